package booking_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/payment"
)

// callback posts a provider callback, signed with secret.
func (e *env) callback(paymentID string, st payment.Status, secret string) (int, map[string]any) {
	e.t.Helper()
	body, _ := json.Marshal(payment.Callback{PaymentID: paymentID, Status: st})
	code, out, _ := e.call(booking.Pass{}, http.MethodPost, "/api/v1/booking/payments/callback", string(body),
		map[string]string{payment.SignatureHeader: payment.Sign([]byte(secret), body)})
	return code, out
}

func (e *env) holdAndCheckout(p booking.Pass, showtime int64, in booking.HoldInput) (booking.Hold, booking.Checkout) {
	e.t.Helper()
	h, err := e.svc.Hold(e.ctx(), p, showtime, in)
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := e.svc.Checkout(e.ctx(), p, h.ID, "key-"+h.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return h, c
}

func (e *env) bookingStatus(id string) string {
	e.t.Helper()
	var s string
	e.q(&s, `SELECT status FROM bookings WHERE id = $1`, id)
	return s
}

func TestCheckoutIsIdempotentUnderConcurrentIdenticalRequests(t *testing.T) {
	e := setup(t)
	p := fan(premiere, "fan")
	h, err := e.svc.Hold(e.ctx(), p, 42, booking.HoldInput{Seats: []string{"C5", "C6"}})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]booking.Checkout, 16)
	errs := race(16, func(i int) error {
		var err error
		got[i], err = e.svc.Checkout(e.ctx(), p, h.ID, "same-key")
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got[i] != got[0] {
			t.Fatalf("request %d answered %+v; request 0 %+v", i, got[i], got[0])
		}
	}
	var bookings, payments int
	e.q(&bookings, `SELECT count(*) FROM bookings`)
	e.q(&payments, `SELECT count(*) FROM payments`)
	if bookings != 1 || payments != 1 {
		t.Fatalf("%d bookings, %d payments; want 1 and 1", bookings, payments)
	}
	if _, err := e.svc.Checkout(e.ctx(), p, "00000000-0000-4000-8000-000000000000", "same-key"); !errors.Is(err, booking.ErrNotFound) {
		t.Fatalf("unknown hold: %v", err)
	}
	h2, err := e.svc.Hold(e.ctx(), p, 42, booking.HoldInput{Seats: []string{"D1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Checkout(e.ctx(), p, h2.ID, "same-key"); !errors.Is(err, booking.ErrIdempotencyReused) {
		t.Fatalf("same key on another hold: %v; want idempotency key reused", err)
	}
	e.lapse(h2.ID)
	if _, err := e.svc.Checkout(e.ctx(), p, h2.ID, "other-key"); !errors.Is(err, booking.ErrHoldExpired) {
		t.Fatalf("checkout of a lapsed hold: %v; want hold expired", err)
	}
}

func TestPaymentCallbacks(t *testing.T) {
	const secret = "test-payment-secret"
	t.Run("success twice confirms once", func(t *testing.T) {
		e := setup(t)
		_, c := e.holdAndCheckout(fan(live, "fan"), 43, booking.HoldInput{Seats: []string{"A1"}, GeneralAdmission: map[string]int{"FLOOR": 2}})
		for i, want := range []string{"confirmed", "duplicate"} {
			code, out := e.callback(c.PaymentID, payment.Succeeded, secret)
			if code != 200 || out["result"] != want {
				t.Fatalf("callback %d: %d %v; want 200 %s", i+1, code, out, want)
			}
		}
		var booked, places, outbox int
		e.q(&booked, `SELECT count(*) FROM seats WHERE status = 'BOOKED' AND booking_id = $1`, c.BookingID)
		e.q(&places, `SELECT coalesce(sum(places),0) FROM ga_places WHERE status = 'BOOKED' AND booking_id = $1`, c.BookingID)
		e.q(&outbox, `SELECT count(*) FROM outbox WHERE booking_id = $1 AND event_type = 'BookingConfirmed'`, c.BookingID)
		if s := e.bookingStatus(c.BookingID); s != booking.StatusConfirmed || booked != 1 || places != 2 || outbox != 1 {
			t.Fatalf("booking %s, %d seats, %d places booked, %d outbox rows; want CONFIRMED, 1, 2, 1", s, booked, places, outbox)
		}
	})
	t.Run("a signed callback with fields the contract does not name still settles", func(t *testing.T) {
		e := setup(t)
		_, c := e.holdAndCheckout(fan(live, "fan"), 43, booking.HoldInput{Seats: []string{"A2"}})
		body := []byte(`{"paymentId":"` + c.PaymentID + `","status":"SUCCEEDED","amount":1500,"currency":"EUR"}`)
		code, out, _ := e.call(booking.Pass{}, http.MethodPost, "/api/v1/booking/payments/callback", string(body),
			map[string]string{payment.SignatureHeader: payment.Sign([]byte(secret), body)})
		if code != 200 || out["result"] != "confirmed" || e.bookingStatus(c.BookingID) != booking.StatusConfirmed {
			t.Fatalf("callback with extra fields: %d %v, booking %s; want 200 confirmed", code, out, e.bookingStatus(c.BookingID))
		}
	})
	t.Run("late success after the seat was re-taken is refunded, the seat stays", func(t *testing.T) {
		e := setup(t)
		h, c := e.holdAndCheckout(fan(live, "slow"), 43, booking.HoldInput{Seats: []string{"B7"}, GeneralAdmission: map[string]int{"BALCONY": 2}})
		e.lapse(h.ID)
		h2, err := e.svc.Hold(e.ctx(), fan(live, "quick"), 43, booking.HoldInput{Seats: []string{"B7"}})
		if err != nil {
			t.Fatal(err)
		}
		code, out := e.callback(c.PaymentID, payment.Succeeded, secret)
		if code != 200 || out["result"] != "late_refunded" {
			t.Fatalf("late callback: %d %v", code, out)
		}
		var holder, refund string
		e.q(&holder, `SELECT hold_id::text FROM seats WHERE showtime_id = 43 AND seat_code = 'B7' AND status = 'HELD'`)
		e.q(&refund, `SELECT status FROM refunds WHERE payment_id = $1`, c.PaymentID)
		if holder != h2.ID {
			t.Fatalf("B7 is held by %s; want the new holder %s", holder, h2.ID)
		}
		if s := e.bookingStatus(c.BookingID); s != booking.StatusRefunded || refund != "DONE" || !e.sim.Refunded(c.PaymentID) {
			t.Fatalf("booking %s, refund %s, provider refunded %v; want REFUNDED, DONE, true", s, refund, e.sim.Refunded(c.PaymentID))
		}
		var gaBooked int
		e.q(&gaBooked, `SELECT count(*) FROM ga_places WHERE status = 'BOOKED'`)
		if gaBooked != 0 {
			t.Fatalf("a late success booked %d place rows; want 0", gaBooked)
		}
	})
	t.Run("late success on a lapsed hold nobody took is still refunded", func(t *testing.T) {
		e := setup(t)
		h, c := e.holdAndCheckout(fan(live, "slow"), 43, booking.HoldInput{GeneralAdmission: map[string]int{"FLOOR": 3}})
		e.lapse(h.ID)
		if code, out := e.callback(c.PaymentID, payment.Succeeded, secret); code != 200 || out["result"] != "late_refunded" {
			t.Fatalf("late callback: %d %v", code, out)
		}
	})
	t.Run("failure releases nothing early and the fan may retry", func(t *testing.T) {
		e := setup(t)
		p := fan(premiere, "fan")
		h, c := e.holdAndCheckout(p, 42, booking.HoldInput{Seats: []string{"E1", "E2"}})
		if code, out := e.callback(c.PaymentID, payment.Failed, secret); code != 200 || out["result"] != "failed" {
			t.Fatalf("failed callback: %d %v", code, out)
		}
		var held int
		e.q(&held, `SELECT count(*) FROM seats WHERE hold_id = $1 AND status = 'HELD'`, h.ID)
		if held != 2 || e.bookingStatus(c.BookingID) != booking.StatusFailed {
			t.Fatalf("after a failed payment: %d seats held, booking %s; want 2, FAILED", held, e.bookingStatus(c.BookingID))
		}
		c2, err := e.svc.Checkout(e.ctx(), p, h.ID, "retry")
		if err != nil || c2.BookingID == c.BookingID {
			t.Fatalf("retry checkout: %+v, %v; want a new booking", c2, err)
		}
		if code, out := e.callback(c2.PaymentID, payment.Succeeded, secret); code != 200 || out["result"] != "confirmed" {
			t.Fatalf("retry callback: %d %v", code, out)
		}
	})
	t.Run("bad signature changes nothing", func(t *testing.T) {
		e := setup(t)
		_, c := e.holdAndCheckout(fan(premiere, "fan"), 42, booking.HoldInput{Seats: []string{"A1"}})
		before := e.snapshot()
		for _, s := range []string{"wrong-secret", ""} {
			if code, out := e.callback(c.PaymentID, payment.Succeeded, s); code != 401 || out["error"] != "invalid_signature" {
				t.Fatalf("secret %q: %d %v; want 401 invalid_signature", s, code, out)
			}
		}
		if e.snapshot() != before {
			t.Fatal("a badly signed callback changed the database")
		}
	})
}

// The callback never comes: the reconciler asks the provider and settles the
// payment through the same code.
func TestReconcilerSettlesAMissingCallback(t *testing.T) {
	e := setup(t, withSimulator(func(c *payment.SimulatorConfig) { c.Manual, c.Drop, c.Delay = false, true, 0 }))
	_, c := e.holdAndCheckout(fan(premiere, "fan"), 42, booking.HoldInput{Seats: []string{"J9"}})
	deadline := time.Now().Add(5 * time.Second)
	for st, _ := e.sim.Status(e.ctx(), c.PaymentID); st == payment.Pending; st, _ = e.sim.Status(e.ctx(), c.PaymentID) {
		if time.Now().After(deadline) {
			t.Fatal("simulator never paid")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := &booking.Reconciler{Service: e.svc, Log: e.log}
	if err := r.ReconcileOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	if s := e.bookingStatus(c.BookingID); s != booking.StatusPending {
		t.Fatalf("a young payment was settled (%s); the reconciler waits reconcile_after", s)
	}
	e.exec(`UPDATE payments SET created_at = now() - interval '16 minutes'`)
	if err := r.ReconcileOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	if s := e.bookingStatus(c.BookingID); s != booking.StatusConfirmed {
		t.Fatalf("after reconciling: %s; want CONFIRMED", s)
	}
}

// The simulator pays by itself, twice, through the real signed callback
// route; the booking ends CONFIRMED once.
func TestSimulatorPaysThroughTheCallbackRoute(t *testing.T) {
	e := setup(t, withSimulator(func(c *payment.SimulatorConfig) { c.Manual, c.Duplicate, c.Delay = false, true, 50*time.Millisecond }))
	p := fan(premiere, "fan")
	code, hold, _ := e.call(p, http.MethodPost, "/api/v1/booking/showtimes/42/holds", map[string]any{"seats": []string{"C5", "C6"}}, nil)
	if code != 201 {
		t.Fatalf("hold: %d %v", code, hold)
	}
	code, co, _ := e.call(p, http.MethodPost, fmt.Sprintf("/api/v1/booking/holds/%s/checkout", hold["holdId"]), nil, map[string]string{"Idempotency-Key": "k1"})
	if code != 201 || co["paymentUrl"] == "" {
		t.Fatalf("checkout: %d %v", code, co)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, b, _ := e.call(p, http.MethodGet, fmt.Sprintf("/api/v1/booking/bookings/%s", co["bookingId"]), nil, nil)
		if code == 200 && b["status"] == booking.StatusConfirmed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("booking never confirmed: %d %v", code, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let the duplicate arrive
	var outbox int
	e.q(&outbox, `SELECT count(*) FROM outbox`)
	if outbox != 1 {
		t.Fatalf("outbox rows = %d; want 1 (the duplicate changes nothing)", outbox)
	}
}
