package gateway_test

import (
	"context"
	"crypto/ed25519"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// The room of these tests, as fans reach it, and the site it guards.
const (
	roomURL  = "https://room.example"
	shopHost = "shop.example"
)

// countingLine is the line, counting what forward auth asks of it: the
// checks and trades in calls, the joins (an auto event's) in enters.
type countingLine struct {
	*queue.Store
	calls  atomic.Int64
	enters atomic.Int64
}

func (l *countingLine) Enter(ctx context.Context, r line.EnterRequest) (line.Entry, error) {
	l.enters.Add(1)
	return l.Store.Enter(ctx, r)
}

func (l *countingLine) Active(ctx context.Context, event, ticket string) (bool, error) {
	l.calls.Add(1)
	return l.Store.Active(ctx, event, ticket)
}

func (l *countingLine) SpendReturn(ctx context.Context, event, id, jti string, keep, ttl time.Duration) (time.Time, bool, error) {
	l.calls.Add(1)
	return l.Store.SpendReturn(ctx, event, id, jti, keep, ttl)
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
	rs, rc := testenv.Redis(t)
	return setupGuardedOn(t, rs, rc, publicURL, trusted, more...)
}

// setupGuardedOn is setupGuardedAt on a Redis the test started (rs, and
// its client rc): a second gateway of the same room, with more setting
// the first one's key.
func setupGuardedOn(t testing.TB, rs *localsvc.Redis, rc *redis.Client, publicURL, trusted string, more ...func(*gateway.Options)) guarded {
	t.Helper()
	var counted *countingLine
	e := setupOn(t, rs, rc, 0, `, public_url: "`+publicURL+`", trusted_proxies: ["`+trusted+`"]`, "", func(o *gateway.Options) {
		o.Config.Events[0].Protect = []config.Protect{{Host: shopHost, PathPrefix: "/tour-tokyo"}}
		// Event other guards /flash with a short window, to watch it end.
		o.Config.Events[1].Protect = []config.Protect{{Host: shopHost, PathPrefix: "/flash"}}
		o.Config.Events[1].Admission.AccessTTL = config.Duration(2 * time.Second)
		for _, f := range more {
			f(o)
		}
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
	set := line.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
	return g.admitWithReturnTo("premiere", ret, set)
}

// admitWithReturnTo is admitWithReturn for event, whose ticks run with set.
func (g guarded) admitWithReturnTo(event, ret string, set line.Settings) (string, resp) {
	g.t.Helper()
	j := g.do(http.MethodPost, "/api/v1/events/"+event+"/tickets", strings.NewReader(`{"return":"`+ret+`"}`))
	if j.code != http.StatusCreated {
		g.t.Fatalf("join with return: %d %s", j.code, j.raw)
	}
	ticket := j.body["ticket"].(string)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := g.line.Tick(context.Background(), event, set); err != nil {
			g.t.Fatal(err)
		}
		if s := g.do(http.MethodGet, "/api/v1/events/"+event+"/tickets/"+ticket, nil); s.body["status"] == "admitted" {
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

// Forward auth fails closed (DESIGN.md, "Fair play, third round"): a host
// no rule names, or none at all, is 403 unknown_host, so that a Host
// header the room does not know never opens a guarded page; a path is
// compared once normalized as the origin may read it (;-parameters, dot
// segments, unreserved escapes), and one that cannot be (an encoded slash,
// a bad escape) is guarded by the host's broadest rule. None of it asks
// Redis anything but the guarded ones.
func TestForwardAuthFailsClosed(t *testing.T) {
	g := setupGuarded(t)
	ask := func(host, target string) resp {
		hdr := []string{"X-Forwarded-Uri", target}
		if host != "" {
			hdr = append(hdr, "X-Forwarded-Host", host)
		}
		return g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", hdr...)
	}
	for _, host := range []string{"", " ", "other.example", "shop.example.evil.example", "evil.example:443", "127.0.0.1:8080", "shop.example@evil.example"} {
		before := g.counted.calls.Load()
		r := ask(host, "/tour-tokyo")
		if r.code != http.StatusForbidden || r.body["error"] != "unknown_host" || r.body["message"] == "" || r.hdr.Get("X-Waitroom-Event") != "" {
			t.Errorf("X-Forwarded-Host %q: %d %s; want 403 unknown_host", host, r.code, r.raw)
		}
		if n := g.counted.calls.Load() - before; n != 0 {
			t.Errorf("X-Forwarded-Host %q asked the line %d times; want 0", host, n)
		}
	}
	// With no X-Forwarded-Host, the Host of the ask itself (the gateway's
	// own address) is no stand-in.
	if r := g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "Host", shopHost, "X-Forwarded-Uri", "/tour-tokyo"); r.code != http.StatusForbidden || r.body["error"] != "unknown_host" {
		t.Errorf("no X-Forwarded-Host, Host %s: %d %s; want 403 unknown_host", shopHost, r.code, r.raw)
	}
	for _, tt := range []struct {
		target string
		event  string // the room the fan is sent to; "" = not guarded (200)
	}{
		{"/", ""},
		{"/tour-osaka", ""},
		{"/tour-tokyo;jsessionid=1/buy", "premiere"},
		{"/tour-tokyo;jsessionid=1", "premiere"},
		{"/x/..;/tour-tokyo", "premiere"},
		{"/x;a=b/..;c=d/tour-tokyo", "premiere"},
		{"/;/tour-tokyo", "premiere"},
		{"/.;/tour-tokyo", "premiere"},
		{"/;x=1/;y=2//tour-tokyo/seats", "premiere"},
		{"/x/.%2E/tour-tokyo", "premiere"},
		{"/%7Etour/../tour-tokyo", "premiere"},
		{`/x\..;\tour-tokyo`, "premiere"},
		{"/tour%2Dtokyo", "premiere"},
		{"/tour-tokyo%20extra", "premiere"},
		{"/%2574our-tokyo", ""},     // %25 is no unreserved character: it stays
		{"/tour%20tokyo", ""},       // nor is a space
		{"/x%3F/../tour-osaka", ""}, // nor '?': a segment like another
		// That cannot be normalized: the host's broadest rule (/flash).
		{"/x%2F..%2Ftour-tokyo", "other"},
		{"/x%2f..%2ftour-tokyo", "other"},
		{"/x%5C..%5Ctour-tokyo", "other"},
		{"/tour-osaka%2Fseats", "other"},
		{"/x%3B/../tour-tokyo", "other"},
		{"/x;%2F..%2F/tour-tokyo", "other"},
		{"/x;%zz/tour-osaka", "other"},
		{"/tour-osaka%", "other"},
		{"/tour-osaka%4", "other"},
		{"/tour-osaka%zz", "other"},
		{"/%E0%A4%A/tour-osaka", "other"},
		// A raw # is no fragment in a request target (RFC 9112, 3.2): nginx
		// passes it on, and an origin that cleans the path as it comes
		// (Go's http.FileServer, Caddy's file_server) reads /tour-tokyo.
		{"/tour-osaka#/../tour-tokyo", "other"},
		{"/tour-osaka?a=#/../tour-tokyo", ""},
	} {
		before := g.counted.calls.Load()
		r := ask(shopHost, tt.target)
		calls := g.counted.calls.Load() - before
		switch loc := r.hdr.Get("X-Waitroom-Location"); {
		case tt.event == "" && (r.code != http.StatusOK || calls != 0):
			t.Errorf("%s: %d %s, %d calls of the line; want 200, none", tt.target, r.code, r.raw, calls)
		case tt.event != "" && (r.code != http.StatusUnauthorized || !strings.HasPrefix(loc, roomURL+"/e/"+tt.event+"?")):
			t.Errorf("%s: %d, to %q; want 401 to the room of %s", tt.target, r.code, loc, tt.event)
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

// A target no URL can carry as it is (a bad escape, bytes beyond ASCII)
// is still guarded, and its way back is a URL
// the room takes: every such byte written as %XX, a good escape kept.
func TestForwardAuthWayBackOfAnOddTarget(t *testing.T) {
	g := setupGuarded(t)
	for _, c := range []struct{ uri, event, back string }{
		{"/%tokyo", "other", "/%25tokyo"}, // no clean path: the host's broadest rule
		{"/tour-tokyo/%zz%4", "other", "/tour-tokyo/%25zz%254"},
		{"/tour-tokyo/caf\xc3\xa9?q=%20", "premiere", "/tour-tokyo/caf%C3%A9?q=%20"},
	} {
		r := g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Proto", "https",
			"X-Forwarded-Host", "SHOP.example", "X-Forwarded-Uri", c.uri)
		back := "https://SHOP.example" + c.back
		want := roomURL + "/e/" + c.event + "?return=" + url.QueryEscape(back)
		if r.code != http.StatusUnauthorized || r.hdr.Get("X-Waitroom-Location") != want {
			t.Errorf("%q: %d, X-Waitroom-Location %q; want 401, %q", c.uri, r.code, r.hdr.Get("X-Waitroom-Location"), want)
			continue
		}
		if p := g.do(http.MethodGet, "/e/"+c.event+"?return="+url.QueryEscape(back), nil); p.code != http.StatusOK {
			t.Errorf("%q: the room refused its own way back %q: %d", c.uri, back, p.code)
		}
	}
}

// A host that names the shop's rule but that no URL can carry as it is (a
// port that is no number, or too long; brackets round no IPv6 address) is
// sent to the room with no way back, rather than one the room would refuse
// (FuzzForwardAuth's find: SHOP.eXAmple:A).
func TestForwardAuthNoWayBackOnAnOddHost(t *testing.T) {
	g := setupGuarded(t)
	for _, host := range []string{"SHOP.eXAmple:A", "shop.example:80a", "shop.example:123456", "[shop.example]", "[shop.example]:443"} {
		r := g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Proto", "https",
			"X-Forwarded-Host", host, "X-Forwarded-Uri", "/tour-tokyo")
		if want := roomURL + "/e/premiere"; r.code != http.StatusUnauthorized || r.hdr.Get("X-Waitroom-Location") != want {
			t.Errorf("X-Forwarded-Host %q: %d, X-Waitroom-Location %q; want 401, %q", host, r.code, r.hdr.Get("X-Waitroom-Location"), want)
		}
	}
	// A well-formed port still gets its way back.
	r := g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Proto", "https",
		"X-Forwarded-Host", "shop.example:8443", "X-Forwarded-Uri", "/tour-tokyo")
	if want := roomURL + "/e/premiere?return=" + url.QueryEscape("https://shop.example:8443/tour-tokyo"); r.code != http.StatusUnauthorized || r.hdr.Get("X-Waitroom-Location") != want {
		t.Errorf("X-Forwarded-Host shop.example:8443: %d, X-Waitroom-Location %q; want 401, %q", r.code, r.hdr.Get("X-Waitroom-Location"), want)
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
	r := g.do(http.MethodGet, "/e/premiere?return="+url.QueryEscape("https://SHOP.example/tour-tokyo?x=1"), nil)
	if r.code != http.StatusOK || !strings.Contains(string(r.raw), `name="return" value="https://SHOP.example/tour-tokyo?x=1"`) {
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

// Each pass is answered with its own claims, however many fans' passes
// the gateway's connections carry at once (issue 40, "found by running
// it": a pass just traded was refused on the fan's next page behind
// Caddy). The gateway is served as in production, a few keep-alive
// connections each carrying one fan's request after another's; 96 fans
// with passes of one length ask again and again, a third of them after
// they left. Every answer is the fan's own: its ticket for the fans still
// in, 401 for the ones who left, never another fan's.
func TestForwardAuthAnswersEachPassWithItsOwnClaims(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := setupGuardedAt(t, roomURL+"/", "127.0.0.1/32")
	go func() { _ = g.srv.Serve(ln) }()
	t.Cleanup(func() { _ = g.srv.Shutdown(context.Background()) })

	const fans = 96
	ctx := context.Background()
	signer := pass.NewSigner(g.priv)
	now := time.Now()
	type fan struct {
		id, cookie string
		left       bool
	}
	all := make([]fan, fans)
	for i := range all {
		j, err := g.line.Join(ctx, "premiere", line.Settings{Mode: "passthrough", AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute})
		if err != nil || j.State != line.Admitted {
			t.Fatalf("join %d: %v %v", i, j.State, err)
		}
		site, err := signer.MintSite(j.ID, "premiere", now, now.Add(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		all[i] = fan{id: j.ID, cookie: "wr_fa_premiere=" + site, left: i%3 == 2}
		if all[i].left {
			if err := g.line.Leave(ctx, "premiere", j.Ticket); err != nil {
				t.Fatal(err)
			}
		}
	}
	tr := &http.Transport{MaxConnsPerHost: 4, MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var wrong atomic.Int64
	testenv.Race(fans, func(i int) {
		f := all[i]
		for round := range 20 {
			req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/api/v1/forward-auth", nil)
			req.Header.Set("X-Forwarded-Host", shopHost)
			req.Header.Set("X-Forwarded-Uri", "/tour-tokyo/seats")
			req.Header.Set("Cookie", f.cookie)
			res, err := hc.Do(req)
			if err != nil {
				t.Errorf("fan %d, round %d: %v", i, round, err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			got := res.Header.Get("X-Waitroom-Ticket-Id")
			switch {
			case f.left && (res.StatusCode != http.StatusUnauthorized || got != ""):
				wrong.Add(1)
				t.Errorf("fan %d (left), round %d: %d as ticket %q; want 401", i, round, res.StatusCode, got)
			case !f.left && (res.StatusCode != http.StatusOK || got != f.id):
				wrong.Add(1)
				t.Errorf("fan %d, round %d: %d as ticket %q; want 200 as its own, %s", i, round, res.StatusCode, got, f.id)
			}
			if wrong.Load() > 10 {
				return
			}
		}
	})
}

// The way back changes only with the fan's consent (DESIGN.md, "Fair
// play, third round"): GET /e/{event}?return=… coming from another site,
// while the browser holds a live place of the event with another way
// back, replaces nothing: the page asks, in the fan's language, with a
// same-site form post. Same-site, over the same way back, or over a place
// with none, it is kept at once.
func TestWayBackChangesOnlyWithConsent(t *testing.T) {
	g := setupGuarded(t)
	ctx := context.Background()
	old, nw := "https://"+shopHost+"/tour-tokyo/old", "https://"+shopHost+"/tour-tokyo/new?x=1"
	kept := func(ticket string) string {
		t.Helper()
		r, err := g.line.Return(ctx, "premiere", g.mustID("premiere", ticket))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	join := func(body string) string {
		t.Helper()
		j := g.do(http.MethodPost, "/api/v1/events/premiere/tickets", strings.NewReader(body))
		if j.code != http.StatusCreated {
			t.Fatalf("join %s: %d %s", body, j.code, j.raw)
		}
		return j.body["ticket"].(string)
	}
	admitted, _ := g.admitWithReturn(old)
	waiting := join(`{"return":"` + old + `"}`) // joined after: in line
	link := "/e/premiere?return=" + url.QueryEscape(nw)

	for _, fan := range []struct{ name, ticket string }{{"admitted", admitted}, {"waiting", waiting}} {
		for _, tt := range fromAnotherSite {
			r := g.do(http.MethodGet, link, nil, append([]string{"Cookie", "wr_t_premiere=" + fan.ticket}, tt.hdr...)...)
			body := string(r.raw)
			if r.code != http.StatusOK || r.hdr.Get("Location") != "" || !strings.Contains(body, "When your turn comes, go back to this page instead?") {
				t.Fatalf("%s fan, %s: %d, Location %q; want 200 asking:\n%.800s", fan.name, tt.name, r.code, r.hdr.Get("Location"), body)
			}
			for _, want := range []string{`<form method="post" action="/e/premiere/move"`, `name="return" value="` + html.EscapeString(nw) + `"`, `id="move-yes"`, `id="move-no"`, html.EscapeString(old)} {
				if !strings.Contains(body, want) {
					t.Errorf("%s fan, %s: the question lacks %s", fan.name, tt.name, want)
				}
			}
			if strings.Contains(body, "room.js") || r.hdr.Get("Cache-Control") != "no-store" {
				t.Errorf("%s fan, %s: the question loads room.js or is stored (Cache-Control %q)", fan.name, tt.name, r.hdr.Get("Cache-Control"))
			}
			if got := kept(fan.ticket); got != old {
				t.Errorf("%s fan, %s: the way back is now %q; want %q, unchanged", fan.name, tt.name, got, old)
			}
		}
	}
	for _, tt := range []struct{ lang, want string }{
		{"ja", "順番が来たら、このリンクのページに戻りますか？"},
		{"ko", "차례가 되면 이 링크의 페이지로 돌아갈까요?"},
	} {
		r := g.do(http.MethodGet, link, nil, "Cookie", "wr_t_premiere="+waiting, "Sec-Fetch-Site", "cross-site", "Accept-Language", tt.lang)
		if r.code != http.StatusOK || !strings.Contains(string(r.raw), `<html lang="`+tt.lang+`">`) || !strings.Contains(string(r.raw), tt.want) {
			t.Errorf("the question in %s: %d; want %q:\n%.800s", tt.lang, r.code, tt.want, r.raw)
		}
	}

	// The answer is a same-site form post.
	post := func(ticket string, hdr ...string) resp {
		return g.do(http.MethodPost, "/e/premiere/move", strings.NewReader("return="+url.QueryEscape(nw)),
			append([]string{"Cookie", "wr_t_premiere=" + ticket, "Content-Type", "application/x-www-form-urlencoded"}, hdr...)...)
	}
	if r := post(waiting, "Sec-Fetch-Site", "cross-site"); r.code != http.StatusForbidden || kept(waiting) != old {
		t.Errorf("the answer posted from another site: %d, way back %q; want 403, unchanged", r.code, kept(waiting))
	}
	if r := post(waiting, "Sec-Fetch-Site", "same-origin", "Origin", roomURL); r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/e/premiere" || kept(waiting) != nw {
		t.Errorf("yes: %d to %q, way back %q; want 303 to the room, %q", r.code, r.hdr.Get("Location"), kept(waiting), nw)
	}
	if r := post(waiting, "Sec-Fetch-Site", "same-origin"); r.code != http.StatusSeeOther {
		t.Errorf("yes again: %d; want 303", r.code)
	}
	bad := g.do(http.MethodPost, "/e/premiere/move", strings.NewReader("return="+url.QueryEscape("https://evil.example/")),
		"Cookie", "wr_t_premiere="+waiting, "Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")
	if bad.code != http.StatusSeeOther || !strings.Contains(bad.hdr.Get("Location"), "e=invalid_return") || kept(waiting) != nw {
		t.Errorf("yes to a way back the event does not guard: %d to %q, way back %q; want 303 saying invalid_return, unchanged", bad.code, bad.hdr.Get("Location"), kept(waiting))
	}

	// Nothing to ask: the same way back again, a place with none, a
	// link of this site (the admitted fan goes back at once), no place.
	if r := g.do(http.MethodGet, link, nil, "Cookie", "wr_t_premiere="+waiting, "Sec-Fetch-Site", "cross-site"); r.code != http.StatusOK || strings.Contains(string(r.raw), "move-yes") {
		t.Errorf("the same way back from another site: %d, asking %v; want the room", r.code, strings.Contains(string(r.raw), "move-yes"))
	}
	none := join(`{}`)
	if r := g.do(http.MethodGet, link, nil, "Cookie", "wr_t_premiere="+none, "Sec-Fetch-Site", "cross-site"); r.code != http.StatusOK || strings.Contains(string(r.raw), "move-yes") || kept(none) != nw {
		t.Errorf("a place with no way back, from another site: %d, way back %q; want the room, kept at once", r.code, kept(none))
	}
	r := g.do(http.MethodGet, link, nil, "Cookie", "wr_t_premiere="+admitted, "Sec-Fetch-Site", "same-origin")
	if loc := r.hdr.Get("Location"); r.code != http.StatusSeeOther || !strings.HasPrefix(loc, nw+"&wr_token=") || kept(admitted) != nw {
		t.Errorf("same-site, admitted: %d to %q; want 303 to the new way back with a token", r.code, loc)
	}
	if r := g.do(http.MethodGet, link, nil, "Sec-Fetch-Site", "cross-site"); r.code != http.StatusOK || !strings.Contains(string(r.raw), `name="return" value="`+html.EscapeString(nw)+`"`) {
		t.Errorf("no place, from another site: %d; want the room, its join carrying the way back", r.code)
	}
}

// A way back is on its site's port and scheme (DESIGN.md, "Fair play,
// third round"): the scheme's default port, or one the site's own proxy
// named in X-Forwarded-Host when forward auth sent a fan to this event's
// room; and https when the room is (gateway.public_url). Anything else is
// 400 invalid_return, on the room page and at the join, and makes no
// place.
func TestWayBackOnItsSitesPortAndScheme(t *testing.T) {
	g := setupGuarded(t) // public_url https
	refused := func(ret, event string) bool {
		t.Helper()
		p := g.do(http.MethodGet, "/e/"+event+"?return="+url.QueryEscape(ret), nil)
		before, _ := g.line.Counts(context.Background(), event)
		j := g.do(http.MethodPost, "/api/v1/events/"+event+"/tickets", strings.NewReader(`{"return":"`+ret+`"}`))
		after, _ := g.line.Counts(context.Background(), event)
		switch {
		case p.code == http.StatusBadRequest && j.code == http.StatusBadRequest && j.body["error"] == "invalid_return" && after.Waiting == before.Waiting:
			return true
		case p.code == http.StatusOK && j.code == http.StatusCreated:
			return false
		}
		t.Fatalf("return %s: room page %d, join %d %s; want both refused (400 invalid_return) or both taken", ret, p.code, j.code, j.raw)
		return false
	}
	for _, tt := range []struct {
		ret     string
		refused bool
	}{
		{"https://shop.example/tour-tokyo", false},
		{"https://shop.example:443/tour-tokyo", false},
		{"http://shop.example/tour-tokyo", true},
		{"http://shop.example:443/tour-tokyo", true},
		{"https://shop.example:80/tour-tokyo", true},
		{"https://shop.example:8443/tour-tokyo", true},
		{"https://shop.example:0/tour-tokyo", true},
		{"https://shop.example:99999/tour-tokyo", true},
	} {
		if got := refused(tt.ret, "premiere"); got != tt.refused {
			t.Errorf("return %s refused: %v; want %v", tt.ret, got, tt.refused)
		}
	}
	// The site's proxy names the port a fan asked for: forward auth sends
	// that fan to the room, and the port is the site's from then on.
	if r := g.ask("/tour-tokyo/seats", "X-Forwarded-Host", "shop.example:8443"); r.code != http.StatusUnauthorized {
		t.Fatalf("a guarded page on port 8443: %d; want 401", r.code)
	}
	if refused("https://SHOP.example:8443/tour-tokyo?x=1", "premiere") {
		t.Error("a way back on the port the site's proxy named: refused; want taken")
	}
	for _, tt := range []struct{ ret, event string }{
		{"https://shop.example:8444/tour-tokyo", "premiere"}, // another port
		{"http://shop.example:8443/tour-tokyo", "premiere"},  // in clear
		{"https://shop.example:8443/flash", "other"},         // another event's room: none of its fans came by it
	} {
		if !refused(tt.ret, tt.event) {
			t.Errorf("return %s to %s's room: taken; want 400 invalid_return", tt.ret, tt.event)
		}
	}

	// A room served over http takes the site's http too.
	h := setupGuardedAt(t, "http://room.example/", balancer+"/32")
	if r := h.do(http.MethodGet, "/e/premiere?return="+url.QueryEscape("http://shop.example/tour-tokyo"), nil); r.code != http.StatusOK {
		t.Errorf("an http way back to a room over http: %d; want 200", r.code)
	}
}

// A fan on the site is a fan present (DESIGN.md, "Fair play, third
// round"): an admitted place whose return token was traded for the site's
// pass is claimed by that trade, as a poll of the room would claim it, so
// the admitter's tick never drops it at its abandon deadline while its
// window lasts, though the fan, browsing the site, never polls the room.
// The pass the trade sets runs the whole window.
func TestAFanOnTheSiteIsPresent(t *testing.T) {
	g := setupGuarded(t)
	ctx := context.Background()
	set := line.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Second}
	j, err := g.line.Join(ctx, "premiere", set)
	if err != nil {
		t.Fatal(err)
	}
	// Let in by the admitter's tick, and never polled since: its place
	// lasts to its abandon deadline unless its fan shows up.
	active := rdb.KeysOf("premiere").Active
	var deadline float64
	for end := time.Now().Add(5 * time.Second); deadline == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("never admitted")
		}
		if _, err := g.line.Tick(ctx, "premiere", set); err != nil {
			t.Fatal(err)
		}
		deadline, _ = g.rdb.ZScore(ctx, active, j.ID).Result()
	}
	if until := time.UnixMilli(int64(deadline)); until.After(time.Now().Add(time.Minute)) {
		t.Fatalf("an unclaimed place lasts to %v; want its abandon deadline, seconds away", until)
	}
	// The room sent it back (its token), and the proxy trades the token.
	now := time.Now()
	tok, err := pass.NewSigner(g.priv).MintReturn(j.ID, "premiere", "DDDDDDDDDDDDDDDDDDDDDD", now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	trade := g.ask("/tour-tokyo?wr_token=" + tok)
	site := cookieOf(trade, "wr_fa_premiere")
	if trade.code != http.StatusOK || site == "" {
		t.Fatalf("the trade: %d; want 200 with the site's pass", trade.code)
	}
	claims, err := pass.NewStaticVerifierFor(g.priv.Public().(ed25519.PublicKey), pass.AudienceSite).Verify(ctx, site)
	if err != nil || claims.ExpiresAt.Before(now.Add(9*time.Minute)) {
		t.Errorf("the site's pass: %v, until %v; want the whole window (10 minutes)", err, claims.ExpiresAt)
	}
	// Past the abandon deadline by Redis's clock, the admitter ticks: the
	// fan browsing the site keeps its place.
	for {
		tm, err := g.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if tm.UnixMilli() > int64(deadline)+200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := g.line.Tick(ctx, "premiere", set); err != nil {
		t.Fatal(err)
	}
	if r := g.ask("/tour-tokyo/seats", "Cookie", "wr_fa_premiere="+site); r.code != http.StatusOK || r.hdr.Get("X-Waitroom-Ticket-Id") != j.ID {
		t.Errorf("the next page, past the abandon deadline: %d; want 200 for the fan's ticket", r.code)
	}
	if ok, err := g.line.Active(ctx, "premiere", j.ID); err != nil || !ok {
		t.Errorf("the place after the tick: active %v, %v; want active", ok, err)
	}
}
