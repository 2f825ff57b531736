package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/queue"
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
