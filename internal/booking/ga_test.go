package booking_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// 500 customers race for the 250-place FLOOR, each asking 1 or 2 places: the
// places held never exceed 250 at any moment (sampled during the race), and
// the winners' sum equals what the database holds.
func TestFiveHundredCustomersNeverOverfillABlock(t *testing.T) {
	e := setup(t)
	want := make([]int, 500)
	for i := range want {
		want[i] = 1 + i%2
	}
	var peak atomic.Int64
	stopSampling := testenv.Repeat(func() time.Duration { return 0 }, func() {
		var n int64
		if err := e.pool.QueryRow(context.Background(), `SELECT coalesce(sum(places),0) FROM ga_places WHERE block_code = 'FLOOR' AND status IN ('HELD','BOOKED')`).Scan(&n); err == nil && n > peak.Load() {
			peak.Store(n)
		}
	})
	errs := race(500, func(i int) error {
		_, err := e.svc.Hold(e.ctx(), fan(live, fmt.Sprintf("c%03d", i)), 43, booking.HoldInput{GeneralAdmission: map[string]int{"FLOOR": want[i]}})
		return err
	})
	stopSampling()
	sum := 0
	for i, err := range errs {
		switch {
		case err == nil:
			sum += want[i]
		case !errors.Is(err, booking.ErrSoldOut):
			t.Fatalf("customer %d: %v", i, err)
		}
	}
	var held int
	e.q(&held, `SELECT coalesce(sum(places),0) FROM ga_places WHERE block_code = 'FLOOR' AND status = 'HELD'`)
	if held != sum || sum > 250 || sum < 249 {
		t.Fatalf("winners hold %d, database %d; want equal, 249..250", sum, held)
	}
	if peak.Load() > 250 {
		t.Fatalf("peak places held = %d; want <= 250", peak.Load())
	}
	t.Logf("winners' places %d, peak sampled %d", sum, peak.Load())
}

// 64 concurrent workers mix seats and places over two blocks and overlapping
// seats, release, confirm and let holds lapse, for long enough to meet a
// deadlock if any transaction took its locks in another order (PostgreSQL
// would abort one with 40P01, which fails the test).
func TestNoDeadlockUnderMixedConcurrentHolds(t *testing.T) {
	e := setup(t, withSettings(func(s *booking.Settings) { s.HoldsPerMinute = 1 << 20; s.MaxSeatsPerHold = 8 }))
	seats := seatCodes(1, 12) // A1..A12: heavy overlap
	deadline := time.Now().Add(4 * time.Second)
	var ops, conflicts atomic.Int64
	errs := race(64, func(w int) error {
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		for i := 0; time.Now().Before(deadline); i++ {
			in := booking.HoldInput{GeneralAdmission: map[string]int{}}
			for _, j := range rng.Perm(len(seats))[:rng.IntN(4)] {
				in.Seats = append(in.Seats, seats[j])
			}
			if rng.IntN(2) == 0 {
				in.GeneralAdmission["FLOOR"] = 1 + rng.IntN(2)
			}
			if rng.IntN(2) == 0 {
				in.GeneralAdmission["BALCONY"] = 1 + rng.IntN(2)
			}
			if len(in.Seats) == 0 && len(in.GeneralAdmission) == 0 {
				in.Seats = []string{seats[rng.IntN(len(seats))]}
			}
			p := fan(live, fmt.Sprintf("w%d-%d", w, i))
			ops.Add(1)
			h, err := e.svc.Hold(e.ctx(), p, 43, in)
			if errors.Is(err, booking.ErrSeatsUnavailable) || errors.Is(err, booking.ErrSoldOut) {
				conflicts.Add(1)
				continue
			}
			if err != nil {
				return fmt.Errorf("hold: %w", err)
			}
			switch rng.IntN(4) {
			case 0, 1:
				err = e.svc.Release(e.ctx(), p, h.ID)
			case 2: // lapse at once: the next holds take it lazily
				_, err = e.pool.Exec(e.ctx(), `UPDATE seats SET hold_expires_at = now() WHERE hold_id = $1 AND status = 'HELD'`, h.ID)
				if err == nil {
					_, err = e.pool.Exec(e.ctx(), `UPDATE ga_places SET expires_at = now() WHERE hold_id = $1`, h.ID)
				}
			case 3: // pay; the confirmation races the others
				var c booking.Checkout
				if c, err = e.svc.Checkout(e.ctx(), p, h.ID, "k"); err == nil {
					_, err = e.svc.Settle(e.ctx(), c.PaymentID, payment.Succeeded)
					_ = e.svc.Release(e.ctx(), p, h.ID) // no-op when booked
				}
			}
			if err != nil && !errors.Is(err, booking.ErrHoldNotActive) {
				return err
			}
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	var over int
	e.q(&over, `SELECT count(*) FROM (
	  SELECT b.code FROM ga_blocks b JOIN ga_places p ON p.showtime_id = b.showtime_id AND p.block_code = b.code
	   WHERE p.status = 'BOOKED' OR (p.status = 'HELD' AND p.expires_at > now())
	   GROUP BY b.code, b.capacity HAVING sum(p.places) > b.capacity) x`)
	var doubly int
	e.q(&doubly, `SELECT count(*) FROM (SELECT seat_code FROM seats s JOIN bookings b ON b.id = s.booking_id AND b.status = 'CONFIRMED' GROUP BY seat_code HAVING count(*) > 1) x`)
	if over != 0 || doubly != 0 {
		t.Fatalf("%d blocks over capacity, %d seats sold twice", over, doubly)
	}
	t.Logf("%d holds attempted, %d conflicts, no deadlock", ops.Load(), conflicts.Load())
}
