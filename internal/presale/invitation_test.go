package presale_test

import (
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// An invitation buys once (DESIGN.md, "Fair play, third round"): the
// line notes a confirmed booking's account as it frees the place
// (queue.Store.CompleteFor, what the booking core's relay calls), and the
// presale's gate refuses that account a new place in its window.

// invitedSale is a drawn presale whose accounts are all invited, their
// window open now, on a line of shards (passthrough: let in at once).
func invitedSale(t *testing.T, shards int, accounts ...string) *sale {
	t.Helper()
	_, c := testenv.Redis(t)
	return invitedSaleOn(t, c, shards, accounts...)
}

// invitedSaleOn is invitedSale on the Redis (a server, or a Cluster) of c.
func invitedSaleOn(t *testing.T, c redis.UniversalClient, shards int, accounts ...string) *sale {
	t.Helper()
	s := newSaleOn(t, c, plan(time.Second, 0, time.Hour, len(accounts), len(accounts)))
	for _, a := range accounts {
		s.register(a)
	}
	s.closeAndDraw()
	s.set.Mode, s.set.Shards = line.ModePassthrough, shards
	return s
}

// An account whose booking was confirmed is refused a new place in its
// window, from any device, and nothing changes; the top-ups count its
// invitation used. An account whose place ended without a booking (it
// left) joins again, as before.
func TestAnInvitationBuysOnce(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			s := invitedSale(t, shards, "alice", "bob")
			r, err := s.join("alice")
			if err != nil || r.State != line.Admitted {
				t.Fatalf("alice in her window: %+v, %v", r, err)
			}
			if err := s.line.CompleteFor(s.ctx, s.event, r.ID, "alice"); err != nil {
				t.Fatal(err)
			}
			store := queuetest.Of(t, s.rdb, s.event)
			before := store.Dump()
			for try := range 2 { // her phone, then her laptop: one account
				if again, err := s.join("alice"); !errors.Is(err, presale.ErrInvitationUsed) {
					t.Fatalf("alice joins again after her booking (%d): %+v, %v; want ErrInvitationUsed", try, again, err)
				}
			}
			if !maps.Equal(store.Dump(), before) {
				t.Fatal("a refused join changed the line's keys")
			}
			states, err := s.line.PlaceStates(s.ctx, s.event, []string{"alice", "bob"})
			if err != nil || states[0] != line.BookedPlace || states[1] != line.NoPlace {
				t.Fatalf("place states %v, %v; want alice's booked, bob none", states, err)
			}

			rb, err := s.join("bob")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.line.Leave(s.ctx, s.event, rb.Ticket); err != nil {
				t.Fatal(err)
			}
			again, err := s.join("bob")
			if err != nil || again.ID == rb.ID {
				t.Fatalf("bob joins again after leaving without a booking: %+v, %v; want a new place", again, err)
			}
			// A booking of an earlier place counts too: bob's first place
			// pays late (its payment settled after he left and came back).
			if err := s.line.CompleteFor(s.ctx, s.event, rb.ID, "bob"); err != nil {
				t.Fatal(err)
			}
			if err := s.line.Leave(s.ctx, s.event, again.Ticket); err != nil {
				t.Fatal(err)
			}
			if _, err := s.join("bob"); !errors.Is(err, presale.ErrInvitationUsed) {
				t.Fatalf("bob joins a third time after his first place's booking: %v; want ErrInvitationUsed", err)
			}
		})
	}
}

// The booking's confirmation raced by the account's joins from 32
// devices: each join resumes the place (before) or is refused (after);
// none ever makes a second place.
func TestAnInvitationBuysOnceRaced(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			s := invitedSale(t, shards, "alice")
			r, err := s.join("alice")
			if err != nil {
				t.Fatal(err)
			}
			racedJoins(t, s, r, func() error { return s.line.CompleteFor(s.ctx, s.event, r.ID, "alice") })
		})
	}
}

// The sale itself uses the invitation: the booking core tells the line a
// confirmed hold (queue.Store.BookedFor), which frees the fan's place at
// once, long before its relay's CompleteFor. Raced by the account's joins
// from 32 devices, each join resumes the place (before) or is refused
// (after); none makes a second place, a join after the sale and before the
// relay is refused, and the relay's completion then changes nothing. On
// one shard, on three, and on a Redis Cluster with the line over its
// three masters (the sale's script touches the event's keys only).
func TestAnInvitationBuysOnceAtTheSale(t *testing.T) {
	_, cluster := testenv.Cluster(t)
	for _, tc := range []struct {
		name   string
		c      redis.UniversalClient
		shards int
	}{{"shards=1", nil, 1}, {"shards=3", nil, 3}, {"cluster/shards=3", cluster, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			if c == nil {
				_, c = testenv.Redis(t)
			}
			s := invitedSaleOn(t, c, tc.shards, "alice")
			r, err := s.join("alice")
			if err != nil || r.State != line.Admitted {
				t.Fatalf("alice in her window: %+v, %v", r, err)
			}
			// The booking core publishes the event's places, and alice holds one.
			mark, err := s.line.SyncMark(s.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.line.SyncInventory(s.ctx, s.event, mark, line.Snapshot{Free: 10}); err != nil {
				t.Fatal(err)
			}
			if known, err := s.line.Reserve(s.ctx, s.event, "h1", r.ID, 1); err != nil || !known {
				t.Fatalf("reserve: %v, %v", known, err)
			}

			racedJoins(t, s, r, func() error { return s.line.BookedFor(s.ctx, s.event, "h1", "alice") })
			store := queuetest.Of(t, s.rdb, s.event)
			if store.IsActive(r.ID) {
				t.Fatal("alice's place is still active after the sale")
			}
			if again, err := s.join("alice"); !errors.Is(err, presale.ErrInvitationUsed) {
				t.Fatalf("alice joins after the sale, before its relay: %+v, %v; want ErrInvitationUsed", again, err)
			}
			states, err := s.line.PlaceStates(s.ctx, s.event, []string{"alice"})
			if err != nil || states[0] != line.BookedPlace {
				t.Fatalf("alice's place before the relay: %v, %v; want booked", states, err)
			}
			before := store.Dump()
			for try := range 2 { // the relay publishes each confirmation at least once
				if err := s.line.CompleteFor(s.ctx, s.event, r.ID, "alice"); err != nil {
					t.Fatalf("relay's completion (%d): %v", try, err)
				}
			}
			if !maps.Equal(store.Dump(), before) {
				t.Fatal("the relay's completion changed the line's keys; the sale had noted it all")
			}
		})
	}
}

// racedJoins races use (the invitation used: the sale, or its relay) with
// 32 joins of alice, whose place is r: each join resumes the place (before)
// or is refused (after), and none makes a second place.
func racedJoins(t *testing.T, s *sale, r line.JoinResult, use func() error) {
	t.Helper()
	var resumed, refused atomic.Int64
	testenv.Race(33, func(i int) {
		if i == 0 {
			if err := use(); err != nil {
				t.Errorf("the invitation used: %v", err)
			}
			return
		}
		again, err := s.join("alice")
		switch {
		case err == nil && again.ID == r.ID:
			resumed.Add(1)
		case errors.Is(err, presale.ErrInvitationUsed):
			refused.Add(1)
		default:
			t.Errorf("join %d: %+v, %v; want the same place or ErrInvitationUsed", i, again, err)
		}
	})
	if n := queuetest.Of(t, s.rdb, s.event).Stat("seq"); n != 1 {
		t.Fatalf("%d places made; want alice's one (resumed %d, refused %d)", n, resumed.Load(), refused.Load())
	}
	t.Logf("resumed %d, refused %d", resumed.Load(), refused.Load())
}
