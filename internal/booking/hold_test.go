package booking_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/booking/postgres"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// race releases n goroutines together and collects what each got.
func race(n int, f func(i int) error) []error {
	errs := make([]error, n)
	testenv.Race(n, func(i int) { errs[i] = f(i) })
	return errs
}

// raceFor is race for calls that answer a value too: what each got, and
// its error.
func raceFor[T any](n int, f func(i int) (T, error)) ([]T, []error) {
	got := make([]T, n)
	errs := race(n, func(i int) error {
		var err error
		got[i], err = f(i)
		return err
	})
	return got, errs
}

// The reference test: 20 customers race for the same two seats; exactly one
// wins, and the database shows both seats under one hold.
func TestTwentyCustomersRaceForTheSameTwoSeats(t *testing.T) {
	e := setup(t)
	holds, errs := raceFor(20, func(i int) (booking.Hold, error) {
		return e.svc.Hold(e.ctx(), fan(premiere, fmt.Sprintf("c%02d", i)), 42, booking.HoldInput{Seats: []string{"F6", "F5"}})
	})
	winners := 0
	var winner string
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
			winner = holds[i].ID
		case !errors.Is(err, booking.ErrSeatsUnavailable):
			t.Fatalf("customer %d: %v; want success or seats unavailable", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("winners = %d; want exactly 1", winners)
	}
	var distinct, held int
	e.q(&distinct, `SELECT count(DISTINCT hold_id) FROM seats WHERE showtime_id = 42 AND status = 'HELD'`)
	e.q(&held, `SELECT count(*) FROM seats WHERE showtime_id = 42 AND status = 'HELD' AND hold_id = $1 AND seat_code IN ('F5','F6')`, winner)
	if distinct != 1 || held != 2 {
		t.Fatalf("database: %d distinct holds, %d seats under the winner; want 1 and 2", distinct, held)
	}
}

// 200 customers × random overlapping seat sets on a 300-seat showtime: the
// winners' seats are disjoint and equal to what the database says is held.
func TestRandomOverlappingHoldsAreDisjointAndMatchTheDatabase(t *testing.T) {
	e := setup(t)
	all := seatCodes(10, 30)
	asks := make([][]string, 200)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range asks {
		for _, j := range rng.Perm(len(all))[:1+rng.IntN(6)] {
			asks[i] = append(asks[i], all[j])
		}
	}
	errs := race(200, func(i int) error {
		_, err := e.svc.Hold(e.ctx(), fan(premiere, fmt.Sprintf("c%03d", i)), 42, booking.HoldInput{Seats: asks[i]})
		return err
	})
	won := map[string]string{}
	wins := 0
	for i, err := range errs {
		if errors.Is(err, booking.ErrSeatsUnavailable) {
			continue
		}
		if err != nil {
			t.Fatalf("customer %d: %v", i, err)
		}
		wins++
		for _, s := range asks[i] {
			if other, dup := won[s]; dup {
				t.Fatalf("seat %s won by c%03d and %s", s, i, other)
			}
			won[s] = fmt.Sprintf("c%03d", i)
		}
	}
	rows, err := e.pool.Query(e.ctx(), `SELECT seat_code, customer_id FROM seats WHERE showtime_id = 42 AND status = 'HELD'`)
	if err != nil {
		t.Fatal(err)
	}
	db := map[string]string{}
	for rows.Next() {
		var s, c string
		if err := rows.Scan(&s, &c); err != nil {
			t.Fatal(err)
		}
		db[s] = c
	}
	if len(db) != len(won) {
		t.Fatalf("database holds %d seats; winners hold %d", len(db), len(won))
	}
	for s, c := range won {
		if db[s] != c {
			t.Fatalf("seat %s: database says %q; winner was %s", s, db[s], c)
		}
	}
	t.Logf("%d winners, %d seats held", wins, len(won))
}

func TestHoldIsAllOrNothing(t *testing.T) {
	cases := []struct {
		name    string
		first   booking.HoldInput // taken by someone else first
		second  booking.HoldInput
		wantErr error
	}{
		{"one seat of three taken", booking.HoldInput{Seats: []string{"A2"}},
			booking.HoldInput{Seats: []string{"A1", "A2", "A3"}}, booking.ErrSeatsUnavailable},
		{"seats taken: no places taken", booking.HoldInput{Seats: []string{"B1"}},
			booking.HoldInput{Seats: []string{"B1", "B2"}, GeneralAdmission: map[string]int{"FLOOR": 2}}, booking.ErrSeatsUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			if _, err := e.svc.Hold(e.ctx(), fan(live, "first"), 43, tc.first); err != nil {
				t.Fatal(err)
			}
			before := e.snapshot()
			_, err := e.svc.Hold(e.ctx(), fan(live, "second"), 43, tc.second)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("second hold: %v; want %v", err, tc.wantErr)
			}
			if after := e.snapshot(); after != before {
				t.Fatalf("a refused hold changed the database:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	t.Run("block full: no seats taken", func(t *testing.T) {
		e := setup(t)
		for i := range 5 { // 5 × 8 = 40 = BALCONY's capacity
			if _, err := e.svc.Hold(e.ctx(), fan(live, fmt.Sprintf("f%d", i)), 43, booking.HoldInput{GeneralAdmission: map[string]int{"BALCONY": 8}}); err != nil {
				t.Fatal(err)
			}
		}
		before := e.snapshot()
		_, err := e.svc.Hold(e.ctx(), fan(live, "late"), 43, booking.HoldInput{Seats: []string{"C1"}, GeneralAdmission: map[string]int{"BALCONY": 1}})
		var d *booking.DetailError
		if !errors.Is(err, booking.ErrSoldOut) || !errors.As(err, &d) || d.Block != "BALCONY" {
			t.Fatalf("hold on a full block: %v; want sold out naming BALCONY", err)
		}
		if after := e.snapshot(); after != before {
			t.Fatalf("a refused hold changed the database")
		}
	})
}

// Expiry is judged by time in the statements: with no sweeper running, a
// lapsed hold's seats and places are free again, and the seat map says so.
func TestLazyExpiryWithoutTheSweeper(t *testing.T) {
	e := setup(t)
	h, err := e.svc.Hold(e.ctx(), fan(live, "first"), 43, booking.HoldInput{Seats: []string{"A1", "A2"}, GeneralAdmission: map[string]int{"BALCONY": 6}})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{8, 8, 8, 8, 2} { // BALCONY (40) is now full
		if _, err := e.svc.Hold(e.ctx(), fan(live, fmt.Sprintf("f%d", i)), 43, booking.HoldInput{GeneralAdmission: map[string]int{"BALCONY": n}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.svc.Hold(e.ctx(), fan(live, "second"), 43, booking.HoldInput{GeneralAdmission: map[string]int{"BALCONY": 1}}); !errors.Is(err, booking.ErrSoldOut) {
		t.Fatalf("full block before expiry: %v; want sold out", err)
	}
	if _, err := e.svc.Hold(e.ctx(), fan(live, "second"), 43, booking.HoldInput{Seats: []string{"A1"}}); !errors.Is(err, booking.ErrSeatsUnavailable) {
		t.Fatalf("before expiry: %v; want seats unavailable", err)
	}
	e.lapse(h.ID)
	m, err := e.svc.SeatMap(e.ctx(), fan(live, "x"), 43)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Seats {
		if s.Code == "A1" && s.Status != booking.Available {
			t.Fatalf("seat map shows lapsed A1 as %s; want AVAILABLE", s.Status)
		}
	}
	for _, b := range m.GeneralAdmission {
		if b.Code == "BALCONY" && b.Available != 6 {
			t.Fatalf("BALCONY available = %d; want 6 (the lapsed hold's places)", b.Available)
		}
	}
	if _, err := e.svc.Hold(e.ctx(), fan(live, "second"), 43, booking.HoldInput{Seats: []string{"A1", "A2"}, GeneralAdmission: map[string]int{"BALCONY": 6}}); err != nil {
		t.Fatalf("after expiry, sweeper stopped: %v; want the seats and places", err)
	}
	var stale int
	e.q(&stale, `SELECT count(*) FROM ga_places WHERE hold_id = $1 AND status = 'HELD'`, h.ID)
	if stale != 1 {
		t.Fatalf("the lapsed hold's place row was rewritten (%d HELD); only the sweeper tidies it", stale)
	}
}

func TestTwoConcurrentSweepersTidyEveryLapsedHoldOnce(t *testing.T) {
	e := setup(t)
	all := seatCodes(10, 30)
	var ids []string
	for i := range 60 {
		h, err := e.svc.Hold(e.ctx(), fan(premiere, fmt.Sprintf("c%d", i)), 42, booking.HoldInput{Seats: all[i*5 : i*5+5]})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ID)
	}
	for _, id := range ids[:50] {
		e.lapse(id)
	}
	errs := race(2, func(i int) error {
		return (&booking.Sweeper{Store: e.store, Batch: 7, Log: e.log}).SweepOnce(e.ctx())
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var held, avail, expired int
	e.q(&held, `SELECT count(*) FROM seats WHERE showtime_id = 42 AND status = 'HELD'`)
	e.q(&avail, `SELECT count(*) FROM seats WHERE showtime_id = 42 AND status = 'AVAILABLE' AND hold_id IS NULL`)
	e.q(&expired, `SELECT count(*) FROM holds WHERE status = 'EXPIRED'`)
	if held != 50 || avail != 250 || expired != 50 {
		t.Fatalf("after two sweepers: held %d, available %d, expired holds %d; want 50, 250, 50", held, avail, expired)
	}
}

// The per-customer limits are exact under a race of one customer's holds.
func TestCustomerLimitsAreExactUnderRace(t *testing.T) {
	t.Run("places across the event", func(t *testing.T) {
		e := setup(t, withSettings(func(s *booking.Settings) { s.HoldsPerMinute = 100 }))
		all := seatCodes(1, 30)
		errs := race(20, func(i int) error {
			_, err := e.svc.Hold(e.ctx(), fan(premiere, "greedy"), 42, booking.HoldInput{Seats: all[i : i+1]})
			return err
		})
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else if !errors.Is(err, booking.ErrTooManySeats) {
				t.Fatal(err)
			}
		}
		var held int
		e.q(&held, `SELECT count(*) FROM seats WHERE customer_id = 'greedy' AND status = 'HELD'`)
		if ok != 8 || held != 8 {
			t.Fatalf("granted %d, held %d; want 8 and 8 (max_seats_per_hold)", ok, held)
		}
	})
	t.Run("holds per minute", func(t *testing.T) {
		e := setup(t)
		all := seatCodes(1, 30)
		errs := race(12, func(i int) error {
			h, err := e.svc.Hold(e.ctx(), fan(premiere, "bot"), 42, booking.HoldInput{Seats: all[i : i+1]})
			if err == nil {
				return e.svc.Release(e.ctx(), fan(premiere, "bot"), h.ID)
			}
			return err
		})
		ok, limited := 0, 0
		for _, err := range errs {
			var d *booking.DetailError
			switch {
			case err == nil:
				ok++
			case errors.Is(err, booking.ErrRateLimited) && errors.As(err, &d) && d.RetryAfter > 0:
				limited++
			default:
				t.Fatal(err)
			}
		}
		if ok != 5 || limited != 7 {
			t.Fatalf("granted %d, limited %d; want 5 and 7", ok, limited)
		}
	})
}

func TestReleaseByTheHolderOnly(t *testing.T) {
	e := setup(t)
	h, err := e.svc.Hold(e.ctx(), fan(live, "owner"), 43, booking.HoldInput{Seats: []string{"A1"}, GeneralAdmission: map[string]int{"FLOOR": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Release(e.ctx(), fan(live, "thief"), h.ID); !errors.Is(err, booking.ErrNotFound) {
		t.Fatalf("release by another customer: %v; want not found", err)
	}
	if err := e.svc.Release(e.ctx(), fan(live, "owner"), h.ID); err != nil {
		t.Fatal(err)
	}
	var status string
	var places int
	e.q(&status, `SELECT status FROM seats WHERE showtime_id = 43 AND seat_code = 'A1'`)
	e.q(&places, `SELECT count(*) FROM ga_places WHERE status IN ('HELD','BOOKED')`)
	if status != booking.Available || places != 0 {
		t.Fatalf("after release: A1 %s, %d live place rows; want AVAILABLE and 0", status, places)
	}
	if _, err := e.svc.Hold(e.ctx(), fan(live, "next"), 43, booking.HoldInput{Seats: []string{"A1"}}); err != nil {
		t.Fatalf("hold after release: %v", err)
	}
}

// A hold whose reply is lost after PostgreSQL committed it is the fan's
// all the same: answered 201 with the hold, not 503 for a hold that would
// then sit on its seats until it lapses. The booking core's connection to
// PostgreSQL goes through a proxy; the test holds the customer's lock, so
// the hold's statements wait in the server, black-holes the connection
// they came on, and lets the lock go: the hold is written, its reply never
// comes back, and the request's budget runs out waiting for it.
func TestALostReplyOfAWrittenHoldIsTheHold(t *testing.T) {
	e := setup(t)
	pool, px := e.poolThroughProxy(2)
	svc := booking.NewService(postgres.New(pool), e.sim, e.cat, e.set, e.log)

	lock, err := e.pool.Begin(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(e.ctx(), `SELECT pg_advisory_xact_lock(hashtext('booking-customer'), hashtext('premiere/late-reply'))`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		h   booking.Hold
		err error
	}
	done := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(e.ctx(), 4*time.Second)
		defer cancel()
		h, err := svc.Hold(ctx, fan(premiere, "late-reply"), 42, booking.HoldInput{Seats: []string{"A1"}})
		done <- answer{h, err}
	}()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := e.pool.QueryRow(e.ctx(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatal("the hold never waited on the customer's lock")
		}
	}
	if n := px.BlackHole(); n != 1 {
		t.Fatalf("%d connections black-holed; want the hold's one", n)
	}
	if err := lock.Commit(e.ctx()); err != nil {
		t.Fatal(err)
	}
	a := <-done
	var exp time.Time
	if err := e.pool.QueryRow(e.ctx(), `SELECT expires_at FROM holds WHERE customer_id = 'late-reply'`).Scan(&exp); err != nil {
		t.Fatalf("the hold is not in PostgreSQL (%v): the fault was not the one under test (answer %+v, %v)", err, a.h, a.err)
	}
	if a.err != nil || a.h.ID == "" || !a.h.ExpiresAt.Equal(exp) || !slices.Equal(a.h.Seats, []string{"A1"}) {
		t.Fatalf("a hold PostgreSQL wrote was answered %+v, %v; want it, expiring at %v", a.h, a.err, exp)
	}
}
