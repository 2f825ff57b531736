package e2e_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// gateEvents: a sale that lets fans in as they come, with seats to hold.
const gateEvents = `  - id: "premiere"
    admission: {admit_per_second: 100, max_active: 100, access_ttl: "5m"}
    showtimes:
      - {id: 42, title: "Premiere", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 10, price_cents: 1500}
`

// gateFan is one fan of these scenarios: its account, ticket, ticket id
// and pass.
type gateFan struct {
	acct, ticket, id, pass string
}

// The gate's third round through the real binaries (DESIGN.md, "Fair play,
// third round"): what the gate and the booking core's own port give a
// valid pass whose place is gone, and what they refuse while Redis is away.
//
// A fan pays a hold with points; the relay frees its place. Its answer
// lost, it sends the checkout again with its Idempotency-Key: the same
// 201, at the gate and at the booking core's own port, as are its booking
// and its wallet; a fresh key on its other hold is 401 at both, and changes
// nothing. Then a fan leaves and another is revoked by an operator; each
// process hears of the three ends (waitroom_gate_ends). Redis stops
// (SIGSTOP): a live fan goes on at both, counted degraded, and the three
// ended passes are 401 at both.
func TestTheGateThirdRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	site := newPresaleSite(t)
	s := stack.Start(t, stack.Options{Events: gateEvents, AdminToken: opsToken, AccountKeysFile: site.file})
	line := queue.New(rdb.New(s.RDB), []byte(stack.TicketSecret))
	call := func(base, method, path, pass string, hdr map[string]string, body any) (int, map[string]any) {
		t.Helper()
		code, _, raw, err := sendJSON(ctx, http.DefaultClient, base, method, path, pass, hdr, body)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return code, out
	}
	admitted := func(acct string) gateFan {
		t.Helper()
		f := gateFan{acct: acct}
		code, out := call(s.Gateway, http.MethodPost, "/api/v1/events/premiere/tickets", "", map[string]string{"X-Waitroom-Account": site.token(t, acct)}, nil)
		if code != http.StatusCreated {
			t.Fatalf("%s joins: %d %v", acct, code, out)
		}
		f.ticket, _ = out["ticket"].(string)
		for deadline := time.Now().Add(20 * time.Second); f.pass == ""; {
			code, out := call(s.Gateway, http.MethodGet, "/api/v1/events/premiere/tickets/"+f.ticket, "", nil, nil)
			if code == http.StatusOK && out["status"] == "admitted" {
				f.pass, _ = out["accessToken"].(string)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never admitted: %d %v", acct, code, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		id, err := stack.TicketID("premiere", f.ticket)
		if err != nil {
			t.Fatal(err)
		}
		f.id = id
		return f
	}
	hold := func(f gateFan, seat string) string {
		t.Helper()
		code, out := call(s.Gateway, http.MethodPost, "/api/v1/booking/showtimes/42/holds", f.pass, nil, map[string]any{"seats": []string{seat}})
		if code != http.StatusCreated {
			t.Fatalf("%s holds %s: %d %v", f.acct, seat, code, out)
		}
		return out["holdId"].(string)
	}
	key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }
	points := map[string]any{"method": "points"}

	// A checkout replayed after it completed gets its answer.
	paid := admitted("fan-paid")
	if code, out := admin(t, s.Gateway, http.MethodPost, "/api/v1/admin/wallets/fan-paid/credits", map[string]any{"points": 100_000, "reference": "top-up"}); code != http.StatusCreated {
		t.Fatalf("credit: %d %v", code, out)
	}
	bought, other := hold(paid, "A1"), hold(paid, "A2")
	code, first := call(s.Gateway, http.MethodPost, "/api/v1/booking/holds/"+bought+"/checkout", paid.pass, key("pts-1"), points)
	if code != http.StatusCreated || first["status"] != "CONFIRMED" {
		t.Fatalf("points checkout: %d %v; want 201 CONFIRMED", code, first)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if ok, err := line.Active(ctx, "premiere", paid.id); err == nil && !ok {
			break // the relay freed the place
		}
		if time.Now().After(deadline) {
			t.Fatal("the confirmed booking's place was not freed within 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, via := range []struct{ name, base string }{{"the gate", s.Gateway}, {"the booking core's own port", s.Booking}} {
		if code, out := call(via.base, http.MethodPost, "/api/v1/booking/holds/"+bought+"/checkout", paid.pass, key("pts-1"), points); code != http.StatusCreated || !maps.Equal(out, first) {
			t.Errorf("the checkout replayed at %s: %d %v; want 201 %v", via.name, code, out, first)
		}
		if code, out := call(via.base, http.MethodGet, "/api/v1/booking/bookings/"+first["bookingId"].(string), paid.pass, nil, nil); code != http.StatusOK || out["status"] != "CONFIRMED" {
			t.Errorf("the booking at %s: %d %v; want 200 CONFIRMED", via.name, code, out)
		}
		if code, out := call(via.base, http.MethodGet, "/api/v1/booking/wallet", paid.pass, nil, nil); code != http.StatusOK || out["balance"] != first["balance"] {
			t.Errorf("the wallet at %s: %d %v; want 200, balance %v", via.name, code, out, first["balance"])
		}
		if code, out := call(via.base, http.MethodPost, "/api/v1/booking/holds/"+other+"/checkout", paid.pass, key("pts-2"), points); code != http.StatusUnauthorized || out["error"] != "admission_required" {
			t.Errorf("a fresh checkout at %s: %d %v; want 401 admission_required", via.name, code, out)
		}
	}
	if code, out := call(s.Gateway, http.MethodGet, "/api/v1/booking/wallet", paid.pass, nil, nil); code != http.StatusOK || out["balance"] != float64(100_000-1500) {
		t.Errorf("the wallet after the refusals: %d %v; want %d (one checkout paid)", code, out, 100_000-1500)
	}

	// Fans cannot open the gate.
	live, left, revoked := admitted("fan-live"), admitted("fan-left"), admitted("fan-revoked")
	if code, out := call(s.Gateway, http.MethodDelete, "/api/v1/events/premiere/tickets/"+left.ticket, "", nil, nil); code != http.StatusNoContent {
		t.Fatalf("leave: %d %v", code, out)
	}
	if code, out := admin(t, s.Gateway, http.MethodDelete, "/api/v1/admin/events/premiere/tickets/"+revoked.id, nil); code != http.StatusNoContent {
		t.Fatalf("revoke: %d %v", code, out)
	}
	for _, p := range []struct{ service, url string }{{"gateway", s.Gateway}, {"booking", s.Booking}} {
		series := `waitroom_gate_ends{service="` + p.service + `"}`
		for deadline := time.Now().Add(20 * time.Second); metric(t, p.url, series) < 3; {
			if time.Now().After(deadline) {
				t.Fatalf("%s keeps %v ends 20s later; want the 3 (paid, left, revoked)", p.service, metric(t, p.url, series))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := s.Redis.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := s.Redis.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	seats := "/api/v1/booking/showtimes/42/seats"
	for _, via := range []struct{ name, base, service string }{{"the gate", s.Gateway, "gateway"}, {"the booking core's own port", s.Booking, "booking"}} {
		degraded := `waitroom_gate_degraded_total{service="` + via.service + `"}`
		before := metric(t, via.base, degraded)
		if code, out := call(via.base, http.MethodGet, seats, live.pass, nil, nil); code != http.StatusOK {
			t.Errorf("the live fan at %s with Redis stopped: %d %v; want 200", via.name, code, out)
		}
		for name, f := range map[string]gateFan{"left": left, "revoked": revoked, "completed": paid} {
			if code, out := call(via.base, http.MethodGet, seats, f.pass, nil, nil); code != http.StatusUnauthorized || out["error"] != "admission_required" {
				t.Errorf("%s before the outage, at %s during it: %d %v; want 401 admission_required", name, via.name, code, out)
			}
		}
		if got := metric(t, via.base, degraded) - before; got < 1 {
			t.Errorf("%s counted %v passes honoured alone; want the live fan's", via.service, got)
		}
	}
	resume()
}
