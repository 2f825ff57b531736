package queue_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/atrest"
)

// kept is the abandon deadline of a place kept away (lua.go's KEPT).
const kept = 4294967295

// seenOf is where a waiting ticket id's abandon deadline is, in the env's
// layout: its seen key and its u32 slot ("#" and its index).
func (e env) seenOf(t testing.TB, id string) (key, slot string) {
	t.Helper()
	n := seqOf(t, id)
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
func tickFor(t testing.TB, e env, set line.Settings, n int64) line.TickResult {
	t.Helper()
	var sum line.TickResult
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

func (e env) stepAway(t testing.TB, set line.Settings, r line.JoinResult, account string) error {
	t.Helper()
	return e.store.StepAway(context.Background(), line.AwayRequest{Event: event, Settings: set, Ticket: r.Ticket,
		Account: account, Email: account + "@example.test", Lang: "ja", Limit: 10, Now: time.Now()})
}

// An away fan's place is kept without polls, far past abandon_after, while
// a silent fan next to it is dropped; a poll from a page of the away fan
// does not undo it. Let in, it waits away_claim_within for its claim (not
// the usual deadline) and is due its email, once; the first look claims it
// and its access window starts then. An away place never claimed lapses,
// moving from admitted to abandoned; the books balance throughout.
// joinAs is a new place of account's in the line as set has it.
func (e env) joinAs(t testing.TB, set line.Settings, account string) line.JoinResult {
	t.Helper()
	r, err := e.store.JoinWith(context.Background(), event, set, line.JoinOptions{Account: account})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// aliceAway is a paused line (nobody let in until the test says) and
// alice's place in it, stepped away from.
func (e env) aliceAway(t testing.TB) (line.Settings, line.JoinResult) {
	t.Helper()
	set := e.open()
	set.Mode = line.ModePaused
	r := e.joinAs(t, set, "alice")
	if err := e.stepAway(t, set, r, "alice"); err != nil {
		t.Fatal(err)
	}
	return set, r
}

// dueOne is the one away fan let in whose email is due (alice).
func (e env) dueOne(t testing.TB) line.AwayFan {
	t.Helper()
	due, err := e.store.AwayAdmitted(context.Background(), event, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due %+v, %v; want alice", due, err)
	}
	return due[0]
}

func TestAwayPlaceKeptAdmittedClaimedOrLapsed(t *testing.T) {
	for _, b := range []backend{backends[0], sharded[0]} {
		t.Run(b.name, func(t *testing.T) { testAway(t, setupOn(t, b)) })
	}
}

func testAway(t *testing.T, e env) {
	ctx := context.Background()
	set := e.open()
	set.Mode = line.ModePaused // nobody let in until the test says
	set.AwayClaimWithin = time.Hour
	away, silent, lapsing := e.joinAs(t, set, "alice"), e.joinAs(t, set, "bob"), e.joinAs(t, set, "chika")
	for _, f := range []struct {
		r    line.JoinResult
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
	if st := status(t, e.store, away.Ticket, set); st.State != line.Waiting {
		t.Fatalf("away fan's poll: %s; want waiting", st.State)
	}
	if got := e.deadlineOf(t, away.ID); got != kept {
		t.Fatalf("away deadline after a poll %d; want still kept", got)
	}
	// Far past abandon_after: the silent fan's deadline long gone (1970).
	e.setDeadline(t, silent.ID, 2)
	set.Mode = line.ModeQueue
	set.AdmitPerSecond, set.MaxActive = 1000, 1000
	r := tickFor(t, e, set, 2)
	if r.Abandoned != 1 || r.Admitted != 2 {
		t.Fatalf("tick: admitted %d abandoned %d; want 2 (the away fans) and 1 (the silent one)", r.Admitted, r.Abandoned)
	}
	if st := status(t, e.store, silent.Ticket, set); st.State != line.Expired {
		t.Errorf("silent fan: %s; want expired", st.State)
	}
	// Both away fans are due their email, once each, with where to send it.
	due, err := e.store.AwayAdmitted(ctx, event, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 2 || due[0].Email == "" || due[0].Lang != "ja" || due[0].Place == "" {
		t.Fatalf("due %+v; want alice's and chika's, with their addresses, language and places", due)
	}
	for _, d := range due {
		if tk, _ := e.store.AwayTicket(event, d.Place, d.Email); (d.ID == away.ID && (d.Email != "alice@example.test" || tk != away.Ticket.String())) || (d.ID != away.ID && d.ID != lapsing.ID) {
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
	if st.State != line.Admitted || !st.FirstAdmission {
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
	if st := status(t, e.store, lapsing.Ticket, set); st.State != line.Expired {
		t.Errorf("lapsed place: %s; want expired", st.State)
	}
	books := checkBooks(t, e)
	want := line.AwayBooks{Away: 2, Admitted: 2, Claimed: 1, Lapsed: 1}
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
	set.Mode = line.ModePaused
	mine := e.joinAs(t, set, "alice")
	anon := join(t, e.store, set)
	for _, c := range []struct {
		name    string
		ticket  line.Ticket
		account string
		want    error
	}{
		{"another account's", mine.Ticket, "mallory", line.ErrNotYours},
		{"no account's", anon.Ticket, "alice", line.ErrNotYours},
		{"none (a forged one parses to none)", line.Ticket{}, "alice", line.ErrInvalidTicket},
	} {
		err := e.store.StepAway(ctx, line.AwayRequest{Event: event, Settings: set, Ticket: c.ticket, Account: c.account,
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
	step := func(r line.JoinResult, acct string) error {
		return e.store.StepAway(ctx, line.AwayRequest{Event: event, Settings: set, Ticket: r.Ticket, Account: acct,
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
	if err := step(mine, "alice"); !errors.Is(err, line.ErrUnknownTicket) {
		t.Errorf("a place that left: %v; want ErrUnknownTicket", err)
	}
	second := e.joinAs(t, set, "alice")
	var limited line.AwayLimited
	if err := step(second, "alice"); !errors.As(err, &limited) || limited.RetryAfter <= 0 || limited.RetryAfter > time.Hour {
		t.Errorf("a third step away in the hour: %v; want AwayLimited with a retry within the hour", err)
	}
	// Let in already: nothing to keep.
	set.Mode = line.ModeQueue
	other := e.joinAs(t, set, "bob")
	tickFor(t, e, set, 3) // anon, second and bob
	if err := step(other, "bob"); !errors.Is(err, line.ErrAlreadyAdmitted) {
		t.Errorf("an admitted place: %v; want ErrAlreadyAdmitted", err)
	}
}

// No bearer credential at rest: from the step away to the email's turn,
// Redis holds no away fan's ticket, only its id and what rebuilds it
// (AwayFan.Place); the ticket rebuilt from it, for the address the fan
// gave, is the very ticket the fan holds; for any other address, or from
// a place changed in Redis, there is none.
func TestAwayKeepsNoTicketAtRest(t *testing.T) {
	for _, b := range []backend{backends[0], sharded[0]} {
		t.Run(b.name, func(t *testing.T) {
			e := setupOn(t, b)
			set, r := e.aliceAway(t)
			noTicketAtRest(t, e, "stepped away")
			set.Mode = line.ModeQueue
			set.AdmitPerSecond, set.MaxActive = 1000, 1000
			tickFor(t, e, set, 1)
			noTicketAtRest(t, e, "let in")
			f := e.dueOne(t)
			if f.ID != r.ID || f.Account != "alice" || f.Email != "alice@example.test" || f.Place == "" || strings.Contains(f.Place, r.Ticket.String()) {
				t.Fatalf("due %+v; want alice's id, account, address and place (not her ticket)", f)
			}
			got, err := e.store.AwayTicket(event, f.Place, f.Email)
			if err != nil || got != r.Ticket.String() {
				t.Fatalf("AwayTicket = %q, %v; want the fan's ticket %q", got, err, r.Ticket)
			}
			// A place is good for its own address only, and as it was
			// written: a Redis writer cannot have another's ticket sent
			// to itself.
			fields := strings.Fields(f.Place)
			for name, c := range map[string][2]string{
				"another address":     {f.Place, "mallory@example.test"},
				"another account":     {strings.Replace(f.Place, " alice ", " mallory ", 1), f.Email},
				"another join time":   {strings.Join(append([]string{fields[0], fields[1] + "1"}, fields[2:]...), " "), f.Email},
				"a seal of another's": {strings.Join(append(fields[:len(fields)-1:len(fields)-1], strings.Repeat("A", 22)), " "), f.Email},
				"no seal":             {strings.Join(fields[:len(fields)-1], " "), f.Email},
				"empty":               {"", f.Email},
				"the ticket itself":   {r.Ticket.String(), f.Email},
			} {
				if tk, err := e.store.AwayTicket(event, c[0], c[1]); !errors.Is(err, line.ErrInvalidTicket) {
					t.Errorf("%s: %q, %v; want ErrInvalidTicket", name, tk, err)
				}
			}
			if tk, err := e.store.AwayTicket("other", f.Place, f.Email); !errors.Is(err, line.ErrInvalidTicket) {
				t.Errorf("another event: %q, %v; want ErrInvalidTicket", tk, err)
			}
		})
	}
}

// noTicketAtRest fails the test if Redis holds a ticket of the event
// anywhere (or any JWT).
func noTicketAtRest(t *testing.T, e env, when string) {
	t.Helper()
	items, err := atrest.Dump(context.Background(), e.rdb.(*redis.Client))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range atrest.Find(items, func(s string) bool { _, err := line.NewCodec(secret).Parse(event, s); return err == nil }) {
		t.Errorf("%s: %s", when, f)
	}
}

// A note written by a gateway of the earlier release ("<lang> <account>
// <email> <ticket>", during a rolling upgrade) still has its fan emailed:
// AwayAdmitted reads it as a place, and the ticket leaves Redis with the
// note once the email is queued.
func TestAwayNoteOfTheEarlierReleaseIsRead(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	set, r := e.aliceAway(t)
	if err := e.rdb.HSet(ctx, rdb.KeysOf(event).Away, r.ID, "ko alice alice@example.test "+r.Ticket.String()).Err(); err != nil {
		t.Fatal(err)
	}
	set.Mode = line.ModeQueue
	set.AdmitPerSecond, set.MaxActive = 1000, 1000
	tickFor(t, e, set, 1)
	f := e.dueOne(t)
	if tk, err := e.store.AwayTicket(event, f.Place, f.Email); err != nil || tk != r.Ticket.String() || f.Lang != "ko" || f.Account != "alice" {
		t.Fatalf("due %+v: ticket %q, %v; want alice's, in Korean", f, tk, err)
	}
	if err := e.store.AwayNotified(ctx, event, []string{f.ID}); err != nil {
		t.Fatal(err)
	}
	noTicketAtRest(t, e, "notified")
}
