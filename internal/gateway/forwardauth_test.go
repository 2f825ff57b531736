package gateway_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// The room of these tests, as fans reach it, and the site it guards.
const (
	roomURL  = "https://room.example"
	shopHost = "shop.example"
)

// countingLine is the line, counting what forward auth asks of it.
type countingLine struct {
	*queue.Store
	calls atomic.Int64
}

func (l *countingLine) Active(ctx context.Context, event, ticket string) (bool, error) {
	l.calls.Add(1)
	return l.Store.Active(ctx, event, ticket)
}

func (l *countingLine) SpendReturn(ctx context.Context, event, id, jti string, keep time.Duration) (time.Time, bool, error) {
	l.calls.Add(1)
	return l.Store.SpendReturn(ctx, event, id, jti, keep)
}

func (l *countingLine) Return(ctx context.Context, event, id string) (string, error) {
	l.calls.Add(1)
	return l.Store.Return(ctx, event, id)
}

// guarded is a gateway whose event premiere guards shop.example's
// /tour-tokyo (and event other its /flash), behind the balancer, and whose
// line counts its calls.
type guarded struct {
	*env
	counted *countingLine
}

func setupGuarded(t testing.TB) guarded {
	t.Helper()
	return setupGuardedAt(t, roomURL+"/", balancer+"/32")
}

// setupGuardedAt is setupGuarded with the room at publicURL, behind the
// proxies of trusted, and more options (the gateway's clock) set by more.
func setupGuardedAt(t testing.TB, publicURL, trusted string, more ...func(*gateway.Options)) guarded {
	t.Helper()
	var counted *countingLine
	e := setupWith(t, 0, `, public_url: "`+publicURL+`", trusted_proxies: ["`+trusted+`"]`, "", func(o *gateway.Options) {
		for _, f := range more {
			f(o)
		}
		o.Config.Events[0].Protect = []config.Protect{{Host: shopHost, PathPrefix: "/tour-tokyo"}}
		// Event other guards /flash with a short window, to watch it end.
		o.Config.Events[1].Protect = []config.Protect{{Host: shopHost, PathPrefix: "/flash"}}
		o.Config.Events[1].Admission.AccessTTL = config.Duration(2 * time.Second)
		counted = &countingLine{Store: o.Line.(*queue.Store)}
		o.Line = counted
	})
	return guarded{env: e, counted: counted}
}

// ask is the proxy's question about a fan's request to the shop (https)
// for target, with the fan's headers hdr.
func (g guarded) ask(target string, hdr ...string) resp {
	g.t.Helper()
	return g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", append([]string{
		"Host", "127.0.0.1:8080", "X-Forwarded-Method", "GET", "X-Forwarded-Proto", "https",
		"X-Forwarded-Host", shopHost, "X-Forwarded-Uri", target, "X-Forwarded-For", "203.0.113.9",
	}, hdr...)...)
}

// admitWithReturn joins premiere carrying the way back ret (a JSON join),
// and ticks until the ticket is admitted; it returns the ticket and the
// admitted status answer.
func (g guarded) admitWithReturn(ret string) (string, resp) {
	g.t.Helper()
	j := g.do(http.MethodPost, "/api/v1/events/premiere/tickets", strings.NewReader(`{"return":"`+ret+`"}`))
	if j.code != http.StatusCreated {
		g.t.Fatalf("join with return: %d %s", j.code, j.raw)
	}
	ticket := j.body["ticket"].(string)
	set := queue.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := g.line.Tick(context.Background(), "premiere", set); err != nil {
			g.t.Fatal(err)
		}
		if s := g.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, nil); s.body["status"] == "admitted" {
			return ticket, s
		}
	}
	g.t.Fatal("never admitted")
	return "", resp{}
}

// setCookieLine is the Set-Cookie line of the cookie name an answer sets.
func setCookieLine(r resp, name string) string {
	for _, l := range r.hdr.Values("Set-Cookie") {
		if strings.HasPrefix(l, name+"=") {
			return l
		}
	}
	return ""
}

// Only the proxies of gateway.trusted_proxies are answered; paths no rule
// guards pass at once, and never touch Redis; every spelling of a guarded
// path is guarded.
func TestForwardAuthRules(t *testing.T) {
	g := setupGuarded(t)
	if r := g.doFrom(stranger, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Host", shopHost, "X-Forwarded-Uri", "/"); r.code != http.StatusForbidden || r.body["error"] != "untrusted_proxy" {
		t.Errorf("a stranger's question: %d %s; want 403 untrusted_proxy", r.code, r.raw)
	}
	for _, tt := range []struct {
		host, target string
		guarded      bool
	}{
		{shopHost, "/", false},
		{shopHost, "/tour-osaka", false},
		{shopHost, "/tour", false},
		{shopHost, "/?next=/tour-tokyo", false},
		{"other.example", "/tour-tokyo", false},
		{shopHost, "/tour-tokyo", true},
		{shopHost, "/tour-tokyo/seats?a=1", true},
		{shopHost, "/tour-tokyo-extra", true},
		{shopHost, "/Tour-Tokyo", true},
		{shopHost, "//tour-tokyo", true},
		{shopHost, "/%74our-tokyo", true},
		{shopHost, "/%2574our-tokyo", false}, // one decoding is what an origin does
		{shopHost, "/x/../tour-tokyo", true},
		{shopHost, "/x/%2e%2e/tour-tokyo", true},
		{shopHost, "/./tour-tokyo", true},
		{shopHost, `/x\..\tour-tokyo`, true},
		{shopHost, "/tour-tokyo;jsessionid=1", true},
		{"SHOP.Example:8443", "/tour-tokyo", true},
		{"shop.example.", "/tour-tokyo", true},
	} {
		before := g.counted.calls.Load()
		r := g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Host", tt.host, "X-Forwarded-Uri", tt.target)
		calls := g.counted.calls.Load() - before
		switch {
		case tt.guarded && r.code != http.StatusUnauthorized:
			t.Errorf("%s%s: %d; want 401 (guarded)", tt.host, tt.target, r.code)
		case !tt.guarded && (r.code != http.StatusOK || r.hdr.Get("X-Waitroom-Event") != "" || calls != 0):
			t.Errorf("%s%s: %d, event %q, %d calls of the line; want 200, none, none", tt.host, tt.target, r.code, r.hdr.Get("X-Waitroom-Event"), calls)
		}
	}
	// X-Original-URI (nginx's habit) is read when X-Forwarded-Uri is absent.
	if r := g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Host", shopHost, "X-Original-URI", "/tour-tokyo"); r.code != http.StatusUnauthorized {
		t.Errorf("X-Original-URI of a guarded path: %d; want 401", r.code)
	}
	for _, bad := range []string{"", "tour-tokyo", "http://shop.example/tour-tokyo", "/tour tokyo", "/tour\x01tokyo", "/" + strings.Repeat("a", 9000)} {
		if r := g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Host", shopHost, "X-Forwarded-Uri", bad); r.code != http.StatusBadRequest {
			t.Errorf("X-Forwarded-Uri %.40q: %d %s; want 400", bad, r.code, r.raw)
		}
	}
}

// A refused fan is sent to the event's room with the URL it asked for, as
// the proxy told it: scheme, host and port, path and query.
func TestForwardAuthSendsToTheRoom(t *testing.T) {
	g := setupGuarded(t)
	r := g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Proto", "https",
		"X-Forwarded-Host", "shop.example:8443", "X-Forwarded-Uri", "/tour-tokyo/seats?a=1&b=%20&wr_token=stale")
	want := roomURL + "/e/premiere?return=" + url.QueryEscape("https://shop.example:8443/tour-tokyo/seats?a=1&b=%20")
	if r.code != http.StatusUnauthorized || r.hdr.Get("X-Waitroom-Location") != want {
		t.Fatalf("refused: %d, X-Waitroom-Location %q; want 401, %q", r.code, r.hdr.Get("X-Waitroom-Location"), want)
	}
	if !strings.Contains(string(r.raw), `http-equiv="refresh"`) || r.hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("refusal's body %q, Cache-Control %q; want a page that goes to the room, no-store", r.raw, r.hdr.Get("Cache-Control"))
	}
	// Over plain http, as the proxy says.
	r = g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Host", shopHost, "X-Forwarded-Uri", "/tour-tokyo")
	if want := roomURL + "/e/premiere?return=" + url.QueryEscape("http://shop.example/tour-tokyo"); r.hdr.Get("X-Waitroom-Location") != want {
		t.Errorf("over http: %q; want %q", r.hdr.Get("X-Waitroom-Location"), want)
	}
}

// The whole trip: joined with the way back, admitted, sent back with a
// return token, which the proxy trades, once, for the site's pass; the
// pass opens the guarded paths while the ticket is active, and no more
// once it left.
func TestForwardAuthTrip(t *testing.T) {
	g := setupGuarded(t)
	back := "https://" + shopHost + "/tour-tokyo/seats?a=1"
	ticket, st := g.admitWithReturn(back)
	link, _ := st.body["returnUrl"].(string)
	if !strings.HasPrefix(link, back+"&wr_token=") {
		t.Fatalf("admitted status: returnUrl %q; want %s&wr_token=…", link, back)
	}
	target := strings.TrimPrefix(link, "https://"+shopHost)
	first := g.ask(target)
	pass, line := cookieOf(first, "wr_fa_premiere"), setCookieLine(first, "wr_fa_premiere")
	if first.code != http.StatusOK || pass == "" || first.hdr.Get("X-Waitroom-Event") != "premiere" || first.hdr.Get("X-Waitroom-Ticket-Id") == "" {
		t.Fatalf("the trade: %d, pass %q, event %q; want 200, a pass, premiere", first.code, pass, first.hdr.Get("X-Waitroom-Event"))
	}
	for _, attr := range []string{"HttpOnly", "SameSite=Lax", "path=/", "secure"} {
		if !strings.Contains(strings.ToLower(line), strings.ToLower(attr)) {
			t.Errorf("pass cookie %q lacks %s", line, attr)
		}
	}
	if again := g.ask(target); again.code != http.StatusUnauthorized {
		t.Errorf("the same token again, without the pass: %d; want 401 (one use)", again.code)
	}
	cookie := "wr_fa_premiere=" + pass
	before := g.counted.calls.Load()
	in := g.ask("/tour-tokyo/checkout", "Cookie", cookie)
	if in.code != http.StatusOK || in.hdr.Get("X-Waitroom-Ticket-Id") != first.hdr.Get("X-Waitroom-Ticket-Id") {
		t.Errorf("with the pass: %d, ticket %q; want 200, %q", in.code, in.hdr.Get("X-Waitroom-Ticket-Id"), first.hdr.Get("X-Waitroom-Ticket-Id"))
	}
	if n := g.counted.calls.Load() - before; n != 1 {
		t.Errorf("a request with a pass asked the line %d times; want 1", n)
	}
	// A pass and a spent token in the URL (a reload): the pass decides.
	if r := g.ask(target, "Cookie", cookie); r.code != http.StatusOK {
		t.Errorf("pass with a spent token in the URL: %d; want 200", r.code)
	}
	if r := g.do(http.MethodDelete, "/api/v1/events/premiere/tickets/"+ticket, nil); r.code != http.StatusNoContent {
		t.Fatalf("leave: %d", r.code)
	}
	if r := g.ask("/tour-tokyo/checkout", "Cookie", cookie); r.code != http.StatusUnauthorized {
		t.Errorf("the pass of a fan who left: %d; want 401", r.code)
	}
}

// A return token is good for 60 s by the gateway's clock (and the 2 s
// every pass is given for clocks that differ): traded 58 s after it was
// handed out, refused at 63.
func TestReturnTokenLastsAMinute(t *testing.T) {
	clk := testenv.NewClock(time.Now())
	g := setupGuardedAt(t, roomURL+"/", balancer+"/32", func(o *gateway.Options) { o.Now = clk.Now })
	back := "https://" + shopHost + "/tour-tokyo/seats"
	target := func() string {
		_, st := g.admitWithReturn(back)
		link, _ := st.body["returnUrl"].(string)
		if !strings.HasPrefix(link, back+"?wr_token=") {
			t.Fatalf("admitted status: returnUrl %q; want %s?wr_token=…", link, back)
		}
		return strings.TrimPrefix(link, "https://"+shopHost)
	}
	early, late := target(), target()
	clk.Add(58 * time.Second)
	if r := g.ask(early); r.code != http.StatusOK || cookieOf(r, "wr_fa_premiere") == "" {
		t.Errorf("a return token 58 s old: %d; want 200 with the pass", r.code)
	}
	clk.Add(5 * time.Second)
	if r := g.ask(late); r.code != http.StatusUnauthorized || cookieOf(r, "wr_fa_premiere") != "" {
		t.Errorf("a return token 63 s old: %d; want 401 and no pass", r.code)
	}
}

// Return tokens and passes that are not the room's own, of this event,
// live and unspent, open nothing, and spend nothing.
func TestForwardAuthRefusesBadTokens(t *testing.T) {
	g := setupGuarded(t)
	_, st := g.admitWithReturn("https://" + shopHost + "/tour-tokyo")
	good := st.body["returnUrl"].(string)
	_, tok, _ := strings.Cut(good, "wr_token=")
	claims, err := pass.NewStaticVerifierFor(g.priv.Public().(ed25519.PublicKey), pass.AudienceReturn).Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	otherKey := testenv.Ed25519Key(t)
	ours, theirs := pass.NewSigner(g.priv), pass.NewSigner(otherKey)
	now := time.Now()
	mint := func(f func() (string, error)) string {
		t.Helper()
		s, err := f()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	id := claims.Ticket
	for _, tt := range []struct{ name, token, cookie string }{
		{"forged: another key", mint(func() (string, error) {
			return theirs.MintReturn(id, "premiere", "AAAAAAAAAAAAAAAAAAAAAA", now, now.Add(time.Minute))
		}), ""},
		{"expired", mint(func() (string, error) {
			return ours.MintReturn(id, "premiere", "BBBBBBBBBBBBBBBBBBBBBB", now.Add(-2*time.Minute), now.Add(-time.Minute))
		}), ""},
		{"foreign: another event's", mint(func() (string, error) {
			return ours.MintReturn(id, "other", "CCCCCCCCCCCCCCCCCCCCCC", now, now.Add(time.Minute))
		}), ""},
		{"a booking pass as the token", mint(func() (string, error) { return ours.Mint(id, "premiere", now, now.Add(time.Minute)) }), ""},
		{"a site's pass as the token", mint(func() (string, error) { return ours.MintSite(id, "premiere", now, now.Add(time.Minute)) }), ""},
		{"garbage", "not.a.token", ""},
		{"a booking pass as the cookie", "", mint(func() (string, error) { return ours.Mint(id, "premiere", now, now.Add(time.Minute)) })},
		{"the token as the cookie", "", tok},
		{"a forged pass", "", mint(func() (string, error) { return theirs.MintSite(id, "premiere", now, now.Add(time.Minute)) })},
		{"another event's pass", "", mint(func() (string, error) { return ours.MintSite(id, "other", now, now.Add(time.Minute)) })},
		{"an expired pass", "", mint(func() (string, error) {
			return ours.MintSite(id, "premiere", now.Add(-2*time.Minute), now.Add(-time.Minute))
		})},
	} {
		target := "/tour-tokyo"
		if tt.token != "" {
			target += "?wr_token=" + tt.token
		}
		var hdr []string
		if tt.cookie != "" {
			hdr = []string{"Cookie", "wr_fa_premiere=" + tt.cookie}
		}
		if r := g.ask(target, hdr...); r.code != http.StatusUnauthorized {
			t.Errorf("%s: %d; want 401", tt.name, r.code)
		}
	}
	// None of them spent the good token.
	if r := g.ask(strings.TrimPrefix(good, "https://"+shopHost)); r.code != http.StatusOK {
		t.Errorf("the good token after the bad ones: %d; want 200", r.code)
	}
}

// The way back is only ever to a site the event guards: the room refuses
// any other, 400 invalid_return, and a join with one makes no place.
func TestReturnOnlyToGuardedSites(t *testing.T) {
	g := setupGuarded(t)
	for _, bad := range []string{
		"https://evil.example/tour-tokyo",
		"https://shop.example.evil.example/",
		"//shop.example/tour-tokyo",
		"/tour-tokyo",
		"javascript:alert(1)//shop.example",
		"https://user@shop.example/tour-tokyo",
		"ftp://shop.example/tour-tokyo",
		"https://shop.example/a b",
		"https://shop.example/" + strings.Repeat("a", 2100),
	} {
		if r := g.do(http.MethodGet, "/e/premiere?return="+url.QueryEscape(bad), nil); r.code != http.StatusBadRequest || !strings.Contains(string(r.raw), "room.notice.invalid_return") && !strings.Contains(string(r.raw), "link back to the site") {
			t.Errorf("room page, return %.50q: %d; want 400 saying so", bad, r.code)
		}
		before, _ := g.line.Counts(context.Background(), "premiere")
		if r := g.do(http.MethodPost, "/api/v1/events/premiere/tickets", strings.NewReader(`{"return":`+jsonString(bad)+`}`)); r.code != http.StatusBadRequest || r.body["error"] != "invalid_return" {
			t.Errorf("join, return %.50q: %d %s; want 400 invalid_return", bad, r.code, r.raw)
		}
		if after, _ := g.line.Counts(context.Background(), "premiere"); after.Waiting != before.Waiting {
			t.Errorf("a join with a bad return made a place: %d waiting, was %d", after.Waiting, before.Waiting)
		}
	}
	// The room of an event that guards no site sends nobody to one.
	if r := g.do(http.MethodGet, "/e/later?return="+url.QueryEscape("https://shop.example/tour-tokyo"), nil); r.code != http.StatusBadRequest {
		t.Errorf("another event's room: %d; want 400", r.code)
	}
	// A good one: the page carries it into its join form.
	r := g.do(http.MethodGet, "/e/premiere?return="+url.QueryEscape("https://SHOP.example:8443/tour-tokyo?x=1"), nil)
	if r.code != http.StatusOK || !strings.Contains(string(r.raw), `name="return" value="https://SHOP.example:8443/tour-tokyo?x=1"`) {
		t.Errorf("room page with a good return: %d; want 200 and the join form carrying it", r.code)
	}
}

// Without JavaScript: the page keeps the way back with a live ticket at
// once, and once the fan is admitted it answers 303 to it, token and all.
func TestRoomPageSendsTheAdmittedBack(t *testing.T) {
	g := setupGuarded(t)
	ticket, _ := g.admitWithReturn("https://" + shopHost + "/tour-tokyo/old")
	back := "https://" + shopHost + "/tour-tokyo/new#top"
	r := g.do(http.MethodGet, "/e/premiere?return="+url.QueryEscape(back), nil, "Cookie", "wr_t_premiere="+ticket)
	loc := r.hdr.Get("Location")
	if r.code != http.StatusSeeOther || !strings.HasPrefix(loc, "https://"+shopHost+"/tour-tokyo/new?wr_token=") || !strings.HasSuffix(loc, "#top") {
		t.Fatalf("admitted fan's room page: %d, Location %q; want 303 to the new way back with a token", r.code, loc)
	}
	target := strings.TrimSuffix(strings.TrimPrefix(loc, "https://"+shopHost), "#top")
	if a := g.ask(target); a.code != http.StatusOK {
		t.Errorf("the page's token: %d; want 200", a.code)
	}
	// The form join of a fan admitted at once (the same place, resumed)
	// goes back too.
	f := g.do(http.MethodPost, "/e/premiere/join", strings.NewReader("return="+url.QueryEscape(back)), "Cookie", "wr_t_premiere="+ticket,
		"Content-Type", "application/x-www-form-urlencoded")
	if f.code != http.StatusSeeOther || !strings.Contains(f.hdr.Get("Location"), "/tour-tokyo/new?wr_token=") {
		t.Errorf("form join of an admitted fan: %d, Location %q; want 303 back to the site", f.code, f.hdr.Get("Location"))
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// While Redis does not answer, a site's live pass goes on as the booking
// pass does at the gate (signature, event, exp), counted as degraded;
// nothing else gets through, and a return token cannot be traded (503,
// which the proxy turns into an error page: the fan tries again).
func TestForwardAuthWhileRedisIsAway(t *testing.T) {
	g := setupGuarded(t)
	_, st := g.admitWithReturn("https://" + shopHost + "/tour-tokyo")
	trade := g.ask(strings.TrimPrefix(st.body["returnUrl"].(string), "https://"+shopHost))
	cookie := "wr_fa_premiere=" + cookieOf(trade, "wr_fa_premiere")
	_, st2 := g.admitWithReturn("https://" + shopHost + "/tour-tokyo")
	degraded := testutil.ToFloat64(gateway.ForwardAuths.WithLabelValues("premiere", "degraded"))

	resume := testenv.PauseRedis(t, g.redis)
	defer resume()
	if r := g.ask("/tour-tokyo/seats", "Cookie", cookie); r.code != http.StatusOK || r.hdr.Get("X-Waitroom-Event") != "premiere" {
		t.Errorf("a live pass with Redis stopped: %d; want 200", r.code)
	}
	if got := testutil.ToFloat64(gateway.ForwardAuths.WithLabelValues("premiere", "degraded")) - degraded; got != 1 {
		t.Errorf("waitroom_forward_auth_total{result=degraded} went up by %v; want 1", got)
	}
	if r := g.ask("/tour-tokyo/seats"); r.code != http.StatusUnauthorized {
		t.Errorf("no pass with Redis stopped: %d; want 401", r.code)
	}
	if r := g.ask(strings.TrimPrefix(st2.body["returnUrl"].(string), "https://"+shopHost)); r.code != http.StatusServiceUnavailable {
		t.Errorf("a return token with Redis stopped: %d; want 503", r.code)
	}
	if r := g.ask("/", "Cookie", cookie); r.code != http.StatusOK {
		t.Errorf("an unguarded path with Redis stopped: %d; want 200", r.code)
	}
}
