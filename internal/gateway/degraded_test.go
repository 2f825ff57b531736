package gateway_test

import (
	"crypto/ed25519"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// An admitted fan keeps going while Redis is away (DESIGN.md, "When parts
// fail"): with Redis stopped (SIGSTOP: its connections stay open, nothing
// answers, as a stalled machine or a failover in progress), the gate
// honours a valid pass by its signature, event and exp alone, counted in
// waitroom_gate_degraded_total{service="gateway"}. The first check waits at
// most a second for Redis; the next ones do not wait again (the breaker).
// A pass that does not verify, has expired, or names no event of the sale is
// still refused, and never reaches the booking core. New joins and polls
// get 503 with Retry-After. Once Redis answers again, the active set counts
// again: a ticket revoked then is refused at the next request.
func TestAdmittedFanKeepsGoingWhileRedisIsAway(t *testing.T) {
	e := setup(t, 0)
	ticket, token := e.admit("premiere")
	other, otherToken := e.admit("premiere")
	otherID, _ := e.line.TicketID("premiere", other)
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
		r := e.do(http.MethodPost, "/api/v1/booking/showtimes/42/holds", strings.NewReader(`{"seats":["A1"]}`), bearer(token)...)
		if r.code != http.StatusCreated {
			t.Fatalf("hold %d with Redis stopped: %d %s; want 201", i, r.code, r.raw)
		}
	}
	if next := time.Since(began); next >= time.Second {
		t.Errorf("five checks after the first took %s; want them not to wait for Redis again (the first took %s)", next, first)
	}
	if got := testutil.ToFloat64(degraded) - before; got != 6 {
		t.Errorf("waitroom_gate_degraded_total{service=gateway} went up by %v; want 6", got)
	}

	// Only the pass itself is trusted: its signature, exp and event.
	now := time.Now()
	id, _ := e.line.TicketID("premiere", ticket)
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
		r := e.do(http.MethodGet, seats, nil, bearer(otherToken)...)
		if r.code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a pass revoked once Redis was back: %d %s 5s later; want 401", r.code, r.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	after := testutil.ToFloat64(degraded)
	if r := e.do(http.MethodGet, seats, nil, bearer(token)...); r.code != http.StatusOK {
		t.Errorf("the active fan once Redis was back: %d %s", r.code, r.raw)
	}
	if got := testutil.ToFloat64(degraded); got != after {
		t.Errorf("a check with Redis back was counted as degraded")
	}
}
