package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// Always on (DESIGN.md): an auto line lets a join straight through, in
// the join's own step, while nobody waits, the cap has room and the
// bucket a token; otherwise the fan waits as in queue, and nobody
// overtakes a waiting fan.

// auto is the settings of an auto event open now, in the env's layout: a
// cap of 3, 1,000 fans a second.
func (e env) auto() line.Settings {
	set := e.open()
	set.Mode = line.ModeAuto
	set.AdmitPerSecond, set.MaxActive = 1000, 3
	return set
}

// tickUntil ticks every 20 ms until done says so, for at most 15 s.
func tickUntil(t testing.TB, e env, set line.Settings, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !done(); {
		if time.Now().After(deadline) {
			t.Fatalf("ticked for 15 s and still not %s", what)
		}
		tick(t, e.store, set)
		time.Sleep(20 * time.Millisecond)
	}
}

// wantState fails the test unless the ticket is in state want (and, when
// waiting, at position pos).
func wantState(t testing.TB, e env, set line.Settings, name string, r line.JoinResult, want line.State, pos int64) {
	t.Helper()
	st := status(t, e.store, r.Ticket, set)
	if st.State != want || (want == line.Waiting && st.Position.Position != pos) {
		t.Fatalf("%s: %s at %d; want %s at %d", name, st.State, st.Position.Position, want, pos)
	}
}

func TestAutoStraightThrough(t *testing.T) { onEachLayout(t, testAutoStraightThrough) }

func testAutoStraightThrough(t *testing.T, e env) {
	set := e.auto()
	r := join(t, e.store, set)
	if r.State != line.Admitted {
		t.Fatalf("a join of an empty auto room: %s at %d; want admitted at once", r.State, r.Position.Position)
	}
	if d := time.Until(r.ActiveUntil); d < set.AccessTTL-time.Minute || d > set.AccessTTL+time.Second {
		t.Errorf("its window ends in %v; want about access_ttl (%v)", d, set.AccessTTL)
	}
	st := status(t, e.store, r.Ticket, set)
	if st.State != line.Admitted || st.FirstAdmission {
		t.Errorf("its status: %s, first admission %v; want admitted, claimed at the join already", st.State, st.FirstAdmission)
	}
	state := e.state(t)
	if !state.IsActive(r.ID) || len(state.Waiting()) != 0 {
		t.Errorf("active %v, waiting %v; want it active, nobody waiting", state.Active(), state.Waiting())
	}
	for field, want := range map[string]int64{"joined": 1, "admitted": 1, "through": 1} {
		if got := state.Stat(field); got != want {
			t.Errorf("stats %s = %d; want %d", field, got, want)
		}
	}
	if e.shards > 1 && state.Marked() {
		t.Error("the line is marked; nobody was sent to a shard")
	}
}

// TestAutoLineFormsAtTheCap: the cap full, the next fans wait; a place
// freed while they wait is theirs, not the newest join's (no
// overtaking); the admitter lets them in; once the line is empty again,
// joins go straight through (the line dissolved).
func TestAutoLineFormsAtTheCap(t *testing.T) { onEachLayout(t, testAutoLineFormsAtTheCap) }

func testAutoLineFormsAtTheCap(t *testing.T, e env) {
	ctx := context.Background()
	set := e.auto()
	var in []line.JoinResult
	for i := range 3 {
		r := join(t, e.store, set)
		if r.State != line.Admitted {
			t.Fatalf("join %d of 3 below the cap: %s; want admitted", i+1, r.State)
		}
		in = append(in, r)
	}
	fourth, fifth := join(t, e.store, set), join(t, e.store, set)
	wantState(t, e, set, "the 4th at the cap", fourth, line.Waiting, 1)
	wantState(t, e, set, "the 5th", fifth, line.Waiting, 2)

	// A place frees while two wait: the newest join does not take it.
	if err := e.store.Leave(ctx, event, in[0].Ticket); err != nil {
		t.Fatal(err)
	}
	sixth := join(t, e.store, set)
	wantState(t, e, set, "a join while others wait and a place is free", sixth, line.Waiting, 3)
	tickUntil(t, e, set, "the 4th admitted", func() bool { return status(t, e.store, fourth.Ticket, set).State == line.Admitted })
	wantState(t, e, set, "the 5th once the 4th is in", fifth, line.Waiting, 1)
	wantState(t, e, set, "the 6th", sixth, line.Waiting, 2)
	if n := e.state(t).ActiveCount(); n != 3 {
		t.Errorf("%d active; want the cap, 3", n)
	}

	// The line empties: the rest are let in as places free.
	for _, r := range append(in[1:], fourth) {
		if err := e.store.Leave(ctx, event, r.Ticket); err != nil {
			t.Fatal(err)
		}
	}
	tickUntil(t, e, set, "the line empty", func() bool { return len(e.line(t)) == 0 })
	if e.shards > 1 {
		// The line's mark is lifted once no place can be on its way to
		// a shard (shards.go): a tick after accountGraceMs.
		tickUntil(t, e, set, "the line's mark lifted", func() bool { return !e.state(t).Marked() })
	}
	if r := join(t, e.store, set); r.State != line.Admitted {
		t.Fatalf("a join once the line dissolved, a place free: %s at %d; want admitted", r.State, r.Position.Position)
	}
	if got := e.state(t).Stat("through"); got != 4 {
		t.Errorf("through = %d; want 4 (3 at first, 1 after)", got)
	}
	checkBooks(t, e)
}

// TestAutoLineFormsAtTheRate: the bucket spent, the next fans wait; the
// joins let straight through keep to the bucket (a second's worth and one
// token, plus the rate since), by Redis's clock.
func TestAutoLineFormsAtTheRate(t *testing.T) { onEachLayout(t, testAutoLineFormsAtTheRate) }

func testAutoLineFormsAtTheRate(t *testing.T, e env) {
	set := e.auto()
	set.AdmitPerSecond, set.MaxActive = 1, 1000
	var through []line.JoinResult
	var waited []line.JoinResult
	for i := range 10 {
		r := join(t, e.store, set)
		switch {
		case r.State == line.Admitted && len(waited) > 0:
			t.Fatalf("join %d let straight through while %d waited", i+1, len(waited))
		case r.State == line.Admitted:
			through = append(through, r)
		default:
			waited = append(waited, r)
		}
	}
	if len(through) < 2 || len(waited) == 0 {
		t.Fatalf("%d straight through, %d waiting; want the bucket's 2 (1/s: a second's worth and one) through, the rest waiting", len(through), len(waited))
	}
	// The bucket's own accounts: it began full (2) at the first join, and
	// its ts is the last join that spent it.
	_, ts := e.state(t).Bucket()
	first := through[0].ActiveUntil.Add(-set.AccessTTL)
	if bound := 2 + float64(ts-first.UnixMilli())/1000; float64(len(through)) > bound+1e-9 {
		t.Errorf("%d straight through over %d ms; the bucket holds 2 and refills 1/s: %.2f at most", len(through), ts-first.UnixMilli(), bound)
	}
	// The admitter lets the line in at the rate, in order.
	tickUntil(t, e, set, "the first waiter admitted", func() bool {
		return status(t, e.store, waited[0].Ticket, set).State == line.Admitted
	})
	if len(waited) > 1 {
		wantState(t, e, set, "the second waiter", waited[1], line.Waiting, 1)
	}
}

// TestAutoShardedPlaceOnItsWay is the race the line's mark closes (docs/
// QUEUE.md, "Always on over several shards"): a place sent to its shard
// but not there yet is waiting all the same, so a join while it is on its
// way, every shard empty and a place free, is not let through before it;
// one that never arrives (its gateway stalled past lateShardMs) is never
// made, and only then is the mark lifted.
func TestAutoShardedPlaceOnItsWay(t *testing.T) { onSharded(t, testAutoShardedPlaceOnItsWay) }

func testAutoShardedPlaceOnItsWay(t *testing.T, e env) {
	ctx := context.Background()
	set := e.auto()
	set.MaxActive = 1
	a := join(t, e.store, set)
	if a.State != line.Admitted {
		t.Fatalf("the first join: %s; want admitted", a.State)
	}
	// B is sent to wait (the cap is full), and stalls on its way.
	finishB, err := e.store.JoinHalfway(ctx, event, set)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Leave(ctx, event, a.Ticket); err != nil {
		t.Fatal(err)
	}
	tick(t, e.store, set)
	if n := len(e.line(t)); n != 0 || !e.state(t).Marked() {
		t.Fatalf("%d on the shards, marked %v; want none there yet, the line marked", n, e.state(t).Marked())
	}
	c := join(t, e.store, set)
	if c.State != line.Waiting {
		t.Fatalf("a join while B is on its way to its shard (shards empty, a place free): %s; want waiting", c.State)
	}
	b, err := finishB()
	if err != nil {
		t.Fatalf("B's shard phase within lateShardMs: %v", err)
	}
	wantState(t, e, set, "B, joined before C", b, line.Waiting, 1)
	wantState(t, e, set, "C", c, line.Waiting, 2)
	tickUntil(t, e, set, "B admitted", func() bool { return status(t, e.store, b.Ticket, set).State == line.Admitted })
	wantState(t, e, set, "C, the cap full again", c, line.Waiting, 1)

	// D is sent to wait and never arrives in time.
	finishD, err := e.store.JoinHalfway(ctx, event, set)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Leave(ctx, event, b.Ticket); err != nil {
		t.Fatal(err)
	}
	tickUntil(t, e, set, "C admitted", func() bool { return status(t, e.store, c.Ticket, set).State == line.Admitted })
	if err := e.store.Leave(ctx, event, c.Ticket); err != nil {
		t.Fatal(err)
	}
	tickUntil(t, e, set, "the line's mark lifted", func() bool { return !e.state(t).Marked() })
	if _, err := finishD(); !errors.Is(err, line.ErrUnavailable) {
		t.Fatalf("D's shard phase after the mark was lifted: %v; want refused as late (ErrUnavailable)", err)
	}
	if n := len(e.line(t)); n != 0 {
		t.Fatalf("%d waiting after D was refused; want none", n)
	}
	if f := join(t, e.store, set); f.State != line.Admitted {
		t.Fatalf("a join once the mark was lifted, a place free: %s; want admitted", f.State)
	}
}

// TestAutoGatewaysRace: many gateways, each with its own client, race
// joins at an empty auto event while two admitters tick. The cap is never
// passed (read back from Redis), the joins let straight through and the
// ticks together keep to the one bucket, and every fan is in exactly one
// place.
func TestAutoGatewaysRace(t *testing.T) {
	t.Parallel()
	onEachLayout(t, func(t *testing.T, e env) {
		t.Run("cap", func(t *testing.T) { testAutoGatewaysRace(t, e, 1000, 50) })
		t.Run("rate", func(t *testing.T) { testAutoGatewaysRace(t, e.fresh(t), 20, 100_000) })
	})
}

// fresh is e on a clean Redis: every key of the test's line dropped.
func (e env) fresh(t *testing.T) env {
	t.Helper()
	e.eachMaster(t, func(ctx context.Context, c *redis.Client) error { return c.FlushAll(ctx).Err() })
	return e
}

// ownClient is a new client to e's Redis, as another gateway process has.
func (e env) ownClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch r := e.rdb.(type) {
	case *redis.ClusterClient:
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Options().Addrs, PoolSize: 16})
	case *redis.Client:
		c = redis.NewClient(&redis.Options{Addr: r.Options().Addr, PoolSize: 16})
	default:
		t.Fatalf("client %T", e.rdb)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testAutoGatewaysRace(t *testing.T, e env, rate float64, capped int) {
	ctx := context.Background()
	const gateways, fans = 6, 300
	set := e.auto()
	set.AdmitPerSecond, set.MaxActive = rate, capped
	set.AbandonAfter = time.Hour // fans here do not poll
	stores := make([]*queue.Store, gateways+2)
	for i := range stores {
		stores[i] = queue.NewStore(e.ownClient(t), secret)
	}
	order := e.state(t)
	if _, err := stores[0].Tick(ctx, event, set); err != nil {
		t.Fatal(err)
	}
	before := order.Admissions()

	var ticked atomic.Int64
	var stops []func()
	for _, s := range stores[gateways:] {
		stops = append(stops, testenv.Repeat(func() time.Duration { return 20 * time.Millisecond }, func() {
			r, err := s.Tick(ctx, event, set)
			if err != nil {
				t.Errorf("tick: %v", err)
			}
			ticked.Add(r.Admitted)
		}))
	}
	var through atomic.Int64
	results := make([]line.JoinResult, fans)
	testenv.Race(fans, func(i int) {
		r, err := stores[i%gateways].Join(ctx, event, set)
		if err != nil {
			t.Errorf("join %d: %v", i, err)
			return
		}
		results[i] = r
		if r.State == line.Admitted {
			through.Add(1)
		}
	})
	for _, stop := range stops {
		stop()
	}
	if r, err := stores[0].Tick(ctx, event, set); err != nil {
		t.Fatal(err)
	} else {
		ticked.Add(r.Admitted)
	}
	after := order.Admissions()

	active := order.ActiveCount()
	if active > int64(capped) {
		t.Errorf("%d active; the cap is %d", active, capped)
	}
	admitted := after.Admitted - before.Admitted
	if admitted != active || admitted != through.Load()+ticked.Load() {
		t.Errorf("admitted %d = %d straight through + %d by ticks; %d active", admitted, through.Load(), ticked.Load(), active)
	}
	if through.Load() == 0 {
		t.Error("nobody went straight through an empty room")
	}
	// The bucket's own accounts, by Redis's clock: no token spent twice.
	if err := bucketBound(before, after, rate); err != nil {
		t.Error(err)
	}
	if capped < fans && active != int64(capped) {
		t.Errorf("%d active of %d fans; want the cap, %d, filled", active, fans, capped)
	}
	if waiting := int64(len(order.Waiting())); waiting+admitted != fans {
		t.Errorf("%d waiting + %d admitted; want the %d fans", waiting, admitted, fans)
	}
	// Nobody overtook: every join let straight through came before every
	// join that waited (the line never emptied during the race: it forms
	// at the cap or the bucket, and empties only as fans leave).
	lastThrough, firstWaited := int64(0), int64(1<<62)
	for _, r := range results {
		seq := seqOf(t, r.ID)
		if r.State == line.Admitted {
			lastThrough = max(lastThrough, seq)
		} else {
			firstWaited = min(firstWaited, seq)
		}
	}
	if lastThrough > firstWaited {
		t.Errorf("join %d let straight through after join %d waited", lastThrough, firstWaited)
	}
	t.Logf("%d straight through, %d let in by ticks, %d active (cap %d, %g/s)", through.Load(), ticked.Load(), active, capped, rate)
}

// bucketBound holds the admissions between two readings of an auto line's
// books to what its bucket gave out: what it held at a, the rate over the
// span, less what it holds at b.
func bucketBound(a, b queuetest.Admissions, rate float64) error {
	span := b.At.Sub(a.At).Seconds()
	due := a.Tokens + rate*span - b.Tokens
	if got := float64(b.Admitted - a.Admitted); got > due+1e-6 {
		return fmt.Errorf("admitted %.0f over %.3fs; the bucket (%g/s) held %.2f and keeps %.2f: %.2f at most, a token spent twice",
			got, span, rate, a.Tokens, b.Tokens, due)
	}
	return nil
}

// TestAutoStraightOnly: a join that takes only a place let in at once
// (forward auth's visitors, line.EnterRequest.StraightOnly) gets one
// while there is room, and none at the cap: ErrWouldWait, nothing in
// wait, no sequence number spent, the network's join given back. In
// queue mode it never gets one.
func TestAutoStraightOnly(t *testing.T) { onEachLayout(t, testAutoStraightOnly) }

func testAutoStraightOnly(t *testing.T, e env) {
	ctx := context.Background()
	set := e.auto()
	now := time.Now()
	addr := netip.MustParseAddr("198.18.0.1")
	enter := func(set line.Settings) (line.Entry, error) {
		return e.store.Enter(ctx, line.EnterRequest{Event: event, Settings: set, StraightOnly: true, Addr: addr, Limit: 10, Now: now})
	}
	for i := range 3 {
		en, err := enter(set)
		if err != nil || en.State != line.Admitted || en.Resumed || !en.FirstAdmission {
			t.Fatalf("straight-only join %d of 3 below the cap: %+v, %v; want admitted, claimed", i+1, en, err)
		}
	}
	before := e.state(t)
	if _, err := enter(set); !errors.Is(err, line.ErrWouldWait) {
		t.Fatalf("a straight-only join at the cap: %v; want ErrWouldWait", err)
	}
	after := e.state(t)
	if len(after.Waiting()) != 0 || after.ActiveCount() != 3 || after.Stat("seq") != before.Stat("seq") || after.Stat("joined") != 3 {
		t.Errorf("after it: waiting %v, %d active, seq %d (was %d), joined %d; want nobody waiting, 3, seq unchanged, 3 joined",
			after.Waiting(), after.ActiveCount(), after.Stat("seq"), before.Stat("seq"), after.Stat("joined"))
	}
	if e.shards > 1 && after.Marked() {
		t.Error("the line is marked; nothing was sent to a shard")
	}
	if n, _ := e.rdb.Get(ctx, rdb.JoinLimitKey(addr.String(), now.Unix()/60)).Int(); n != 3 {
		t.Errorf("the network's joins this minute: %d; want 3 (the refused one given back)", n)
	}
	q := e.open()
	q.MaxActive = 100
	if _, err := enter(q); !errors.Is(err, line.ErrWouldWait) {
		t.Errorf("a straight-only join in queue mode: %v; want ErrWouldWait", err)
	}
}
