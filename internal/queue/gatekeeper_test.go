package queue_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/gatekeeper"
	"github.com/waitroom/waitroom/internal/line"
)

// admitted joins a fan in passthrough (admitted and claimed at once) and
// returns its signed ticket and id.
func admitted(t testing.TB, e env, set line.Settings) (ticket line.Ticket, id string) {
	t.Helper()
	set.Mode = line.ModePassthrough
	r := join(t, e.store, set)
	if r.State != line.Admitted {
		t.Fatalf("passthrough join: %+v; want admitted", r)
	}
	return r.Ticket, r.ID
}

// An active place that ends before its window is noted in the line's ends,
// whatever ended it: its fan left, an operator revoked it, its booking
// completed it (the relay's completion, or the booking core's inventory
// selling its hold, which frees the place too). Each note names the
// ticket and the window's end in force
// (no pass of the place outlives it). A window that ends by time (the tick
// drops the place) and a fan who leaves the line while waiting need none:
// a pass of the first has expired, the second never had one.
func TestAnEarlyEndIsNoted(t *testing.T) { onEachLayout(t, testAnEarlyEndIsNoted) }

func testAnEarlyEndIsNoted(t *testing.T, e env) {
	ctx := context.Background()
	set := e.open()
	leftT, left := admitted(t, e, set)
	_, revoked := admitted(t, e, set)
	_, completed := admitted(t, e, set)
	_, sold := admitted(t, e, set)
	_, lapsed := admitted(t, e, set)
	waiting := join(t, e.store, set).Ticket
	windows := map[string]time.Time{}
	for _, id := range []string{left, revoked, completed, sold} {
		windows[id] = e.state(t).Window(id)
	}
	sync0(t, e.store, line.Snapshot{Free: 10})
	if _, err := e.store.Reserve(ctx, event, "h1", sold, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Leave(ctx, event, leftT); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Revoke(ctx, event, revoked); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Complete(ctx, event, completed); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Booked(ctx, event, "h1"); err != nil {
		t.Fatal(err)
	}
	if e.state(t).IsActive(sold) {
		t.Fatal("the inventory sold the hold and kept its fan's place")
	}
	if err := e.store.Leave(ctx, event, waiting); err != nil {
		t.Fatal(err)
	}
	// The lapsed place's window ends now; the tick drops it.
	e.state(t).EndWindow(lapsed, time.Now().Add(-time.Second))
	tick(t, e.store, set)
	if e.state(t).IsActive(lapsed) {
		t.Fatal("the tick kept a place whose window ended")
	}

	ends, err := e.store.Ends(ctx, event, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, end := range ends {
		got = append(got, end.Ticket)
		if !end.Until.Equal(windows[end.Ticket]) {
			t.Errorf("the end of %s until %v; want its window's end %v", end.Ticket, end.Until, windows[end.Ticket])
		}
	}
	if want := []string{left, revoked, completed, sold}; !slices.Equal(got, want) {
		t.Fatalf("ends noted %v; want %v (left, revoked, completed, sold, in that order)", got, want)
	}
	// Read on from the last: nothing new.
	if more, err := e.store.Ends(ctx, event, ends[len(ends)-1].ID, 100); err != nil || len(more) != 0 {
		t.Errorf("ends after the last read: %v, %v; want none", more, err)
	}
	// The notes go with the last window they cut short.
	if d := e.state(t).ExpiresIn(e.state(t).Keys().Ends); d <= 0 || d > 11*time.Minute {
		t.Errorf("the ends expire in %v; want within the windows (10m)", d)
	}
}

// The ends are trimmed as they go: a note whose window is over goes at
// the next note, so the stream holds about the places that ended within
// one window.
func TestEndsAreTrimmedOnceTheirWindowIsOver(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	short := e.open()
	short.AccessTTL = 300 * time.Millisecond
	var until time.Time
	for i := 0; i < 20; i++ {
		_, id := admitted(t, e, short)
		until = e.state(t).Window(id)
		if err := e.store.Revoke(ctx, event, id); err != nil {
			t.Fatal(err)
		}
	}
	for !time.Now().After(until.Add(10 * time.Millisecond)) {
		time.Sleep(10 * time.Millisecond)
	}
	_, id := admitted(t, e, e.open())
	if err := e.store.Revoke(ctx, event, id); err != nil {
		t.Fatal(err)
	}
	_, id2 := admitted(t, e, e.open())
	if err := e.store.Revoke(ctx, event, id2); err != nil {
		t.Fatal(err)
	}
	ends, err := e.store.Ends(ctx, event, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ends) != 2 || ends[0].Ticket != id || ends[1].Ticket != id2 {
		t.Errorf("after 20 notes whose windows are over and 2 new ones, the ends hold %d (%v); want the 2 new ones", len(ends), ends)
	}
}

// A gatekeeper hears every end, however many were written since it last
// read (it reads them page by page), and those written before it started.
func TestGatekeeperHearsEveryEnd(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	set := e.open()
	var ids []string
	revoke := func(n int) {
		for i := 0; i < n; i++ {
			_, id := admitted(t, e, set)
			if err := e.store.Revoke(ctx, event, id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	revoke(1500) // more than a page, before it starts
	g := gatekeeper.New(gatekeeper.Options{
		Line: e.store, Redis: gatekeeper.NewBreaker(e.store.Ping, slog.New(slog.DiscardHandler)), Service: "test",
		Sells: func(string) bool { return true }, Events: func() []string { return []string{event} },
	})
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); g.Follow(fctx) }()
	t.Cleanup(func() { stop(); <-done })
	revoke(10) // while it follows
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for !g.Heard(event, id) {
			if time.Now().After(deadline) {
				t.Fatalf("the gatekeeper did not hear of %s within 10s", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	_, live := admitted(t, e, set)
	if g.Heard(event, live) {
		t.Error("the gatekeeper heard of an end nobody wrote")
	}
	if v, err := g.Check(ctx, event, live); v != gatekeeper.PassActive || err != nil {
		t.Errorf("check of a live place: %v, %v; want PassActive", v, err)
	}
	if v, err := g.Check(ctx, event, ids[0]); v != gatekeeper.PassRefused || err != nil {
		t.Errorf("check of a revoked place: %v, %v; want PassRefused", v, err)
	}
}
