package queue_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// joinMany joins n fans with a few workers and returns their results.
func joinMany(t testing.TB, s *queue.Store, set queue.Settings, n int) []queue.JoinResult {
	t.Helper()
	out := make([]queue.JoinResult, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				r, err := s.Join(context.Background(), event, set)
				if err != nil {
					errs <- err
					return
				}
				out[i] = r
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("join: %v", err)
	}
	return out
}

// raceTimes are the phases of the replicas race: warm-up, the window over
// which the rate is measured (fans complete, the cap never binds), and the
// time after fans stop completing, for the cap to fill and hold.
type raceTimes struct{ warm, measure, capped time.Duration }

// TestReplicasRace runs three admitter replicas against one line while fans
// complete at random: first fans complete within 0–1 s of admission (the cap
// never binds), then they stop completing and the cap must hold. Afterwards
// every ticket is in exactly one place. 20 s on a single node; 13 s on the
// cluster, where the line lives on one of three masters, and 13 s more with
// the line over three shards, one per master. The rate is measured over 8 s
// or more: a tick late at either end of the window (a loaded machine) moves
// the figure by its lateness times the rate.
func TestReplicasRace(t *testing.T) {
	t.Parallel()
	times := map[string]raceTimes{
		"single":  {2 * time.Second, 10 * time.Second, 8 * time.Second},
		"cluster": {1 * time.Second, 8 * time.Second, 4 * time.Second},
		// One line over three shards, one per master: the merged front,
		// the lease and the fencing under three replicas.
		"cluster/3-shards": {1 * time.Second, 8 * time.Second, 4 * time.Second},
	}
	for _, b := range append(backends, sharded[1]) {
		t.Run(b.name, func(t *testing.T) { testReplicasRace(t, setupOn(t, b), times[b.name]) })
	}
}

func testReplicasRace(t *testing.T, e env, times raceTimes) {
	ctx := context.Background()
	set := e.open()
	set.AdmitPerSecond, set.MaxActive = 50, 200
	set.AbandonAfter = time.Hour // fans here do not poll
	const n = 5000
	joined := joinMany(t, e.store, set, n)

	var (
		stops      []func() // the background actors' stops
		ticks      atomic.Int64
		tickSum    atomic.Int64
		tickErrs   atomic.Int64
		completing atomic.Bool
		maxActive  atomic.Int64
		twice      atomic.Int64
	)
	completing.Store(true)
	// every runs f every d() in a goroutine of its own until the end.
	every := func(d func() time.Duration, f func()) { stops = append(stops, testenv.Repeat(d, f)) }
	for replica := range 3 {
		every(func() time.Duration { return time.Duration(40+rand.IntN(20)) * time.Millisecond }, func() {
			r, err := e.store.Tick(ctx, event, set)
			if err != nil {
				tickErrs.Add(1)
				t.Errorf("replica %d: %v", replica, err)
				return
			}
			ticks.Add(1)
			tickSum.Add(r.Admitted)
		})
	}
	// The sampler: the number of live actives at many instants.
	every(func() time.Duration { return 5 * time.Millisecond }, func() {
		if c, err := e.store.Counts(ctx, event); err == nil {
			for m := maxActive.Load(); c.Active > m && !maxActive.CompareAndSwap(m, c.Active); m = maxActive.Load() {
			}
		}
	})
	// The fans: each admitted fan completes 0–1 s after we first see it, so
	// that some 25–50 are active at 50/s, far below the cap of 200, however
	// slowly a loaded machine runs this loop.
	completed := map[string]bool{}
	var mu sync.Mutex
	activeKey := e.state(t).Keys().Active
	due := map[string]time.Time{} // the fans' goroutine's own
	every(func() time.Duration { return 10 * time.Millisecond }, func() {
		if !completing.Load() {
			return
		}
		ids, err := e.rdb.ZRange(ctx, activeKey, 0, -1).Result()
		if err != nil {
			return
		}
		now := time.Now()
		for _, id := range ids {
			mu.Lock()
			if completed[id] {
				twice.Add(1) // completed, yet active again: admitted twice
			}
			mu.Unlock()
			d, ok := due[id]
			if !ok {
				due[id] = now.Add(time.Duration(rand.Int64N(int64(time.Second))))
				continue
			}
			if now.After(d) {
				if err := e.store.Complete(ctx, event, id); err == nil {
					mu.Lock()
					completed[id] = true
					mu.Unlock()
					delete(due, id)
				}
			}
		}
	})

	// The achieved rate while the cap is not binding, by Redis's clock:
	// each count with the time of the tick that left it, read together (a
	// count read a moment after the clock, on a loaded machine, made the
	// rate look 6% high).
	sample := func() (float64, int64) {
		a, at := e.state(t).Admitted()
		return float64(at.UnixMicro()) / 1e6, a
	}
	time.Sleep(times.warm)
	t0, a0 := sample()
	time.Sleep(times.measure)
	t1, a1 := sample()
	completing.Store(false)
	time.Sleep(times.capped)
	for _, stop := range stops {
		stop()
	}

	rate := float64(a1-a0) / (t1 - t0)
	t.Logf("achieved %.2f admissions/s over %.1fs (%d ticks by 3 replicas), max active sampled %d",
		rate, t1-t0, ticks.Load(), maxActive.Load())
	if math.Abs(rate-50)/50 > 0.03 {
		t.Errorf("achieved rate %.2f/s; want 50/s ± 3%%", rate)
	}
	if m := maxActive.Load(); m > 200 {
		t.Errorf("max active sampled %d; want ≤ 200", m)
	}
	if tw := twice.Load(); tw != 0 {
		t.Errorf("%d completed tickets were active again: admitted twice", tw)
	}

	// The books, in Redis.
	active := e.state(t).Active()
	waiting := e.line(t)
	if len(active) != 200 {
		t.Errorf("%d active at the end with nobody completing; want the cap, 200", len(active))
	}
	place := map[string]string{}
	for name, ids := range map[string][]string{"active": active, "waiting": waiting} {
		for _, id := range ids {
			if p, dup := place[id]; dup {
				t.Errorf("ticket %s both %s and %s", id, p, name)
			}
			place[id] = name
		}
	}
	for id := range completed {
		if p, dup := place[id]; dup {
			t.Errorf("completed ticket %s is %s again", id, p)
		}
		place[id] = "completed"
	}
	for _, j := range joined {
		if _, ok := place[j.ID]; !ok {
			t.Errorf("ticket %s lost: neither waiting, active nor completed", j.ID)
		}
	}
	st := checkBooks(t, e)
	if st.Admitted != tickSum.Load() || st.Admitted != int64(len(completed)+len(active)) {
		t.Errorf("admitted counter %d, ticks admitted %d, completed+active %d; want all equal",
			st.Admitted, tickSum.Load(), len(completed)+len(active))
	}
	if st.Joined != n {
		t.Errorf("joined %d; want %d", st.Joined, n)
	}
}
