package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
	"github.com/waitroom/waitroom/internal/webhook"
)

// Always on's moments (DESIGN.md, "Always on" and "Webhooks"): an auto
// event's line.formed when a fan is made to wait, line.cleared when the
// line is empty again, each made once by the look that sees the change
// however many look at once (32 observers released together at every
// step), on one shard and on three (where the line's mark says someone may
// wait). A line that forms and dissolves between two looks is announced
// all the same, formed then cleared: the line's count of places made
// (seq less the joins let straight through) moved.
func TestLineFormedAndCleared(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) { testLineFormedAndCleared(t, shards) })
	}
}

func testLineFormedAndCleared(t *testing.T, shards int) {
	e := setup(t, nil, "/line")
	ctx := context.Background()
	const event = "premiere"
	set := line.Settings{Mode: line.ModeAuto, AdmitPerSecond: 1000, MaxActive: 2, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute, Shards: shards}
	view := webhook.View{Event: event, Values: map[string]any{"mode": "auto"}, Mode: line.ModeAuto}
	// look has n observers look at once, and returns the moments made.
	look := func(n int) []string {
		t.Helper()
		made := make([][]string, n)
		errs := make([]error, n)
		testenv.Race(len(made), func(i int) { made[i], errs[i] = e.store.Observe(ctx, e.hooks, view) })
		var out []string
		for i := range made {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			out = append(out, made[i]...)
		}
		return out
	}
	expect := func(what string, want ...string) {
		t.Helper()
		if got := look(32); !slices.Equal(got, want) {
			t.Fatalf("%s: moments %v; want %v", what, got, want)
		}
	}
	join := func(want line.State) line.JoinResult {
		t.Helper()
		r, err := e.line.Join(ctx, event, set)
		if err != nil || r.State != want {
			t.Fatalf("join: %s, %v; want %s", r.State, err, want)
		}
		return r
	}
	leave := func(r line.JoinResult) {
		t.Helper()
		if err := e.line.Leave(ctx, event, r.Ticket); err != nil {
			t.Fatal(err)
		}
	}
	state := queuetest.Of(t, e.rc, event)
	// tickUntil ticks until the ticket is let in and (many shards) the
	// line's mark lifted: nobody waits any more.
	tickUntil := func(r line.JoinResult) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the waiting fan is never let in, or the line never dissolves")
			}
			if _, err := e.line.Tick(ctx, event, set); err != nil {
				t.Fatal(err)
			}
			st, err := e.line.Status(ctx, event, r.Ticket, set)
			if err != nil {
				t.Fatal(err)
			}
			if c, err := e.line.Counts(ctx, event); err == nil && st.State == line.Admitted && c.Waiting == 0 && !state.Marked() {
				return
			}
		}
	}

	expect("an empty auto room", webhook.SaleOpened)
	a, b := join(line.Admitted), join(line.Admitted)
	expect("two let straight through")
	c := join(line.Waiting)
	expect("a fan waits at the cap", webhook.LineFormed)
	expect("the line still there")
	leave(a)
	tickUntil(c)
	expect("the line let in and empty", webhook.LineCleared)
	expect("still empty")

	// A line between two looks: formed and let in before anyone looked.
	d := join(line.Waiting)
	leave(b)
	tickUntil(d)
	// One look sees that it came (the racers after it would see it gone:
	// line.cleared, as the look after it does).
	if got := look(1); !slices.Equal(got, []string{webhook.LineFormed}) {
		t.Fatalf("a line that came and went: moments %v; want line.formed", got)
	}
	expect("the look after it", webhook.LineCleared)
	expect("and then")

	// The receiver gets them in order, with their states.
	s := e.sender(webhook.SenderOptions{})
	e.until(s, "the five deliveries", func() bool { return len(e.recv.Delivered("/line")) == 5 })
	var got []string
	for _, r := range e.recv.Delivered("/line") {
		var data struct{ State, Previous *string }
		if err := json.Unmarshal(r.Payload.Data, &data); err != nil || data.State == nil {
			t.Fatalf("%s's data %s: %v", r.Payload.Type, r.Payload.Data, err)
		}
		prev := "null"
		if data.Previous != nil {
			prev = *data.Previous
		}
		got = append(got, r.Payload.Type+" "+*data.State+"←"+prev)
	}
	want := []string{"sale.opened open←null", "line.formed formed←cleared", "line.cleared cleared←formed", "line.formed formed←cleared", "line.cleared cleared←formed"}
	if !slices.Equal(got, want) {
		t.Errorf("delivered %q; want %q", got, want)
	}
}
