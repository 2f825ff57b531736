package operators_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

const event = "premiere"

// onEach runs test on a private redis-server and on a private three-master
// Redis Cluster.
func onEach(t *testing.T, test func(t *testing.T, s *operators.Store)) {
	t.Helper()
	for _, b := range []struct {
		name   string
		client func(t testing.TB) redis.UniversalClient
	}{
		{"single", func(t testing.TB) redis.UniversalClient { _, c := testenv.Redis(t); return c }},
		{"cluster", func(t testing.TB) redis.UniversalClient { _, c := testenv.Cluster(t); return c }},
	} {
		t.Run(b.name, func(t *testing.T) { test(t, operators.New(rdb.New(b.client(t)))) })
	}
}

// Overrides are read back as written; a drop succeeds only for the
// override read, so of many replicas dropping it at once exactly one does.
func TestOverrides(t *testing.T) {
	onEach(t, func(t *testing.T, s *operators.Store) {
		ctx := context.Background()
		at := time.Now().UTC().Truncate(time.Millisecond)
		err := s.SetOverrides(ctx, event, map[string]operators.Override{
			operators.FieldAdmitPerSecond: {Value: "20", Base: "50", At: at},
			operators.FieldMode:           {Value: "paused", Base: "queue", At: at},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Overrides(ctx, event)
		if err != nil || len(got) != 2 || got[operators.FieldAdmitPerSecond].Value != "20" || got[operators.FieldMode].Base != "queue" || !got[operators.FieldMode].At.Equal(at) {
			t.Fatalf("overrides = %+v, %v", got, err)
		}
		var dropped atomic.Int32
		testenv.Race(16, func(int) {
			if ok, err := s.DropOverride(ctx, event, operators.FieldMode, got[operators.FieldMode]); err != nil {
				t.Error(err)
			} else if ok {
				dropped.Add(1)
			}
		})
		if n := dropped.Load(); n != 1 {
			t.Errorf("%d replicas dropped the override; want exactly 1", n)
		}
		// A newer override is not dropped by one who read the old one.
		if err := s.SetOverrides(ctx, event, map[string]operators.Override{operators.FieldAdmitPerSecond: {Value: "30", Base: "50"}}, nil); err != nil {
			t.Fatal(err)
		}
		if ok, _ := s.DropOverride(ctx, event, operators.FieldAdmitPerSecond, got[operators.FieldAdmitPerSecond]); ok {
			t.Error("a stale read dropped a newer override")
		}
		if err := s.SetOverrides(ctx, event, nil, []string{operators.FieldAdmitPerSecond}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Overrides(ctx, event); len(got) != 0 {
			t.Errorf("after clearing: %+v; want none", got)
		}
	})
}

// Adapt halves the factor while struggling (not below the floor), raises
// it by step when healthy (not above 1), keeps it without a signal, and
// moves at most once per interval however many replicas call at once.
func TestAdapt(t *testing.T) {
	onEach(t, func(t *testing.T, s *operators.Store) {
		ctx := context.Background()
		const every = 300 * time.Millisecond
		step := func(struggling int) float64 {
			t.Helper()
			f, _, err := s.Adapt(ctx, event, struggling, every, 0.25, 0.1)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		var moved atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if now, was, err := s.Adapt(ctx, event, 1, every, 0.25, 0.1); err == nil && now != was {
					moved.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := moved.Load(); n != 1 {
			t.Fatalf("%d replicas moved the factor in one interval; want 1", n)
		}
		if f, _ := s.AdaptiveFactor(ctx, event); f != 0.5 {
			t.Fatalf("factor = %v; want 0.5", f)
		}
		for i, want := range []struct {
			signal int
			factor float64
		}{{1, 0.25}, {1, 0.125}, {1, 0.1}, {1, 0.1}, {-1, 0.1}, {0, 0.35}, {0, 0.6}, {-1, 0.6}, {0, 0.85}, {0, 1}, {0, 1}} {
			time.Sleep(every + 20*time.Millisecond)
			if got := step(want.signal); fmt.Sprintf("%.4f", got) != fmt.Sprintf("%.4f", want.factor) {
				t.Errorf("step %d (signal %d): factor %v; want %v", i, want.signal, got, want.factor)
			}
		}
	})
}

// The audit trail reads newest first; an entry with a once key is
// appended once however many replicas append it.
func TestAudit(t *testing.T) {
	onEach(t, func(t *testing.T, s *operators.Store) {
		ctx := context.Background()
		for i := range 3 {
			if err := s.Audit(ctx, operators.AuditEntry{Event: event, Change: fmt.Sprintf("change %d", i), Source: "api"}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.AuditOnce(ctx, "reload-abc", time.Minute, operators.AuditEntry{Event: event, Change: "reload", Source: "config"}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, err := s.AuditLog(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var changes []string
		for _, g := range got {
			changes = append(changes, g.Change)
			if g.Event != event || g.At.IsZero() || time.Since(g.At) > time.Minute {
				t.Errorf("entry %+v: want event %s and a recent time", g, event)
			}
		}
		if want := "[reload change 2 change 1 change 0]"; fmt.Sprint(changes) != want {
			t.Errorf("audit = %v; want %s", changes, want)
		}
		if got, _ := s.AuditLog(ctx, 2); len(got) != 2 {
			t.Errorf("limit 2 gave %d entries", len(got))
		}
	})
}

// The booking core's summaries: each replica's newest kept, stale ones
// ignored by readers and dropped by the next publisher.
func TestBookingHealth(t *testing.T) {
	onEach(t, func(t *testing.T, s *operators.Store) {
		ctx := context.Background()
		now := time.Now()
		for _, h := range []operators.BookingHealth{
			{Replica: "c", At: now.Add(-2 * time.Minute)},
			{Replica: "b", HoldP99: 5 * time.Millisecond, Holds: 3, Requests: 9, At: now.Add(-10 * time.Second)},
			{Replica: "a", HoldP99: 800 * time.Millisecond, Holds: 10, Requests: 40, Errors: 1, At: now},
		} {
			if err := s.PublishBookingHealth(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.BookingHealthOf(ctx, now.Add(-5*time.Second))
		if err != nil || len(got) != 1 || got[0].Replica != "a" || got[0].HoldP99 != 800*time.Millisecond || got[0].Errors != 1 {
			t.Fatalf("fresh summaries = %+v, %v; want replica a's alone", got, err)
		}
		all, _ := s.BookingHealthOf(ctx, time.Time{})
		if len(all) != 2 {
			t.Errorf("%d summaries kept; want 2 (c was stale and dropped)", len(all))
		}
		if err := s.RemoveBookingHealth(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.BookingHealthOf(ctx, now.Add(-5*time.Second)); len(got) != 0 {
			t.Errorf("after a stopped: %+v", got)
		}
	})
}
