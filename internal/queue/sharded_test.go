package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
)

// The shards of an event fall each in its own K-th of the slot range, so
// that on a cluster whose masters split the slots evenly (the default),
// each shard is on its own master: checked against the slot map of a real
// three-master cluster, for many events and K = 2..6.
func TestShardTagsSpreadOverMasters(t *testing.T) {
	e := setupOn(t, sharded[1])
	ctx := context.Background()
	rdb := e.rdb.(*redis.ClusterClient)
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	masterOf := func(slot int) string {
		for _, s := range slots {
			if slot >= s.Start && slot <= s.End {
				return s.Nodes[0].Addr
			}
		}
		t.Fatalf("slot %d unassigned", slot)
		return ""
	}
	for _, ev := range []string{"premiere", "live-20", "x", "tour-2027-tokyo-dome"} {
		for k := 2; k <= 6; k++ {
			tags := queue.ShardTags(ev, k)
			shards := queuetest.Of(t, rdb, ev).Spread(k).Shards()
			for i, tag := range tags {
				if !strings.HasPrefix(tag, fmt.Sprintf("%s#%d", ev, i)) {
					t.Errorf("%s shard %d of %d: tag %q", ev, i, k, tag)
				}
				slot, err := rdb.ClusterKeySlot(ctx, shards[i].Wait).Result()
				if err != nil {
					t.Fatal(err)
				}
				if lo, hi := int64(i*16384/k), int64((i+1)*16384/k); slot < lo || slot >= hi {
					t.Errorf("%s shard %d of %d in slot %d; want [%d, %d)", ev, i, k, slot, lo, hi)
				}
			}
			if k == 3 {
				masters := map[string]bool{}
				for _, sk := range shards {
					masters[masterOf(int(rdb.ClusterKeySlot(ctx, sk.Wait).Val()))] = true
				}
				if len(masters) != 3 {
					t.Errorf("%s: 3 shards on %d masters; want 3", ev, len(masters))
				}
			}
		}
	}
}

// positions checks that every waiting fan's poll tells its exact place in
// the one line (the merged shards), and returns the line.
func positions(t *testing.T, e env, set line.Settings, tickets map[string]line.Ticket) []string {
	t.Helper()
	order := e.line(t)
	for i, id := range order {
		tk, ok := tickets[id]
		if !ok {
			t.Fatalf("%s in line is nobody's ticket", id)
		}
		st := status(t, e.store, tk, set)
		if st.State != line.Waiting || st.Position.Position != int64(i+1) {
			t.Fatalf("fan %d of the line: %v at place %d; want waiting at %d", i, st.State, st.Position.Position, i+1)
		}
	}
	return order
}

// The pre-queue is one lottery over every shard: each fan's place is
// exact, the order is random, and at opening the fans are let in in that
// order, whatever shard they are on.
func TestShardedLottery(t *testing.T) { onSharded(t, testShardedLottery) }

func testShardedLottery(t *testing.T, e env) {
	pre := e.open()
	pre.AdmitPerSecond = 1e6
	pre.MaxActive = 1 << 30
	// Opening 4 s ahead: every join of the 300 must land in the
	// pre-queue (on a loaded machine they took more than 1.5 s, and
	// the late ones went to the back in join order).
	pre.PrequeueOpensAt, pre.OpensAt = at(-time.Minute), at(4*time.Second)
	const n = 300
	ids := make([]string, n)
	tickets := map[string]line.Ticket{}
	for i, r := range joinMany(t, e.store, pre, n) {
		ids[i] = r.ID
		tickets[r.ID] = r.Ticket
	}
	if time.Now().After(*pre.OpensAt) {
		t.Fatal("the joins took longer than the pre-queue: the order check below would see late joins at the back")
	}
	line := positions(t, e, pre, tickets)
	if err := randomOrder(rankOf(ids, line)); err != nil {
		t.Errorf("pre-queue order: %v", err)
	}
	time.Sleep(time.Until(*pre.OpensAt))
	// The first tick draws the committed lottery (admitting nobody
	// with no room): the line is then in the draw's order, and
	// every place still exact.
	set := pre
	set.MaxActive = 0
	tick(t, e.store, set)
	line = positions(t, e, pre, tickets)
	// Let them in a few at a time: each step takes the front.
	admitInSteps(t, e, set, 13, line, "in the lottery's order")
	checkBooks(t, e)
}

// While fans are admitted, join and leave, every waiting fan's place stays
// exact, and nobody is admitted out of turn.
func TestShardedPositionsStayExact(t *testing.T) {
	e := setupOn(t, sharded[1])
	ctx := context.Background()
	set := e.open()
	set.AdmitPerSecond = 1e6
	set.MaxActive = 0
	tickets := map[string]line.Ticket{}
	add := func(n int) {
		for _, r := range joinMany(t, e.store, set, n) {
			tickets[r.ID] = r.Ticket
		}
	}
	add(120)
	for round := range 6 {
		set.MaxActive += 17
		tick(t, e.store, set)
		// two fans leave, from anywhere in the line
		line := e.line(t)
		for _, id := range []string{line[len(line)/3], line[2*len(line)/3]} {
			must(t, e.store.Leave(ctx, event, tickets[id]))
		}
		add(10)
		line = positions(t, e, set, tickets)
		admitted := e.state(t).Active()
		// Everyone admitted sorts before everyone waiting.
		inLine := map[string]int{}
		for i, id := range line {
			inLine[id] = i
		}
		for _, id := range admitted {
			if _, waiting := inLine[id]; waiting {
				t.Fatalf("round %d: %s both active and waiting", round, id)
			}
		}
		if len(line) > 0 {
			first := seqOf(t, line[0])
			for _, id := range admitted {
				if seqOf(t, id) > first {
					t.Fatalf("round %d: %s admitted before %s, who joined first", round, id, line[0])
				}
			}
		}
	}
	checkBooks(t, e)
}

// A tick that dies halfway loses nobody and admits nobody twice: killed
// after moving fans out of line, they are back at their places (the front)
// at the next tick, which then lets them in first; killed after letting
// them in, the next tick clears the handover and they are in, once.
func TestShardedTickDiesHalfway(t *testing.T) {
	for _, step := range []string{"take", "accept"} {
		t.Run("after "+step, func(t *testing.T) {
			e := setupOn(t, sharded[0])
			ctx := context.Background()
			set := e.open()
			set.AdmitPerSecond = 1e6
			set.MaxActive = 10
			rs := joinMany(t, e.store, set, 40)
			tickets := map[string]line.Ticket{}
			for _, r := range rs {
				tickets[r.ID] = r.Ticket
			}
			order := e.line(t)
			tick(t, e.store, set) // the first tick only sets the watermark
			// The bucket fills with the time since the last tick: a tick in
			// the same millisecond would have no token, take nobody, and
			// never reach the step it is to die after.
			time.Sleep(5 * time.Millisecond)
			if err := e.store.TickDyingAfter(ctx, event, set, step); err != nil {
				t.Fatalf("the dying tick: %v", err)
			}
			// Meanwhile the fans being handed over poll: still in line, or in.
			for _, id := range order[:10] {
				st := status(t, e.store, tickets[id], set)
				if want := map[string]line.State{"take": line.Waiting, "accept": line.Admitted}[step]; st.State != want {
					t.Fatalf("a fan of the dead handover: %v; want %v", st.State, want)
				}
			}
			// A new admitter (another Store: another replica) after the lease.
			next := queue.NewStore(e.rdb, secret).WithDrawSecret(drawSecret)
			var r line.TickResult
			deadline := time.Now().Add(5 * time.Second)
			for r = tick(t, next, set); r.Busy && time.Now().Before(deadline); r = tick(t, next, set) {
				time.Sleep(50 * time.Millisecond)
			}
			if r.Busy {
				t.Fatal("the dead replica's lease never lapsed")
			}
			if step == "take" && r.Admitted != 10 {
				t.Fatalf("the next tick admitted %d; want the 10 the dead one could not", r.Admitted)
			}
			active := map[string]bool{}
			for _, id := range e.state(t).Active() {
				active[id] = true
			}
			for i, id := range order {
				if active[id] != (i < 10) {
					t.Fatalf("fan %d of the line active=%v; want the first 10 in, the rest waiting", i, active[id])
				}
			}
			if got := e.line(t); len(got) != 30 || got[0] != order[10] {
				t.Fatalf("%d waiting, front %v; want 30 from fan 10 on", len(got), got[:1])
			}
			if n := e.state(t).Moving(); n != 0 {
				t.Fatalf("%d fans left in the shards' handovers", n)
			}
			st := checkBooks(t, e)
			if st.Admitted != 10 {
				t.Fatalf("admitted counter %d; want 10 (nobody twice)", st.Admitted)
			}
		})
	}
}

// A fan who stops polling on a shard is dropped as abandoned there, counted
// once; passthrough lets fans in at the global step, claimed at once; a
// closed event tells its waiting fans.
func TestShardedModes(t *testing.T) {
	e := setupOn(t, sharded[0])
	ctx := context.Background()
	set := e.open()
	set.AdmitPerSecond = 1e6
	set.AbandonAfter = time.Second
	gone := join(t, e.store, set)
	joined, err := e.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	stays := join(t, e.store, set)
	// gone last polled at its join, no later than joined: its deadline is
	// the second its pollAfter and abandon_after (1 s) end in, rounded up
	// (lua.go, deadline), and a tick drops it once Redis's clock is in a
	// later second. Until then stays keeps polling.
	dl := joined.Add(gone.PollAfter + set.AbandonAfter + time.Second - time.Millisecond).Unix()
	for {
		status(t, e.store, stays.Ticket, set)
		now, err := e.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.Unix() > dl {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	set.MaxActive = 1
	tickUntilStill(t, e.store, set)
	if st := status(t, e.store, stays.Ticket, set); st.State != line.Admitted {
		t.Fatalf("the fan who polled: %v; want admitted (the one who left skipped)", st.State)
	}
	if st := status(t, e.store, gone.Ticket, set); st.State != line.Expired {
		t.Fatalf("the fan who stopped polling: %v; want expired", st.State)
	}
	if st := checkBooks(t, e); st.Abandoned != 1 || st.Admitted != 1 {
		t.Fatalf("%+v; want 1 abandoned, 1 admitted", st)
	}

	pass := set
	pass.Mode = line.ModePassthrough
	r := join(t, e.store, pass)
	if r.State != line.Admitted {
		t.Fatalf("passthrough join: %+v; want admitted", r)
	}
	if st := status(t, e.store, r.Ticket, pass); st.State != line.Admitted || st.FirstAdmission {
		t.Fatalf("passthrough poll: %+v; want admitted, claimed at join", st)
	}

	w := join(t, e.store, set)
	closed := set
	closed.Mode = line.ModeClosed
	if st := status(t, e.store, w.Ticket, closed); st.State != line.Closed {
		t.Fatalf("closed: %v", st.State)
	}
	if _, err := e.store.Join(ctx, event, closed); !errors.Is(err, line.ErrClosed) {
		t.Fatalf("join closed: %v", err)
	}
	checkBooks(t, e)
}

// An event's line keeps the layout it started with: settings asking for
// another one (a config edited mid-sale, a gateway that has not yet read
// the admitter's settings) are told, and every operation goes to where the
// fans really are.
func TestLayoutIsKept(t *testing.T) {
	for _, c := range []struct{ started, asked int }{{1, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("%d then %d", c.started, c.asked), func(t *testing.T) {
			e := setup(t)
			ctx := context.Background()
			first := open()
			first.AdmitPerSecond = 1e6
			first.Shards = c.started
			a := join(t, e.store, first)
			other := first
			other.Shards = c.asked
			b := join(t, e.store, other)
			if st := status(t, e.store, a.Ticket, other); st.State != line.Waiting || st.Position.Position != 1 {
				t.Fatalf("first fan: %+v; want waiting at 1", st)
			}
			if st := status(t, e.store, b.Ticket, other); st.State != line.Waiting || st.Position.Position != 2 {
				t.Fatalf("second fan: %+v; want waiting at 2", st)
			}
			var r line.TickResult
			for range 3 {
				r = tick(t, e.store, other)
				time.Sleep(10 * time.Millisecond) // the bucket fills with time
			}
			if r.Shards != c.started || r.Active != 2 {
				t.Fatalf("tick: %+v; want the %d-shard line's 2 fans admitted", r, c.started)
			}
			must(t, e.store.Leave(ctx, event, b.Ticket))
			if c, _ := e.store.Counts(ctx, event); c.Active != 1 {
				t.Fatalf("counts after leave %+v", c)
			}
			want := c.started
			if want == 1 {
				if l := e.state(t).Spread(3); l.Has(l.Shards()[0].Wait) {
					t.Fatal("a one-shard line grew shard keys")
				}
			}
		})
	}
}

// The merged calls of the sharded line: many concurrent polls cost each
// shard a few script calls, not one each.
func TestShardedPollsAreMerged(t *testing.T) {
	e := setupOn(t, sharded[0])
	set := e.open()
	rs := joinMany(t, e.store, set, 600)
	before := e.cmds.n.Load()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.store.Status(context.Background(), event, r.Ticket, set); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	n := e.cmds.n.Load() - before
	t.Logf("%d polls: %d commands", len(rs), n)
	// Unmerged: a poll's own script plus a count on each of the 2 others.
	if n >= int64(3*len(rs)) {
		t.Errorf("%d commands for %d polls; want the counts merged (fewer than %d)", n, len(rs), 3*len(rs))
	}
}
