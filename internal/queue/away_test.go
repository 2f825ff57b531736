package queue_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
)

// kept is the abandon deadline of a place kept away (lua.go's KEPT).
const kept = 4294967295

// seenOf is where a waiting ticket id's abandon deadline is, in the env's
// layout: its seen key and its u32 slot ("#" and its index).
func (e env) seenOf(t testing.TB, id string) (key, slot string) {
	t.Helper()
	seq, _, _ := strings.Cut(id, ".")
	n, err := strconv.ParseInt(seq, 36, 64)
	if err != nil {
		t.Fatal(err)
	}
	if e.shards > 1 {
		return rdb.ShardKeysFor(event, e.shards)[n%int64(e.shards)].Seen, "#" + strconv.FormatInt(n/int64(e.shards), 10)
	}
	return rdb.KeysOf(event).Seen, "#" + strconv.FormatInt(n, 10)
}

// deadlineOf reads the abandon deadline (unix s) of a waiting ticket id.
func (e env) deadlineOf(t testing.TB, id string) int64 {
	t.Helper()
	key, slot := e.seenOf(t, id)
	v, err := e.rdb.BitField(context.Background(), key, "GET", "u32", slot).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

// setDeadline sets it, as if that much time had passed since its fan polled.
func (e env) setDeadline(t testing.TB, id string, v int64) {
	t.Helper()
	key, slot := e.seenOf(t, id)
	if err := e.rdb.BitField(context.Background(), key, "SET", "u32", slot, v).Err(); err != nil {
		t.Fatal(err)
	}
}

// tickFor ticks until n fans are let in (the bucket fills from the first
// tick on), and sums what the ticks did.
func tickFor(t testing.TB, e env, set queue.Settings, n int64) queue.TickResult {
	t.Helper()
	var sum queue.TickResult
	for range 50 {
		r := tick(t, e.store, set)
		sum.Admitted += r.Admitted
		sum.Abandoned += r.Abandoned
		sum.Lapsed += r.Lapsed
		if sum.Admitted >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return sum
}

func (e env) stepAway(t testing.TB, set queue.Settings, r queue.JoinResult, account string) error {
	t.Helper()
	return e.store.StepAway(context.Background(), queue.AwayRequest{Event: event, Settings: set, Ticket: r.Ticket,
		Account: account, Email: account + "@example.test", Lang: "ja", Limit: 10, Now: time.Now()})
}

// An away fan's place is kept without polls, far past abandon_after, while
// a silent fan next to it is dropped; a poll from a page of the away fan
// does not undo it. Let in, it waits away_claim_within for its claim (not
// the usual deadline) and is due its email, once; the first look claims it
// and its access window starts then. An away place never claimed lapses,
// moving from admitted to abandoned; the books balance throughout.
func TestAwayPlaceKeptAdmittedClaimedOrLapsed(t *testing.T) {
	for _, b := range []backend{backends[0], sharded[0]} {
		t.Run(b.name, func(t *testing.T) { testAway(t, setupOn(t, b)) })
	}
}

func testAway(t *testing.T, e env) {
	ctx := context.Background()
	set := e.open()
	set.Mode = queue.ModePaused // nobody let in until the test says
	set.AwayClaimWithin = time.Hour
	join := func(acct string) queue.JoinResult {
		r, err := e.store.JoinWith(ctx, event, set, queue.JoinOptions{Account: acct})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	away, silent, lapsing := join("alice"), join("bob"), join("chika")
	for _, f := range []struct {
		r    queue.JoinResult
		acct string
	}{{away, "alice"}, {lapsing, "chika"}} {
		if err := e.stepAway(t, set, f.r, f.acct); err != nil {
			t.Fatalf("step away: %v", err)
		}
	}
	if got := e.deadlineOf(t, away.ID); got != kept {
		t.Fatalf("away deadline %d; want %d (kept)", got, kept)
	}
	// A page of the away fan still polls: its place stays kept.
	if st := status(t, e.store, away.Ticket, set); st.State != queue.Waiting {
		t.Fatalf("away fan's poll: %s; want waiting", st.State)
	}
	if got := e.deadlineOf(t, away.ID); got != kept {
		t.Fatalf("away deadline after a poll %d; want still kept", got)
	}
	// Far past abandon_after: the silent fan's deadline long gone (1970).
	e.setDeadline(t, silent.ID, 2)
	set.Mode = queue.ModeQueue
	set.AdmitPerSecond, set.MaxActive = 1000, 1000
	r := tickFor(t, e, set, 2)
	if r.Abandoned != 1 || r.Admitted != 2 {
		t.Fatalf("tick: admitted %d abandoned %d; want 2 (the away fans) and 1 (the silent one)", r.Admitted, r.Abandoned)
	}
	if st := status(t, e.store, silent.Ticket, set); st.State != queue.Expired {
		t.Errorf("silent fan: %s; want expired", st.State)
	}
	// Both away fans are due their email, once each, with where to send it.
	due, err := e.store.AwayAdmitted(ctx, event, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 2 || due[0].Email == "" || due[0].Lang != "ja" || due[0].Ticket == "" {
		t.Fatalf("due %+v; want alice's and chika's, with their addresses, language and tickets", due)
	}
	for _, d := range due {
		if (d.ID == away.ID && (d.Email != "alice@example.test" || d.Ticket != away.Ticket)) || (d.ID != away.ID && d.ID != lapsing.ID) {
			t.Errorf("due %+v", d)
		}
	}
	// Their places wait an hour (away_claim_within), not the deadline.
	exp, _ := e.rdb.ZScore(ctx, rdb.KeysOf(event).Active, away.ID).Result()
	if until := time.UnixMilli(int64(exp)); until.Before(time.Now().Add(50 * time.Minute)) {
		t.Errorf("away place waits until %v; want about an hour from now", until)
	}
	if err := e.store.AwayNotified(ctx, event, []string{away.ID, lapsing.ID}); err != nil {
		t.Fatal(err)
	}
	if due, _ := e.store.AwayAdmitted(ctx, event, 10); len(due) != 0 {
		t.Errorf("still due after notified: %+v", due)
	}
	// The claim (the link opened): the window is access_ttl from now,
	// shorter than the wait it had.
	st := status(t, e.store, away.Ticket, set)
	if st.State != queue.Admitted || !st.FirstAdmission {
		t.Fatalf("claim: %+v; want admitted, first", st)
	}
	if d := time.Until(st.ActiveUntil); d > set.AccessTTL+time.Second || d < set.AccessTTL-5*time.Second {
		t.Errorf("window after the claim ends in %v; want access_ttl %v", d, set.AccessTTL)
	}
	// The other is never claimed: its wait ends (moved to now), it lapses.
	if err := e.rdb.ZAdd(ctx, rdb.KeysOf(event).Active, redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: lapsing.ID}).Err(); err != nil {
		t.Fatal(err)
	}
	r = tick(t, e.store, set)
	if r.Lapsed != 1 {
		t.Errorf("tick lapsed %d; want 1", r.Lapsed)
	}
	if st := status(t, e.store, lapsing.Ticket, set); st.State != queue.Expired {
		t.Errorf("lapsed place: %s; want expired", st.State)
	}
	books := checkBooks(t, e)
	want := queue.AwayBooks{Away: 2, Admitted: 2, Claimed: 1, Lapsed: 1}
	if books.Away != want || books.Admitted != 1 || books.Abandoned != 2 {
		t.Errorf("books %+v; want away %+v, admitted 1 (alice), abandoned 2 (bob, chika)", books, want)
	}
}

// Bad steps away change nothing: a ticket of another account, or of none;
// a forged ticket; a place that left; one let in already. An account steps
// away at most Limit times an hour (stepping away again with the same
// ticket is not counted again).
func TestStepAwayRefusals(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	set := e.open()
	set.Mode = queue.ModePaused
	mine, err := e.store.JoinWith(ctx, event, set, queue.JoinOptions{Account: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	anon := join(t, e.store, set)
	for _, c := range []struct {
		name    string
		ticket  string
		account string
		want    error
	}{
		{"another account's", mine.Ticket, "mallory", queue.ErrNotYours},
		{"no account's", anon.Ticket, "alice", queue.ErrNotYours},
		{"forged", mine.Ticket[:len(mine.Ticket)-2] + "AA", "alice", queue.ErrInvalidTicket},
	} {
		err := e.store.StepAway(ctx, queue.AwayRequest{Event: event, Settings: set, Ticket: c.ticket, Account: c.account,
			Email: "x@example.test", Lang: "en", Now: time.Now()})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v; want %v", c.name, err, c.want)
		}
	}
	if n, _ := e.rdb.HLen(ctx, rdb.KeysOf(event).Away).Result(); n != 0 {
		t.Fatalf("away notes %d after refusals; want 0", n)
	}
	if got := e.deadlineOf(t, mine.ID); got == kept {
		t.Fatal("a refused step away kept the place")
	}
	// Limit 2 an hour: the same ticket again is free; a third new one is not.
	step := func(r queue.JoinResult, acct string) error {
		return e.store.StepAway(ctx, queue.AwayRequest{Event: event, Settings: set, Ticket: r.Ticket, Account: acct,
			Email: acct + "@example.test", Lang: "en", Limit: 2, Now: time.Now()})
	}
	if err := step(mine, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := step(mine, "alice"); err != nil {
		t.Fatalf("the same place again: %v", err)
	}
	if err := e.store.Leave(ctx, event, mine.Ticket); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.rdb.HLen(ctx, rdb.KeysOf(event).Away).Result(); n != 0 {
		t.Errorf("away notes %d after leaving; want 0", n)
	}
	if err := step(mine, "alice"); !errors.Is(err, queue.ErrUnknownTicket) {
		t.Errorf("a place that left: %v; want ErrUnknownTicket", err)
	}
	second, _ := e.store.JoinWith(ctx, event, set, queue.JoinOptions{Account: "alice"})
	var limited queue.AwayLimited
	if err := step(second, "alice"); !errors.As(err, &limited) || limited.RetryAfter <= 0 || limited.RetryAfter > time.Hour {
		t.Errorf("a third step away in the hour: %v; want AwayLimited with a retry within the hour", err)
	}
	// Let in already: nothing to keep.
	set.Mode = queue.ModeQueue
	other, _ := e.store.JoinWith(ctx, event, set, queue.JoinOptions{Account: "bob"})
	tickFor(t, e, set, 3) // anon, second and bob
	if err := step(other, "bob"); !errors.Is(err, queue.ErrAlreadyAdmitted) {
		t.Errorf("an admitted place: %v; want ErrAlreadyAdmitted", err)
	}
}
