package booking_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/booking"
)

// account is the pass of ticket for the account acct in premiere.
func account(acct, ticket string) booking.Pass { return booking.NewPass(ticket, acct, "premiere") }

// checkBalance checks the wallet's invariants in PostgreSQL itself: the
// balance is want, never negative, and the ledger adds up to it.
func (e *env) checkBalance(acct string, want int64) {
	e.t.Helper()
	var balance, sum int64
	e.q(&balance, `SELECT coalesce((SELECT balance FROM wallets WHERE account_id = $1), 0)`, acct)
	e.q(&sum, `SELECT coalesce(sum(points), 0) FROM wallet_ledger WHERE account_id = $1`, acct)
	if balance != want || sum != balance || balance < 0 {
		e.t.Fatalf("account %s: balance %d, ledger sum %d; want %d, and the ledger adding up to it", acct, balance, sum, want)
	}
}

func (e *env) credit(acct string, points int64, ref string) int64 {
	e.t.Helper()
	b, err := e.svc.Credit(e.ctx(), acct, booking.CreditInput{Points: &points, Reference: ref})
	if err != nil {
		e.t.Fatalf("credit %s %d %s: %v", acct, points, ref, err)
	}
	return b
}

// Limits per account: the customer is the account, across all its tickets
// (a fan with three browsers): holds per minute, places held at once and
// the re-hold cool-down count them together. Fans without an account keep
// one customer per ticket.
func TestLimitsPerAccountAcrossTickets(t *testing.T) {
	e := setup(t)
	a1, a2, a3 := account("fan-a", "1.ticketone"), account("fan-a", "2.tickettwo"), account("fan-a", "3.ticketthree")
	// Places at once: 5 by one ticket, then 4 more by another is 9 > 8.
	if _, err := e.svc.Hold(e.ctx(), a1, 42, booking.HoldInput{Seats: []string{"A1", "A2", "A3", "A4", "A5"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Hold(e.ctx(), a2, 42, booking.HoldInput{Seats: []string{"B1", "B2", "B3", "B4"}}); !errors.Is(err, booking.ErrTooManySeats) {
		t.Fatalf("second ticket of the account, 5 + 4 places: %v; want ErrTooManySeats", err)
	}
	// Cool-down: a seat the account released is out of reach of its other tickets.
	h, err := e.svc.Hold(e.ctx(), a2, 42, booking.HoldInput{Seats: []string{"C1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Release(e.ctx(), a3, h.ID); err != nil {
		t.Fatalf("another ticket of the account releases its hold: %v; want it may", err)
	}
	var d *booking.DetailError
	if _, err := e.svc.Hold(e.ctx(), a3, 42, booking.HoldInput{Seats: []string{"C1"}}); !errors.As(err, &d) || !errors.Is(err, booking.ErrSeatsUnavailable) {
		t.Fatalf("re-hold of the released seat by a third ticket: %v; want seats_unavailable (cool-down)", err)
	}
	// Holds per minute (5): two taken, then three more across tickets, the sixth refused.
	for i, p := range []booking.Pass{a1, a2, a3} {
		if _, err := e.svc.Hold(e.ctx(), p, 42, booking.HoldInput{Seats: []string{fmt.Sprintf("D%d", i+1)}}); err != nil {
			t.Fatalf("hold %d: %v", i+3, err)
		}
	}
	if _, err := e.svc.Hold(e.ctx(), a1, 42, booking.HoldInput{Seats: []string{"E1"}}); !errors.Is(err, booking.ErrRateLimited) {
		t.Fatalf("sixth hold of the account in a minute: %v; want rate limited", err)
	}
	// Two tickets without an account are two customers.
	for i, tk := range []string{"4.anon", "5.anon"} {
		var seats []string
		for n := 1; n <= 5; n++ {
			seats = append(seats, fmt.Sprintf("I%d", 5*i+n))
		}
		if _, err := e.svc.Hold(e.ctx(), booking.NewPass(tk, "", "premiere"), 42, booking.HoldInput{Seats: seats}); err != nil {
			t.Fatalf("anonymous ticket %s, 5 places: %v; want its own limits", tk, err)
		}
	}
	var customers []string
	rows, err := e.pool.Query(e.ctx(), `SELECT DISTINCT customer_id FROM holds ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		_ = rows.Scan(&c)
		customers = append(customers, c)
	}
	if strings.Join(customers, ",") != "4.anon,5.anon,acct:fan-a" {
		t.Errorf("customers of the holds = %v; want the account once and each anonymous ticket", customers)
	}
	var tickets int
	e.q(&tickets, `SELECT count(DISTINCT ticket_id) FROM holds WHERE customer_id = 'acct:fan-a'`)
	if tickets != 3 {
		t.Errorf("the account's holds name %d tickets; want 3 (who holds what in the line)", tickets)
	}
}

// The reference design's points wallet under a race: one account, twelve
// holds, points for five of them, twelve checkouts released together:
// exactly five confirmed (their seats BOOKED), seven refused 402 with
// nothing changed, the balance 0, never below, and the ledger adding up to
// it, in PostgreSQL. A second round with the same keys answers the same.
func TestPointsCheckoutRace(t *testing.T) {
	e := setup(t, withSettings(func(s *booking.Settings) {
		s.MaxSeatsPerHold, s.HoldsPerMinute, s.HoldAttemptsPerMinute = 50, 100, 200
	}))
	const n, covered = 12, 5
	holds := make([]booking.Hold, n)
	for i := range holds {
		p := account("fan-w", fmt.Sprintf("%d.ticket", i%3+1)) // three devices
		h, err := e.svc.Hold(e.ctx(), p, 42, booking.HoldInput{Seats: []string{fmt.Sprintf("F%d", i+1)}})
		if err != nil {
			t.Fatal(err)
		}
		holds[i] = h
	}
	e.credit("fan-w", covered*1500, "top-up-1")
	paid, errs := raceFor(n, func(i int) (booking.PointsPaid, error) {
		return e.svc.CheckoutPoints(e.ctx(), account("fan-w", fmt.Sprintf("%d.ticket", i%3+1)), holds[i].ID, fmt.Sprintf("key-%d", i))
	})
	ok, poor := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
			if paid[i].Status != booking.StatusConfirmed || paid[i].Balance < 0 || paid[i].Balance%1500 != 0 {
				t.Errorf("checkout %d = %+v", i, paid[i])
			}
		case errors.Is(err, booking.ErrInsufficientPoints):
			poor++
		default:
			t.Errorf("checkout %d: %v", i, err)
		}
	}
	if ok != covered || poor != n-covered {
		t.Fatalf("%d confirmed, %d refused for want of points; want %d and %d", ok, poor, covered, n-covered)
	}
	e.checkBalance("fan-w", 0)
	var booked, confirmed, debits, outbox int
	e.q(&booked, `SELECT count(*) FROM seats WHERE status = 'BOOKED'`)
	e.q(&confirmed, `SELECT count(*) FROM bookings WHERE status = 'CONFIRMED' AND method = 'points'`)
	e.q(&debits, `SELECT count(*) FROM wallet_ledger WHERE kind = 'debit' AND points = -1500`)
	e.q(&outbox, `SELECT count(*) FROM outbox`)
	if booked != covered || confirmed != covered || debits != covered || outbox != covered {
		t.Fatalf("seats booked %d, bookings confirmed %d, debits %d, outbox rows %d; want %d each", booked, confirmed, debits, outbox, covered)
	}
	// A confirmation frees the place in line of the ticket that took the
	// hold, never the account's name.
	var ticketsOut int
	e.q(&ticketsOut, `SELECT count(*) FROM outbox o JOIN bookings b ON b.id = o.booking_id JOIN holds h ON h.id = b.hold_id
	                   WHERE o.customer_id = h.ticket_id AND o.customer_id LIKE '_.ticket'`)
	if ticketsOut != covered {
		t.Errorf("%d outbox rows name the hold's ticket; want %d", ticketsOut, covered)
	}
	var held int
	e.q(&held, `SELECT count(*) FROM seats WHERE status = 'HELD'`)
	if held != n-covered {
		t.Errorf("%d seats still held; want the %d unpaid holds untouched", held, n-covered)
	}
	// The same keys again: the same answers, nothing moves.
	before := e.snapshot()
	for i := range holds {
		again, err := e.svc.CheckoutPoints(e.ctx(), account("fan-w", "9.other"), holds[i].ID, fmt.Sprintf("key-%d", i))
		if errs[i] == nil && (err != nil || again.BookingID != paid[i].BookingID || again.Balance != paid[i].Balance) {
			t.Errorf("repeat of key-%d = %+v, %v; want %+v", i, again, err, paid[i])
		}
	}
	if e.snapshot() != before {
		t.Error("repeated checkouts changed the books")
	}
	e.checkBalance("fan-w", 0)
}

// One hold, one key, many tabs at once: one booking, one debit.
func TestPointsCheckoutSameKeyRace(t *testing.T) {
	e := setup(t)
	p := account("fan-k", "1.ticket")
	h, err := e.svc.Hold(e.ctx(), p, 42, booking.HoldInput{Seats: []string{"G1", "G2"}})
	if err != nil {
		t.Fatal(err)
	}
	e.credit("fan-k", 10_000, "r1")
	out, errs := raceFor(16, func(int) (booking.PointsPaid, error) {
		return e.svc.CheckoutPoints(e.ctx(), p, h.ID, "same-key")
	})
	for i, err := range errs {
		if err != nil && !errors.Is(err, booking.ErrIdempotencyReused) {
			t.Fatalf("checkout %d: %v", i, err)
		}
		if err == nil && (out[i].BookingID != out[0].BookingID && errs[0] == nil) {
			t.Fatalf("two bookings for one key: %s and %s", out[i].BookingID, out[0].BookingID)
		}
	}
	var bookings int
	e.q(&bookings, `SELECT count(*) FROM bookings`)
	if bookings != 1 {
		t.Fatalf("%d bookings; want 1", bookings)
	}
	e.checkBalance("fan-k", 10_000-3000)
}

// Credits are idempotent by reference under a race: 20 identical credits
// add the points once; 10 different ones add up.
func TestCreditOncePerReferenceRace(t *testing.T) {
	e := setup(t)
	balances, errs := raceFor(20, func(int) (int64, error) {
		points := int64(700)
		return e.svc.Credit(e.ctx(), "fan-c", booking.CreditInput{Points: &points, Reference: "order-1"})
	})
	for i, err := range errs {
		if err != nil || balances[i] != 700 {
			t.Fatalf("credit %d = %d, %v; want balance 700", i, balances[i], err)
		}
	}
	e.checkBalance("fan-c", 700)
	errs = race(10, func(i int) error {
		points := int64(10)
		_, err := e.svc.Credit(e.ctx(), "fan-c", booking.CreditInput{Points: &points, Reference: fmt.Sprintf("order-2-%d", i)})
		return err
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	e.checkBalance("fan-c", 800)
	var rows int
	e.q(&rows, `SELECT count(*) FROM wallet_ledger WHERE account_id = 'fan-c'`)
	if rows != 11 {
		t.Errorf("%d ledger rows; want 11", rows)
	}
}

// The wallet over HTTP: the contract's answers, and the refusals change
// nothing.
func TestWalletAPI(t *testing.T) {
	e := setup(t)
	acct, ticket := e.admit("premiere", "fan-h")
	anon, _ := e.admit("premiere", "")
	admin := map[string]string{"Authorization": "Bearer " + testAdminToken}

	code, body, _ := e.call(booking.Pass{}, "POST", "/api/v1/booking/admin/wallets/fan-h/credits", map[string]any{"points": 2000, "reference": "x1"}, admin)
	if code != 201 || body["balance"] != 2000.0 {
		t.Fatalf("credit: %d %v; want 201 balance 2000", code, body)
	}
	for _, tt := range []struct {
		name string
		hdr  map[string]string
		body any
		code int
	}{
		{"no token", nil, map[string]any{"points": 1, "reference": "x2"}, 401},
		{"wrong token", map[string]string{"Authorization": "Bearer nope"}, map[string]any{"points": 1, "reference": "x2"}, 401},
		{"zero points", admin, map[string]any{"points": 0, "reference": "x2"}, 400},
		{"negative points", admin, map[string]any{"points": -5, "reference": "x2"}, 400},
		{"fractional points", admin, map[string]any{"points": 1.5, "reference": "x2"}, 400},
		{"no reference", admin, map[string]any{"points": 5}, 400},
		{"unknown field", admin, map[string]any{"points": 5, "reference": "x2", "x": 1}, 400},
	} {
		if code, body, _ := e.call(booking.Pass{}, "POST", "/api/v1/booking/admin/wallets/fan-h/credits", tt.body, tt.hdr); code != tt.code {
			t.Errorf("credit, %s: %d %v; want %d", tt.name, code, body, tt.code)
		}
	}
	if code, body, _ := e.call(booking.Pass{}, "POST", "/api/v1/booking/admin/wallets/fan-h/credits", map[string]any{"points": 2000, "reference": "x1"}, admin); code != 201 || body["balance"] != 2000.0 {
		t.Fatalf("the same reference again: %d %v; want 201, balance still 2000", code, body)
	}
	off := httptest.NewRecorder()
	booking.NewHandler(e.svc, nil, e.line, nil, e.log).ServeHTTP(off, httptest.NewRequest("POST", "/api/v1/booking/admin/wallets/fan-h/credits", strings.NewReader(`{"points":1,"reference":"y"}`)))
	if off.Code != http.StatusNotFound {
		t.Errorf("credit with no admin token configured: %d; want 404", off.Code)
	}

	if code, body, _ := e.call(acct, "GET", "/api/v1/booking/wallet", nil, nil); code != 200 || body["account"] != "fan-h" || body["balance"] != 2000.0 {
		t.Fatalf("wallet: %d %v", code, body)
	}
	if code, body, _ := e.call(anon, "GET", "/api/v1/booking/wallet", nil, nil); code != 403 || body["error"] != "account_required" {
		t.Fatalf("wallet without an account: %d %v; want 403 account_required", code, body)
	}

	_, hb, _ := e.call(acct, "POST", "/api/v1/booking/showtimes/42/holds", map[string]any{"seats": []string{"H1", "H2"}}, nil)
	hold := hb["holdId"].(string)
	points := map[string]any{"method": "points"}
	key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }
	if code, body, _ := e.call(anon, "POST", "/api/v1/booking/holds/"+hold+"/checkout", points, key("k0")); code != 403 || body["error"] != "account_required" {
		t.Fatalf("points checkout without an account: %d %v; want 403 account_required", code, body)
	}
	before := e.snapshot()
	if code, body, _ := e.call(acct, "POST", "/api/v1/booking/holds/"+hold+"/checkout", points, key("k1")); code != 402 || body["error"] != "insufficient_points" {
		t.Fatalf("2 seats for 3000 points with 2000: %d %v; want 402 insufficient_points", code, body)
	}
	if code, _, _ := e.call(acct, "POST", "/api/v1/booking/holds/"+hold+"/checkout", map[string]any{"method": "gold"}, key("k1")); code != 400 {
		t.Fatalf("unknown method: %d; want 400", code)
	}
	if e.snapshot() != before {
		t.Fatal("a refused points checkout changed the books")
	}
	e.checkBalance("fan-h", 2000)

	e.credit("fan-h", 1500, "x3")
	code, body, _ = e.call(acct, "POST", "/api/v1/booking/holds/"+hold+"/checkout", points, key("k2"))
	if code != 201 || body["status"] != "CONFIRMED" || body["balance"] != 500.0 || body["bookingId"] == nil {
		t.Fatalf("points checkout: %d %v; want 201 CONFIRMED balance 500", code, body)
	}
	// The account's next place (the first one given up, as the confirmation
	// does), on another device.
	if err := e.line.Leave(e.ctx(), "premiere", ticket); err != nil {
		t.Fatal(err)
	}
	phone, _ := e.admit("premiere", "fan-h")
	again, body2, _ := e.call(phone, "POST", "/api/v1/booking/holds/"+hold+"/checkout", points, key("k2"))
	if again != 201 || fmt.Sprint(body2) != fmt.Sprint(body) {
		t.Fatalf("same key from another ticket of the account: %d %v; want %v", again, body2, body)
	}
	if code, b, _ := e.call(phone, "GET", "/api/v1/booking/bookings/"+body["bookingId"].(string), nil, nil); code != 200 || b["status"] != "CONFIRMED" {
		t.Fatalf("the account's booking from another ticket: %d %v", code, b)
	}
	e.checkBalance("fan-h", 500)
}

// A points booking refunded, for whatever reason, gives its points back in
// the same transaction, once.
func TestPointsRefundedOnce(t *testing.T) {
	e := setup(t)
	p := account("fan-r", "1.ticket")
	h, err := e.svc.Hold(e.ctx(), p, 42, booking.HoldInput{Seats: []string{"J1"}})
	if err != nil {
		t.Fatal(err)
	}
	e.credit("fan-r", 2000, "r")
	paid, err := e.svc.CheckoutPoints(e.ctx(), p, h.ID, "k")
	if err != nil || paid.Balance != 500 {
		t.Fatalf("checkout = %+v, %v", paid, err)
	}
	e.exec(`UPDATE bookings SET status = 'REFUNDED' WHERE id = $1`, paid.BookingID)
	e.checkBalance("fan-r", 2000)
	e.exec(`UPDATE bookings SET status = 'FAILED' WHERE id = $1`, paid.BookingID)
	e.exec(`UPDATE bookings SET status = 'REFUNDED' WHERE id = $1`, paid.BookingID)
	e.checkBalance("fan-r", 2000)
	var refunds int
	e.q(&refunds, `SELECT count(*) FROM wallet_ledger WHERE kind = 'refund'`)
	if refunds != 1 {
		t.Errorf("%d refund rows; want 1", refunds)
	}
	// The CHECK stands behind the code: no statement can take a balance below 0.
	if _, err := e.pool.Exec(e.ctx(), `UPDATE wallets SET balance = balance - 2001 WHERE account_id = 'fan-r'`); err == nil {
		t.Error("a balance went below zero")
	}
}
