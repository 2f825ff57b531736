package booking_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/booking/postgres"
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
	got, errs := raceFor(16, func(int) (booking.Checkout, error) {
		return e.svc.Checkout(e.ctx(), p, h.ID, "same-key")
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
	const secret = testPaymentSecret
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
		if s := e.bookingStatus(c.BookingID); s != booking.StatusRefunded || refund != "DONE" || !e.sim.Refunded(e.ctx(), c.PaymentID) {
			t.Fatalf("booking %s, refund %s, provider refunded %v; want REFUNDED, DONE, true", s, refund, e.sim.Refunded(e.ctx(), c.PaymentID))
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
	e := setup(t, withSimulator(func(c *payment.SimulatorConfig) { c.Manual, c.AutoPay, c.Drop, c.Delay = false, true, true, 0 }))
	_, c := e.holdAndCheckout(fan(premiere, "fan"), 42, booking.HoldInput{Seats: []string{"J9"}})
	if st, err := e.sim.Status(e.ctx(), c.PaymentID); st != payment.Succeeded || err != nil {
		t.Fatalf("auto_pay with no delay: %s %v; want SUCCEEDED at once", st, err)
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

// noRedirects is a client that shows a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// payPage is the fan on the simulator's hosted page: it reads the page,
// then presses Pay (with outcome) or Cancel, and returns the page's words
// and where the provider sends the fan.
func (e *env) payPage(paymentURL, action string, outcome payment.Choice) (page, location string) {
	e.t.Helper()
	res, err := http.Get(paymentURL)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Security-Policy"), "form-action 'self' http://gateway.test") {
		e.t.Fatalf("GET %s: %d, CSP %q", paymentURL, res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	res, err = noRedirects.PostForm(paymentURL, url.Values{"action": {action}, "outcome": {string(outcome)}})
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("POST %s: %d; want 303", paymentURL, res.StatusCode)
	}
	return string(b), res.Header.Get("Location")
}

// waitBooking polls the fan's booking until it leaves PENDING (or 5 s).
func (e *env) waitBooking(p booking.Pass, id string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, b, _ := e.call(p, http.MethodGet, "/api/v1/booking/bookings/"+id, nil, nil)
		if code != 200 {
			e.t.Fatalf("booking %s: %d %v", id, code, b)
		}
		if b["status"] != booking.StatusPending && (b["status"] != booking.StatusFailed || b["refund"] != "REQUESTED") {
			return b
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("booking %s still %v after 5s", id, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The way a real provider works: checkout answers paymentUrl, the fan pays
// or cancels on the provider's page and is sent back to the booking page of
// the event, the provider's callback settles the booking.
func TestHostedPaymentPage(t *testing.T) {
	t.Run("pay: sent back, confirmed; the booking shows its hold", func(t *testing.T) {
		e := setup(t, withSimulator(func(c *payment.SimulatorConfig) { c.Manual, c.Delay = false, 0 }))
		p := fan(live, "fan")
		h, c := e.holdAndCheckout(p, 43, booking.HoldInput{Seats: []string{"A3"}, GeneralAdmission: map[string]int{"FLOOR": 2}})
		if want := e.srv.URL + "/pay/" + c.PaymentID; c.PaymentURL != want {
			t.Fatalf("paymentUrl %q; want %q", c.PaymentURL, want)
		}
		code, b, _ := e.call(p, http.MethodGet, "/api/v1/booking/bookings/"+c.BookingID, nil, nil)
		if code != 200 || b["holdId"] != h.ID || b["holdExpiresAt"] == nil || b["refund"] != nil {
			t.Fatalf("pending booking: %d %v; want its hold, the hold's expiry, no refund", code, b)
		}
		page, to := e.payPage(c.PaymentURL, "pay", payment.ChoiceSucceed)
		for _, want := range []string{"$150.00", "Live: A3, FLOOR × 2", `id="sim-pay"`, `id="sim-cancel"`, `value="never"`} {
			if !strings.Contains(page, want) {
				t.Errorf("the hosted page lacks %q", want)
			}
		}
		if want := "http://gateway.test/e/live/book?booking=" + c.BookingID; to != want {
			t.Fatalf("sent back to %q; want %q", to, want)
		}
		if b := e.waitBooking(p, c.BookingID); b["status"] != booking.StatusConfirmed || b["holdExpiresAt"] != nil {
			t.Fatalf("after paying: %v; want CONFIRMED (and no hold expiry: the hold is booked)", b)
		}
	})
	t.Run("cancel: sent back, the hold is still there and can be paid again", func(t *testing.T) {
		e := setup(t, withSimulator(func(c *payment.SimulatorConfig) { c.Manual, c.Delay = false, 0 }))
		p := fan(premiere, "fan")
		h, c := e.holdAndCheckout(p, 42, booking.HoldInput{Seats: []string{"B1", "B2"}})
		if _, to := e.payPage(c.PaymentURL, "cancel", ""); !strings.HasSuffix(to, "?booking="+c.BookingID) {
			t.Fatalf("cancel sent the fan to %q", to)
		}
		if b := e.waitBooking(p, c.BookingID); b["status"] != booking.StatusFailed || b["holdExpiresAt"] == nil || b["refund"] != nil {
			t.Fatalf("after cancelling: %v; want FAILED, the hold still held, nothing refunded", b)
		}
		var held int
		e.q(&held, `SELECT count(*) FROM seats WHERE hold_id = $1 AND status = 'HELD'`, h.ID)
		if held != 2 {
			t.Fatalf("%d seats still held after a cancel; want 2", held)
		}
		// A second press on the cancelled page changes nothing.
		res, err := noRedirects.PostForm(c.PaymentURL, url.Values{"action": {"pay"}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if st, _ := e.sim.Status(e.ctx(), c.PaymentID); st != payment.Failed || res.Header.Get("Location") != "/pay/"+c.PaymentID {
			t.Fatalf("pay after cancel: status %s, sent to %q; want FAILED, the page itself", st, res.Header.Get("Location"))
		}
		c2, err := e.svc.Checkout(e.ctx(), p, h.ID, "pay-again")
		if err != nil || c2.PaymentID == c.PaymentID {
			t.Fatalf("pay again: %+v %v; want a new payment", c2, err)
		}
		e.payPage(c2.PaymentURL, "pay", payment.ChoiceSucceed)
		if b := e.waitBooking(p, c2.BookingID); b["status"] != booking.StatusConfirmed {
			t.Fatalf("paid again: %v; want CONFIRMED", b)
		}
	})
	t.Run("pay after the hold lapsed: refunded, the seat never taken back", func(t *testing.T) {
		e := setup(t, withSimulator(func(c *payment.SimulatorConfig) { c.Manual, c.Delay = false, 0 }))
		p := fan(premiere, "slow")
		h, c := e.holdAndCheckout(p, 42, booking.HoldInput{Seats: []string{"H8"}})
		e.lapse(h.ID)
		if _, err := e.svc.Hold(e.ctx(), fan(premiere, "quick"), 42, booking.HoldInput{Seats: []string{"H8"}}); err != nil {
			t.Fatal(err)
		}
		e.payPage(c.PaymentURL, "pay", payment.ChoiceSucceed)
		b := e.waitBooking(p, c.BookingID)
		if b["status"] != booking.StatusRefunded || b["refund"] != "DONE" || b["holdExpiresAt"] == nil {
			t.Fatalf("paid after the hold lapsed: %v; want REFUNDED, refund DONE", b)
		}
		if !e.sim.Refunded(e.ctx(), c.PaymentID) {
			t.Fatal("the provider was not asked for the refund")
		}
		var booked int
		e.q(&booked, `SELECT count(*) FROM seats WHERE status = 'BOOKED'`)
		if booked != 0 {
			t.Fatalf("%d seats booked by a late payment", booked)
		}
	})
	t.Run("twice through the real signed route: confirmed once", func(t *testing.T) {
		e := setup(t, withSimulator(func(c *payment.SimulatorConfig) { c.Manual, c.Delay = false, 50*time.Millisecond }))
		p := fan(premiere, "fan")
		_, c := e.holdAndCheckout(p, 42, booking.HoldInput{Seats: []string{"C5", "C6"}})
		e.payPage(c.PaymentURL, "pay", payment.ChoiceTwice)
		if b := e.waitBooking(p, c.BookingID); b["status"] != booking.StatusConfirmed {
			t.Fatalf("booking %v; want CONFIRMED", b)
		}
		var left, outbox int
		deadline := time.Now().Add(5 * time.Second)
		for e.q(&left, `SELECT callbacks_left FROM payment_sessions WHERE payment_id = $1`, c.PaymentID); left > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			e.q(&left, `SELECT callbacks_left FROM payment_sessions WHERE payment_id = $1`, c.PaymentID)
		}
		e.q(&outbox, `SELECT count(*) FROM outbox`)
		if left != 0 || outbox != 1 {
			t.Fatalf("callbacks left %d, outbox rows %d; want both sent, one outbox row", left, outbox)
		}
	})
	t.Run("never: the reconciler asks and settles", func(t *testing.T) {
		e := setup(t, withSimulator(func(c *payment.SimulatorConfig) { c.Manual, c.Delay = false, 0 }))
		p := fan(premiere, "fan")
		_, c := e.holdAndCheckout(p, 42, booking.HoldInput{Seats: []string{"D4"}})
		e.payPage(c.PaymentURL, "pay", payment.ChoiceNever)
		e.exec(`UPDATE payments SET created_at = now() - interval '16 minutes'`)
		if err := (&booking.Reconciler{Service: e.svc, Log: e.log}).ReconcileOnce(e.ctx()); err != nil {
			t.Fatal(err)
		}
		if s := e.bookingStatus(c.BookingID); s != booking.StatusConfirmed {
			t.Fatalf("after reconciling: %s; want CONFIRMED", s)
		}
	})
}

// Open payments survive a restart of the booking core: a new simulator on
// the same database (a restarted process) still shows the page of a
// payment opened before, takes the fan's decision, answers the reconciler
// truthfully, and sends the callbacks the old one had not sent.
func TestPaymentsSurviveARestart(t *testing.T) {
	e := setup(t, withSimulator(func(c *payment.SimulatorConfig) { c.Manual, c.Delay = false, time.Hour }))
	p := fan(premiere, "fan")
	_, open := e.holdAndCheckout(p, 42, booking.HoldInput{Seats: []string{"F1"}})
	_, paid := e.holdAndCheckout(fan(premiere, "other"), 42, booking.HoldInput{Seats: []string{"F2"}})
	e.payPage(paid.PaymentURL, "pay", payment.ChoiceSucceed) // its callback is an hour away

	// The restart: another simulator and service on the same database; the
	// first is forgotten.
	cfg := payment.SimulatorConfig{Outcome: "succeed", Secret: []byte(testPaymentSecret), Delay: 0,
		CallbackURL: e.srv.URL + "/api/v1/booking/payments/callback", PageURL: e.srv.URL,
		Now: func() time.Time { return time.Now().Add(2 * time.Hour) }} // the hour has passed
	sim := payment.NewSimulator(cfg, postgres.NewSessions(e.pool), nil, e.log)
	svc := booking.NewService(e.store, sim, e.cat, e.set, e.log)
	if st, err := sim.Status(e.ctx(), paid.PaymentID); st != payment.Succeeded || err != nil {
		t.Fatalf("the paid session after the restart: %s %v; want SUCCEEDED", st, err)
	}
	if err := sim.DeliverOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	if s := e.bookingStatus(paid.BookingID); s != booking.StatusConfirmed {
		t.Fatalf("the callback due across the restart: booking %s; want CONFIRMED", s)
	}
	// The open one: its page is there still; the fan pays and the callback
	// is dropped; the reconciler asks and settles it.
	rec, ok, err := sim.Decide(e.ctx(), open.PaymentID, payment.ChoiceNever)
	if err != nil || !ok || rec.ReturnURL != "http://gateway.test/e/premiere/book?booking="+open.BookingID {
		t.Fatalf("decide after the restart: %+v %v %v", rec, ok, err)
	}
	e.exec(`UPDATE payments SET created_at = now() - interval '16 minutes' WHERE payment_id = $1`, open.PaymentID)
	if err := (&booking.Reconciler{Service: svc, Log: e.log}).ReconcileOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	// The simulator's clock is its own: the hold is judged by the
	// database's, and it is still held.
	if s := e.bookingStatus(open.BookingID); s != booking.StatusConfirmed {
		t.Fatalf("reconciled after the restart: %s; want CONFIRMED", s)
	}
}
