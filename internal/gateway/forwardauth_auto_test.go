package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// Always on (DESIGN.md, "Visitors of a guarded site never see the room"):
// forward auth of an auto event makes the visitor's place in the ask
// itself while a join would be let straight through, and sends it to the
// room otherwise.

// setupAutoGuarded is setupGuarded with premiere in mode auto, capped at
// capped actives, and joinsPerIP joins per address and minute (0 = no
// limit), the gateway's clock stopped at the test's start so that the
// per-address budget's minute never turns during a test.
func setupAutoGuarded(t testing.TB, capped, joinsPerIP int, more ...func(*gateway.Options)) guarded {
	t.Helper()
	g, _ := setupAutoGuardedClock(t, capped, joinsPerIP, more...)
	return g
}

// setupAutoGuardedClock is setupAutoGuarded with the gateway's clock
// returned, for the test to move.
func setupAutoGuardedClock(t testing.TB, capped, joinsPerIP int, more ...func(*gateway.Options)) (guarded, *testClock) {
	t.Helper()
	clock := &testClock{}
	clock.set(time.Now())
	return setupGuardedAt(t, roomURL+"/", balancer+"/32", func(o *gateway.Options) {
		ev := &o.Config.Events[0]
		ev.Mode = config.ModeAuto
		ev.Admission.MaxActive = &capped
		o.Config.Gateway.JoinsPerIPPerMinute = &joinsPerIP
		o.Now = clock.now
		for _, f := range more {
			f(o)
		}
	}), clock
}

// testClock is a gateway's clock that stands still until the test moves it.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *testClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// fanAt is a visitor's address, one of many (TEST-NET-3 and beyond).
func fanAt(i int) string { return fmt.Sprintf("198.18.%d.%d", i/250, i%250+1) }

// actives is how many places of event Redis holds active, and waiting.
func (g guarded) actives(event string) (active, waiting int64) {
	g.t.Helper()
	ctx := context.Background()
	k := rdb.KeysOf(event)
	active, err := g.rdb.ZCard(ctx, k.Active).Result()
	if err != nil {
		g.t.Fatal(err)
	}
	waiting, err = g.rdb.ZCard(ctx, k.Wait).Result()
	if err != nil {
		g.t.Fatal(err)
	}
	return active, waiting
}

// straight checks that r let the visitor straight through: 200 with the
// event, a ticket and the site's pass as a cookie; it returns the ticket
// id and the pass.
func straight(t testing.TB, what string, r resp) (id, site string) {
	t.Helper()
	id, site = r.hdr.Get("X-Waitroom-Ticket-Id"), cookieOf(r, "wr_fa_premiere")
	if r.code != http.StatusOK || r.hdr.Get("X-Waitroom-Event") != "premiere" || id == "" || site == "" {
		t.Fatalf("%s: %d, event %q, ticket %q, Set-Cookie %q; want 200 straight through, premiere, a ticket and the site's pass",
			what, r.code, r.hdr.Get("X-Waitroom-Event"), id, r.hdr.Values("Set-Cookie"))
	}
	if l := setCookieLine(r, "wr_fa_premiere"); !strings.Contains(l, "HttpOnly") || !strings.Contains(l, "SameSite=Lax") || !strings.Contains(l, "path=/") {
		t.Errorf("%s: the pass's cookie %q; want HttpOnly, SameSite=Lax, path=/", what, l)
	}
	return id, site
}

// toRoom checks that r sent the visitor to the room, making nothing.
func toRoom(t testing.TB, what string, r resp) {
	t.Helper()
	if r.code != http.StatusUnauthorized || !strings.HasPrefix(r.hdr.Get("X-Waitroom-Location"), roomURL+"/e/premiere?return=") ||
		r.hdr.Get("X-Waitroom-Ticket-Id") != "" || cookieOf(r, "wr_fa_premiere") != "" {
		t.Fatalf("%s: %d, Location %q, ticket %q, Set-Cookie %q; want 401 to the room, no place, no pass", what, r.code,
			r.hdr.Get("X-Waitroom-Location"), r.hdr.Get("X-Waitroom-Ticket-Id"), r.hdr.Values("Set-Cookie"))
	}
}

// An empty auto event lets a visitor with no pass straight through: its
// place is made in the ask, the pass comes back as the cookie and works
// on the next ask (no new place); at the cap the next visitor goes to the
// room, and nothing is made for it. Counted through, as a join would be.
func TestForwardAuthStraightThrough(t *testing.T) {
	g := setupAutoGuarded(t, 2, 0)
	through := testutil.ToFloat64(gateway.StraightThrough.WithLabelValues("premiere"))
	issued := testutil.ToFloat64(gateway.TicketsIssued.WithLabelValues("premiere"))
	faThrough := testutil.ToFloat64(gateway.ForwardAuths.WithLabelValues("premiere", "through"))
	passed := testutil.ToFloat64(gateway.ForwardAuths.WithLabelValues("premiere", "passed"))

	id, site := straight(t, "a visitor with no pass", g.ask("/tour-tokyo/seats"))
	if active, waiting := g.actives("premiere"); active != 1 || waiting != 0 {
		t.Errorf("after the first visitor: %d active, %d waiting in Redis; want 1, 0", active, waiting)
	}
	if ok, err := g.line.Active(context.Background(), "premiere", id); err != nil || !ok {
		t.Errorf("the visitor's place %s: active %v, %v; want active", id, ok, err)
	}
	next := g.ask("/tour-tokyo/checkout", "Cookie", "wr_fa_premiere="+site)
	if next.code != http.StatusOK || next.hdr.Get("X-Waitroom-Ticket-Id") != id || len(next.hdr.Values("Set-Cookie")) != 0 {
		t.Errorf("the next ask with the pass: %d, ticket %q, Set-Cookie %q; want 200 for %s, no new cookie", next.code,
			next.hdr.Get("X-Waitroom-Ticket-Id"), next.hdr.Values("Set-Cookie"), id)
	}
	other, _ := straight(t, "a second visitor", g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(1)))
	if other == id {
		t.Errorf("two visitors got one place %s", id)
	}
	toRoom(t, "a third visitor, at the cap", g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(2)))
	if active, waiting := g.actives("premiere"); active != 2 || waiting != 0 {
		t.Errorf("at the cap: %d active, %d waiting in Redis; want 2, 0 (a refused ask makes no place)", active, waiting)
	}
	for name, tt := range map[string]struct{ got, want float64 }{
		"waitroom_straight_through_total":               {testutil.ToFloat64(gateway.StraightThrough.WithLabelValues("premiere")) - through, 2},
		"waitroom_tickets_issued_total":                 {testutil.ToFloat64(gateway.TicketsIssued.WithLabelValues("premiere")) - issued, 2},
		`waitroom_forward_auth_total{result="through"}`: {testutil.ToFloat64(gateway.ForwardAuths.WithLabelValues("premiere", "through")) - faThrough, 2},
		`waitroom_forward_auth_total{result="passed"}`:  {testutil.ToFloat64(gateway.ForwardAuths.WithLabelValues("premiere", "passed")) - passed, 1},
	} {
		if tt.got != tt.want {
			t.Errorf("%s went up by %v; want %v", name, tt.got, tt.want)
		}
	}
}

// Once a line formed, nobody is let straight through by forward auth
// either, even when a place frees: it goes to the one waiting.
func TestForwardAuthLineFormed(t *testing.T) {
	g := setupAutoGuarded(t, 1, 0)
	id, _ := straight(t, "the first visitor", g.ask("/tour-tokyo"))
	if r := g.join("premiere"); r.code != http.StatusCreated || r.body["status"] != "waiting" {
		t.Fatalf("a join at the cap: %d %s; want 201 waiting", r.code, r.raw)
	}
	if err := g.line.Revoke(context.Background(), "premiere", id); err != nil {
		t.Fatal(err)
	}
	toRoom(t, "a visitor while someone waits, a place free", g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(1)))
	if active, waiting := g.actives("premiere"); active != 0 || waiting != 1 {
		t.Errorf("%d active, %d waiting in Redis; want 0, 1 (the free place is the waiting fan's)", active, waiting)
	}
}

// A pass that ended (left, revoked, window over) is no pass: with room,
// a new place straight through; without, the room.
func TestForwardAuthEndedPass(t *testing.T) {
	g := setupAutoGuarded(t, 1, 0)
	id, site := straight(t, "the first visit", g.ask("/tour-tokyo"))
	if err := g.line.Revoke(context.Background(), "premiere", id); err != nil {
		t.Fatal(err)
	}
	again, _ := straight(t, "back with the revoked pass, with room", g.ask("/tour-tokyo", "Cookie", "wr_fa_premiere="+site))
	if again == id {
		t.Errorf("the ended place %s came back; want a new one", id)
	}
	if err := g.line.Revoke(context.Background(), "premiere", again); err != nil {
		t.Fatal(err)
	}
	straight(t, "someone else takes the room", g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(1)))
	toRoom(t, "back with the revoked pass, at the cap", g.ask("/tour-tokyo", "Cookie", "wr_fa_premiere="+site))
	if active, waiting := g.actives("premiere"); active != 1 || waiting != 0 {
		t.Errorf("%d active, %d waiting in Redis; want 1, 0", active, waiting)
	}
}

// A client that drops its cookies cannot fill the cap: every place made
// for it counts against its address's join budget, and past it the
// visitor goes to the room. Many addresses racing never get more places
// than the cap, as Redis counts them.
func TestForwardAuthCookielessBudget(t *testing.T) {
	g := setupAutoGuarded(t, 10, 3)
	for i := range 3 {
		straight(t, fmt.Sprintf("cookie-less ask %d", i+1), g.ask("/tour-tokyo"))
	}
	toRoom(t, "the fourth cookie-less ask of the minute", g.ask("/tour-tokyo"))
	toRoom(t, "the fifth", g.ask("/tour-tokyo"))
	if active, _ := g.actives("premiere"); active != 3 {
		t.Errorf("one address: %d places in Redis; want its budget, 3", active)
	}
	// The room's join says the same to it: the budget is one.
	if r := g.doFrom(balancer, http.MethodPost, "/api/v1/events/premiere/tickets", "X-Forwarded-For", "203.0.113.9"); r.code != http.StatusTooManyRequests {
		t.Errorf("a join at the room from that address: %d %s; want 429", r.code, r.raw)
	}

	// Forty addresses, three asks each, at once: seven places left.
	var through, refused atomic.Int64
	testenv.Race(120, func(i int) {
		r := g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(i%40))
		switch r.code {
		case http.StatusOK:
			through.Add(1)
		case http.StatusUnauthorized:
			refused.Add(1)
		}
	})
	if through.Load() != 7 || refused.Load() != 113 {
		t.Errorf("the race: %d through, %d to the room; want 7 and 113", through.Load(), refused.Load())
	}
	if active, waiting := g.actives("premiere"); active != 10 || waiting != 0 {
		t.Errorf("after the race: %d active, %d waiting in Redis; want the cap, 10, and nobody waiting", active, waiting)
	}
}

// Bypass (DESIGN.md, "Always on"): the requests to a guarded path from the
// event's cidrs (the fan's address as the trusted proxies tell it), under
// its path_prefixes (normalized as for protect, its case kept), or with
// one of its methods pass with no pass: 200 with no X-Waitroom-* header,
// no cookie, no place made and Redis never asked, counted once each as
// result "bypass". In every mode; another event's bypass is not this
// one's.
func TestForwardAuthBypass(t *testing.T) {
	for _, mode := range []string{config.ModeQueue, config.ModeAuto} {
		t.Run(mode, func(t *testing.T) { testForwardAuthBypass(t, mode) })
	}
}

func testForwardAuthBypass(t *testing.T, mode string) {
	g := setupGuardedAt(t, roomURL+"/", balancer+"/32", func(o *gateway.Options) {
		o.Config.Events[0].Mode = mode
		o.Config.Events[0].Bypass = config.Bypass{CIDRs: []string{"198.51.100.0/24", "2001:db8:7::1"},
			PathPrefixes: []string{"/tour-tokyo/assets/", "/tour-tokyo/health"}, Methods: []string{"OPTIONS"}}
	})
	bypassed := func() float64 { return testutil.ToFloat64(gateway.ForwardAuths.WithLabelValues("premiere", "bypass")) }
	for _, tt := range []struct {
		name, target string
		hdr          []string
		pass         bool
	}{
		{"the monitor's address", "/tour-tokyo/seats", []string{"X-Forwarded-For", "198.51.100.20"}, true},
		{"the monitor's IPv6 address", "/tour-tokyo", []string{"X-Forwarded-For", "2001:db8:7::1"}, true},
		{"the monitor's address before the fan's", "/tour-tokyo", []string{"X-Forwarded-For", "198.51.100.20, 203.0.113.9"}, false},
		{"another address", "/tour-tokyo", []string{"X-Forwarded-For", "198.51.101.20"}, false},
		{"an asset", "/tour-tokyo/assets/app.css?v=3", nil, true},
		{"the assets' folder", "/tour-tokyo/assets", nil, true},
		{"the health check", "/tour-tokyo/health", nil, true},
		{"an asset, a dot segment on the way", "/tour-tokyo/x/../assets/app.css", nil, true},
		{"an asset, escaped", "/tour-tokyo/%61ssets/app.css", nil, true},
		{"a longer name", "/tour-tokyo/assetsx", nil, false},
		{"out of the assets with ..", "/tour-tokyo/assets/../checkout", nil, false},
		{"out of the assets with ..;", "/tour-tokyo/assets/..;/checkout", nil, false},
		{"out of the assets with ;", "/tour-tokyo/assets;/../checkout", nil, false},
		{"out of the assets with %2e%2e", "/tour-tokyo/assets/%2e%2e/checkout", nil, false},
		{"out of the assets with an escaped slash", "/tour-tokyo/assets%2F..%2Fcheckout", nil, false},
		{"out of the assets with a backslash", `/tour-tokyo/assets\..\checkout`, nil, false},
		{"out of the assets with a raw #", "/tour-tokyo/assets#/../checkout", nil, false},
		{"the assets in another case", "/tour-tokyo/ASSETS/app.css", nil, false},
		{"a preflight", "/tour-tokyo/seats", []string{"X-Forwarded-Method", "OPTIONS"}, true},
		{"a preflight in lower case", "/tour-tokyo/seats", []string{"X-Forwarded-Method", "options"}, false},
		{"a POST", "/tour-tokyo/seats", []string{"X-Forwarded-Method", "POST"}, false},
		{"all three at once", "/tour-tokyo/assets/app.css", []string{"X-Forwarded-Method", "OPTIONS", "X-Forwarded-For", "198.51.100.20"}, true},
	} {
		before, calls := bypassed(), g.counted.calls.Load()
		active, _ := g.actives("premiere")
		r := g.ask(tt.target, tt.hdr...)
		n := bypassed() - before
		now, _ := g.actives("premiere")
		switch {
		case tt.pass && (r.code != http.StatusOK || r.hdr.Get("X-Waitroom-Event") != "" || r.hdr.Get("X-Waitroom-Ticket-Id") != "" ||
			len(r.hdr.Values("Set-Cookie")) != 0 || n != 1 || g.counted.calls.Load() != calls || now != active):
			t.Errorf("%s (%s): %d, event %q, Set-Cookie %q, counted %v, %d places made; want 200 bypassed: no header, no cookie, counted once, none made",
				tt.name, tt.target, r.code, r.hdr.Get("X-Waitroom-Event"), r.hdr.Values("Set-Cookie"), n, now-active)
		case !tt.pass && (n != 0 || r.code == http.StatusOK && r.hdr.Get("X-Waitroom-Event") == ""):
			t.Errorf("%s (%s): %d, event %q, counted bypass %v; want no bypass", tt.name, tt.target, r.code, r.hdr.Get("X-Waitroom-Event"), n)
		}
	}
	// Premiere's bypass is not event other's.
	if r := g.ask("/flash", "X-Forwarded-Method", "OPTIONS", "X-Forwarded-For", "198.51.100.20"); r.code != http.StatusUnauthorized {
		t.Errorf("another event's guarded path, as premiere's bypass: %d; want 401", r.code)
	}
}

// The new results' series are there from the start, at zero (event later
// is never asked of forward auth by any test).
func TestForwardAuthSeriesFromTheStart(t *testing.T) {
	e := setup(t, 0)
	m := string(e.do(http.MethodGet, "/metrics", nil).raw)
	for _, want := range []string{
		`waitroom_forward_auth_total{event="later",result="bypass"} 0`,
		`waitroom_forward_auth_total{event="later",result="through"} 0`,
		`waitroom_straight_through_total{event="later"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// The origin ends a visitor's session after checkout (DESIGN.md, "Always
// on"): told X-Waitroom-Ticket-Id, it deletes the ticket with a named
// token of scope tickets:end; the place frees at once (the next visitor
// takes it) and the pass stops working. A token of another event may not.
func TestOriginEndsASession(t *testing.T) {
	hash := func(tok string) string {
		sum := sha256.Sum256([]byte(tok))
		return hex.EncodeToString(sum[:])
	}
	g := setupAutoGuarded(t, 1, 0, func(o *gateway.Options) {
		o.Config.Auth.Tokens = []config.Token{
			{Name: "shop-backend", SHA256: hash("shop-backend-token-0123456789abcdef"), Scopes: []string{config.ScopeTicketsEnd}, Events: []string{"premiere"}},
			{Name: "other-backend", SHA256: hash("other-backend-token-0123456789abcdef"), Scopes: []string{config.ScopeTicketsEnd}, Events: []string{"other"}},
		}
	})
	id, site := straight(t, "a visitor", g.ask("/tour-tokyo/checkout"))
	end := "/api/v1/admin/events/premiere/tickets/" + id
	if r := g.do(http.MethodDelete, end, nil, bearer("other-backend-token-0123456789abcdef")...); r.code != http.StatusForbidden || r.body["error"] != "forbidden" {
		t.Errorf("ending it with another event's token: %d %s; want 403 forbidden", r.code, r.raw)
	}
	if ok, _ := g.line.Active(context.Background(), "premiere", id); !ok {
		t.Fatal("another event's token ended the place")
	}
	if r := g.do(http.MethodDelete, end, nil, bearer("shop-backend-token-0123456789abcdef")...); r.code != http.StatusNoContent {
		t.Fatalf("the origin ends the session: %d %s; want 204", r.code, r.raw)
	}
	if active, _ := g.actives("premiere"); active != 0 {
		t.Errorf("%d active in Redis after the end; want 0 (the place freed at once)", active)
	}
	straight(t, "the next visitor, in the place freed", g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(1)))
	toRoom(t, "the ended pass, the cap full again", g.ask("/tour-tokyo", "Cookie", "wr_fa_premiere="+site))
}

// A gateway that saw the line form (or the cap full) remembers it for a
// moment: the visitors with no pass who ask meanwhile go to the room
// without asking Redis, so that a client hammering a full site with no
// cookie costs Redis nothing more than in queue. The room lets them in
// at once if the site has room again (its joins are let straight
// through); once the moment is over, forward auth asks again.
func TestForwardAuthRemembersTheLine(t *testing.T) {
	g, clock := setupAutoGuardedClock(t, 1, 0)
	id, _ := straight(t, "the first visitor", g.ask("/tour-tokyo"))
	enters := g.counted.enters.Load()
	toRoom(t, "a visitor at the cap", g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(1)))
	if n := g.counted.enters.Load() - enters; n != 1 {
		t.Fatalf("the visitor at the cap asked the line %d times; want 1", n)
	}
	for i := range 20 {
		toRoom(t, "a visitor just after", g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(2+i)))
	}
	if err := g.line.Revoke(context.Background(), "premiere", id); err != nil {
		t.Fatal(err)
	}
	toRoom(t, "a visitor in the moment, a place free again", g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(30)))
	if n := g.counted.enters.Load() - enters; n != 1 {
		t.Errorf("the line was asked %d times in the moment after it was seen; want 1 (the first)", n)
	}
	clock.add(gateway.LineRemembered)
	straight(t, "a visitor once the moment is over", g.ask("/tour-tokyo", "X-Forwarded-For", fanAt(31)))
}

// Forward auth's straight-through places and the room's joins race on two
// gateways of one room at an auto event with room for 5: exactly 5 places
// are let in, whoever asked; an ask refused made nothing, and every join
// refused a place waits in line (Redis holds the let in and the waiting,
// and nothing else).
func TestForwardAuthRacesTheRoom(t *testing.T) {
	rs, rc := testenv.Redis(t)
	auto := func(o *gateway.Options) {
		capped := 5
		o.Config.Events[0].Mode = config.ModeAuto
		o.Config.Events[0].Admission.MaxActive = &capped
	}
	site := setupGuardedOn(t, rs, rc, roomURL+"/", balancer+"/32", auto)
	room := setupGuardedOn(t, rs, rc, roomURL+"/", balancer+"/32", auto)
	var through, refused, admitted, waiting atomic.Int64
	testenv.Race(60, func(i int) {
		if i%2 == 0 {
			switch r := site.ask("/tour-tokyo", "X-Forwarded-For", fanAt(i)); r.code {
			case http.StatusOK:
				through.Add(1)
			case http.StatusUnauthorized:
				refused.Add(1)
			}
			return
		}
		switch r := room.doFrom(balancer, http.MethodPost, "/api/v1/events/premiere/tickets", "X-Forwarded-For", fanAt(i)); r.body["status"] {
		case "admitted":
			admitted.Add(1)
		case "waiting":
			waiting.Add(1)
		}
	})
	if through.Load()+refused.Load() != 30 || admitted.Load()+waiting.Load() != 30 || through.Load()+admitted.Load() != 5 {
		t.Fatalf("%d asks let through, %d sent to the room, %d joins let in, %d waiting; want 30 asks, 30 joins, 5 let in in all",
			through.Load(), refused.Load(), admitted.Load(), waiting.Load())
	}
	if active, inLine := site.actives("premiere"); active != 5 || inLine != waiting.Load() {
		t.Errorf("Redis holds %d active and %d waiting; want the cap, 5, and the %d joins told to wait", active, inLine, waiting.Load())
	}
}

// The cookie-less budget is the room's (Fair play, second round): an IPv6
// address counts by its /64 (gateway.ipv6_prefix), and an address a client
// wrote before the fan's in X-Forwarded-For moves nothing, in its family or
// the other's.
func TestForwardAuthCookielessBudgetIPv6(t *testing.T) {
	g := setupAutoGuarded(t, 50, 3)
	for i, xff := range []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "198.18.7.7, 2001:db8:1:2::abcd"} {
		straight(t, fmt.Sprintf("ask %d from the /64", i+1), g.ask("/tour-tokyo", "X-Forwarded-For", xff))
	}
	for _, xff := range []string{"2001:db8:1:2::2", "2001:db8:1:2:1:2:3:4", "198.18.7.8, 2001:db8:1:2::5", "2001:db8:9::1, 2001:db8:1:2::6"} {
		toRoom(t, "an ask past the /64's budget, from "+xff, g.ask("/tour-tokyo", "X-Forwarded-For", xff))
	}
	straight(t, "the next /64", g.ask("/tour-tokyo", "X-Forwarded-For", "2001:db8:1:3::1"))
	if active, _ := g.actives("premiere"); active != 4 {
		t.Errorf("%d places in Redis; want the /64's 3 and the next /64's 1", active)
	}
}
