package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// Benchmarks of the hold path (run with `make bench`, or
// go test -run '^$' -bench . ./internal/booking/postgres/). Holds lapse after
// benchTTL so that seats churn and most holds decide on contended rows; each
// benchmark checks afterwards that no two successful holds ever overlapped on
// a seat, and that a block was never over capacity: zero double sales.
const benchTTL = 40 * time.Millisecond

// 64 concurrent customers (RunParallel goroutines) whatever GOMAXPROCS is.
func concurrency64(b *testing.B) { b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) }

type benchEnv struct {
	pool  *pgxpool.Pool
	store *Store
	svc   *booking.Service
}

// benchSetup gives a benchmark the service on a fresh database seeded with
// events; with inventory, the service tells a waiting room on a private
// Redis about every hold, as `booking serve` does, and the inventory's
// background passes (lapses, syncs) run meanwhile.
func benchSetup(b *testing.B, events []booking.Event, inventory ...bool) *benchEnv {
	b.Helper()
	// The pool as `booking serve` builds it (Open), 32 connections.
	url := testenv.Database(b, "booking", Migrate)
	pool, err := Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	store := New(pool)
	if _, err := store.Seed(context.Background(), events); err != nil {
		b.Fatal(err)
	}
	set := booking.Settings{HoldTTL: benchTTL, SessionTTL: benchTTL / 2, MaxSeatsPerHold: 8, HoldsPerMinute: 5,
		HoldAttemptsPerMinute: 20, ReholdCooldown: benchTTL}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	simPool, err := OpenPool(context.Background(), url, 8)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(simPool.Close)
	sim := payment.NewSimulator(payment.SimulatorConfig{Manual: true}, NewSessions(simPool), nil, log)
	// As in `booking serve`, the sweeper tidies lapsed rows meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&booking.Sweeper{Store: store, Batch: 500, Every: 200 * time.Millisecond, Log: log}).Run(ctx)
	}()
	b.Cleanup(func() { cancel(); <-done })
	svc := booking.NewService(store, sim, booking.NewCatalog(events), set, log)
	if len(inventory) > 0 && inventory[0] {
		_, rdb := testenv.Redis(b)
		ids := make([]string, len(events))
		for i, ev := range events {
			ids[i] = ev.ID
		}
		inv := booking.NewInventory(queue.NewStore(rdb, []byte("bench-ticket-secret-0123456789abcdef")), store, ids, log)
		if err := inv.SyncOnce(ctx); err != nil {
			b.Fatal(err)
		}
		svc.WithInventory(inv)
		invDone := make(chan struct{})
		go func() { defer close(invDone); inv.Run(ctx) }()
		b.Cleanup(func() { cancel(); <-invDone })
	}
	return &benchEnv{pool: pool, store: store, svc: svc}
}

func hotShowtime() []booking.Event {
	return []booking.Event{{ID: "hot", Showtimes: []booking.Showtime{{
		ID: 1, Title: "hot", Rows: 10, SeatsPerRow: 30, PriceCents: 100,
		Blocks: []booking.GABlock{{Code: "FLOOR", Capacity: 250, PriceCents: 50}},
	}}}}
}

// granted records successful holds to prove afterwards that none overlapped.
type granted struct {
	mu   sync.Mutex
	list []grant
}

type grant struct {
	key        string // showtime/seat, or showtime/block
	places     int
	start, end time.Time
}

func (g *granted) add(h booking.Hold, showtime int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	start := h.ExpiresAt.Add(-benchTTL)
	for _, s := range h.Seats {
		g.list = append(g.list, grant{fmt.Sprintf("%d/%s", showtime, s), 1, start, h.ExpiresAt})
	}
	for c, n := range h.GeneralAdmission {
		g.list = append(g.list, grant{fmt.Sprintf("%d/%s", showtime, c), n, start, h.ExpiresAt})
	}
}

// check fails if, at any instant, a seat had two holds or a block more places
// than capacity.
func (g *granted) check(b *testing.B, capacity int) {
	type ev struct {
		at    time.Time
		delta int
	}
	by := map[string][]ev{}
	for _, x := range g.list {
		by[x.key] = append(by[x.key], ev{x.start, x.places}, ev{x.end, -x.places})
	}
	for key, evs := range by {
		sort.Slice(evs, func(i, j int) bool {
			if evs[i].at.Equal(evs[j].at) {
				return evs[i].delta < evs[j].delta // a lapse at t frees before a hold at t
			}
			return evs[i].at.Before(evs[j].at)
		})
		limit, n := 1, 0
		if strings.HasSuffix(key, "/FLOOR") {
			limit = capacity
		}
		for _, e := range evs {
			if n += e.delta; n > limit {
				b.Fatalf("%s: %d held at %s; limit %d (double sale)", key, n, e.at, limit)
			}
		}
	}
}

func report(b *testing.B, start time.Time, ok, conflicts int64) {
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(ok+conflicts)/secs, "holds/s")
	b.ReportMetric(float64(ok)/secs, "ok/s")
	b.ReportMetric(float64(ok)/float64(max(ok+conflicts, 1)), "ok-ratio")
}

var customerSeq atomic.Int64

// BenchmarkHoldHotShowtime: 64 customers take 2 random seats each of one
// 300-seat showtime, through the service (validation, per-customer limits,
// the conditional UPDATE, the hold row), without and with the inventory told
// to the waiting room (a Redis script before each hold, the lapse and sync
// passes in the background). Run with -count to interleave the two.
func BenchmarkHoldHotShowtime(b *testing.B) {
	for _, inv := range []bool{false, true} {
		b.Run(fmt.Sprintf("inventory=%v", inv), func(b *testing.B) { holdHotShowtime(b, inv) })
	}
}

func holdHotShowtime(b *testing.B, inventory bool) {
	hot := hotShowtime()
	e := benchSetup(b, hot, inventory)
	seats := seatsOf(hot[0].Showtimes[0])
	g := raceHolds(b, e, 1, booking.ErrSeatsUnavailable, func(rng *rand.Rand) (string, int64, booking.HoldInput) {
		i, j := rng.IntN(len(seats)), rng.IntN(len(seats)-1)
		if j >= i {
			j++
		}
		return "hot", 1, booking.HoldInput{Seats: []string{seats[i], seats[j]}}
	})
	g.check(b, 0)
}

// raceHolds runs a benchmark's holds: 64 concurrent customers, each hold
// as ask draws it; conflict is the refusal that means another customer was
// faster. It reports the rates and returns what was granted, to check.
func raceHolds(b *testing.B, e *benchEnv, seed uint64, conflict error, ask func(*rand.Rand) (event string, showtime int64, in booking.HoldInput)) *granted {
	var g granted
	var ok, conflicts atomic.Int64
	concurrency64(b)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(uint64(customerSeq.Add(1)), seed))
		for pb.Next() {
			event, st, in := ask(rng)
			p := booking.Pass{Event: event, Customer: fmt.Sprintf("c%d", customerSeq.Add(1))}
			h, err := e.svc.Hold(context.Background(), p, st, in)
			switch {
			case err == nil:
				ok.Add(1)
				g.add(h, st)
			case errors.Is(err, conflict):
				conflicts.Add(1)
			default:
				b.Fatal(err)
			}
		}
	})
	report(b, start, ok.Load(), conflicts.Load())
	b.StopTimer()
	return &g
}

// sqlBareTakeSeats is the conditional UPDATE at the heart of a hold (sqlHold's
// locked and taken), alone: lock the asked seats that are AVAILABLE or lapsed
// by $6 in code order, take them. $1 showtime, $2 sorted codes, $3 hold id,
// $4 customer, $5 expiry, $6 now.
const sqlBareTakeSeats = `
WITH locked AS (
    SELECT seat_code FROM seats
     WHERE showtime_id = $1 AND seat_code = ANY($2::text[])
       AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= $6))
     ORDER BY seat_code
       FOR UPDATE
)
UPDATE seats s
   SET status = 'HELD', hold_id = $3, customer_id = $4, hold_expires_at = $5, booking_id = NULL
  FROM locked
 WHERE s.showtime_id = $1 AND s.seat_code = locked.seat_code
   AND (s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= $6))`

// BenchmarkBareConditionalUpdate runs the hold's conditional UPDATE alone,
// autocommitted, on the same seats with the same concurrency: the ceiling the
// full hold is compared with.
func BenchmarkBareConditionalUpdate(b *testing.B) {
	hot := hotShowtime()
	e := benchSetup(b, hot)
	seats := seatsOf(hot[0].Showtimes[0])
	var ok, conflicts atomic.Int64
	concurrency64(b)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(uint64(customerSeq.Add(1)), 2))
		for pb.Next() {
			i, j := rng.IntN(len(seats)), rng.IntN(len(seats)-1)
			if j >= i {
				j++
			}
			codes := []string{seats[i], seats[j]}
			sort.Strings(codes)
			now := time.Now()
			tag, err := e.pool.Exec(context.Background(), sqlBareTakeSeats, int64(1), codes, booking.NewID(),
				fmt.Sprintf("c%d", customerSeq.Add(1)), now.Add(benchTTL), now)
			if err != nil {
				b.Fatal(err)
			}
			if tag.RowsAffected() == 2 {
				ok.Add(1)
			} else {
				conflicts.Add(1)
			}
		}
	})
	report(b, start, ok.Load(), conflicts.Load())
}

// BenchmarkHoldColdShowtimes: the same holds spread over 5,000 showtimes of
// 20 seats (little contention: the per-hold cost alone).
func BenchmarkHoldColdShowtimes(b *testing.B) {
	const n = 5000
	ev := booking.Event{ID: "cold"}
	for i := 1; i <= n; i++ {
		ev.Showtimes = append(ev.Showtimes, booking.Showtime{ID: int64(i), Title: "c", Rows: 2, SeatsPerRow: 10, PriceCents: 100})
	}
	e := benchSetup(b, []booking.Event{ev})
	seats := seatsOf(ev.Showtimes[0])
	g := raceHolds(b, e, 3, booking.ErrSeatsUnavailable, func(rng *rand.Rand) (string, int64, booking.HoldInput) {
		i := rng.IntN(len(seats) - 1)
		return "cold", int64(1 + rng.IntN(n)), booking.HoldInput{Seats: []string{seats[i], seats[i+1]}}
	})
	g.check(b, 0)
}

// BenchmarkHoldHotBlock: 64 customers take 1-2 places of one 250-place
// general-admission block (lock the block, count, insert).
func BenchmarkHoldHotBlock(b *testing.B) {
	e := benchSetup(b, hotShowtime())
	g := raceHolds(b, e, 4, booking.ErrSoldOut, func(rng *rand.Rand) (string, int64, booking.HoldInput) {
		return "hot", 1, booking.HoldInput{GeneralAdmission: map[string]int{"FLOOR": 1 + rng.IntN(2)}}
	})
	g.check(b, 250)
}

// BenchmarkSeatMap: seat-map reads of the 300-seat showtime (plus its block).
func BenchmarkSeatMap(b *testing.B) {
	e := benchSetup(b, hotShowtime())
	concurrency64(b)
	b.ResetTimer()
	start := time.Now()
	var reads atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m, err := e.store.SeatMap(context.Background(), 1)
			if err != nil || len(m.Seats) != 300 {
				b.Fatalf("seat map: %d seats, %v", len(m.Seats), err)
			}
			reads.Add(1)
		}
	})
	b.ReportMetric(float64(reads.Load())/time.Since(start).Seconds(), "reads/s")
}

// seatsOf is every seat code of st, in map order from the first.
func seatsOf(st booking.Showtime) []string {
	var out []string
	for _, row := range st.RowLabels() {
		for n := 1; n <= st.SeatsPerRow; n++ {
			out = append(out, fmt.Sprintf("%s%d", row, n))
		}
	}
	return out
}
