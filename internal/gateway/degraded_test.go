package gateway_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/faultproxy"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// An admitted fan keeps going while Redis is away (DESIGN.md, "When parts
// fail"): with Redis stopped (SIGSTOP: its connections stay open, nothing
// answers, as a stalled machine or a failover in progress), the gate
// honours a valid pass by its signature, event and exp alone, counted in
// waitroom_gate_degraded_total{service="gateway"}. The first check waits at
// most a second for Redis, and a second for the ping that confirms Redis
// is away; the next ones do not wait again (the breaker).
// A pass that does not verify, has expired, or names no event of the sale is
// still refused, and never reaches the booking core. New joins and polls
// get 503 with Retry-After. Once Redis answers again, the active set counts
// again: a ticket revoked then is refused at the next request.
func TestAdmittedFanKeepsGoingWhileRedisIsAway(t *testing.T) {
	e := setup(t, 0)
	ticket, token := e.admit("premiere")
	other, otherToken := e.admit("premiere")
	otherID := e.idOf("premiere", other)
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	seats := "/api/v1/booking/showtimes/42/seats"
	if r := e.do(http.MethodGet, seats, nil, bearer(token)...); r.code != http.StatusOK {
		t.Fatalf("gate with Redis up: %d %s", r.code, r.raw)
	}
	degraded := metrics.GateDegraded("gateway")
	before := testutil.ToFloat64(degraded)

	resume := testenv.PauseRedis(t, e.redis)

	began := time.Now()
	if r := e.do(http.MethodGet, seats, nil, bearer(token)...); r.code != http.StatusOK || r.body["path"] != seats {
		t.Fatalf("gate with Redis stopped: %d %s; want 200 from the booking core", r.code, r.raw)
	}
	first := time.Since(began)
	// The breaker is open now: five more checks, none waits for Redis.
	began = time.Now()
	for i := 0; i < 5; i++ {
		if r := e.do(http.MethodGet, seats, nil, bearer(token)...); r.code != http.StatusOK {
			t.Fatalf("check %d with Redis stopped: %d %s; want 200", i, r.code, r.raw)
		}
	}
	if next := time.Since(began); next >= time.Second {
		t.Errorf("five checks after the first took %s; want them not to wait for Redis again (the first took %s)", next, first)
	}
	if got := testutil.ToFloat64(degraded) - before; got != 6 {
		t.Errorf("waitroom_gate_degraded_total{service=gateway} went up by %v; want 6", got)
	}
	// A hold is passed on for the booking core to check (its reserve): its
	// own gatekeeper lets the fan go on while Redis is away (booking's
	// TestAdmittedFanKeepsGoingWhileTheLineIsAway), as the stand-in core does
	// here; the gate, whose breaker is open, keeps the fan's pass.
	e.upstream.placeActive.Store(func(event, ticket string) bool { return true })
	if r := e.do(http.MethodPost, "/api/v1/booking/showtimes/42/holds", strings.NewReader(`{"seats":["A1"]}`), bearer(token)...); r.code != http.StatusCreated {
		t.Fatalf("a hold with Redis stopped: %d %s; want 201", r.code, r.raw)
	}

	// Only the pass itself is trusted: its signature, exp and event.
	now := time.Now()
	id := e.idOf("premiere", ticket)
	sign := func(key ed25519.PrivateKey, mut func(jwt.MapClaims)) string {
		c := jwt.MapClaims{"iss": "waitroom", "aud": "booking", "sub": id, "evt": "premiere", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
		mut(c)
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
		tok.Header["kid"] = pass.KeyID(e.priv.Public().(ed25519.PublicKey))
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	_, stranger, _ := ed25519.GenerateKey(nil)
	hits := e.upstream.hits.Load()
	for name, tok := range map[string]string{
		"another key":      sign(stranger, func(jwt.MapClaims) {}),
		"expired":          sign(e.priv, func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }),
		"no such event":    sign(e.priv, func(c jwt.MapClaims) { c["evt"] = "nope" }),
		"wrong audience":   sign(e.priv, func(c jwt.MapClaims) { c["aud"] = "forward-auth" }),
		"garbage":          "garbage",
		"tampered payload": token[:len(token)-4] + "AAAA",
	} {
		if r := e.do(http.MethodGet, seats, nil, bearer(tok)...); r.code != http.StatusUnauthorized || r.body["error"] != "admission_required" {
			t.Errorf("%s with Redis stopped: %d %s; want 401 admission_required", name, r.code, r.raw)
		}
	}
	if n := e.upstream.hits.Load(); n != hits {
		t.Errorf("refused passes reached the booking core %d times", n-hits)
	}

	// The line itself needs Redis: a join and a poll are 503, retry later.
	for name, r := range map[string]resp{
		"join": e.join("premiere", "X-Forwarded-For", ""),
		"poll": e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, nil),
	} {
		if r.code != http.StatusServiceUnavailable || r.body["error"] != "unavailable" || r.hdr.Get("Retry-After") == "" {
			t.Errorf("%s with Redis stopped: %d %s (Retry-After %q); want 503 unavailable with Retry-After", name, r.code, r.raw, r.hdr.Get("Retry-After"))
		}
	}

	// Redis back: the active set decides again, and a revocation counts.
	resume()
	if err := e.line.Revoke(t.Context(), "premiere", otherID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := testutil.ToFloat64(degraded)
		r := e.do(http.MethodGet, seats, nil, bearer(token)...)
		if r.code == http.StatusOK && testutil.ToFloat64(degraded) == after {
			break // the line answered, not the pass alone
		}
		if time.Now().After(deadline) {
			t.Fatalf("the active fan 5s after Redis was back: %d %s, degraded %v; want 200 from the line", r.code, r.raw, testutil.ToFloat64(degraded) != after)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := e.do(http.MethodGet, seats, nil, bearer(otherToken)...); r.code != http.StatusUnauthorized {
		t.Errorf("a pass revoked once Redis was back: %d %s; want 401", r.code, r.raw)
	}
}

// lineApart is the gateway's line through a fault proxy, its ping apart
// (another proxy): one slow answer of the line while Redis still answers a
// ping, as a fan's heavy read or a stalled connection would make it.
type lineApart struct {
	*queue.Store
	ping *queue.Store
}

func (l lineApart) Ping(ctx context.Context) error { return l.ping.Ping(ctx) }

// setupThroughProxies is setup with the gateway's Redis behind two fault
// proxies: lines (every call of the line) and pings (the breaker's probe).
// The env's own line (e.line) talks to Redis directly: another gateway, or
// the booking core's relay.
func setupThroughProxies(t *testing.T) (e *env, lines, pings *faultproxy.Proxy) {
	t.Helper()
	rs, rc := testenv.Redis(t)
	through := func() (*faultproxy.Proxy, *queue.Store) {
		px, err := faultproxy.Start(rs.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(px.Close)
		c := redis.NewClient(&redis.Options{Addr: px.Addr, PoolSize: 16})
		t.Cleanup(func() { c.Close() })
		return px, queue.NewStore(c, []byte("gateway-test-secret-0123456789abcdef"))
	}
	lines, line := through()
	pings, ping := through()
	e = setupOn(t, rs, rc, 0, "", "", func(o *gateway.Options) { o.Line = lineApart{Store: line, ping: ping} })
	return e, lines, pings
}

// Fans cannot open the gate (DESIGN.md, "Fair play, third round"). One
// check that gets no answer within the wait (latency put between the gate
// and Redis while Redis answers pings) is that fan's 503, not a way in: the
// breaker stays closed, and a revoked pass is refused the moment after.
// Three such checks in a row open it: then valid passes go on by their
// signature (counted degraded), but a pass whose ticket ended before, while
// Redis answered (left at this gate, revoked by an operator through
// another gateway, completed by the booking core's relay), is still 401:
// the gate follows the line's ends while Redis answers. Nothing refused
// reaches the booking core. Once Redis answers again the line decides.
func TestFansCannotOpenTheGate(t *testing.T) {
	e, lines, pings := setupThroughProxies(t)
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	seats := "/api/v1/booking/showtimes/42/seats"
	_, token := e.admit("premiere")
	idOf := func(ticket string) string { return e.idOf("premiere", ticket) }
	leftT, left := e.admit("premiere")
	revokedT, revoked := e.admit("premiere")
	completedT, completed := e.admit("premiere")
	if r := e.do(http.MethodDelete, "/api/v1/events/premiere/tickets/"+leftT, nil); r.code != http.StatusNoContent {
		t.Fatalf("leave: %d %s", r.code, r.raw)
	}
	if err := e.line.Revoke(t.Context(), "premiere", idOf(revokedT)); err != nil {
		t.Fatal(err)
	}
	if err := e.line.Complete(t.Context(), "premiere", idOf(completedT)); err != nil {
		t.Fatal(err)
	}
	ended := map[string]string{"left": left, "revoked": revoked, "completed": completed}
	for name, tok := range ended {
		if r := e.do(http.MethodGet, seats, nil, bearer(tok)...); r.code != http.StatusUnauthorized {
			t.Fatalf("%s with Redis answering: %d %s; want 401", name, r.code, r.raw)
		}
	}
	// The gate heard of every end (its own, and the others').
	deadline := time.Now().Add(10 * time.Second)
	for _, ticket := range []string{leftT, revokedT, completedT} {
		for !e.srv.EndHeard("premiere", idOf(ticket)) {
			if time.Now().After(deadline) {
				t.Fatalf("the gate did not hear of %s's end within 10s", ticket)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	degraded := metrics.GateDegraded("gateway")
	before := testutil.ToFloat64(degraded)

	// One slow answer: that check's 503, the breaker closed.
	lines.Latency(1500 * time.Millisecond)
	r := e.do(http.MethodGet, seats, nil, bearer(token)...)
	lines.Heal()
	if r.code != http.StatusServiceUnavailable || r.body["error"] != "unavailable" || r.hdr.Get("Retry-After") == "" {
		t.Errorf("one check without an answer in time: %d %s; want 503 unavailable with Retry-After (not a way in)", r.code, r.raw)
	}
	if r := e.do(http.MethodGet, seats, nil, bearer(revoked)...); r.code != http.StatusUnauthorized {
		t.Errorf("a revoked pass right after one slow answer: %d %s; want 401 (the breaker stays closed)", r.code, r.raw)
	}
	if r := e.do(http.MethodGet, seats, nil, bearer(token)...); r.code != http.StatusOK {
		t.Errorf("the active fan after one slow answer: %d %s; want 200", r.code, r.raw)
	}
	if got := testutil.ToFloat64(degraded) - before; got != 0 {
		t.Errorf("one slow answer let %v passes through degraded; want none", got)
	}

	// Three in a row: the breaker opens (the third with the ping silent
	// too, so that it stays open while we look).
	lines.Latency(1500 * time.Millisecond)
	for i := 0; i < 2; i++ {
		if r := e.do(http.MethodGet, seats, nil, bearer(token)...); r.code != http.StatusServiceUnavailable {
			t.Fatalf("check %d without an answer: %d %s; want 503", i+1, r.code, r.raw)
		}
	}
	pings.Partition()
	if r := e.do(http.MethodGet, seats, nil, bearer(token)...); r.code != http.StatusOK || r.body["path"] != seats {
		t.Fatalf("the third check in a row without an answer: %d %s; want 200 from the booking core (degraded)", r.code, r.raw)
	}
	hits := e.upstream.hits.Load()
	began := time.Now()
	for name, tok := range ended {
		if r := e.do(http.MethodGet, seats, nil, bearer(tok)...); r.code != http.StatusUnauthorized || r.body["error"] != "admission_required" {
			t.Errorf("%s before the outage, during it: %d %s; want 401 admission_required", name, r.code, r.raw)
		}
	}
	if n := e.upstream.hits.Load(); n != hits {
		t.Errorf("ended passes reached the booking core %d times", n-hits)
	}
	if r := e.do(http.MethodGet, seats, nil, bearer(token)...); r.code != http.StatusOK {
		t.Errorf("the active fan while open: %d %s; want 200", r.code, r.raw)
	}
	if d := time.Since(began); d >= time.Second {
		t.Errorf("four checks while open took %s; want none to wait for Redis", d)
	}
	if got := testutil.ToFloat64(degraded) - before; got != 2 {
		t.Errorf("waitroom_gate_degraded_total{service=gateway} went up by %v; want 2 (the active fan's two checks, no ended pass)", got)
	}

	// Redis back: the line decides again.
	lines.Heal()
	pings.Heal()
	deadline = time.Now().Add(10 * time.Second)
	for {
		after := testutil.ToFloat64(degraded)
		r := e.do(http.MethodGet, seats, nil, bearer(token)...)
		if r.code == http.StatusOK && testutil.ToFloat64(degraded) == after {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10s after Redis answered again the gate still falls back (%d %s)", r.code, r.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, tok := range ended {
		if r := e.do(http.MethodGet, seats, nil, bearer(tok)...); r.code != http.StatusUnauthorized {
			t.Errorf("%s with Redis back: %d %s; want 401", name, r.code, r.raw)
		}
	}
}
