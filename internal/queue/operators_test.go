package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// Revoke takes a waiting ticket out of the line and an admitted one out of
// its place, on every layout; its place is then free and its fan's poll is
// expired; a second revoke, or one of a ticket never issued, is
// ErrUnknownTicket; a malformed id is refused before Redis.
func TestRevoke(t *testing.T) {
	onEachLayout(t, func(t *testing.T, e env) {
		ctx := context.Background()
		set := e.open()
		in, waiting := join(t, e.store, set), join(t, e.store, set)
		set.MaxActive = 1
		tick(t, e.store, set) // the bucket starts empty: the next tick has tokens
		time.Sleep(50 * time.Millisecond)
		tick(t, e.store, set)
		if st := status(t, e.store, in.Ticket, set); st.State != queue.Admitted {
			t.Fatalf("first fan %s; want admitted", st.State)
		}
		for _, tk := range []queue.JoinResult{in, waiting} {
			if err := e.store.Revoke(ctx, event, tk.ID); err != nil {
				t.Fatalf("revoke %s: %v", tk.ID, err)
			}
			if st := status(t, e.store, tk.Ticket, set); st.State != queue.Expired {
				t.Errorf("revoked ticket polls %s; want expired", st.State)
			}
			if ok, _ := e.store.Active(ctx, event, tk.ID); ok {
				t.Errorf("revoked ticket still active")
			}
			if err := e.store.Revoke(ctx, event, tk.ID); !errors.Is(err, queue.ErrUnknownTicket) {
				t.Errorf("second revoke = %v; want ErrUnknownTicket", err)
			}
		}
		c, err := e.store.Counts(ctx, event)
		if err != nil || c.Waiting != 0 || c.Active != 0 {
			t.Errorf("counts after revoking both = %+v, %v; want 0 waiting, 0 active", c, err)
		}
		checkBooks(t, e)
		before := e.cmds.n.Load()
		for _, id := range []string{"", "x", "1.short", "zz.AAAAAAAAAAAAAAAAAAAAAA/"} {
			if err := e.store.Revoke(ctx, event, id); !errors.Is(err, queue.ErrInvalidTicket) {
				t.Errorf("Revoke(%q) = %v; want ErrInvalidTicket", id, err)
			}
		}
		if n := e.cmds.n.Load() - before; n != 0 {
			t.Errorf("malformed ids sent %d commands to Redis; want 0", n)
		}
	})
}

// Overrides are read back as written; a drop succeeds only for the
// override read, so of many replicas dropping it at once exactly one does.
func TestOverrides(t *testing.T) {
	onEach(t, func(t *testing.T, e env) {
		ctx := context.Background()
		at := time.Now().UTC().Truncate(time.Millisecond)
		err := e.store.SetOverrides(ctx, event, map[string]queue.Override{
			queue.FieldAdmitPerSecond: {Value: "20", Base: "50", At: at},
			queue.FieldMode:           {Value: "paused", Base: "queue", At: at},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.store.Overrides(ctx, event)
		if err != nil || len(got) != 2 || got[queue.FieldAdmitPerSecond].Value != "20" || got[queue.FieldMode].Base != "queue" || !got[queue.FieldMode].At.Equal(at) {
			t.Fatalf("overrides = %+v, %v", got, err)
		}
		var dropped atomic.Int32
		testenv.Race(16, func(int) {
			if ok, err := e.store.DropOverride(ctx, event, queue.FieldMode, got[queue.FieldMode]); err != nil {
				t.Error(err)
			} else if ok {
				dropped.Add(1)
			}
		})
		if n := dropped.Load(); n != 1 {
			t.Errorf("%d replicas dropped the override; want exactly 1", n)
		}
		// A newer override is not dropped by one who read the old one.
		if err := e.store.SetOverrides(ctx, event, map[string]queue.Override{queue.FieldAdmitPerSecond: {Value: "30", Base: "50"}}, nil); err != nil {
			t.Fatal(err)
		}
		if ok, _ := e.store.DropOverride(ctx, event, queue.FieldAdmitPerSecond, got[queue.FieldAdmitPerSecond]); ok {
			t.Error("a stale read dropped a newer override")
		}
		if err := e.store.SetOverrides(ctx, event, nil, []string{queue.FieldAdmitPerSecond}); err != nil {
			t.Fatal(err)
		}
		if got, _ := e.store.Overrides(ctx, event); len(got) != 0 {
			t.Errorf("after clearing: %+v; want none", got)
		}
	})
}

// Adapt halves the factor while struggling (not below the floor), raises
// it by step when healthy (not above 1), keeps it without a signal, and
// moves at most once per interval however many replicas call at once.
func TestAdapt(t *testing.T) {
	onEach(t, func(t *testing.T, e env) {
		ctx := context.Background()
		const every = 300 * time.Millisecond
		step := func(s int) float64 {
			t.Helper()
			f, _, err := e.store.Adapt(ctx, event, s, every, 0.25, 0.1)
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
				if now, was, err := e.store.Adapt(ctx, event, 1, every, 0.25, 0.1); err == nil && now != was {
					moved.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := moved.Load(); n != 1 {
			t.Fatalf("%d replicas moved the factor in one interval; want 1", n)
		}
		if f, _ := e.store.AdaptiveFactor(ctx, event); f != 0.5 {
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
	onEach(t, func(t *testing.T, e env) {
		ctx := context.Background()
		for i := range 3 {
			if err := e.store.Audit(ctx, queue.AuditEntry{Event: event, Change: fmt.Sprintf("change %d", i), Source: "api"}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := e.store.AuditOnce(ctx, "reload-abc", time.Minute, queue.AuditEntry{Event: event, Change: "reload", Source: "config"}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, err := e.store.AuditLog(ctx, 10)
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
		if got, _ := e.store.AuditLog(ctx, 2); len(got) != 2 {
			t.Errorf("limit 2 gave %d entries", len(got))
		}
	})
}

// The booking core's summaries: each replica's newest kept, stale ones
// ignored by readers and dropped by the next publisher.
func TestBookingHealth(t *testing.T) {
	onEach(t, func(t *testing.T, e env) {
		ctx := context.Background()
		now := time.Now()
		for _, h := range []queue.BookingHealth{
			{Replica: "c", At: now.Add(-2 * time.Minute)},
			{Replica: "b", HoldP99: 5 * time.Millisecond, Holds: 3, Requests: 9, At: now.Add(-10 * time.Second)},
			{Replica: "a", HoldP99: 800 * time.Millisecond, Holds: 10, Requests: 40, Errors: 1, At: now},
		} {
			if err := e.store.PublishBookingHealth(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
		got, err := e.store.BookingHealthOf(ctx, now.Add(-5*time.Second))
		if err != nil || len(got) != 1 || got[0].Replica != "a" || got[0].HoldP99 != 800*time.Millisecond || got[0].Errors != 1 {
			t.Fatalf("fresh summaries = %+v, %v; want replica a's alone", got, err)
		}
		all, _ := e.store.BookingHealthOf(ctx, time.Time{})
		if len(all) != 2 {
			t.Errorf("%d summaries kept; want 2 (c was stale and dropped)", len(all))
		}
		if err := e.store.RemoveBookingHealth(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if got, _ := e.store.BookingHealthOf(ctx, now.Add(-5*time.Second)); len(got) != 0 {
			t.Errorf("after a stopped: %+v", got)
		}
	})
}
