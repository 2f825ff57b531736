package booking_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/payment"
)

// No endless hold: a customer cannot take a seat again within the cool-down
// after a hold of theirs on it was released or lapsed (409 listing it); the
// seat stays free for everyone else, and the customer may take others.
func TestReholdCooldown(t *testing.T) {
	hold := func(e *env, who string, seats ...string) error {
		_, err := e.svc.Hold(e.ctx(), fan(premiere, who), 42, booking.HoldInput{Seats: seats})
		return err
	}
	refused := func(t *testing.T, err error, want ...string) {
		t.Helper()
		var d *booking.DetailError
		if !errors.Is(err, booking.ErrSeatsUnavailable) || !errors.As(err, &d) || !slices.Equal(d.Seats, want) {
			t.Fatalf("hold: %v; want seats unavailable listing %v", err, want)
		}
	}
	t.Run("released", func(t *testing.T) {
		e := setup(t)
		h, err := e.svc.Hold(e.ctx(), fan(premiere, "cycler"), 42, booking.HoldInput{Seats: []string{"F5", "F6"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Release(e.ctx(), fan(premiere, "cycler"), h.ID); err != nil {
			t.Fatal(err)
		}
		before := e.snapshot()
		refused(t, hold(e, "cycler", "F5", "F6"), "F5", "F6")
		refused(t, hold(e, "cycler", "F6", "F7"), "F6")
		if e.snapshot() != before {
			t.Fatal("a refused re-hold changed the seats")
		}
		if err := hold(e, "cycler", "F7", "F8"); err != nil {
			t.Fatalf("other seats: %v; want them", err)
		}
		if err := hold(e, "neighbour", "F5"); err != nil {
			t.Fatalf("another customer: %v; want the released seat", err)
		}
	})
	t.Run("lapsed", func(t *testing.T) {
		e := setup(t)
		h, err := e.svc.Hold(e.ctx(), fan(premiere, "cycler"), 42, booking.HoldInput{Seats: []string{"G1"}})
		if err != nil {
			t.Fatal(err)
		}
		e.exec(`UPDATE seats SET hold_expires_at = now() - interval '1 second' WHERE hold_id = $1`, h.ID)
		e.exec(`UPDATE holds SET expires_at = now() - interval '1 second', created_at = now() - interval '10 minutes 1 second' WHERE id = $1`, h.ID)
		refused(t, hold(e, "cycler", "G1"), "G1")
		// The sweeper tidying it changes nothing.
		if err := (&booking.Sweeper{Store: e.store, Batch: 10, Log: e.log}).SweepOnce(e.ctx()); err != nil {
			t.Fatal(err)
		}
		e.exec(`UPDATE holds SET status = 'EXPIRED' WHERE id = $1`, h.ID)
		refused(t, hold(e, "cycler", "G1"), "G1")
	})
	t.Run("over once the cool-down has passed", func(t *testing.T) {
		e := setup(t)
		h, err := e.svc.Hold(e.ctx(), fan(premiere, "cycler"), 42, booking.HoldInput{Seats: []string{"H1"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Release(e.ctx(), fan(premiere, "cycler"), h.ID); err != nil {
			t.Fatal(err)
		}
		e.exec(`UPDATE holds SET ended_at = now() - interval '10 minutes 1 second' WHERE id = $1`, h.ID)
		if err := hold(e, "cycler", "H1"); err != nil {
			t.Fatalf("after the cool-down: %v; want the seat", err)
		}
	})
	t.Run("off with rehold_cooldown 0", func(t *testing.T) {
		e := setup(t, withSettings(func(s *booking.Settings) { s.ReholdCooldown = 0 }))
		h, err := e.svc.Hold(e.ctx(), fan(premiere, "fan"), 42, booking.HoldInput{Seats: []string{"J1"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Release(e.ctx(), fan(premiere, "fan"), h.ID); err != nil {
			t.Fatal(err)
		}
		if err := hold(e, "fan", "J1"); err != nil {
			t.Fatalf("no cool-down: %v; want the seat", err)
		}
	})
	t.Run("raced", func(t *testing.T) {
		// The cycler releases and races 20 requests for the seat against 20
		// other customers: the cycler never wins it, exactly one other does.
		e := setup(t, withSettings(func(s *booking.Settings) { s.HoldsPerMinute, s.HoldAttemptsPerMinute = 100, 100 }))
		h, err := e.svc.Hold(e.ctx(), fan(premiere, "cycler"), 42, booking.HoldInput{Seats: []string{"E5"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Release(e.ctx(), fan(premiere, "cycler"), h.ID); err != nil {
			t.Fatal(err)
		}
		errs := race(40, func(i int) error {
			who := "cycler"
			if i%2 == 1 {
				who = fmt.Sprintf("other%02d", i)
			}
			return hold(e, who, "E5")
		})
		winners := 0
		for i, err := range errs {
			switch {
			case err == nil && i%2 == 0:
				t.Fatalf("the cycler took its released seat back (request %d)", i)
			case err == nil:
				winners++
			case !errors.Is(err, booking.ErrSeatsUnavailable):
				t.Fatalf("request %d: %v", i, err)
			}
		}
		var holder string
		e.q(&holder, `SELECT customer_id FROM seats WHERE showtime_id = 42 AND seat_code = 'E5' AND status = 'HELD'`)
		if winners != 1 || !strings.HasPrefix(holder, "other") {
			t.Fatalf("%d winners, E5 held by %q; want exactly one other customer", winners, holder)
		}
	})
}

// Attempts are limited, not only successes: a customer's hold requests,
// refused ones included, are limited to hold_attempts_per_minute; then 429
// with Retry-After, whatever the seats, and nothing is locked or written.
func TestHoldAttemptsAreLimited(t *testing.T) {
	t.Run("refusals count", func(t *testing.T) {
		e := setup(t) // 20 attempts a minute
		if _, err := e.svc.Hold(e.ctx(), fan(premiere, "owner"), 42, booking.HoldInput{Seats: []string{"A1"}}); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			_, err := e.svc.Hold(e.ctx(), fan(premiere, "hammer"), 42, booking.HoldInput{Seats: []string{"A1"}})
			var d *booking.DetailError
			switch {
			case i < 20 && !errors.Is(err, booking.ErrSeatsUnavailable):
				t.Fatalf("attempt %d: %v; want seats unavailable", i+1, err)
			case i >= 20 && (!errors.Is(err, booking.ErrRateLimited) || !errors.As(err, &d) || d.RetryAfter < 50*time.Second):
				t.Fatalf("attempt %d: %v; want rate limited, retry in about a minute", i+1, err)
			}
		}
		// Limited for any seat, not only the contested one.
		if _, err := e.svc.Hold(e.ctx(), fan(premiere, "hammer"), 42, booking.HoldInput{Seats: []string{"J30"}}); !errors.Is(err, booking.ErrRateLimited) {
			t.Fatalf("a free seat once limited: %v; want rate limited", err)
		}
		if _, err := e.svc.Hold(e.ctx(), fan(premiere, "bystander"), 42, booking.HoldInput{Seats: []string{"J30"}}); err != nil {
			t.Fatalf("another customer: %v", err)
		}
		// A minute later the hammer may try again.
		e.exec(`UPDATE hold_refusals SET at = ARRAY(SELECT t - interval '61 seconds' FROM unnest(at) t) WHERE customer_id = 'hammer'`)
		if _, err := e.svc.Hold(e.ctx(), fan(premiere, "hammer"), 42, booking.HoldInput{Seats: []string{"J29"}}); err != nil {
			t.Fatalf("a minute later: %v", err)
		}
	})
	t.Run("raced", func(t *testing.T) {
		e := setup(t)
		if _, err := e.svc.Hold(e.ctx(), fan(premiere, "owner"), 42, booking.HoldInput{Seats: []string{"B2"}}); err != nil {
			t.Fatal(err)
		}
		errs := race(50, func(int) error {
			_, err := e.svc.Hold(e.ctx(), fan(premiere, "hammer"), 42, booking.HoldInput{Seats: []string{"B2"}})
			return err
		})
		conflicts, limited := 0, 0
		for _, err := range errs {
			switch {
			case errors.Is(err, booking.ErrSeatsUnavailable):
				conflicts++
			case errors.Is(err, booking.ErrRateLimited):
				limited++
			default:
				t.Fatalf("attempt: %v", err)
			}
		}
		var recorded int
		e.q(&recorded, `SELECT coalesce(cardinality(at), 0) FROM hold_refusals WHERE customer_id = 'hammer'`)
		if conflicts != 20 || limited != 30 || recorded != 20 {
			t.Fatalf("%d conflicts, %d limited, %d refusals recorded; want 20, 30 and 20", conflicts, limited, recorded)
		}
	})
	t.Run("successes count too", func(t *testing.T) {
		e := setup(t, withSettings(func(s *booking.Settings) { s.HoldAttemptsPerMinute = 3 }))
		p := fan(premiere, "fan")
		for i, seat := range []string{"C1", "C2", "C3"} {
			if _, err := e.svc.Hold(e.ctx(), p, 42, booking.HoldInput{Seats: []string{seat}}); err != nil {
				t.Fatalf("hold %d: %v", i, err)
			}
		}
		if _, err := e.svc.Hold(e.ctx(), p, 42, booking.HoldInput{Seats: []string{"C4"}}); !errors.Is(err, booking.ErrRateLimited) {
			t.Fatalf("4th attempt in a minute: %v; want rate limited", err)
		}
	})
	t.Run("a 429 through the API", func(t *testing.T) {
		e := setup(t, withSettings(func(s *booking.Settings) { s.HoldAttemptsPerMinute = 1 }))
		p, _ := e.admit("premiere", "")
		e.call(p, http.MethodPost, "/api/v1/booking/showtimes/42/holds", map[string]any{"seats": []string{"D1"}}, nil)
		before := e.snapshot()
		code, body, hdr := e.call(p, http.MethodPost, "/api/v1/booking/showtimes/42/holds", map[string]any{"seats": []string{"D2"}}, nil)
		if code != http.StatusTooManyRequests || body["error"] != "rate_limited" || hdr.Get("Retry-After") == "" {
			t.Fatalf("over the limit: %d %v (Retry-After %q); want 429 rate_limited with Retry-After", code, body, hdr.Get("Retry-After"))
		}
		if e.snapshot() != before {
			t.Fatal("a limited attempt changed the database")
		}
	})
}

// Bad input is a 4xx, never a 500, and changes nothing.
func TestHostileHoldAndCheckoutInput(t *testing.T) {
	e := setup(t)
	p, _ := e.admit("live", "")
	cases := []struct {
		name string
		body string
		code int
		err  string
	}{
		{"GA counts that overflow when summed", `{"generalAdmission":{"FLOOR":9223372036854775807,"BALCONY":9223372036854775807}}`, 422, "too_many_seats"},
		{"a seat and a huge count", `{"seats":["A1"],"generalAdmission":{"FLOOR":9223372036854775807}}`, 422, "too_many_seats"},
		{"one count over the limit", `{"generalAdmission":{"FLOOR":9}}`, 422, "too_many_seats"},
		{"count zero", `{"generalAdmission":{"FLOOR":0}}`, 400, "invalid_request"},
		{"negative count", `{"generalAdmission":{"FLOOR":-9223372036854775808}}`, 400, "invalid_request"},
		{"count beyond int64", `{"generalAdmission":{"FLOOR":92233720368547758070}}`, 400, "invalid_request"},
		{"fractional count", `{"generalAdmission":{"FLOOR":1.5}}`, 400, "invalid_request"},
	}
	before := e.snapshot()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body, _ := e.call(p, http.MethodPost, "/api/v1/booking/showtimes/43/holds", c.body, nil)
			if code != c.code || body["error"] != c.err {
				t.Fatalf("%s: %d %v; want %d %s", c.body, code, body, c.code, c.err)
			}
		})
	}
	h, err := e.svc.Hold(e.ctx(), p, 43, booking.HoldInput{Seats: []string{"E5"}})
	if err != nil {
		t.Fatal(err)
	}
	before = e.snapshot()
	for _, key := range []string{"\xff\xfe", "caf\xc3\xa9", "tab\there", strings.Repeat("k", 256)} {
		code, body, _ := e.call(p, http.MethodPost, "/api/v1/booking/holds/"+h.ID+"/checkout", nil, map[string]string{"Idempotency-Key": key})
		if code != 400 || body["error"] != "invalid_request" {
			t.Fatalf("Idempotency-Key %q: %d %v; want 400 invalid_request", key, code, body)
		}
	}
	if e.snapshot() != before {
		t.Fatal("refused checkouts changed the database")
	}
	if code, body, _ := e.call(p, http.MethodPost, "/api/v1/booking/holds/"+h.ID+"/checkout", nil,
		map[string]string{"Idempotency-Key": strings.Repeat("k", 254) + "~"}); code != 201 {
		t.Fatalf("a 255-character printable key: %d %v; want 201", code, body)
	}
}

// stubborn is a provider that keeps answering PENDING for some payments and
// refuses some refunds, as real providers do for hours at a time.
type stubborn struct {
	*payment.Simulator
	mu       sync.Mutex
	pending  map[string]bool // Status answers PENDING
	failing  map[string]bool // Refund fails
	refunded map[string]int
}

func (s *stubborn) Status(ctx context.Context, id string) (payment.Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[id] {
		return payment.Pending, nil
	}
	return payment.Succeeded, nil
}

func (s *stubborn) Refund(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing[id] {
		return errors.New("provider: try again later")
	}
	s.refunded[id]++
	return nil
}

// Money is never kept by mistake: the reconciler reaches every stale payment
// and every unacknowledged refund in each pass, however many older ones the
// provider keeps answering PENDING or failing; two reconcilers at once
// settle each once.
func TestReconcilerStarvesNobody(t *testing.T) {
	prov := &stubborn{pending: map[string]bool{}, failing: map[string]bool{}, refunded: map[string]int{}}
	e := setup(t, withProvider(func(sim *payment.Simulator) payment.Provider { prov.Simulator = sim; return prov }))
	const n = 150
	var payments, bookings []string
	for i := range n {
		seat := fmt.Sprintf("%c%d", 'A'+i/30, 1+i%30)
		_, c := e.holdAndCheckout(fan(premiere, fmt.Sprintf("c%03d", i)), 42, booking.HoldInput{Seats: []string{seat}})
		payments, bookings = append(payments, c.PaymentID), append(bookings, c.BookingID)
	}
	// Stale, in this order; the provider keeps the oldest 110 PENDING.
	for i, id := range payments {
		e.exec(`UPDATE payments SET created_at = now() - interval '1 hour' + $2 * interval '1 millisecond' WHERE payment_id = $1`, id, i)
		prov.pending[id] = i < 110
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := (&booking.Reconciler{Service: e.svc, Log: e.log}).ReconcileOnce(e.ctx()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var confirmed, pending, outbox int
	e.q(&confirmed, `SELECT count(*) FROM bookings WHERE status = 'CONFIRMED'`)
	e.q(&pending, `SELECT count(*) FROM payments WHERE status = 'PENDING'`)
	e.q(&outbox, `SELECT count(*) FROM outbox`)
	if confirmed != 40 || pending != 110 || outbox != 40 {
		t.Fatalf("%d confirmed, %d pending, %d outbox rows; want the 40 newest confirmed once, 110 still pending", confirmed, pending, outbox)
	}

	// Refunds: the provider refuses the oldest 110, takes the rest.
	e.exec(`UPDATE payments SET status = 'SUCCEEDED' WHERE status = 'PENDING'`)
	for i, id := range payments[:110] {
		e.exec(`UPDATE bookings SET status = 'FAILED' WHERE payment_id = $1`, id)
		e.exec(`INSERT INTO refunds (payment_id, booking_id, amount_cents, status, created_at)
		        VALUES ($1, $2, 1500, 'REQUESTED', now() - interval '1 hour' + $3 * interval '1 millisecond')`, id, bookings[i], i)
		prov.failing[id] = i < 100
	}
	if err := (&booking.Reconciler{Service: e.svc, Log: e.log}).ReconcileOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	var done, refunded int
	e.q(&done, `SELECT count(*) FROM refunds WHERE status = 'DONE'`)
	e.q(&refunded, `SELECT count(*) FROM bookings WHERE status = 'REFUNDED'`)
	if done != 10 || refunded != 10 || len(prov.refunded) != 10 {
		t.Fatalf("%d refunds done, %d bookings refunded, %d refunds asked of the provider; want the 10 newest", done, refunded, len(prov.refunded))
	}
}

// A SUCCEEDED that arrives after FAILED for the same payment means the
// provider took the money: the booking core records a refund and asks the
// provider for it, once however many such callbacks race; nothing is booked.
func TestSucceededAfterFailedIsRefunded(t *testing.T) {
	const secret = testPaymentSecret
	e := setup(t)
	h, c := e.holdAndCheckout(fan(premiere, "fan"), 42, booking.HoldInput{Seats: []string{"A9"}})
	if code, out := e.callback(c.PaymentID, payment.Failed, secret); code != 200 || out["result"] != "failed" {
		t.Fatalf("failed callback: %d %v", code, out)
	}
	results := make([]string, 8)
	race(8, func(i int) error {
		code, out := e.callback(c.PaymentID, payment.Succeeded, secret)
		results[i] = fmt.Sprint(code, " ", out["result"])
		return nil
	})
	late := 0
	for _, r := range results {
		switch r {
		case "200 late_refunded":
			late++
		case "200 duplicate":
		default:
			t.Fatalf("success after failure: %s; want 200 late_refunded once, duplicate after", r)
		}
	}
	var refunds, booked int
	var pay string
	e.q(&refunds, `SELECT count(*) FROM refunds WHERE payment_id = $1 AND status = 'DONE'`, c.PaymentID)
	e.q(&booked, `SELECT count(*) FROM seats WHERE status = 'BOOKED'`)
	e.q(&pay, `SELECT status FROM payments WHERE payment_id = $1`, c.PaymentID)
	if late != 1 || refunds != 1 || booked != 0 || pay != "SUCCEEDED" || !e.sim.Refunded(e.ctx(), c.PaymentID) {
		t.Fatalf("%d late_refunded, %d refunds done, %d seats booked, payment %s, provider refunded %v; want 1, 1, 0, SUCCEEDED, true",
			late, refunds, booked, pay, e.sim.Refunded(e.ctx(), c.PaymentID))
	}
	if s := e.bookingStatus(c.BookingID); s != booking.StatusRefunded {
		t.Fatalf("booking %s; want REFUNDED", s)
	}
	if code, out := e.callback(c.PaymentID, payment.Failed, secret); code != 200 || out["result"] != "duplicate" {
		t.Fatalf("a FAILED after that: %d %v; want duplicate", code, out)
	}
	// The hold is the fan's still: they may pay again.
	if _, err := e.svc.Checkout(e.ctx(), fan(premiere, "fan"), h.ID, "again"); err != nil {
		t.Fatalf("checkout again: %v", err)
	}
}
