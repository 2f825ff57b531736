package booking_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
)

// An invitation buys once (DESIGN.md, "Fair play, third round"), through
// the booking core's own path: an invited account joins in its window,
// holds, pays; the confirmation's relay frees its place and, in the same
// step, notes its invitation used; a join of the account again in its
// window, from any device, is refused and changes nothing. An invited
// account whose place ended without a booking (it left) joins again, as
// before.
func TestAnInvitationBuysOnce(t *testing.T) {
	e := setup(t)
	ctx := e.ctx()
	join := invitedJoin(t, e, "alice", "bob")

	r, err := join("alice")
	if err != nil || r.State != line.Admitted {
		t.Fatalf("alice in her window: %+v, %v; want let in", r, err)
	}
	_, c := e.holdAndCheckout(booking.NewPass(r.ID, "alice", "premiere"), 42, booking.HoldInput{Seats: []string{"A1", "A2"}})
	if out, err := e.svc.Settle(ctx, c.PaymentID, payment.Succeeded); err != nil || out.Outcome != booking.Confirmed {
		t.Fatalf("settle: %+v, %v", out, err)
	}
	relay := &booking.Relay{Store: e.store, Line: e.line, Batch: 10, Log: e.log}
	if err := relay.RelayOnce(ctx); err != nil {
		t.Fatal(err)
	}
	ql := queuetest.Of(t, e.rdb, "premiere")
	if ql.IsActive(r.ID) {
		t.Fatal("alice's place is still active after her booking's confirmation was relayed")
	}
	before := ql.Dump()
	for try := range 2 { // her phone, then her laptop: one account
		if r, err := join("alice"); !errors.Is(err, presale.ErrInvitationUsed) {
			t.Fatalf("alice joins again after her booking (%d): %+v, %v; want ErrInvitationUsed", try, r, err)
		}
	}
	if after := ql.Dump(); !maps.Equal(after, before) {
		t.Fatal("a refused join changed the line's keys")
	}
	states, err := e.line.PlaceStates(ctx, "premiere", []string{"alice"})
	if err != nil || states[0] != line.BookedPlace {
		t.Fatalf("alice's place: %v, %v; want booked", states, err)
	}

	rb, err := join("bob")
	if err != nil {
		t.Fatalf("bob in his window: %v", err)
	}
	if err := e.line.Leave(ctx, "premiere", rb.Ticket); err != nil {
		t.Fatal(err)
	}
	if again, err := join("bob"); err != nil || again.ID == rb.ID {
		t.Fatalf("bob joins again after leaving without a booking: %+v, %v; want a new place", again, err)
	}
}

// The sale itself notes the invitation used, not only its relay: the
// confirmation frees the fan's place at once (the inventory's booked), so a
// join of the account between the confirmation and the relay's completion
// would otherwise find no place and no booking noted, and make a second
// place: the invitation would buy twice. Here every join of that gap is
// refused and changes nothing, and the relay, when it comes, changes
// nothing either.
func TestAnInvitationBuysOnceBeforeTheRelay(t *testing.T) {
	e := setupInventory(t)
	ctx := e.ctx()
	joinAs := invitedJoin(t, e.env, "alice")
	join := func() (line.JoinResult, error) { return joinAs("alice") }

	r, err := join()
	if err != nil || r.State != line.Admitted {
		t.Fatalf("alice in her window: %+v, %v; want let in", r, err)
	}
	_, c := e.holdAndCheckout(booking.NewPass(r.ID, "alice", "premiere"), 42, booking.HoldInput{Seats: []string{"A1"}})
	if out, err := e.svc.Settle(ctx, c.PaymentID, payment.Succeeded); err != nil || out.Outcome != booking.Confirmed {
		t.Fatalf("settle: %+v, %v", out, err)
	}
	ql := queuetest.Of(t, e.rdb, "premiere")
	if ql.IsActive(r.ID) {
		t.Fatal("alice's place is still active after her booking's confirmation: the sale should free it at once")
	}
	before := ql.Dump()
	for try := range 2 { // her phone, then her laptop, before the relay
		if again, err := join(); !errors.Is(err, presale.ErrInvitationUsed) {
			t.Fatalf("alice joins again after her booking's confirmation, before its relay (%d): %+v, %v; want ErrInvitationUsed", try, again, err)
		}
	}
	if !maps.Equal(ql.Dump(), before) {
		t.Fatal("a refused join changed the line's keys")
	}
	if states, err := e.line.PlaceStates(ctx, "premiere", []string{"alice"}); err != nil || states[0] != line.BookedPlace {
		t.Fatalf("alice's place before the relay: %v, %v; want booked", states, err)
	}

	relay := &booking.Relay{Store: e.store, Line: e.line, Batch: 10, Log: e.log}
	if err := relay.RelayOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(ql.Dump(), before) {
		t.Fatal("the relay's completion changed the line's keys; the sale had done it all")
	}
	if again, err := join(); !errors.Is(err, presale.ErrInvitationUsed) {
		t.Fatalf("alice joins again after the relay: %+v, %v; want ErrInvitationUsed", again, err)
	}
}

// invitedJoin draws a presale of premiere in which every one of accounts is
// selected, in one group whose window (an hour) opens now, and returns a
// join of an account in it (passthrough: an invited fan in its window is
// let in at once).
func invitedJoin(t *testing.T, e *env, accounts ...string) func(account string) (line.JoinResult, error) {
	t.Helper()
	ctx := e.ctx()
	closes := time.Now().Add(time.Second)
	plan := presale.Plan{RegistrationOpensAt: time.Now().Add(-time.Minute), RegistrationClosesAt: closes,
		Selected: len(accounts), GroupSize: len(accounts), Window: time.Hour, OpensAt: closes}
	pre := presale.New(rdb.New(e.rdb), e.line, []byte(testTicketSecret), "admitter").WithDrawSecret([]byte("test-draw-secret-0123456789abcdef"))
	for _, a := range accounts {
		if _, _, err := pre.Register(ctx, "premiere", plan, a); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Until(closes) + 5*time.Millisecond)
	if err := pre.Step(ctx, "premiere", plan); err != nil {
		t.Fatal(err)
	}
	set := line.Settings{Mode: line.ModePassthrough, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute,
		OpensAt: &plan.OpensAt, Presale: true}
	return func(account string) (line.JoinResult, error) {
		return e.line.JoinWith(ctx, "premiere", set, line.JoinOptions{Account: account})
	}
}
