package booking_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// redisState is every key of event's in Redis, dumped: the proof that a
// refused request told the line nothing.
func (e *env) redisState(event string) string {
	e.t.Helper()
	keys, err := e.rdb.Keys(e.ctx(), "wr:{"+event+"}:*").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v, err := e.rdb.Dump(e.ctx(), k).Result()
		if err != nil {
			e.t.Fatalf("dump %s: %v", k, err)
		}
		fmt.Fprintf(&b, "%s=%x\n", k, v)
	}
	return b.String()
}

func idempotencyKey(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }

// A pass opens one event. An account is the same customer in every event,
// so the pass of one of its tickets finds the account's holds and bookings
// of another event too: it may neither release nor check out (card or
// points) such a hold, nor read such a booking. Each is 403 wrong_event, and
// nothing changes: no seat, hold, booking, payment, session or point in
// PostgreSQL, no key of either event in Redis (whose inventory would
// otherwise be told of the hold under the wrong event). The pass of the
// hold's own event then does each.
func TestAPassOpensOneEvent(t *testing.T) {
	e := setupInventory(t)
	own, _ := e.admit("premiere", "fan-x")
	other, _ := e.admit("live", "fan-x")
	e.credit("fan-x", 100_000, "top-up")
	hold := func(seat string) string {
		t.Helper()
		code, h, _ := e.call(own, http.MethodPost, "/api/v1/booking/showtimes/42/holds", map[string]any{"seats": []string{seat}}, nil)
		if code != http.StatusCreated {
			t.Fatalf("hold %s: %d %v", seat, code, h)
		}
		return h["holdId"].(string)
	}
	held, paying := hold("A1"), hold("A2")
	code, c, _ := e.call(own, http.MethodPost, "/api/v1/booking/holds/"+paying+"/checkout", nil, idempotencyKey("card-1"))
	if code != http.StatusCreated {
		t.Fatalf("checkout: %d %v", code, c)
	}
	bookingID := c["bookingId"].(string)
	points := map[string]any{"method": "points"}
	holds := "/api/v1/booking/holds/"
	cases := []struct {
		name, method, path string
		body               any
		hdr                map[string]string
	}{
		{"release", http.MethodDelete, holds + held, nil, nil},
		{"card checkout", http.MethodPost, holds + held + "/checkout", nil, idempotencyKey("k1")},
		{"points checkout", http.MethodPost, holds + held + "/checkout", points, idempotencyKey("k2")},
		{"card checkout with the key the event's own pass used", http.MethodPost, holds + paying + "/checkout", nil, idempotencyKey("card-1")},
		{"points checkout of a hold being paid", http.MethodPost, holds + paying + "/checkout", points, idempotencyKey("k3")},
		{"release of a hold being paid", http.MethodDelete, holds + paying, nil, nil},
		{"booking", http.MethodGet, "/api/v1/booking/bookings/" + bookingID, nil, nil},
	}
	db, premiere, live := e.snapshot(), e.redisState("premiere"), e.redisState("live")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, _ := e.call(other, tc.method, tc.path, tc.body, tc.hdr)
			if code != http.StatusForbidden || out["error"] != "wrong_event" {
				t.Errorf("%s %s with the account's pass of another event: %d %v; want 403 wrong_event", tc.method, tc.path, code, out)
			}
			if e.snapshot() != db {
				t.Error("the database changed")
			}
			if e.redisState("premiere") != premiere || e.redisState("live") != live {
				t.Error("the line's keys in Redis changed")
			}
		})
	}
	if code, b, _ := e.call(own, http.MethodGet, "/api/v1/booking/bookings/"+bookingID, nil, nil); code != http.StatusOK || b["status"] != "PENDING" {
		t.Fatalf("the booking with its own event's pass: %d %v; want 200 PENDING", code, b)
	}
	if code, out, _ := e.call(own, http.MethodPost, holds+held+"/checkout", points, idempotencyKey("k2")); code != http.StatusCreated || out["status"] != "CONFIRMED" {
		t.Fatalf("points checkout with its own event's pass: %d %v; want 201 CONFIRMED", code, out)
	}
	if code, out, _ := e.call(own, http.MethodDelete, holds+paying, nil, nil); code != http.StatusNoContent {
		t.Fatalf("release with its own event's pass: %d %v; want 204", code, out)
	}
	e.checkMatches("premiere")
	e.checkMatches("live")
}
