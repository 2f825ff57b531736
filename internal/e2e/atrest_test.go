package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testsupport/atrest"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// atRestEvents: a paused sale that guards shop.example's /tour (a site
// behind the room) and has seats to hold.
const atRestEvents = `  - id: "premiere"
    name: "Premiere night"
    mode: "paused"
    admission: {admit_per_second: 50, max_active: 100, access_ttl: "5m", abandon_after: "60s", away_claim_within: "5m"}
    protect: [{host: "shop.example", path_prefix: "/tour"}]
    showtimes:
      - {id: 42, title: "Premiere 19:00", starts_at: "2036-12-01T19:00:00+09:00", rows: 5, seats_per_row: 10, price_cents: 1500}
`

// No bearer credential at rest (DESIGN.md, Fair play, third round), on the
// real binaries: a fan with an account joins carrying its way back to a
// guarded site, steps away, is let in and emailed (the email held at the
// SMTP server mid-send, then delivered), opens the emailed link, trades
// its return token for the site's pass, asks forward auth with it, holds a
// seat and checks out. After every step the whole of Redis (every key of
// every database, every value) holds no ticket (one the room's secret
// verifies) and no JWT: never the fan's ticket, its access pass, its
// return token or its site pass.
func TestNoBearerCredentialAtRest(t *testing.T) {
	t.Parallel()
	sink, err := mailsink.Start(mailsink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	site := newPresaleSite(t)
	s := stack.Start(t, stack.Options{Events: atRestEvents, AdminToken: opsToken, AccountKeysFile: site.file,
		TrustedProxies: []string{"127.0.0.1/32"}, GatewayKeys: `, public_url: "http://{gateway}"`,
		Notify: fmt.Sprintf(`{smtp_url: %q, timeout: "2s"}`, "smtp://"+sink.Addr)})
	r := &awayRoom{Stack: s, t: t, site: site.priv, sink: sink}
	ctx := context.Background()
	held := map[string]string{} // what the fan holds, by name: none may be at rest
	scan := func(when string) {
		t.Helper()
		items, err := atrest.Dump(ctx, s.RDB.(*redis.Client))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range atrest.Find(items, func(v string) bool { _, err := stack.ParseTicket("premiere", v); return err == nil }) {
			t.Errorf("%s: %s", when, f)
		}
		for name, v := range held {
			for _, it := range items {
				if strings.Contains(it.Text, v) {
					t.Errorf("%s: the fan's %s in key %q (%s)", when, name, it.Key, it.Part)
				}
			}
		}
		t.Logf("%s: %d keys and values read", when, len(items))
	}

	code, _, raw, err := sendJSON(ctx, http.DefaultClient, s.Gateway, http.MethodPost, "/api/v1/events/premiere/tickets", "",
		map[string]string{"X-Waitroom-Account": r.token("alice")}, map[string]any{"return": "http://shop.example/tour/day1"})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("join: %d %s %v", code, raw, err)
	}
	ticket := jsonField(t, raw, "ticket")
	held["ticket"] = ticket
	scan("joined")
	if code, out := r.call(http.MethodPost, "/api/v1/events/premiere/tickets/"+ticket+"/away", r.token("alice")); code != http.StatusAccepted {
		t.Fatalf("step away: %d %v", code, out)
	}
	scan("stepped away")

	// Let in: the email is queued, taken by the sender and held at the
	// SMTP server, mid-send.
	wait, release := sink.Hold()
	defer release()
	r.mode("queue")
	select {
	case <-wait:
	case <-time.After(30 * time.Second):
		t.Fatal("no email reached the SMTP server")
	}
	scan("the email being sent")
	release()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := sink.Wait(wctx, "alice@example.test", 1)
	if err != nil {
		t.Fatal(err)
	}
	l := link(t, got[0])
	if tk, _ := url.QueryUnescape(l[strings.Index(l, "?t=")+3:]); tk != ticket {
		t.Fatalf("the emailed link %s; want the fan's own ticket %s", l, ticket)
	}
	scan("emailed")

	// The link opened: admitted, with a pass and the way back.
	code, out := r.call(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, "")
	if code != http.StatusOK || out["status"] != "admitted" {
		t.Fatalf("the link opened: %d %v", code, out)
	}
	pass, _ := out["accessToken"].(string)
	back, err := url.Parse(fmt.Sprint(out["returnUrl"]))
	if pass == "" || err != nil || back.Query().Get("wr_token") == "" {
		t.Fatalf("admitted answer %v; want an accessToken and a returnUrl with a wr_token", out)
	}
	held["access pass"], held["return token"] = pass, back.Query().Get("wr_token")
	scan("claimed")

	// The shop's proxy trades the return token for the site's pass, and
	// asks with it.
	ask := func(uri, cookie string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.Gateway+"/api/v1/forward-auth", nil)
		for k, v := range map[string]string{"X-Forwarded-Method": "GET", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "shop.example", "X-Forwarded-Uri": uri} {
			req.Header.Set(k, v)
		}
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := ask(back.RequestURI(), "")
	var sitePass string
	for _, c := range res.Cookies() {
		if c.Name == "wr_fa_premiere" {
			sitePass = c.Value
		}
	}
	if res.StatusCode != http.StatusOK || sitePass == "" {
		t.Fatalf("exchange: %d, cookies %v; want 200 and the site's pass", res.StatusCode, res.Header.Values("Set-Cookie"))
	}
	held["site pass"] = sitePass
	if res := ask("/tour/day2", "wr_fa_premiere="+sitePass); res.StatusCode != http.StatusOK {
		t.Fatalf("forward auth with the site's pass: %d; want 200", res.StatusCode)
	}
	scan("exchanged")

	// A seat held and checked out with the access pass.
	code, _, raw, err = sendJSON(ctx, http.DefaultClient, s.Gateway, http.MethodPost, "/api/v1/booking/showtimes/42/holds", pass, nil, map[string]any{"seats": []string{"A1"}})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("hold: %d %s %v", code, raw, err)
	}
	hold := jsonField(t, raw, "holdId")
	code, _, raw, err = sendJSON(ctx, http.DefaultClient, s.Gateway, http.MethodPost, "/api/v1/booking/holds/"+hold+"/checkout", pass,
		map[string]string{"Idempotency-Key": "at-rest-" + hold}, nil)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("checkout: %d %s %v", code, raw, err)
	}
	scan("checked out")
}

// jsonField is the string field of a JSON object answer.
func jsonField(t *testing.T, raw []byte, field string) string {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	v, _ := out[field].(string)
	if v == "" {
		t.Fatalf("answer %s has no %q", raw, field)
	}
	return v
}
