package queue_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/atrest"
)

// The draw's rules of the second round (DESIGN.md, Transparency): the key
// is SHA-256(seed ‖ entriesDigest), the entries freeze at opens_at and
// never grow again, the seed is shown only with the entries, and a drawn
// event stays drawn.

// entriesDigest is SHA-256 of the ids sorted bytewise, each followed by a
// newline: what docs/QUEUE.md tells anyone to compute.
func entriesDigest(ids []string) []byte {
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	h := sha256.New()
	for _, id := range sorted {
		h.Write([]byte(id))
		h.Write([]byte("\n"))
	}
	return h.Sum(nil)
}

// drawKey is SHA-256(seed ‖ digest).
func drawKey(seed, digest []byte) []byte {
	k := sha256.Sum256(append(append([]byte(nil), seed...), digest...))
	return k[:]
}

func hmacOf(key []byte, id string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	return m.Sum(nil)
}

// rankOrder sorts ids by their draw under key, lowest first: the whole 32
// bytes, then the id (DESIGN.md, "Ties are broken as written").
func rankOrder(key []byte, ids []string) []string {
	out := append([]string(nil), ids...)
	sort.Slice(out, func(a, b int) bool {
		if c := bytes.Compare(hmacOf(key, out[a]), hmacOf(key, out[b])); c != 0 {
			return c < 0
		}
		return out[a] < out[b]
	})
	return out
}

// drawnLine is a line whose pre-queue of n fans is drawn, nobody let in
// yet (max_active 0, admitting at once when it is raised): its settings and
// its fans.
func drawnLine(t *testing.T, e env, n int) (line.Settings, []line.JoinResult) {
	t.Helper()
	set := prequeue(e.open())
	set.AdmitPerSecond, set.MaxActive = 1e6, 0
	fans := joinMany(t, e.store, set, n)
	set.OpensAt = at(0)
	drawNow(t, e, set)
	return set, fans
}

// drawn opens the event's line at once and ticks until its lottery is
// drawn.
func drawNow(t *testing.T, e env, set line.Settings) line.Draw {
	t.Helper()
	ctx := context.Background()
	for range 50 {
		tick(t, e.store, set)
		l, err := e.store.Lottery(ctx, event, set)
		must(t, err)
		if l.Drawn {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the lottery is never drawn")
	return line.Draw{}
}

// The key mixes the seed with the frozen entries: anyone recomputes the
// digest from the published list, then every draw and rank, with nothing
// but SHA-256 and HMAC; the list is every entry (those who left too) in
// rank order.
func TestDrawKeyMixesTheEntries(t *testing.T) { onEachLayout(t, testDrawKeyMixesTheEntries) }

func testDrawKeyMixesTheEntries(t *testing.T, e env) {
	ctx := context.Background()
	set := prequeue(e.open())
	set.MaxActive = 0
	fans := joinMany(t, e.store, set, 60)
	must(t, e.store.Leave(ctx, event, fans[0].Ticket))
	set.OpensAt = at(0) // brought forward: the entries freeze at the next tick
	l := drawNow(t, e, set)

	seed, err := hex.DecodeString(l.Seed)
	must(t, err)
	var ids []string
	for _, f := range fans {
		ids = append(ids, f.ID)
	}
	digest := entriesDigest(ids)
	if l.EntriesDigest != hex.EncodeToString(digest) || l.Entries != int64(len(ids)) {
		t.Fatalf("entries %d digest %s; want %d and %x", l.Entries, l.EntriesDigest, len(ids), digest)
	}
	key := drawKey(seed, digest)
	want := rankOrder(key, ids)
	var list strings.Builder
	must(t, e.store.LotteryEntries(ctx, event, &list))
	if got := strings.Fields(list.String()); !equal(got, want) || !strings.HasSuffix(list.String(), "\n") {
		t.Fatalf("published entries\n%q\nwant, in rank order\n%q", list.String(), want)
	}
	for i, id := range want {
		d, err := e.store.TicketDraw(ctx, event, ticketOf(fans, id))
		must(t, err)
		if d.Rank != int64(i+1) || d.Draw != hex.EncodeToString(hmacOf(key, id)) {
			t.Errorf("%s: rank %d draw %s; want rank %d draw %x", id, d.Rank, d.Draw, i+1, hmacOf(key, id))
		}
	}
	// The line is the draw's order, less the one who left.
	var line []string
	for _, id := range want {
		if id != fans[0].ID {
			line = append(line, id)
		}
	}
	if got := e.line(t); !equal(got, line) {
		t.Errorf("the line\n%v\nwant the draw's order\n%v", got, line)
	}
}

func ticketOf(fans []line.JoinResult, id string) line.Ticket {
	for _, f := range fans {
		if f.ID == id {
			return f.Ticket
		}
	}
	return line.Ticket{}
}

// From opens_at until the draw is complete, the seed is not shown, and a
// fan's draw is "not drawn yet", not "at opening": opening is not the draw.
func TestSeedHiddenUntilDrawn(t *testing.T) { onEachLayout(t, testSeedHiddenUntilDrawn) }

func testSeedHiddenUntilDrawn(t *testing.T, e env) {
	ctx := context.Background()
	set := prequeue(e.open())
	f := join(t, e.store, set)
	set.OpensAt = at(-time.Millisecond) // opened, and no admitter ticked since
	l, err := e.store.Lottery(ctx, event, set)
	must(t, err)
	if l.Seed != "" || l.Drawn || l.EntriesDigest != "" {
		t.Errorf("after opens_at, before the draw: seed %q drawn %v digest %q; want none shown", l.Seed, l.Drawn, l.EntriesDigest)
	}
	if _, err := e.store.TicketDraw(ctx, event, f.Ticket); !errors.Is(err, line.ErrNotDrawn) {
		t.Errorf("a draw before the draw is done: %v; want ErrNotDrawn", err)
	}
	var list strings.Builder
	if err := e.store.LotteryEntries(ctx, event, &list); !errors.Is(err, line.ErrNotDrawn) || list.Len() != 0 {
		t.Errorf("the entries before the draw: %v, %q; want ErrNotDrawn and nothing", err, list.String())
	}
	l = drawNow(t, e, set)
	if l.Seed == "" || l.EntriesDigest == "" || l.Entries != 1 {
		t.Errorf("drawn: %+v; want the seed, the digest and 1 entry", l)
	}
}

// Once drawn, always drawn: a join made with settings whose opens_at was
// postponed after the draw (a reload, a stale gateway) is FIFO behind every
// entry, in no lottery, and counted in the FIFO figures; nobody can leave
// and rejoin into a draw whose seed is public.
func TestJoinAfterTheDrawIsFIFO(t *testing.T) { onEachLayout(t, testJoinAfterTheDrawIsFIFO) }

func testJoinAfterTheDrawIsFIFO(t *testing.T, e env) {
	ctx := context.Background()
	set, fans := drawnLine(t, e, 30)

	later := set
	later.OpensAt = at(time.Hour) // postponed after the draw
	tickets := map[string]line.Ticket{}
	for _, f := range fans {
		tickets[f.ID] = f.Ticket
	}
	var late []line.JoinResult
	for range 8 {
		r := join(t, e.store, later)
		late = append(late, r)
		tickets[r.ID] = r.Ticket
		if _, err := e.store.TicketDraw(ctx, event, r.Ticket); !errors.Is(err, line.ErrNotInLottery) {
			t.Errorf("a join after the draw: its draw %v; want ErrNotInLottery", err)
		}
		if r.Position.Position != int64(len(fans)+len(late)) {
			t.Errorf("a join after the draw at place %d; want %d, behind every entry", r.Position.Position, len(fans)+len(late))
		}
	}
	line := e.line(t)
	for i, f := range late {
		if line[len(fans)+i] != f.ID {
			t.Fatalf("the line's tail %v; want the late joins in FIFO order %v", line[len(fans):], late)
		}
	}
	positions(t, e, set, tickets)
	set.MaxActive = 1 << 20
	for range 20 {
		tick(t, e.store, set)
		if len(e.line(t)) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r, err := e.store.Report(ctx, event)
	must(t, err)
	if r.FIFOInversions != 0 || r.Admitted != int64(len(fans)+len(late)) {
		t.Errorf("report: admitted %d, %d FIFO inversions; want %d and 0", r.Admitted, r.FIFOInversions, len(fans)+len(late))
	}
}

// Removing the pre-queue (or the opening time) after the commitment still
// draws what was entered and opens the line; it never stays shut.
func TestPrequeueRemovedAfterTheCommitment(t *testing.T) {
	onEachLayout(t, testPrequeueRemovedAfterTheCommitment)
}

// (On a single Redis the opening stays; on the cluster it is removed as
// well.)

func testPrequeueRemovedAfterTheCommitment(t *testing.T, e env) {
	ctx := context.Background()
	set := prequeue(e.open())
	fans := joinMany(t, e.store, set, 5)
	// The operator removes the pre-queue, and brings the opening forward;
	// then removes the opening too.
	set.PrequeueOpensAt, set.OpensAt = nil, at(300*time.Millisecond)
	tick(t, e.store, set)
	if l, err := e.store.Lottery(ctx, event, set); err != nil || l.Drawn {
		t.Fatalf("before the new opening: %+v %v; want not drawn yet", l, err)
	}
	time.Sleep(time.Until(*set.OpensAt))
	if e.cluster {
		set.OpensAt = nil
	}
	var admitted int64
	for range 20 {
		admitted += tick(t, e.store, set).Admitted
		if admitted == int64(len(fans)) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if admitted != int64(len(fans)) {
		t.Fatalf("%d of %d entries admitted after the pre-queue was removed", admitted, len(fans))
	}
	l, err := e.store.Lottery(ctx, event, set)
	must(t, err)
	if !l.Drawn || l.Entries != int64(len(fans)) {
		t.Errorf("lottery %+v; want drawn with %d entries", l, len(fans))
	}
}

// An insider who knows the seed during the pre-queue (the nonce from Redis
// and the draw secret from the config) and keeps the tickets whose HMAC
// under it is lowest (the old draw), letting the rest lapse, gains nothing:
// the kept tickets' ranks are spread as anyone's.
func TestInsiderWhoKnowsTheSeedGainsNothing(t *testing.T) {
	onEachLayout(t, testInsiderWhoKnowsTheSeedGainsNothing)
}

func testInsiderWhoKnowsTheSeedGainsNothing(t *testing.T, e env) {
	ctx := context.Background()
	set := prequeue(e.open())
	set.MaxActive = 0
	honest := joinMany(t, e.store, set, 200)
	seed, err := draw.Secret(drawSecret).Seed(event, draw.Lottery, e.state(t).Nonce())
	if err != nil || len(seed) != 32 {
		t.Fatalf("the insider derives the seed: %x, %v", seed, err)
	}
	ground := joinMany(t, e.store, set, 400)
	sort.Slice(ground, func(a, b int) bool {
		return bytes.Compare(hmacOf(seed, ground[a].ID), hmacOf(seed, ground[b].ID)) < 0
	})
	kept := ground[:40]
	for _, f := range ground[40:] {
		must(t, e.store.Leave(ctx, event, f.Ticket))
	}
	set.OpensAt = at(0)
	l := drawNow(t, e, set)
	mean := func(fans []line.JoinResult) float64 {
		var sum float64
		for _, f := range fans {
			d, err := e.store.TicketDraw(ctx, event, f.Ticket)
			must(t, err)
			sum += float64(d.Rank) / float64(l.Entries)
		}
		return sum / float64(len(fans))
	}
	// Uniform ranks have a mean of 0.5; the mean of 40 has a standard
	// deviation of 0.046, so 0.3 is more than four of them away. Under the
	// seed alone the kept tickets would sit near 0.05.
	if m := mean(kept); m < 0.3 {
		t.Errorf("the insider's kept tickets: mean rank %.3f of the entries; want about 0.5 (honest fans: %.3f)", m, mean(honest))
	}
}

// The line is let in while the draw is applied, and only in the drawn
// order: one admitter draws a pre-queue of several parts while another
// ticks as fast as it can; every set of fans let in, at every moment, is
// the front of the drawn order.
func TestLetInWhileTheDrawIsApplied(t *testing.T) { onEachLayout(t, testLetInWhileTheDrawIsApplied) }

func testLetInWhileTheDrawIsApplied(t *testing.T, e env) {
	ctx := context.Background()
	const n = 35_000
	set := prequeue(e.open())
	set.AdmitPerSecond, set.MaxActive = 1e6, 1<<30
	join(t, e.store, set)
	fillPrequeue(t, e.rdb, n, e.shards)
	opens := time.Now().Add(300 * time.Millisecond)
	set.OpensAt = &opens
	tick(t, e.store, set)
	time.Sleep(time.Until(opens))

	drawer, other := queue.NewStore(e.rdb, secret).WithDrawSecret(drawSecret), queue.NewStore(e.rdb, secret).WithDrawSecret(drawSecret)
	drawn := make(chan error, 1)
	go func() { _, err := drawer.Tick(ctx, event, set); drawn <- err }()
	for l := e.state(t); !l.Has(l.Keys().Drawing); {
		time.Sleep(time.Millisecond) // the drawer holds the draw's lease
	}
	var snapshots [][]string
	for done := false; !done; {
		select {
		case err := <-drawn:
			must(t, err)
			done = true
		default:
		}
		tick(t, other, set)
		snapshots = append(snapshots, e.state(t).Active())
	}
	partly := 0 // ticks that found the line partly let in
	for _, snap := range snapshots {
		if len(snap) > 0 && len(snap) < n {
			partly++
		}
	}
	// (How many ticks land while it is applied depends on the machine's
	// load: TestDrawBoundHoldsTheLine checks the bound itself.)
	var list strings.Builder
	must(t, e.store.LotteryEntries(ctx, event, &list))
	order := strings.Fields(list.String())
	rank := map[string]int{}
	for i, id := range order {
		rank[id] = i
	}
	for i, snap := range snapshots {
		for _, id := range snap {
			r, ok := rank[id]
			if !ok || r >= len(snap) {
				t.Fatalf("tick %d during the draw: %d fans in, among them %s at rank %d: not the front of the draw", i, len(snap), id, r+1)
			}
		}
	}
	t.Logf("%d ticks during the draw, %d of them with the line partly let in", len(snapshots), partly)
}

// While the draw is applied, a tick lets in nobody past its bound, however
// many tokens and places there are: here the draw is done, then set back
// to "applied up to the 7th fan in line", and ticks let in exactly the
// first 7, until the bound moves on.
func TestDrawBoundHoldsTheLine(t *testing.T) { onEachLayout(t, testDrawBoundHoldsTheLine) }

func testDrawBoundHoldsTheLine(t *testing.T, e env) {
	ctx := context.Background()
	set := prequeue(e.open())
	set.AdmitPerSecond, set.MaxActive = 1e6, 1<<30
	fans := joinMany(t, e.store, set, 20)
	must(t, e.store.Leave(ctx, event, fans[0].Ticket))
	set.OpensAt = at(0)
	closed := set
	closed.Mode = "paused" // drawn, nobody let in yet
	drawNow(t, e, closed)
	var list strings.Builder
	must(t, e.store.LotteryEntries(ctx, event, &list))
	order := strings.Fields(list.String())
	lot := e.state(t).Keys().Lottery
	score := func(id string) float64 {
		s, ok := e.state(t).Place(id)
		if !ok {
			t.Fatalf("%s is not in line", id)
		}
		return s
	}
	var line []string // the drawn order, less the one who left
	for _, id := range order {
		if id != fans[0].ID {
			line = append(line, id)
		}
	}
	must(t, e.rdb.HDel(ctx, lot, "applied").Err())
	must(t, e.rdb.HSet(ctx, lot, "through", int64(score(line[6]))).Err())
	for range 5 {
		tick(t, e.store, set)
		time.Sleep(5 * time.Millisecond)
	}
	want := map[string]bool{}
	for _, id := range line[:7] {
		want[id] = true
	}
	in := e.state(t).Active()
	if len(in) != len(want) {
		t.Fatalf("%d fans in past a bound at rank 7; want %d: %v", len(in), len(want), in)
	}
	for _, id := range in {
		if !want[id] {
			t.Errorf("%s let in past the bound", id)
		}
	}
	must(t, e.rdb.HSet(ctx, lot, "applied", 1).Err())
	must(t, e.rdb.HDel(ctx, lot, "through").Err())
	for range 5 {
		tick(t, e.store, set)
		time.Sleep(5 * time.Millisecond)
	}
	if n := e.state(t).ActiveCount(); n != int64(len(fans)-1) {
		t.Errorf("%d fans in once the draw is applied; want all %d", n, len(fans)-1)
	}
}

// everything is every string the env's Redis holds (on a cluster, every
// master's): keys, values, fields, members, scores, as someone reading
// Redis, its AOF or a backup would find them.
func everything(t *testing.T, e env) []atrest.Item {
	t.Helper()
	var (
		mu  sync.Mutex
		out []atrest.Item
	)
	e.eachMaster(t, func(ctx context.Context, c *redis.Client) error {
		items, err := atrest.Dump(ctx, c)
		mu.Lock()
		out = append(out, items...)
		mu.Unlock()
		return err
	})
	return out
}

// The draw's seed is not in Redis before the draw (DESIGN.md, Fair play,
// third round): a reader of every key during the pre-queue finds neither
// the seed (raw or hex) nor anything that gives it; once drawn, the seed
// and the nonce are published, and the seed is HMAC-SHA256 of the draw
// secret over the event, the kind and the nonce, whose SHA-256 is the
// commitment.
func TestSeedNotInRedisBeforeTheDraw(t *testing.T) { onEachLayout(t, testSeedNotInRedisBeforeTheDraw) }

func testSeedNotInRedisBeforeTheDraw(t *testing.T, e env) {
	set := prequeue(e.open())
	set.MaxActive = 0
	fans := joinMany(t, e.store, set, 20)
	must(t, e.store.Leave(context.Background(), event, fans[0].Ticket))
	before := everything(t, e)
	set.OpensAt = at(0)
	l := drawNow(t, e, set)
	if err := atrest.CheckDerived(before, drawSecret, atrest.Draw{Event: event, Kind: "lottery", Seed: l.Seed, Nonce: l.Nonce, Commitment: l.Commitment}); err != nil {
		t.Error(err)
	}
}
