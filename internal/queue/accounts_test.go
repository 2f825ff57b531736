package queue_test

import (
	"context"
	"sync"
	"testing"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// joinAccountRace has n joins for account released together and returns
// their results.
func joinAccountRace(t *testing.T, e env, set line.Settings, account string, n int) []line.JoinResult {
	t.Helper()
	var (
		mu   sync.Mutex
		out  []line.JoinResult
		errs []error
	)
	testenv.Race(n, func(int) {
		r, err := e.store.JoinWith(context.Background(), event, set, line.JoinOptions{Account: account})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		out = append(out, r)
	})
	if len(errs) > 0 {
		t.Fatalf("%d of %d joins failed, first: %v", len(errs), n, errs[0])
	}
	return out
}

// One place per account: 64 joins for one account released together (many
// devices, many gateways) make exactly one place, which every join answers
// with the very same ticket; Redis holds one ticket in line and the books
// balance. Other fans and another account are not affected. Once the place
// is gone (left), the account's next join gets a new one, once.
func TestOnePlacePerAccount(t *testing.T) {
	onEachLayout(t, func(t *testing.T, e env) {
		ctx := context.Background()
		set := e.open()
		join(t, e.store, set) // a fan without an account, in front
		got := joinAccountRace(t, e, set, "fan-1", 64)
		fresh := 0
		for _, r := range got {
			if !r.Resumed {
				fresh++
			}
			if r.Ticket != got[0].Ticket || r.ID != got[0].ID {
				t.Fatalf("join answered ticket %s (%s); another answered %s (%s): want one ticket", r.ID, r.Ticket, got[0].ID, got[0].Ticket)
			}
			if r.State != line.Waiting || r.Account != "fan-1" {
				t.Fatalf("join = %+v; want waiting, account fan-1", r)
			}
		}
		if fresh != 1 {
			t.Errorf("%d joins made a place; want exactly 1", fresh)
		}
		order := e.line(t)
		if len(order) != 2 || order[1] != got[0].ID {
			t.Fatalf("line = %v; want the anonymous fan and %s", order, got[0].ID)
		}
		if st := checkBooks(t, e); st.Joined != 2 {
			t.Errorf("joined %d; want 2", st.Joined)
		}
		st, err := e.store.Status(ctx, event, got[0].Ticket, set)
		if err != nil || st.State != line.Waiting || st.Account != "fan-1" || st.Position.Position != 2 {
			t.Fatalf("status = %+v, %v; want waiting at 2, account fan-1", st, err)
		}
		ticket, st, err := e.store.AccountPlace(ctx, event, "fan-1", set)
		if err != nil || ticket != got[0].Ticket || st.State != line.Waiting {
			t.Fatalf("AccountPlace = %q, %+v, %v; want the account's ticket, waiting", ticket, st, err)
		}

		other := joinAccountRace(t, e, set, "fan-2", 8)
		if other[0].ID == got[0].ID {
			t.Fatal("another account got fan-1's place")
		}

		if err := e.store.Leave(ctx, event, got[0].Ticket); err != nil {
			t.Fatal(err)
		}
		again := joinAccountRace(t, e, set, "fan-1", 32)
		for _, r := range again {
			if r.ID != again[0].ID || r.ID == got[0].ID {
				t.Fatalf("after leaving: joins answered %s and %s (left %s); want one new place", r.ID, again[0].ID, got[0].ID)
			}
		}
		if order := e.line(t); len(order) != 3 || order[2] != again[0].ID {
			t.Fatalf("line = %v; want the anonymous fan, fan-2 and fan-1's new place %s", order, again[0].ID)
		}
		if st := checkBooks(t, e); st.Joined != 4 || st.Left != 1 {
			t.Errorf("joined %d, left %d; want 4 and 1", st.Joined, st.Left)
		}
	})
}

// An admitted account is resumed admitted (its place claimed by that
// look), from any device; a ticket of an account carries it, forged ones
// are refused.
func TestAccountResumedAdmitted(t *testing.T) {
	onEachLayout(t, func(t *testing.T, e env) {
		ctx := context.Background()
		set := e.open()
		set.AdmitPerSecond = 1000
		first, err := e.store.JoinWith(ctx, event, set, line.JoinOptions{Account: "fan-9"})
		if err != nil {
			t.Fatal(err)
		}
		letIn(t, e.store, set)
		r, err := e.store.JoinWith(ctx, event, set, line.JoinOptions{Account: "fan-9"})
		if err != nil || !r.Resumed || r.State != line.Admitted || r.ID != first.ID || !r.Status.FirstAdmission {
			t.Fatalf("join after admission = %+v, %v; want the same place resumed, admitted, claimed now", r, err)
		}
		if _, err := line.NewCodec(secret).Parse(event, first.Ticket.String()+"x"); err == nil {
			t.Error("a tampered account ticket checks")
		}
	})
}
