package presale_test

import (
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

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
	s := newSale(t, plan(time.Second, 0, time.Hour, len(accounts), len(accounts)))
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
			var resumed, refused atomic.Int64
			testenv.Race(33, func(i int) {
				if i == 0 {
					if err := s.line.CompleteFor(s.ctx, s.event, r.ID, "alice"); err != nil {
						t.Errorf("complete: %v", err)
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
		})
	}
}
