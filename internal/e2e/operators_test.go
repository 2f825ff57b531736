package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/plot"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

const opsToken = "e2e-operator-token-0123456789"

// admin calls the operators' API of gateway.
func admin(t *testing.T, gateway, method, path string, body any) (int, map[string]any) {
	t.Helper()
	code, _, raw, err := sendJSON(context.Background(), http.DefaultClient, gateway, method, path, opsToken, nil, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return code, out
}

const opsEvents = `  - id: "premiere"
    admission: {admit_per_second: 10, max_active: 100}
    showtimes:
      - {id: 42, title: "T", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 5, price_cents: 1500}
`

// TestOperators: an override made through one gateway is in force on the
// other gateway within a tick (two admitters publish it), survives
// restarts of both admitters and the gateways, gives way to an edit of the
// same key in the config file (recorded), and a revoked fan's pass stops
// working at the gate at once, through either gateway.
func TestOperators(t *testing.T) {
	t.Parallel()
	s := stack.Start(t, stack.Options{Events: opsEvents, Gateways: 2, Admitters: 2, AdminToken: opsToken})
	gw1, gw2 := s.Gateways[0], s.Gateways[1]

	code, out := admin(t, gw1, http.MethodPatch, "/api/v1/admin/events/premiere", map[string]any{"admitPerSecond": 3, "maxActive": 7})
	if code != 200 || out["admitPerSecond"] != 3.0 || out["maxActive"] != 7.0 {
		t.Fatalf("PATCH: %d %v", code, out)
	}
	took := waitEvent(t, gw2, "premiere", 3*time.Second, func(e eventInfo) bool {
		return e.AdmitPerSecond == 3 && e.MaxActive == 7
	})
	t.Logf("the other gateway reported the override after %v (tick 200ms, gateways re-read every 500ms)", took)
	if took > 2*time.Second { // a tick (200ms) and a re-read (500ms), with room for a loaded machine
		t.Errorf("the other gateway took %v; want within a tick and its re-read", took)
	}
	code, out = admin(t, gw2, http.MethodGet, "/api/v1/admin/events", nil)
	ev := out["events"].([]any)[0].(map[string]any)
	if code != 200 || fmt.Sprint(ev["sources"]) != "map[admitPerSecond:api maxActive:api mode:config]" {
		t.Errorf("admin events on the other gateway: %d %v", code, out)
	}

	for _, name := range []string{"admitter", "admitter2", "gateway", "gateway2"} {
		s.Restart(name)
	}
	time.Sleep(time.Second)
	for _, gw := range s.Gateways {
		if e := getEvent(t, gw, "premiere"); e.AdmitPerSecond != 3 || e.MaxActive != 7 {
			t.Errorf("after restarts %s reports %v", gw, e)
		}
	}

	// The file is the operators' first tool: its edit of the same key wins.
	s.EditConfig(t, func(c string) string { return strings.Replace(c, "admit_per_second: 10", "admit_per_second: 15", 1) })
	waitEvent(t, gw2, "premiere", 5*time.Second, func(e eventInfo) bool { return e.AdmitPerSecond == 15 })
	time.Sleep(500 * time.Millisecond)
	if e := getEvent(t, gw1, "premiere"); e.AdmitPerSecond != 15 || e.MaxActive != 7 {
		t.Errorf("after the edit: %v; want the file's 15 and the API's 7", e)
	}

	// Revocation: the pass is refused at once, through either gateway.
	f := &apiFan{t: t, base: gw2, event: "premiere"}
	f.join()
	f.waitAdmitted()
	if code, _ := f.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, nil); code != 200 {
		t.Fatalf("seats before revoke: %d", code)
	}
	id, err := stack.TicketID("premiere", f.ticket)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := admin(t, gw1, http.MethodDelete, "/api/v1/admin/events/premiere/tickets/"+id, nil); code != 204 {
		t.Fatalf("revoke: %d %v", code, out)
	}
	for _, gw := range s.Gateways {
		f.base = gw
		if code, out := f.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, nil); code != 401 || out["error"] != "admission_required" {
			t.Errorf("revoked pass at %s: %d %v; want 401 admission_required", gw, code, out)
		}
	}

	code, out = admin(t, gw2, http.MethodGet, "/api/v1/admin/audit", nil)
	var lines []string
	for _, e := range out["entries"].([]any) {
		m := e.(map[string]any)
		lines = append(lines, fmt.Sprintf("%s [%s] %s", m["event"], m["source"], m["change"]))
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		"premiere [api] admitPerSecond 10 -> 3",
		"premiere [api] maxActive 100 -> 7",
		"premiere [config] premiere admit_per_second 10 -> 15",
		"premiere [config] admitPerSecond 3 -> 15: the config file's edit",
		"premiere [api] ticket " + id + " revoked",
	} {
		if n := strings.Count(all, want); n != 1 {
			t.Errorf("audit has %q %d times; want once:\n%s", want, n, all)
		}
	}
	if code != 200 || !strings.HasPrefix(lines[0], "premiere [api] ticket") {
		t.Errorf("audit not newest first:\n%s", all)
	}
}

// adaptiveEvents: two sales alike but for admission.adaptive, and a hall
// the probing fans hold seats in (passthrough: they are in at once).
const adaptiveEvents = `  - id: "fast"
    admission: {admit_per_second: 20, max_active: 5000, abandon_after: "600s", adaptive: true}
    showtimes:
      - {id: 61, title: "A", starts_at: "2036-12-01T19:00:00Z", rows: 26, seats_per_row: 100, price_cents: 1500}
  - id: "steady"
    admission: {admit_per_second: 20, max_active: 5000, abandon_after: "600s"}
    showtimes:
      - {id: 62, title: "B", starts_at: "2036-12-01T19:00:00Z", rows: 26, seats_per_row: 100, price_cents: 1500}
  - id: "hall"
    mode: "passthrough"
    showtimes:
      - {id: 63, title: "C", starts_at: "2036-12-01T19:00:00Z", rows: 26, seats_per_row: 40, price_cents: 1500}
`

const adaptiveBooking = `  holds_per_minute: 100000
  hold_attempts_per_minute: 100000
  rehold_cooldown: "0s"
  payment: {secret: "stack-payment-secret-0123456789abcdef", simulator: {enabled: true, outcome: "succeed", delay: "300ms"}}`

// slowHolds makes the booking core's database slow (or fast again): every
// hold's INSERT waits 600 ms, as a database under strain would.
func slowHolds(t *testing.T, s *stack.Stack, on bool) {
	t.Helper()
	ctx := context.Background()
	db := s.DB(ctx)
	sql := `DROP TRIGGER IF EXISTS e2e_slow ON holds`
	if on {
		sql = `CREATE OR REPLACE FUNCTION e2e_slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1.2); RETURN NEW; END $$;
CREATE TRIGGER e2e_slow BEFORE INSERT ON holds FOR EACH ROW EXECUTE FUNCTION e2e_slow()`
	}
	if _, err := db.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

type adaptiveSample struct {
	at               time.Duration
	fast, steady     float64 // the rate in force
	p99              time.Duration
	factor           float64
	fastAdm, stdyAdm float64 // admitted so far
}

// TestAdaptiveSale: the booking core's database slows down in the middle
// of two sales. The one with admission.adaptive halves its rate within a few
// ticks, down to its floor while the core struggles, and climbs back to its
// configured rate step by step once the core is healthy again; the one
// without keeps admitting at its rate throughout. The changes are in the
// audit and in waitroom_admit_rate. With WAITROOM_E2E_DOCS=<folder> the run
// is drawn to <folder>/adaptive.png (docs/OPERATIONS.md).
func TestAdaptiveSale(t *testing.T) {
	s := stack.Start(t, stack.Options{
		Events: adaptiveEvents, Booking: adaptiveBooking, AdminToken: opsToken,
		Admitter: `, adaptive: {hold_p99: "700ms", interval: "2s", step: 0.25, floor: 0.05}`,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Lines long enough for the whole run on both sales.
	var wg sync.WaitGroup
	for _, ev := range []string{"fast", "steady"} {
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					code, _, _, err := sendJSON(ctx, http.DefaultClient, s.Gateway, http.MethodPost, "/api/v1/events/"+ev+"/tickets", "", nil, nil)
					if err != nil || code != http.StatusCreated {
						t.Errorf("join %s (worker %d): %d %v", ev, w, code, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()

	// Probing fans hold and release seats in the hall, as a sale's admitted
	// fans do: the booking core's hold latency is theirs.
	var holdsOK, holdsBad atomic.Int64
	for w := range 4 {
		f := &apiFan{t: t, base: s.Gateway, event: "hall"}
		f.join()
		f.waitAdmitted()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				seat := fmt.Sprintf("%c%d", 'A'+r.IntN(26), 1+r.IntN(40))
				code, _, raw, err := sendJSON(ctx, http.DefaultClient, s.Gateway, http.MethodPost, "/api/v1/booking/showtimes/63/holds", f.pass, nil, map[string]any{"seats": []string{seat}})
				if err == nil && code == http.StatusCreated {
					holdsOK.Add(1)
					var h struct{ HoldID string }
					_ = json.Unmarshal(raw, &h)
					_, _, _, _ = sendJSON(ctx, http.DefaultClient, s.Gateway, http.MethodDelete, "/api/v1/booking/holds/"+h.HoldID, f.pass, nil, nil)
				} else if ctx.Err() == nil && code != http.StatusConflict {
					holdsBad.Add(1)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}

	start := time.Now()
	var mu sync.Mutex
	var samples []adaptiveSample
	sample := func() adaptiveSample {
		code, out := admin(t, s.Gateway, http.MethodGet, "/api/v1/admin/events", nil)
		if code != 200 {
			t.Fatalf("admin events: %d %v", code, out)
		}
		smp := adaptiveSample{at: time.Since(start)}
		for _, e := range out["events"].([]any) {
			m := e.(map[string]any)
			switch m["id"] {
			case "fast":
				smp.fast, smp.factor, smp.fastAdm = num(m["admitPerSecond"]), num(m["adaptiveFactor"]), num(m["admitted"])
			case "steady":
				smp.steady, smp.stdyAdm = num(m["admitPerSecond"]), num(m["admitted"])
			}
		}
		for _, raw := range s.RDB.HGetAll(ctx, rdb.BookingHealthKey).Val() {
			var h struct{ HoldP99 time.Duration }
			if json.Unmarshal([]byte(raw), &h) == nil {
				smp.p99 = max(smp.p99, h.HoldP99)
			}
		}
		mu.Lock()
		samples = append(samples, smp)
		mu.Unlock()
		return smp
	}
	until := func(d time.Duration, ok func(adaptiveSample) bool) (adaptiveSample, bool) {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if smp := sample(); ok(smp) {
				return smp, true
			}
		}
		return sample(), false
	}

	// Healthy for 8 s: both at their rate.
	until(8*time.Second, func(adaptiveSample) bool { return false })
	slowAt := time.Since(start)
	slowHolds(t, s, true)
	crossed, ok := until(6*time.Second, func(m adaptiveSample) bool { return m.p99 > 700*time.Millisecond })
	if !ok {
		t.Fatalf("the hold p99 never crossed 700ms: %+v", crossed)
	}
	halved, ok := until(5*time.Second, func(m adaptiveSample) bool { return m.fast <= 10 })
	if !ok {
		t.Fatalf("the adaptive rate was not halved within 5 s of the p99 crossing: %+v", halved)
	}
	t.Logf("slowed at %.1fs; p99 over the threshold at %.1fs; rate halved at %.1fs", slowAt.Seconds(), crossed.at.Seconds(), halved.at.Seconds())
	low, _ := until(10*time.Second, func(adaptiveSample) bool { return false })
	lowMetric := metric(t, s.Admitter, `waitroom_admit_rate{event="fast"}`)
	steadyMetric := metric(t, s.Admitter, `waitroom_admit_rate{event="steady"}`)
	if low.fast > 5 || lowMetric > 5 {
		t.Errorf("after 10 s of struggle: rate %v, waitroom_admit_rate %v; want both <= 5", low.fast, lowMetric)
	}
	if steadyMetric < 19 {
		t.Errorf("waitroom_admit_rate of the sale without adaptive %v; want its 20", steadyMetric)
	}
	fastAt := time.Since(start)
	slowHolds(t, s, false)
	back, ok := until(45*time.Second, func(m adaptiveSample) bool { return m.fast == 20 })
	if !ok {
		t.Fatalf("the adaptive rate did not come back to 20 within 45 s: %+v", back)
	}
	t.Logf("fast again at %.1fs; rate back to 20 at %.1fs", fastAt.Seconds(), back.at.Seconds())
	until(3*time.Second, func(adaptiveSample) bool { return false })
	cancel()
	wg.Wait()

	var steps []float64
	for _, m := range samples {
		if m.steady != 20 {
			t.Errorf("the sale without adaptive at %.1fs: rate %v; want 20 throughout", m.at.Seconds(), m.steady)
		}
		if m.at > fastAt && (len(steps) == 0 || steps[len(steps)-1] != m.fast) {
			steps = append(steps, m.fast)
		}
	}
	if len(steps) < 3 {
		t.Errorf("recovery %v; want step by step", steps)
	}
	last := samples[len(samples)-1]
	if last.fastAdm >= last.stdyAdm {
		t.Errorf("admitted: %v with adaptive, %v without; want fewer with", last.fastAdm, last.stdyAdm)
	}
	t.Logf("admitted %v with adaptive, %v without; recovery %v; holds %d ok, %d refused", last.fastAdm, last.stdyAdm, steps, holdsOK.Load(), holdsBad.Load())
	_, out := admin(t, s.Gateway, http.MethodGet, "/api/v1/admin/audit?limit=200", nil)
	down, up := 0, 0
	for _, e := range out["entries"].([]any) {
		m := e.(map[string]any)
		if m["source"] != "adaptive" {
			continue
		}
		if m["event"] != "fast" {
			t.Errorf("adaptive audit entry of %v", m)
		}
		if strings.Contains(fmt.Sprint(m["change"]), "struggles") {
			down++
		} else {
			up++
		}
	}
	if down < 2 || up < 2 {
		t.Errorf("audit: %d halvings, %d steps up; want both", down, up)
	}
	if dir := os.Getenv("WAITROOM_E2E_DOCS"); dir != "" {
		drawAdaptive(t, filepath.Join(dir, "adaptive.png"), samples)
	}
}

// drawAdaptive plots the run: the rate in force with adaptive (blue) and
// without (red, dashed), and the booking core's hold p99 in tenths of a
// second (grey).
func drawAdaptive(t *testing.T, path string, samples []adaptiveSample) {
	var fast, steady, p99 []plot.Point
	for _, m := range samples {
		x := m.at.Seconds()
		fast = append(fast, plot.Point{X: x, Y: m.fast})
		steady = append(steady, plot.Point{X: x, Y: m.steady})
		p99 = append(p99, plot.Point{X: x, Y: m.p99.Seconds() * 10})
	}
	var b bytes.Buffer
	err := plot.PNG(&b, 800, 360,
		plot.Series{Points: p99, Color: color.RGBA{150, 150, 150, 255}},
		plot.Series{Points: steady, Color: plot.Red, Dashed: true},
		plot.Series{Points: fast, Color: plot.Blue},
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, b.Len())
}

// The operators' named tokens of TestOperatorsPage's stack (DESIGN.md,
// Integrations: Operators' tokens): one limited to premiere with a few
// scopes, one that may only credit wallets (of every event).
const (
	deskToken   = "e2e-premiere-desk-token-0123456789"
	walletToken = "e2e-wallet-bot-token-0123456789"
)

var opsNamedTokens = []stack.Token{
	{Name: "premiere-desk", Token: deskToken, Scopes: []string{config.ScopeEventsRead, config.ScopeTicketsEnd}, Events: []string{"premiere"}},
	{Name: "wallet-bot", Token: walletToken, Scopes: []string{config.ScopeWalletsWrite}},
}

// opsEncore is an event besides opsEvents' premiere, which premiere-desk
// is not given.
const opsEncore = `  - id: "encore"
    admission: {admit_per_second: 10, max_active: 100}
    showtimes:
      - {id: 43, title: "E", starts_at: "2036-12-02T19:00:00Z", rows: 2, seats_per_row: 5, price_cents: 1500}
`

// TestOperatorsPage drives GET /admin in headless Chromium: a wrong token
// is refused, the right one opens the console (kept in sessionStorage
// only), the controls pause the sale and set its rate, a bad ticket id is
// refused, the chart draws the gateway's samples. Then named tokens: one
// limited to premiere with events:read and tickets:end sees premiere
// alone, its name, scopes and events, the controls its scopes allow, and
// for each scope it lacks a note saying what that scope would show; one
// that may only credit wallets (every answer of the page's reads a 403)
// is told the same. And the wallets' credit with named tokens, through the
// gateway to the real booking core (namedTokensCredit).
func TestOperatorsPage(t *testing.T) {
	t.Parallel()
	s := stack.Start(t, stack.Options{Events: opsEvents + opsEncore, AdminToken: opsToken, Tokens: opsNamedTokens})
	namedTokensCredit(t, s)
	for range 3 {
		joinPlain(t, s.Gateway, "premiere")
	}
	ctx := tab(t, browser(t))
	run(t, ctx, 20*time.Second, "open /admin",
		chromedp.Navigate(s.Gateway+"/admin"),
		chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.SendKeys(`#token`, "wrong-token", chromedp.ByQuery),
		chromedp.Click(`#sign-in`, chromedp.ByQuery),
	)
	waitEval(t, ctx, 5*time.Second, "a wrong token refused", `document.querySelector('#message').dataset.status === '401' && document.querySelector('#console').hidden`)
	run(t, ctx, 10*time.Second, "sign in",
		chromedp.SendKeys(`#token`, opsToken, chromedp.ByQuery),
		chromedp.Click(`#sign-in`, chromedp.ByQuery),
	)
	waitEval(t, ctx, 5*time.Second, "the console", `!document.querySelector('#console').hidden && document.querySelector('#events tr[data-event="premiere"] td[data-k="active"]').textContent === '3'`)
	var stored struct {
		Session string `json:"session"`
		Local   int    `json:"local"`
		Cookie  string `json:"cookie"`
	}
	run(t, ctx, 5*time.Second, "storage", chromedp.Evaluate(`({session: sessionStorage.getItem('wr_admin_token'), local: localStorage.length, cookie: document.cookie})`, &stored))
	if stored.Session != opsToken || stored.Local != 0 || strings.Contains(stored.Cookie, opsToken) {
		t.Errorf("token kept as %+v; want in sessionStorage only", stored)
	}

	run(t, ctx, 5*time.Second, "pause", chromedp.Click(`#pause`, chromedp.ByQuery))
	waitEval(t, ctx, 5*time.Second, "paused, from the API", `(() => { const c = document.querySelector('#events tr[data-event="premiere"] td[data-k="mode"]'); return c.textContent === 'paused' && c.classList.contains('api'); })()`)
	// The fans' side follows once the admitter has published the override:
	// within a tick and the gateway's refresh (a loaded machine may take
	// a few seconds).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		e := getEvent(t, s.Gateway, "premiere")
		if e.State == "paused" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("public state %v after 5 s; want paused", e.State)
			break
		}
	}
	run(t, ctx, 5*time.Second, "set the rate",
		chromedp.SendKeys(`#rate`, "4", chromedp.ByQuery),
		chromedp.Click(`#set-rate`, chromedp.ByQuery),
	)
	waitEval(t, ctx, 5*time.Second, "rate 4", `document.querySelector('#events tr[data-event="premiere"] td[data-k="rate"]').textContent === '4'`)
	run(t, ctx, 5*time.Second, "resume", chromedp.Click(`#resume`, chromedp.ByQuery))
	waitEval(t, ctx, 5*time.Second, "resumed", `document.querySelector('#events tr[data-event="premiere"] td[data-k="state"]').textContent === 'open'`)
	run(t, ctx, 5*time.Second, "revoke a bad id",
		chromedp.SendKeys(`#ticket`, "not-a-ticket", chromedp.ByQuery),
		chromedp.Click(`#revoke`, chromedp.ByQuery),
	)
	waitEval(t, ctx, 5*time.Second, "400 for a bad ticket id", `document.querySelector('#message').dataset.status === '400' && document.querySelector('#message').textContent.includes('ticketId')`)
	waitEval(t, ctx, 15*time.Second, "the chart", `document.querySelectorAll('#chart polyline.admitted-line, #chart polyline.waiting-line').length === 2`)
	waitEval(t, ctx, 5*time.Second, "the audit", `[...document.querySelectorAll('#audit li')].some((li) => li.textContent.includes('[api] mode queue -> paused'))`)
	// A reload keeps the tab's token; signing out forgets it.
	run(t, ctx, 10*time.Second, "reload", chromedp.Reload())
	waitEval(t, ctx, 5*time.Second, "the console after a reload", `!document.querySelector('#console').hidden`)
	run(t, ctx, 5*time.Second, "sign out", chromedp.Click(`#sign-out`, chromedp.ByQuery))
	waitEval(t, ctx, 5*time.Second, "signed out", `document.querySelector('#console').hidden && sessionStorage.getItem('wr_admin_token') === null`)
	checkA11y(t, ctx, "the operators' page")

	// premiere-desk: premiere alone, what it may do, and what it may not
	// said. seen is whether an element is on screen (no hidden ancestor).
	const seen = `const seen = (q) => { const el = document.querySelector(q); return !!el && el.checkVisibility(); };`
	run(t, ctx, 10*time.Second, "sign in as premiere-desk",
		chromedp.SendKeys(`#token`, deskToken, chromedp.ByQuery),
		chromedp.Click(`#sign-in`, chromedp.ByQuery),
	)
	waitEval(t, ctx, 5*time.Second, "premiere-desk's name, scopes and event", `(() => { const w = document.querySelector('#whoami');
		return !w.hidden && w.dataset.name === 'premiere-desk' && w.textContent.includes('events:read tickets:end') && w.textContent.includes('events premiere'); })()`)
	waitEval(t, ctx, 5*time.Second, "premiere alone", `document.querySelector('#events tr[data-event="premiere"] td[data-k="active"]')?.textContent === '3' &&
		!document.querySelector('#events tr[data-event="encore"]') && [...document.querySelectorAll('#event option')].map((o) => o.value).join() === 'premiere'`)
	waitEval(t, ctx, 5*time.Second, "premiere-desk's controls, and the notes of what it lacks", `(() => { `+seen+`
		const lacks = (scope) => { const n = document.querySelector('[data-lacks="' + scope + '"]'); return !!n && n.checkVisibility() && n.textContent.includes(scope); };
		return seen('#events') && seen('#revoke') && seen('#show-previews') && !seen('#pause') && !seen('#set-rate') && !seen('#deliveries') &&
			lacks('events:write') && lacks('webhooks:read') && !seen('[data-lacks="events:read"]') && !seen('[data-lacks="tickets:end"]'); })()`)
	run(t, ctx, 5*time.Second, "premiere-desk revokes a bad id",
		chromedp.SendKeys(`#ticket`, "not-a-ticket", chromedp.ByQuery),
		chromedp.Click(`#revoke`, chromedp.ByQuery),
	)
	waitEval(t, ctx, 5*time.Second, "past the scope: 400 for a bad ticket id", `document.querySelector('#message').dataset.status === '400' && document.querySelector('#message').textContent.includes('ticketId')`)
	run(t, ctx, 5*time.Second, "sign out premiere-desk", chromedp.Click(`#sign-out`, chromedp.ByQuery))

	// wallet-bot: no scope of the page's (its reads are 403, which say
	// what it may do too): the public list of events to pick from, and a
	// note for each scope.
	run(t, ctx, 10*time.Second, "sign in as wallet-bot",
		chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.SendKeys(`#token`, walletToken, chromedp.ByQuery),
		chromedp.Click(`#sign-in`, chromedp.ByQuery),
	)
	waitEval(t, ctx, 5*time.Second, "wallet-bot's page", `(() => { `+seen+` const w = document.querySelector('#whoami');
		return seen('#console') && w.dataset.name === 'wallet-bot' && w.textContent.includes('wallets:write') && w.textContent.includes('every event') &&
			[...document.querySelectorAll('#event option')].map((o) => o.value).sort().join() === 'encore,premiere' &&
			!seen('#events') && !seen('#pause') && !seen('#revoke') && !seen('#deliveries') &&
			['events:read', 'events:write', 'tickets:end', 'webhooks:read'].every((sc) => seen('[data-lacks="' + sc + '"]')); })()`)
	checkA11y(t, ctx, "the operators' page of a token with no scope of its own")
	run(t, ctx, 5*time.Second, "sign out wallet-bot", chromedp.Click(`#sign-out`, chromedp.ByQuery))
}

// namedTokensCredit: the wallets' credit with named tokens reaches the
// real booking core, which judges the forwarded token by the same config:
// wallet-bot (wallets:write, every event) credits, once per reference,
// through the gateway and on the booking core's own port; premiere-desk
// (no wallets:write) is 403 forbidden at the gateway, naming the scope,
// and 401 at the booking core; the ledger in PostgreSQL holds the two
// credits made and nothing else.
func namedTokensCredit(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx := context.Background()
	credit := func(base, path, token, ref string, points int) (int, map[string]any) {
		t.Helper()
		code, _, raw, err := sendJSON(ctx, http.DefaultClient, base, http.MethodPost, path, token, nil, map[string]any{"points": points, "reference": ref})
		if err != nil {
			t.Fatalf("credit %s: %v", ref, err)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return code, out
	}
	const gw, core = "/api/v1/admin/wallets/fan-named/credits", "/api/v1/booking/admin/wallets/fan-named/credits"
	if code, out := credit(s.Gateway, gw, deskToken, "desk-1", 500); code != http.StatusForbidden || out["error"] != "forbidden" || !strings.Contains(fmt.Sprint(out["message"]), "wallets:write") {
		t.Errorf("premiere-desk credits through the gateway: %d %v; want 403 forbidden naming wallets:write", code, out)
	}
	for i := range 2 {
		if code, out := credit(s.Gateway, gw, walletToken, "bot-1", 250); code != http.StatusCreated || out["balance"] != 250.0 {
			t.Errorf("wallet-bot's credit bot-1 (#%d) through the gateway: %d %v; want 201, balance 250", i+1, code, out)
		}
	}
	if code, out := credit(s.Booking, core, deskToken, "desk-2", 500); code != http.StatusUnauthorized {
		t.Errorf("premiere-desk credits on the booking core's port: %d %v; want 401", code, out)
	}
	if code, out := credit(s.Booking, core, walletToken, "bot-2", 50); code != http.StatusCreated || out["balance"] != 300.0 {
		t.Errorf("wallet-bot's credit bot-2 on the booking core's port: %d %v; want 201, balance 300", code, out)
	}
	db, err := pgx.Connect(ctx, s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var refs string
	var balance int64
	err = db.QueryRow(ctx, `SELECT coalesce(string_agg(l.reference || ':' || l.points, ' ' ORDER BY l.id), ''), coalesce(max(w.balance), 0)
		FROM wallets w LEFT JOIN wallet_ledger l ON l.account_id = w.account_id WHERE w.account_id = 'fan-named'`).Scan(&refs, &balance)
	if err != nil {
		t.Fatal(err)
	}
	if refs != "bot-1:250 bot-2:50" || balance != 300 {
		t.Errorf("fan-named's ledger %q, balance %d; want bot-1:250 bot-2:50, 300 (the refused credits nowhere)", refs, balance)
	}
}

// joinPlain joins event through the API (no proof of work asked).
func joinPlain(t *testing.T, gateway, event string) {
	t.Helper()
	code, _, raw, err := sendJSON(context.Background(), http.DefaultClient, gateway, http.MethodPost, "/api/v1/events/"+event+"/tickets", "", nil, nil)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("join %s: %d %s %v", event, code, raw, err)
	}
}
