package queue_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// joinMany joins n fans with a few workers and returns their results.
func joinMany(t testing.TB, s *queue.Store, set line.Settings, n int) []line.JoinResult {
	t.Helper()
	return joinManyOf(t, s, event, set, n)
}

// joinManyOf is joinMany for event ev.
func joinManyOf(t testing.TB, s *queue.Store, ev string, set line.Settings, n int) []line.JoinResult {
	t.Helper()
	out := make([]line.JoinResult, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				r, err := s.Join(context.Background(), ev, set)
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

// TestReplicasRace runs three admitter replicas against one line while fans
// complete at random, 0–1 s after their admission. First the cap is far
// above what they hold, and the admissions over five seconds are checked
// against the token bucket's own accounts, by Redis's clock
// (queuetest.RateError: not one token spent twice, none lost but to a
// stalled tick); then the cap comes down to 200, the fans stop completing,
// and the cap must hold while the replicas race to fill it. Afterwards
// every ticket is in exactly one place. On a single node, on the cluster
// (the line on one of three masters), and with the line over three shards,
// one per master (the merged front, the lease and the fencing under three
// replicas).
func TestReplicasRace(t *testing.T) {
	t.Parallel()
	for _, b := range append(backends, sharded[1]) {
		t.Run(b.name, func(t *testing.T) { testReplicasRace(t, setupOn(t, b)) })
	}
}

func testReplicasRace(t *testing.T, e env) {
	ctx := context.Background()
	const n, rate, capped = 5000, 50, 200
	set := e.open()
	// The cap binds nowhere near while the rate is measured: tokens a
	// binding cap kept waiting would overflow the bucket.
	set.AdmitPerSecond, set.MaxActive = rate, n
	set.AbandonAfter = time.Hour // fans here do not poll
	joined := joinMany(t, e.store, set, n)
	order := e.state(t)

	var (
		stops      []func() // the background actors' stops
		settings   atomic.Pointer[line.Settings]
		lowered    [3]atomic.Bool // replica i ticked with the lowered cap
		armed      atomic.Bool    // the cap is down for every replica: sample it
		ticks      atomic.Int64
		tickSum    atomic.Int64
		completing atomic.Bool
		maxActive  atomic.Int64
		twice      atomic.Int64
	)
	settings.Store(&set)
	completing.Store(true)
	// every runs f every d() in a goroutine of its own until the end.
	every := func(d func() time.Duration, f func()) { stops = append(stops, testenv.Repeat(d, f)) }
	for replica := range 3 {
		every(func() time.Duration { return time.Duration(40+rand.IntN(20)) * time.Millisecond }, func() {
			s := settings.Load()
			r, err := e.store.Tick(ctx, event, *s)
			if err != nil {
				t.Errorf("replica %d: %v", replica, err)
				return
			}
			ticks.Add(1)
			tickSum.Add(r.Admitted)
			if s.MaxActive == capped {
				lowered[replica].Store(true)
			}
		})
	}
	// The sampler: the number of live actives at many instants, once every
	// replica ticks under the lowered cap.
	every(func() time.Duration { return 5 * time.Millisecond }, func() {
		if !armed.Load() {
			return
		}
		if c, err := e.store.Counts(ctx, event); err == nil {
			for m := maxActive.Load(); c.Active > m && !maxActive.CompareAndSwap(m, c.Active); m = maxActive.Load() {
			}
		}
	})
	// The fans: each admitted fan completes 0–1 s after we first see it.
	completed := map[string]bool{}
	var mu sync.Mutex
	activeKey := order.Keys().Active
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
	stop := func() {
		for _, f := range stops {
			f()
		}
		stops = nil
	}
	defer stop()
	await := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(limit); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after %s", what, limit)
			}
		}
	}

	// The rate: the admissions over five seconds of Redis's clock against
	// the bucket's own accounts, once the replicas admit.
	await("a first admission", 30*time.Second, func() bool { return order.Admissions().Admitted > 0 })
	watch := order.WatchTicks()
	a := order.Admissions()
	time.Sleep(5 * time.Second)
	b := order.Admissions()
	watch.Stop()
	span := b.At.Sub(a.At).Seconds()
	lost := watch.Lost(a, b, rate)
	t.Logf("admitted %d over %.2fs (%.2f/s; the bucket held %.2f then %.2f tokens; late ticks may have lost %.2f) by 3 replicas",
		b.Admitted-a.Admitted, span, float64(b.Admitted-a.Admitted)/span, a.Tokens, b.Tokens, lost)
	if err := queuetest.RateError(a, b, rate, lost); err != nil {
		t.Error(err)
	}

	// The cap: down to 200, the fans stop completing once as few are in,
	// and it holds while the replicas race to fill it.
	low := set
	low.MaxActive = capped
	settings.Store(&low)
	await("every replica ticking under the lowered cap, at most that many in", 30*time.Second, func() bool {
		return lowered[0].Load() && lowered[1].Load() && lowered[2].Load() && order.ActiveCount() <= capped
	})
	completing.Store(false)
	armed.Store(true)
	await("the cap filled", time.Minute, func() bool { return order.ActiveCount() == capped })
	full := ticks.Load()
	await("60 ticks at the cap", time.Minute, func() bool { return ticks.Load() >= full+60 })
	stop()
	t.Logf("%d ticks by 3 replicas; max active sampled %d under the cap", ticks.Load(), maxActive.Load())
	if m := maxActive.Load(); m > capped {
		t.Errorf("max active sampled %d; want ≤ %d", m, capped)
	}
	if tw := twice.Load(); tw != 0 {
		t.Errorf("%d completed tickets were active again: admitted twice", tw)
	}

	// The books, in Redis.
	active := order.Active()
	waiting := e.line(t)
	if len(active) != capped {
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
