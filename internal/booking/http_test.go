package booking_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/booking/postgres"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
)

// Every bad input of the contract gets its status and code, and leaves the
// database as it was.
func TestContractErrors(t *testing.T) {
	e := setup(t)
	owner, _ := e.admit("live", "")
	// State the cases refer to: a hold on A1 + FLOOR 1, a full BALCONY.
	code, held, _ := e.call(owner, http.MethodPost, "/api/v1/booking/showtimes/43/holds",
		map[string]any{"seats": []string{"A1"}, "generalAdmission": map[string]int{"FLOOR": 1}}, nil)
	if code != 201 || held["holdId"] == nil || held["expiresAt"] == nil {
		t.Fatalf("hold: %d %v", code, held)
	}
	holdPath := fmt.Sprintf("/api/v1/booking/holds/%s", held["holdId"])
	for i := range 5 {
		if _, err := e.svc.Hold(e.ctx(), fan(live, fmt.Sprintf("b%d", i)), 43, booking.HoldInput{GeneralAdmission: map[string]int{"BALCONY": 8}}); err != nil {
			t.Fatal(err)
		}
	}
	limited, _ := e.admit("live", "")
	for i := range 5 {
		h, err := e.svc.Hold(e.ctx(), limited, 43, booking.HoldInput{Seats: []string{fmt.Sprintf("E%d", i+1)}})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.svc.Release(e.ctx(), limited, h.ID)
	}
	const holds = "/api/v1/booking/showtimes/43/holds"
	anon := booking.Pass{}
	other, _ := e.admit("live", "")
	elsewhere, _ := e.admit("premiere", "")
	cases := []struct {
		name   string
		as     booking.Pass
		method string
		path   string
		body   any
		hdr    map[string]string
		status int
		code   string
	}{
		{"no pass", anon, "GET", "/api/v1/booking/showtimes/43/seats", nil, nil, 401, "admission_required"},
		{"forged pass", anon, "GET", "/api/v1/booking/showtimes/43/seats", nil, map[string]string{"Authorization": "Bearer eyJhbGciOiJub25lIn0.e30."}, 401, "admission_required"},
		{"wrong event", elsewhere, "POST", holds, `{"seats":["A2"]}`, nil, 403, "wrong_event"},
		{"unknown showtime", other, "GET", "/api/v1/booking/showtimes/999/seats", nil, nil, 404, "not_found"},
		{"not JSON", other, "POST", holds, `seats`, nil, 400, "invalid_request"},
		{"unknown field", other, "POST", holds, `{"seats":["A2"],"vip":true}`, nil, 400, "invalid_request"},
		{"trailing data", other, "POST", holds, `{"seats":["A2"]}{}`, nil, 400, "invalid_request"},
		{"trailing brace", other, "POST", holds, `{"seats":["A2"]}}`, nil, 400, "invalid_request"},
		{"trailing bracket", other, "POST", holds, `{"seats":["A2"]} ]`, nil, 400, "invalid_request"},
		{"too large", other, "POST", holds, `{"seats":["` + strings.Repeat("A", 70<<10) + `"]}`, nil, 400, "invalid_request"},
		{"empty", other, "POST", holds, `{}`, nil, 400, "invalid_request"},
		{"empty lists", other, "POST", holds, `{"seats":[],"generalAdmission":{}}`, nil, 400, "invalid_request"},
		{"duplicate seat", other, "POST", holds, `{"seats":["A2","A2"]}`, nil, 400, "invalid_request"},
		{"row out of range", other, "POST", holds, `{"seats":["F1"]}`, nil, 400, "invalid_request"},
		{"seat 0", other, "POST", holds, `{"seats":["A0"]}`, nil, 400, "invalid_request"},
		{"seat past the row", other, "POST", holds, `{"seats":["A31"]}`, nil, 400, "invalid_request"},
		{"leading zero", other, "POST", holds, `{"seats":["A02"]}`, nil, 400, "invalid_request"},
		{"lower case", other, "POST", holds, `{"seats":["a2"]}`, nil, 400, "invalid_request"},
		{"count 0", other, "POST", holds, `{"generalAdmission":{"FLOOR":0}}`, nil, 400, "invalid_request"},
		{"unknown block", other, "POST", holds, `{"generalAdmission":{"PIT":1}}`, nil, 400, "invalid_request"},
		{"too many places", other, "POST", holds, `{"seats":["B1","B2","B3"],"generalAdmission":{"FLOOR":6}}`, nil, 422, "too_many_seats"},
		{"seat taken", other, "POST", holds, `{"seats":["A1","A2"]}`, nil, 409, "seats_unavailable"},
		{"block full", other, "POST", holds, `{"generalAdmission":{"BALCONY":1}}`, nil, 409, "sold_out"},
		{"rate limited", limited, "POST", holds, `{"seats":["E9"]}`, nil, 429, "rate_limited"},
		{"release by another", other, "DELETE", holdPath, nil, nil, 404, "not_found"},
		{"release malformed id", owner, "DELETE", "/api/v1/booking/holds/xyz", nil, nil, 404, "not_found"},
		{"checkout without key", owner, "POST", holdPath + "/checkout", nil, nil, 400, "invalid_request"},
		{"checkout by another", other, "POST", holdPath + "/checkout", nil, map[string]string{"Idempotency-Key": "k"}, 404, "not_found"},
		{"booking of nobody", owner, "GET", "/api/v1/booking/bookings/00000000-0000-4000-8000-000000000000", nil, nil, 404, "not_found"},
		{"callback unsigned", anon, "POST", "/api/v1/booking/payments/callback", `{"paymentId":"p","status":"SUCCEEDED"}`, nil, 401, "invalid_signature"},
		{"no such route", owner, "GET", "/api/v1/booking/nothing", nil, nil, 404, "not_found"},
	}
	before := e.snapshot()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, hdr := e.call(tc.as, tc.method, tc.path, tc.body, tc.hdr)
			if code != tc.status || out["error"] != tc.code {
				t.Fatalf("%s %s: %d %v; want %d %s", tc.method, tc.path, code, out, tc.status, tc.code)
			}
			if msg, _ := out["message"].(string); msg == "" {
				t.Errorf("no message in %v", out)
			}
			switch tc.code {
			case "seats_unavailable":
				if fmt.Sprint(out["seats"]) != "[A1]" {
					t.Errorf("seats in body = %v; want [A1]", out["seats"])
				}
			case "sold_out":
				if out["block"] != "BALCONY" {
					t.Errorf("block in body = %v; want BALCONY", out["block"])
				}
			case "rate_limited":
				if hdr.Get("Retry-After") == "" {
					t.Error("no Retry-After")
				}
			}
			if after := e.snapshot(); after != before {
				t.Fatalf("the database changed")
			}
		})
	}
}

func TestSeatMapAndBookingRoutes(t *testing.T) {
	e := setup(t)
	p, _ := e.admit("live", "")
	code, m, _ := e.call(p, "GET", "/api/v1/booking/showtimes/43/seats", nil, nil)
	if code != 200 || m["showtimeId"] != float64(43) {
		t.Fatalf("seat map: %d %v", code, m)
	}
	seats := m["seats"].([]any)
	first := seats[0].(map[string]any)
	if len(seats) != 150 || first["code"] != "A1" || first["row"] != "A" || first["number"] != float64(1) || first["status"] != "AVAILABLE" {
		t.Fatalf("seats: %d, first %v", len(seats), first)
	}
	if ga := fmt.Sprint(m["generalAdmission"]); ga != "[map[available:40 capacity:40 code:BALCONY priceCents:3000] map[available:250 capacity:250 code:FLOOR priceCents:4500]]" {
		t.Fatalf("generalAdmission = %s", ga)
	}
	// What is at stake: the showtime, when, and the price of a seat, in booking.currency.
	if m["title"] != "Live" || m["startsAt"] != "2026-12-02T20:00:00Z" || m["priceCents"] != float64(6000) || m["currency"] != "USD" {
		t.Fatalf("seat map title/startsAt/priceCents/currency = %v %v %v %v; want Live 2026-12-02T20:00:00Z 6000 USD",
			m["title"], m["startsAt"], m["priceCents"], m["currency"])
	}
	code, h, _ := e.call(p, "POST", "/api/v1/booking/showtimes/43/holds", booking.HoldInput{Seats: []string{"A2"}, GeneralAdmission: map[string]int{"BALCONY": 1}}, nil)
	if code != 201 || h["amountCents"] != float64(6000+3000) {
		t.Fatalf("hold: %d %v; want 201 with amountCents 9000", code, h)
	}
	_, c := e.holdAndCheckout(p, 43, booking.HoldInput{Seats: []string{"A1"}, GeneralAdmission: map[string]int{"FLOOR": 2}})
	code, b, _ := e.call(p, "GET", "/api/v1/booking/bookings/"+c.BookingID, nil, nil)
	if code != 200 || b["status"] != "PENDING" || fmt.Sprint(b["seats"]) != "[A1]" || b["showtimeId"] != float64(43) {
		t.Fatalf("booking: %d %v", code, b)
	}
	if b["amountCents"] != float64(6000+2*4500) || b["title"] != "Live" || b["startsAt"] != "2026-12-02T20:00:00Z" {
		t.Fatalf("booking amountCents/title/startsAt = %v %v %v; want 15000 Live 2026-12-02T20:00:00Z", b["amountCents"], b["title"], b["startsAt"])
	}
	if code, _, _ := e.call(fan(live, "someone"), "GET", "/api/v1/booking/bookings/"+c.BookingID, nil, nil); code != 404 {
		t.Fatalf("another customer's booking: %d; want 404", code)
	}
	_, m, _ = e.call(p, "GET", "/api/v1/booking/showtimes/43/seats", nil, nil)
	if st := m["seats"].([]any)[0].(map[string]any); st["status"] != "HELD" || len(st) != 4 {
		t.Fatalf("held seat shows %v; want HELD and no holder", st)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _, _ := e.call(booking.Pass{}, "GET", path, nil, nil); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
	}
}

// A database that cannot be reached is 503 with Retry-After, decided by the
// store's error (no ping after the fact), on every route that reads it.
func TestDatabaseDownIs503(t *testing.T) {
	e := setup(t)
	port, err := localsvc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/none?connect_timeout=1", port))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	down := postgres.New(pool)
	svc := booking.NewService(down, e.sim, e.cat, e.set, e.log)
	srv := httptest.NewServer(booking.NewHandler(svc, booking.PassAuth(pass.NewStaticVerifier(e.signer.PublicKey())), e.line, down.Ping, e.log))
	defer srv.Close()
	e.srv = srv
	p, _ := e.admit("premiere", "")
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/booking/showtimes/42/seats", ""},
		{http.MethodPost, "/api/v1/booking/showtimes/42/holds", `{"seats":["A1"]}`},
		{http.MethodGet, "/api/v1/booking/bookings/00000000-0000-4000-8000-000000000000", ""},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		code, out, hdr := e.call(p, c.method, c.path, body, nil)
		if code != http.StatusServiceUnavailable || out["error"] != "unavailable" || hdr.Get("Retry-After") == "" {
			t.Errorf("%s %s with the database down: %d %v (Retry-After %q); want 503 unavailable with Retry-After", c.method, c.path, code, out, hdr.Get("Retry-After"))
		}
	}
}

// The middleware around the booking API (metrics, the health summary the
// adaptive admitter reads) sees the route each request matched: a hold
// counts as a hold.
func TestRoutesSeenAround(t *testing.T) {
	e := setup(t)
	h := booking.NewHealth(nil, e.log)
	var route string
	api := e.srv.Config.Handler
	srv := httptest.NewServer(h.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r)
		route = r.Pattern
	})))
	defer srv.Close()
	e.srv = srv
	p, _ := e.admit("live", "")
	if code, out, _ := e.call(p, http.MethodPost, "/api/v1/booking/showtimes/43/holds", `{"seats":["A1"]}`, nil); code != http.StatusCreated {
		t.Fatalf("hold: %d %v", code, out)
	}
	if s := h.Summary(); route != "POST /api/v1/booking/showtimes/{id}/holds" || s.Holds != 1 {
		t.Fatalf("around the API: route %q, %d holds; want the hold's pattern and 1 hold", route, s.Holds)
	}
}
