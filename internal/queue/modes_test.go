package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
)

func TestJoinWindows(t *testing.T) {
	closed := open()
	closed.Mode = "closed"
	pastClose := open()
	pastClose.OpensAt, pastClose.ClosesAt = at(-2*time.Hour), at(-time.Minute)
	beforePre := open()
	beforePre.PrequeueOpensAt, beforePre.OpensAt = at(time.Hour), at(2*time.Hour)
	beforeOpen := open()
	beforeOpen.OpensAt = at(time.Hour)
	inPre := prequeue(open())
	paused := open()
	paused.Mode = "paused"

	cases := []struct {
		name    string
		set     line.Settings
		want    error
		wantETA bool
	}{
		{"open", open(), nil, true},
		{"mode closed", closed, line.ErrClosed, false},
		{"past closes_at", pastClose, line.ErrClosed, false},
		{"before the pre-queue", beforePre, line.ErrNotOpen, false},
		{"before opens_at, no pre-queue", beforeOpen, line.ErrNotOpen, false},
		{"in the pre-queue", inPre, nil, false},
		{"paused", paused, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			r, err := e.store.Join(context.Background(), event, c.set)
			if !errors.Is(err, c.want) {
				t.Fatalf("join = %v; want %v", err, c.want)
			}
			if err != nil {
				return
			}
			if got := r.ETA != nil; got != c.wantETA {
				t.Errorf("join ETA = %v; want ETA: %v", r.ETA, c.wantETA)
			}
			st := status(t, e.store, r.Ticket, c.set)
			if got := st.ETA != nil; got != c.wantETA {
				t.Errorf("status ETA = %v; want ETA: %v", st.ETA, c.wantETA)
			}
			if got := (st.JoinETA != nil); got != c.wantETA {
				t.Errorf("JoinETA = %v; want ETA: %v", st.JoinETA, c.wantETA)
			}
			if res := tick(t, e.store, c.set); c.set.Mode == "paused" && res.Admitted != 0 {
				t.Errorf("paused tick admitted %d; want 0", res.Admitted)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	e := setup(t)
	set := open()
	set.AdmitPerSecond = 10
	a, b := join(t, e.store, set), join(t, e.store, set)

	st := status(t, e.store, b.Ticket, set)
	if st.State != line.Waiting || st.Position.Position != 2 || st.Ahead != 1 || st.ID != b.ID {
		t.Fatalf("status = %+v; want waiting at 2, 1 ahead", st)
	}
	if st.ETA == nil || *st.ETA != 200*time.Millisecond {
		t.Errorf("ETA = %v; want 200ms (position 2 at 10/s)", st.ETA)
	}
	if st.JoinETA == nil || *st.JoinETA != 200*time.Millisecond {
		t.Errorf("JoinETA = %v; want 200ms", st.JoinETA)
	}
	if st.PollAfter < time.Second || st.PollAfter >= 1500*time.Millisecond {
		t.Errorf("PollAfter = %v near the front; want [1s, 1.5s)", st.PollAfter)
	}
	if d := time.Since(st.JoinedAt); d < 0 || d > time.Minute {
		t.Errorf("JoinedAt = %v; want about now", st.JoinedAt)
	}

	tick(t, e.store, set)
	time.Sleep(250 * time.Millisecond) // 2.5 tokens at 10/s
	if r := tick(t, e.store, set); r.Admitted != 2 {
		t.Fatalf("tick admitted %d; want 2", r.Admitted)
	}
	for i, want := range []bool{true, false, false} {
		st := status(t, e.store, a.Ticket, set)
		if st.State != line.Admitted || st.FirstAdmission != want {
			t.Errorf("poll %d = %v first=%v; want admitted first=%v", i, st.State, st.FirstAdmission, want)
		}
		if d := time.Until(st.ActiveUntil); d < 9*time.Minute || d > 10*time.Minute {
			t.Errorf("ActiveUntil in %v; want about access_ttl", d)
		}
	}
}

func TestPollAfterGrowsAndIsBounded(t *testing.T) {
	e := setup(t)
	set := open()
	set.AdmitPerSecond = 1
	var prev time.Duration
	for i := 1; i <= 300; i++ {
		r := join(t, e.store, set)
		p := r.PollAfter
		if p < time.Second || p >= 60*time.Second {
			t.Fatalf("join %d: pollAfter %v outside [1s, 60s)", i, p)
		}
		// Jitter is at most ×1.5: the base grows, so a fan 4 places back
		// never polls sooner than 1/1.5 of one in front of it.
		if float64(p) < float64(prev)/1.5-float64(time.Millisecond) {
			t.Fatalf("join %d: pollAfter %v shrank from %v beyond jitter", i, p, prev)
		}
		if i%4 == 0 {
			prev = p
		}
	}
	// ahead/(4·rate) would be 75 s; the line-speed bound (ahead / 250 s)
	// wakes the fan far sooner, in case the line runs faster than measured.
	if base := 299 * time.Second / 250; prev < base || prev >= base*3/2+time.Millisecond {
		t.Errorf("pollAfter 300 places back at 1/s = %v; want 299/250 s × [1, 1.5)", prev)
	}
	// Far back, the 40 s cap (×1.5 jitter) bounds it.
	var last time.Duration
	for i := 301; i <= 10_500; i++ {
		last = join(t, e.store, set).PollAfter
	}
	if last < 40*time.Second || last >= 60*time.Second {
		t.Errorf("pollAfter 10,500 places back = %v; want the 40 s cap × [1, 1.5)", last)
	}
}

func TestAbandonment(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	set := open()
	set.Mode = "paused"
	set.AbandonAfter = time.Second
	set.AdmitPerSecond = 1000
	silent := join(t, e.store, set)
	faithful := join(t, e.store, set)

	// The faithful fan polls exactly as told; the silent one never again.
	// The silent one's deadline is its pollAfter (< 1.5 s) + abandon_after
	// (1 s) from its join, rounded up to the second, and it is past once the
	// clock's whole second is beyond it: at most 4.5 s.
	poll := faithful.PollAfter
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(poll)
		poll = status(t, e.store, faithful.Ticket, set).PollAfter
	}
	set.Mode = "queue"
	tick(t, e.store, set)
	time.Sleep(20 * time.Millisecond)
	r := tick(t, e.store, set)
	if r.Abandoned != 1 || r.Admitted != 1 {
		t.Errorf("tick = %+v; want 1 abandoned, 1 admitted", r)
	}
	if st := status(t, e.store, silent.Ticket, set); st.State != line.Expired {
		t.Errorf("abandoned ticket state %v; want expired", st.State)
	}
	if st := status(t, e.store, faithful.Ticket, set); st.State != line.Admitted {
		t.Errorf("faithful ticket state %v; want admitted", st.State)
	}
	if st, _ := e.store.Stats(ctx, event); st.Abandoned != 1 {
		t.Errorf("abandoned counter %d; want 1", st.Abandoned)
	}
	checkBooks(t, e)
}

func TestLeave(t *testing.T) { onEachLayout(t, testLeave) }

func testLeave(t *testing.T, e env) {
	ctx := context.Background()
	set := e.open()
	set.AdmitPerSecond = 1000
	active := joinAndLetIn(t, e.store, set)
	waiting := join(t, e.store, set)
	behind := join(t, e.store, set)

	t.Run("waiting", func(t *testing.T) {
		if err := e.store.Leave(ctx, event, waiting.Ticket); err != nil {
			t.Fatal(err)
		}
		if st := status(t, e.store, waiting.Ticket, set); st.State != line.Expired {
			t.Errorf("state after leave %v; want expired", st.State)
		}
		if st := status(t, e.store, behind.Ticket, set); st.Position.Position != 1 {
			t.Errorf("fan behind at %d; want 1", st.Position.Position)
		}
		if st, _ := e.store.Stats(ctx, event); st.Left != 1 {
			t.Errorf("left = %d; want 1", st.Left)
		}
	})
	t.Run("active", func(t *testing.T) {
		if ok, _ := e.store.Active(ctx, event, active.ID); !ok {
			t.Fatal("ticket not active before leaving")
		}
		if err := e.store.Leave(ctx, event, active.Ticket); err != nil {
			t.Fatal(err)
		}
		if ok, _ := e.store.Active(ctx, event, active.ID); ok {
			t.Error("ticket still active after leaving")
		}
		if c, _ := e.store.Counts(ctx, event); c.Active != 0 || c.Waiting != 1 {
			t.Errorf("counts = %+v; want 0 active, 1 waiting", c)
		}
		if st := status(t, e.store, active.Ticket, set); st.State != line.Expired {
			t.Errorf("state after leave %v; want expired", st.State)
		}
	})
	t.Run("twice", func(t *testing.T) {
		if err := e.store.Leave(ctx, event, waiting.Ticket); err != nil {
			t.Errorf("second leave = %v; want nil", err)
		}
		if st, _ := e.store.Stats(ctx, event); st.Left != 1 {
			t.Errorf("left = %d after a second leave; want 1", st.Left)
		}
	})
	checkBooks(t, e)
}

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
		if st := status(t, e.store, in.Ticket, set); st.State != line.Admitted {
			t.Fatalf("first fan %s; want admitted", st.State)
		}
		for _, tk := range []line.JoinResult{in, waiting} {
			if err := e.store.Revoke(ctx, event, tk.ID); err != nil {
				t.Fatalf("revoke %s: %v", tk.ID, err)
			}
			if st := status(t, e.store, tk.Ticket, set); st.State != line.Expired {
				t.Errorf("revoked ticket polls %s; want expired", st.State)
			}
			if ok, _ := e.store.Active(ctx, event, tk.ID); ok {
				t.Errorf("revoked ticket still active")
			}
			if err := e.store.Revoke(ctx, event, tk.ID); !errors.Is(err, line.ErrUnknownTicket) {
				t.Errorf("second revoke = %v; want ErrUnknownTicket", err)
			}
		}
		c, err := e.store.Counts(ctx, event)
		if err != nil || c.Waiting != 0 || c.Active != 0 {
			t.Errorf("counts after revoking both = %+v, %v; want 0 waiting, 0 active", c, err)
		}
		checkBooks(t, e)
		e.sendsNothing(t, "malformed ids", func() {
			for _, id := range []string{"", "x", "1.short", "zz.AAAAAAAAAAAAAAAAAAAAAA/"} {
				if err := e.store.Revoke(ctx, event, id); !errors.Is(err, line.ErrInvalidTicket) {
					t.Errorf("Revoke(%q) = %v; want ErrInvalidTicket", id, err)
				}
			}
		})
	})
}

// A passthrough place is admitted and claimed at join: the fan holds its
// pass at once, and the window's ceiling counts from the join.
func TestPassthrough(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	set := open()
	set.Mode = "passthrough"
	set.AccessTTL = time.Minute
	r := join(t, e.store, set)
	if r.State != line.Admitted {
		t.Fatalf("passthrough join state %v; want admitted", r.State)
	}
	if d := time.Until(r.ActiveUntil); d < 50*time.Second || d > time.Minute {
		t.Errorf("ActiveUntil in %v; want about access_ttl", d)
	}
	if c, _ := e.store.Counts(ctx, event); c.Active != 1 || c.Waiting != 0 {
		t.Errorf("counts = %+v; want 1 active", c)
	}
	// The join itself claimed the place: the fan holds its pass already.
	st := status(t, e.store, r.Ticket, set)
	if st.State != line.Admitted || st.FirstAdmission {
		t.Errorf("status = %+v; want admitted, already claimed", st)
	}
	// Its ceiling counts from the join: access_ttl 1m + window 1m.
	got, ok, err := e.store.Extend(ctx, event, r.ID, time.Now().Add(time.Hour), 2*time.Minute)
	if err != nil || !ok || time.Until(got) > 2*time.Minute {
		t.Fatalf("Extend = %v, %v, %v; want at most 2 minutes from the join", got, ok, err)
	}

	// Fans already waiting when the mode turns to passthrough go in at once,
	// regardless of the cap.
	q := open()
	q.MaxActive = 1
	w := []line.JoinResult{join(t, e.store, q), join(t, e.store, q)}
	if res := tick(t, e.store, set); res.Admitted != 2 || res.Waiting != 0 {
		t.Errorf("passthrough tick = %+v; want 2 admitted, none waiting", res)
	}
	for _, j := range w {
		if st := status(t, e.store, j.Ticket, set); st.State != line.Admitted {
			t.Errorf("state %v; want admitted", st.State)
		}
	}
	checkBooks(t, e)
}

func TestClosedWhileWaiting(t *testing.T) {
	e := setup(t)
	set := open()
	r := join(t, e.store, set)
	set.Mode = "closed"
	if st := status(t, e.store, r.Ticket, set); st.State != line.Closed {
		t.Errorf("state %v; want closed", st.State)
	}
	if res := tick(t, e.store, set); res.Admitted != 0 {
		t.Errorf("closed tick admitted %d", res.Admitted)
	}
	set = open()
	set.ClosesAt = at(-time.Second)
	if st := status(t, e.store, r.Ticket, set); st.State != line.Closed {
		t.Errorf("past closes_at: state %v; want closed", st.State)
	}
	if _, err := e.store.Join(context.Background(), event, set); !errors.Is(err, line.ErrClosed) {
		t.Errorf("join = %v; want ErrClosed", err)
	}
}

func TestCapAndBucket(t *testing.T) {
	e := setup(t)
	set := open()
	set.AdmitPerSecond = 1000
	set.MaxActive = 3
	for range 10 {
		join(t, e.store, set)
	}
	tick(t, e.store, set)
	time.Sleep(50 * time.Millisecond)
	if r := tick(t, e.store, set); r.Admitted != 3 || r.Active != 3 || r.Waiting != 7 {
		t.Errorf("tick = %+v; want the cap: 3 admitted, 3 active, 7 waiting", r)
	}
	time.Sleep(50 * time.Millisecond)
	if r := tick(t, e.store, set); r.Admitted != 0 {
		t.Errorf("tick at the cap admitted %d; want 0", r.Admitted)
	}

	// The bucket held far more than a second at 1,000/s while the cap bound;
	// at 2/s a tick 1.2 s later gets the capacity: that gap's refill plus
	// the one token a fractional rate carries, floor(2 × 1.2 + 1) = 3.
	set.MaxActive = 1000
	set.AdmitPerSecond = 2
	_, ts0 := bucket(t, e)
	time.Sleep(1200 * time.Millisecond)
	r := tick(t, e.store, set)
	_, ts1 := bucket(t, e)
	span := min(max(ts1-ts0, 1000), 2000)
	if want := int64(math.Floor(2*float64(span)/1000 + 1)); r.Admitted != want {
		t.Errorf("burst after a %d ms idle admitted %d; want %d (the bucket's capacity)", ts1-ts0, r.Admitted, want)
	}
	checkBooks(t, e)
}

// bucket reads the admission token bucket: tokens, and the Redis time (ms)
// of the tick that left them.
func bucket(t testing.TB, e env) (float64, int64) {
	t.Helper()
	return e.state(t).Bucket()
}

// TestBucketKeepsFractionalRate: at the design's computed rate, 1000/6 =
// 166.67 fans/s, with ticks a second or a little more apart (the admitter's
// cadence: its tick plus the tick's own duration), a waiting line gets
// exactly rate × elapsed: admitted + tokens left − tokens at the start equals
// the refill over the Redis time between the first and last tick, to float
// precision, and no whole fan is lost. A bucket capped at one second of rate
// admitted 166 a tick here, 0.4% short, and lost more the later ticks came.
func TestBucketKeepsFractionalRate(t *testing.T) {
	t.Parallel()
	e := setup(t)
	set := open()
	set.AdmitPerSecond = 1000.0 / 6
	set.MaxActive = 1_000_000
	set.AbandonAfter = time.Hour // these fans do not poll
	joinMany(t, e.store, set, 1000)
	tick(t, e.store, set)
	tok0, ts0 := bucket(t, e)
	var admitted int64
	for _, gap := range []time.Duration{1000, 1040, 1003, 1100} {
		time.Sleep(gap * time.Millisecond)
		admitted += tick(t, e.store, set).Admitted
	}
	tok1, ts1 := bucket(t, e)
	refill := set.AdmitPerSecond * float64(ts1-ts0) / 1000
	if got := float64(admitted) + tok1 - tok0; math.Abs(got-refill) > 1e-6 {
		t.Errorf("admitted %d + tokens %.6f − %.6f = %.6f; want the refill %.6f (166.67/s × %d ms)",
			admitted, tok1, tok0, got, refill, ts1-ts0)
	}
	if float64(admitted) < refill-1-1e-6 {
		t.Errorf("admitted %d over %d ms; want at least %.2f (rate × elapsed − 1)", admitted, ts1-ts0, refill-1)
	}
	checkBooks(t, e)
}

// TestBucketAfterStall: an admitter that was away for 30 s catches up with at
// most two seconds of rate plus one token, not 30 s' worth. The stall is
// made by moving the bucket's last tick back in Redis, not by waiting.
func TestBucketAfterStall(t *testing.T) {
	t.Parallel()
	e := setup(t)
	set := open()
	set.AdmitPerSecond = 1000.0 / 6
	set.MaxActive = 1_000_000
	set.AbandonAfter = time.Hour
	joinMany(t, e.store, set, 2000)
	tick(t, e.store, set)
	_, ts := bucket(t, e)
	if err := e.rdb.HSet(context.Background(), e.state(t).Keys().Bucket, "ts", ts-30_000).Err(); err != nil {
		t.Fatal(err)
	}
	if r := tick(t, e.store, set); r.Admitted != 334 {
		t.Errorf("after a 30 s stall admitted %d; want 334 (floor(2 s × 166.67 + 1))", r.Admitted)
	}
	checkBooks(t, e)
}

func TestActiveExpires(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	set := open()
	set.AdmitPerSecond = 1000
	set.AccessTTL = 1 * time.Second
	r := joinAndLetIn(t, e.store, set)
	if ok, _ := e.store.Active(ctx, event, r.ID); !ok {
		t.Fatal("not active after admission")
	}
	time.Sleep(1100 * time.Millisecond)
	if ok, _ := e.store.Active(ctx, event, r.ID); ok {
		t.Error("still active after access_ttl")
	}
	if c, _ := e.store.Counts(ctx, event); c.Active != 0 {
		t.Errorf("counts active %d after expiry; want 0", c.Active)
	}
	if res := tick(t, e.store, set); res.Expired != 1 {
		t.Errorf("tick expired %d; want 1", res.Expired)
	}
	if st := status(t, e.store, r.Ticket, set); st.State != line.Expired {
		t.Errorf("state %v; want expired", st.State)
	}
}

func TestExtendAndComplete(t *testing.T) { onEachLayout(t, testExtendAndComplete) }

func testExtendAndComplete(t *testing.T, e env) {
	ctx := context.Background()
	set := e.open()
	set.AdmitPerSecond = 1000
	r := joinAndLetIn(t, e.store, set)
	st := status(t, e.store, r.Ticket, set)

	cases := []struct {
		name  string
		until time.Time
		want  time.Time
	}{
		{"earlier never shortens", st.ActiveUntil.Add(-time.Minute), st.ActiveUntil},
		{"later extends", st.ActiveUntil.Add(time.Minute), st.ActiveUntil.Add(time.Minute)},
		{"back to the first never shortens", st.ActiveUntil, st.ActiveUntil.Add(time.Minute)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := e.store.Extend(ctx, event, r.ID, c.until, time.Hour)
			if err != nil || !ok || !got.Equal(c.want) {
				t.Errorf("Extend = %v, %v, %v; want %v, true", got, ok, err, c.want)
			}
		})
	}
	if err := e.store.Complete(ctx, event, r.ID); err != nil {
		t.Fatal(err)
	}
	if ok, _ := e.store.Active(ctx, event, r.ID); ok {
		t.Error("active after Complete")
	}
	if _, ok, _ := e.store.Extend(ctx, event, r.ID, time.Now().Add(time.Hour), time.Hour); ok {
		t.Error("Extend of a completed ticket reported active")
	}
}

func TestSettingsRoundTrip(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	if _, err := e.store.Settings(ctx, event); !errors.Is(err, line.ErrNoSettings) {
		t.Fatalf("Settings before publish = %v; want ErrNoSettings", err)
	}
	set := open()
	set.OpensAt = at(time.Hour)
	if err := e.store.PublishSettings(ctx, event, set); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Settings(ctx, event)
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != set.Mode || got.AdmitPerSecond != set.AdmitPerSecond || got.MaxActive != set.MaxActive ||
		got.AccessTTL != set.AccessTTL || !got.OpensAt.Equal(*set.OpensAt) || got.ClosesAt != nil {
		t.Errorf("Settings = %+v; want %+v", got, set)
	}
	if l := e.state(t); !l.Has(l.Keys().Settings) {
		t.Errorf("settings key not under the event tag")
	}
}

// TestClaimWindow: a fan admitted while away holds the place only until
// their abandon deadline; the first poll that finds the ticket admitted
// claims the full access window.
func TestClaimWindow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	set := open()
	set.AdmitPerSecond = 1000
	set.AbandonAfter = time.Second
	set.AccessTTL = time.Hour
	away := join(t, e.store, set)
	present := join(t, e.store, set)
	tick(t, e.store, set)
	time.Sleep(20 * time.Millisecond)
	if r := tick(t, e.store, set); r.Active != 2 {
		t.Fatalf("tick: %+v; want both admitted", r)
	}
	// Until claimed, both windows end by the abandon deadline (join + pollAfter + 1 s).
	for _, tk := range []line.JoinResult{away, present} {
		if until := time.Until(e.state(t).Window(tk.ID)); until > tk.PollAfter+3*time.Second {
			t.Fatalf("unclaimed window ends in %v; want at most pollAfter + abandon_after (%v + 1s)", until, tk.PollAfter)
		}
	}
	st := status(t, e.store, present.Ticket, set)
	if st.State != line.Admitted || !st.FirstAdmission {
		t.Fatalf("present fan: %+v; want admitted, first admission", st)
	}
	if d := time.Until(st.ActiveUntil); d < 59*time.Minute {
		t.Fatalf("claimed window ends in %v; want the full access_ttl (1h)", d)
	}
	again := status(t, e.store, present.Ticket, set)
	if !again.ActiveUntil.Equal(st.ActiveUntil) || again.FirstAdmission {
		t.Fatalf("second poll: %+v; want the same window and no first admission", again)
	}
	// The fan who stayed away loses the place at the deadline, with no job running.
	deadline := time.Now().Add(away.PollAfter + 4*time.Second)
	for time.Now().Before(deadline) {
		if ok, _ := e.store.Active(ctx, event, away.ID); !ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ok, _ := e.store.Active(ctx, event, away.ID); ok {
		t.Fatal("the unclaimed place was still active after the abandon deadline")
	}
	if ok, _ := e.store.Active(ctx, event, present.ID); !ok {
		t.Fatal("the claimed place was lost")
	}
	checkBooks(t, e)
}

// TestScriptsSurviveAFlushedCache: a Redis that lost its script cache (a
// restart, SCRIPT FLUSH) still answers the pipelined scripts: the calls that
// meet NOSCRIPT are sent again with EVAL.
func TestScriptsSurviveAFlushedCache(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	set := open()
	a := join(t, e.store, set)
	if err := e.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := e.store.Status(ctx, event, a.Ticket, set); err != nil || st.State != line.Waiting {
				errs <- fmt.Errorf("status after SCRIPT FLUSH: %+v, %v", st, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if b := join(t, e.store, set); b.Position.Position != 2 {
		t.Fatalf("join after SCRIPT FLUSH: position %d; want 2", b.Position.Position)
	}
}
