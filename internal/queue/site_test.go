package queue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// The way back to a site behind the room is kept with the ticket, and a
// later one replaces it; a forged ticket keeps nothing and asks nothing of
// Redis.
func TestReturnKeptWithTheTicket(t *testing.T) {
	onEachLayout(t, func(t *testing.T, e env) {
		ctx := context.Background()
		set := e.open()
		tk := join(t, e.store, set)
		if got, err := e.store.Return(ctx, event, tk.ID); err != nil || got != "" {
			t.Fatalf("Return before any = %q, %v; want none", got, err)
		}
		for _, u := range []string{"https://shop.example/a", "https://shop.example/b?x=1"} {
			if err := e.store.SetReturn(ctx, event, tk.ID, u, time.Minute); err != nil {
				t.Fatal(err)
			}
			if got, err := e.store.Return(ctx, event, tk.ID); err != nil || got != u {
				t.Errorf("Return = %q, %v; want %q", got, err, u)
			}
		}
		e.sendsNothing(t, "malformed ids", func() {
			if err := e.store.SetReturn(ctx, event, tk.ID+"x", "https://evil.example/", time.Minute); !errors.Is(err, line.ErrInvalidTicket) {
				t.Errorf("SetReturn of a malformed id = %v; want ErrInvalidTicket", err)
			}
			if got, _ := e.store.Return(ctx, event, "not an id"); got != "" {
				t.Errorf("Return of a malformed id = %q", got)
			}
		})
	})
}

// A return token is spent once, however many proxies race to trade it,
// and only while its ticket is active: one that is not spends nothing.
func TestReturnTokenSpentOnce(t *testing.T) {
	onEachLayout(t, func(t *testing.T, e env) {
		ctx := context.Background()
		set := e.open()
		waiting := join(t, e.store, set)
		if _, active, err := e.store.SpendReturn(ctx, event, waiting.ID, "AAAAAAAAAAAAAAAAAAAAAA", time.Minute, set.AccessTTL); err != nil || active {
			t.Fatalf("spend for a waiting ticket = %v, %v; want not active", active, err)
		}
		set.MaxActive = 1
		tick(t, e.store, set)
		time.Sleep(50 * time.Millisecond)
		tick(t, e.store, set)
		st := status(t, e.store, waiting.Ticket, set)
		if st.State != line.Admitted {
			t.Fatalf("fan %s; want admitted", st.State)
		}
		// The token the waiting fan could not spend is still good now.
		var won, spent atomic.Int32
		testenv.Race(16, func(int) {
			until, active, err := e.store.SpendReturn(ctx, event, waiting.ID, "AAAAAAAAAAAAAAAAAAAAAA", time.Minute, set.AccessTTL)
			switch {
			case err == nil && active:
				won.Add(1)
				if d := until.Sub(st.ActiveUntil); d < -time.Millisecond || d > time.Millisecond {
					t.Errorf("spent until %v; want the ticket's window, %v", until, st.ActiveUntil)
				}
			case errors.Is(err, line.ErrTokenSpent):
				spent.Add(1)
			default:
				t.Errorf("SpendReturn = %v, %v", active, err)
			}
		})
		if won.Load() != 1 || spent.Load() != 15 {
			t.Errorf("16 racing spends: %d won, %d told spent; want 1 and 15", won.Load(), spent.Load())
		}
		if _, active, err := e.store.SpendReturn(ctx, event, waiting.ID, "BBBBBBBBBBBBBBBBBBBBBB", time.Minute, set.AccessTTL); err != nil || !active {
			t.Errorf("another token = %v, %v; want spent", active, err)
		}
		if err := e.store.Revoke(ctx, event, waiting.ID); err != nil {
			t.Fatal(err)
		}
		if _, active, err := e.store.SpendReturn(ctx, event, waiting.ID, "CCCCCCCCCCCCCCCCCCCCCC", time.Minute, set.AccessTTL); err != nil || active {
			t.Errorf("spend after a revoke = %v, %v; want not active", active, err)
		}
		e.sendsNothing(t, "malformed ids", func() {
			for _, bad := range [][2]string{{"x", "CCCCCCCCCCCCCCCCCCCCCC"}, {waiting.ID, "short"}, {waiting.ID, "CCCCCCCCCCCCCCCCCCCCC/"}} {
				if _, active, err := e.store.SpendReturn(ctx, event, bad[0], bad[1], time.Minute, set.AccessTTL); err != nil || active {
					t.Errorf("SpendReturn(%q, %q) = %v, %v; want not active", bad[0], bad[1], active, err)
				}
			}
		})
	})
}

// Trading a return token is the fan at the site: it claims a place let in
// but not yet claimed, as a poll would, so the place runs its whole
// access_ttl from the trade instead of lapsing at its abandon deadline; a
// place claimed already keeps its window (a second trade stretches
// nothing).
func TestSpendingAReturnTokenClaimsThePlace(t *testing.T) {
	onEachLayout(t, func(t *testing.T, e env) {
		ctx := context.Background()
		set := e.open()
		fan := join(t, e.store, set)
		k := rdb.KeysOf(event)
		var before float64
		for end := time.Now().Add(5 * time.Second); before == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("never admitted")
			}
			tick(t, e.store, set)
			before, _ = e.rdb.ZScore(ctx, k.Active, fan.ID).Result()
		}
		if c, _ := e.rdb.HGet(ctx, k.Claims, fan.ID).Result(); c != "1" {
			t.Fatalf("claims of a place let in: %q; want 1 (unclaimed)", c)
		}
		at := time.Now()
		until, active, err := e.store.SpendReturn(ctx, event, fan.ID, "EEEEEEEEEEEEEEEEEEEEEE", time.Minute, set.AccessTTL)
		if err != nil || !active {
			t.Fatalf("spend = %v, %v; want active", active, err)
		}
		if d := until.Sub(at); d < set.AccessTTL-2*time.Second || d > set.AccessTTL+2*time.Second {
			t.Errorf("spent until %v from now; want the whole access_ttl, %v (the deadline was %v away)", d, set.AccessTTL, time.UnixMilli(int64(before)).Sub(at))
		}
		if c, _ := e.rdb.HGet(ctx, k.Claims, fan.ID).Int64(); c < at.Unix()-2 {
			t.Errorf("claims after the trade: %d; want the trade's time (unix s)", c)
		}
		if score, _ := e.rdb.ZScore(ctx, k.Active, fan.ID).Result(); int64(score) != until.UnixMilli() {
			t.Errorf("the place's expiry %v; want the pass's, %v", int64(score), until.UnixMilli())
		}
		again, active, err := e.store.SpendReturn(ctx, event, fan.ID, "FFFFFFFFFFFFFFFFFFFFFF", time.Minute, 2*set.AccessTTL)
		if err != nil || !active || !again.Equal(until) {
			t.Errorf("a second trade: until %v, %v, %v; want the same window, %v", again, active, err, until)
		}
	})
}
