package queue_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// At the pre-queue's opening, many gateways (joining) and admitters
// (ticking), each with its own Store, race to commit the lottery: exactly
// one commitment is ever published and it never changes; no fan is placed
// before it; the seed revealed at opening is the one committed.
func TestLotteryCommitmentRace(t *testing.T) { onEachLayout(t, testLotteryCommitmentRace) }

func testLotteryCommitmentRace(t *testing.T, e env) {
	ctx := context.Background()
	set := e.open()
	set.PrequeueOpensAt, set.OpensAt = at(300*time.Millisecond), at(1500*time.Millisecond)
	stores := make([]*queue.Store, 12)
	for i := range stores {
		stores[i] = queue.NewStore(e.rdb, secret).WithDrawSecret(drawSecret)
	}
	stop := time.Now().Add(time.Second)
	var mu sync.Mutex
	seen := map[string]bool{}
	var placed []line.JoinResult
	testenv.Race(len(stores), func(i int) {
		s := stores[i]
		for time.Now().Before(stop) {
			if i%3 == 0 { // an admitter
				if _, err := s.Tick(ctx, event, set); err != nil {
					t.Errorf("tick: %v", err)
					return
				}
			} else { // a gateway
				r, err := s.Join(ctx, event, set)
				switch {
				case errors.Is(err, line.ErrNotOpen):
				case err != nil:
					t.Errorf("join: %v", err)
					return
				default:
					mu.Lock()
					placed = append(placed, r)
					mu.Unlock()
				}
			}
			if l, err := s.Lottery(ctx, event, set); err == nil {
				mu.Lock()
				seen[l.Commitment] = true
				mu.Unlock()
			} else if !errors.Is(err, line.ErrNoLottery) {
				t.Errorf("lottery: %v", err)
				return
			}
		}
	})
	if len(placed) == 0 {
		t.Fatal("nobody was placed")
	}
	if len(seen) != 1 {
		t.Fatalf("%d commitments seen during the race; want exactly 1", len(seen))
	}
	l, err := e.store.Lottery(ctx, event, set)
	must(t, err)
	if !seen[l.Commitment] {
		t.Errorf("commitment %s now, not the one seen in the race", l.Commitment)
	}
	if l.Seed != "" {
		t.Errorf("seed %q revealed before opens_at", l.Seed)
	}
	for _, r := range placed {
		st := status(t, e.store, r.Ticket, set)
		if st.JoinedAt.Before(l.CommittedAt) {
			t.Errorf("%s placed at %v, before the commitment at %v", r.ID, st.JoinedAt, l.CommittedAt)
		}
		if e.rdb.LPos(ctx, e.state(t).Keys().Entries, r.ID, redis.LPosArgs{}).Err() != nil {
			t.Errorf("%s placed in the pre-queue but not among the draw's entries", r.ID)
		}
	}
	time.Sleep(time.Until(*set.OpensAt))
	tick(t, e.store, set)
	l2, err := e.store.Lottery(ctx, event, set)
	must(t, err)
	seed, err := hex.DecodeString(l2.Seed)
	if err != nil || len(seed) != 32 {
		t.Fatalf("seed revealed %q (%v); want 32 bytes of hex", l2.Seed, err)
	}
	sum := sha256.Sum256(seed)
	if got := hex.EncodeToString(sum[:]); got != l.Commitment || l2.Commitment != l.Commitment || !l2.CommittedAt.Equal(l.CommittedAt) {
		t.Errorf("SHA-256 of the seed %s, commitment %s then %s; want one and the same", got, l.Commitment, l2.Commitment)
	}
	if !l2.Drawn || l2.Entries != int64(len(placed)) {
		t.Errorf("drawn %v with %d entries; want drawn with %d", l2.Drawn, l2.Entries, len(placed))
	}
}

// The revealed seed reproduces every fan's draw and rank, computed here
// from nothing but HMAC-SHA256 (several admitters draw at once), and the
// fans are let in in rank order, then the post-opening joins in FIFO.
func TestLotteryDrawIsReproducible(t *testing.T) { onEachLayout(t, testLotteryDrawIsReproducible) }

func testLotteryDrawIsReproducible(t *testing.T, e env) {
	ctx := context.Background()
	pre := prequeue(e.open())
	pre.AdmitPerSecond, pre.MaxActive = 1e6, 1<<30
	if _, err := e.store.Lottery(ctx, event, pre); !errors.Is(err, line.ErrNoLottery) {
		t.Fatalf("lottery before anyone: %v; want ErrNoLottery", err)
	}
	const n = 120
	fans := joinMany(t, e.store, pre, n)
	if _, err := e.store.TicketDraw(ctx, event, fans[0].Ticket); !errors.Is(err, line.ErrNotDrawn) {
		t.Errorf("a draw before opening: %v; want ErrNotDrawn", err)
	}
	left := map[string]bool{}
	for _, f := range fans[:10] {
		must(t, e.store.Leave(ctx, event, f.Ticket))
		left[f.ID] = true
	}
	pre.OpensAt = at(0) // brought forward once everyone is in
	set := pre
	set.MaxActive = 0
	late := joinMany(t, e.store, set, 5)

	// Several admitters draw at once; nobody is let in (no room).
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := queue.NewStore(e.rdb, secret).WithDrawSecret(drawSecret).Tick(ctx, event, set); err != nil {
				t.Errorf("tick: %v", err)
			}
		}()
	}
	wg.Wait()

	l, err := e.store.Lottery(ctx, event, set)
	must(t, err)
	seed, err := hex.DecodeString(l.Seed)
	must(t, err)
	sum := sha256.Sum256(seed)
	if hex.EncodeToString(sum[:]) != l.Commitment {
		t.Fatalf("the seed revealed does not hash to the commitment")
	}
	if !l.Drawn || l.Entries != n {
		t.Fatalf("drawn %v, %d entries; want %d (those who left too)", l.Drawn, l.Entries, n)
	}
	var ids []string
	for _, f := range fans {
		ids = append(ids, f.ID)
	}
	key := drawKey(seed, entriesDigest(ids))
	order := rankOrder(key, ids)
	rank := map[string]int64{}
	for i, id := range order {
		rank[id] = int64(i + 1)
	}
	tickets := map[string]line.Ticket{}
	for _, f := range fans {
		tickets[f.ID] = f.Ticket
		got, err := e.store.TicketDraw(ctx, event, f.Ticket)
		must(t, err)
		if want := hex.EncodeToString(hmacOf(key, f.ID)); got.TicketID != f.ID || got.Draw != want || got.Rank != rank[f.ID] {
			t.Errorf("%s: draw %s rank %d; want %s rank %d", f.ID, got.Draw, got.Rank, want, rank[f.ID])
		}
	}
	if _, err := e.store.TicketDraw(ctx, event, late[0].Ticket); !errors.Is(err, line.ErrNotInLottery) {
		t.Errorf("a post-opening join's draw: %v; want ErrNotInLottery", err)
	}
	if _, err := e.store.TicketDraw(ctx, event, line.Ticket{}); !errors.Is(err, line.ErrInvalidTicket) {
		t.Errorf("no ticket's draw (a forged one parses to none): %v; want ErrInvalidTicket", err)
	}

	// The line: the draw's order (less those who left), then FIFO.
	var want []string
	for _, id := range order {
		if !left[id] {
			want = append(want, id)
		}
	}
	sort.Slice(late, func(a, b int) bool { return seqOf(t, late[a].ID) < seqOf(t, late[b].ID) })
	for _, f := range late {
		want = append(want, f.ID)
		tickets[f.ID] = f.Ticket
	}
	if got := positions(t, e, set, tickets); !equal(got, want) {
		t.Fatalf("line after the draw:\n%v\nwant\n%v", got, want)
	}
	admitInSteps(t, e, set, 17, want, "in the ranks' order")
	checkBooks(t, e)
	r, err := e.store.Report(ctx, event)
	must(t, err)
	if r.FIFOInversions != 0 {
		t.Errorf("%d FIFO inversions; want 0", r.FIFOInversions)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A pre-queue join whose second step reaches its shard after the draw
// began there is placed at its rank's score, not at a placeholder the draw
// would never correct.
func TestShardedJoinOvertakenByTheDraw(t *testing.T) { onSharded(t, testShardedJoinOvertakenByTheDraw) }

func testShardedJoinOvertakenByTheDraw(t *testing.T, e env) {
	ctx := context.Background()
	set := prequeue(e.open())
	join(t, e.store, set) // commits the lottery: sequence number 1
	// The draw began: it wrote the rank table (here: the next six fans,
	// sequence numbers 2…7, at ranks 6 down to 1), then marked the shards.
	l := e.state(t)
	table := make([]byte, 4*8)
	for seq := 2; seq <= 7; seq++ {
		binary.BigEndian.PutUint32(table[4*seq:], uint32(8-seq))
	}
	must(t, e.rdb.Set(ctx, l.Keys().Ranks, table, 0).Err())
	for _, sk := range l.Shards() {
		must(t, e.rdb.HSet(ctx, sk.Info, "drawn", 1).Err())
	}
	for range 6 {
		r := join(t, e.store, set)
		rank := int64(8 - seqOf(t, r.ID))
		want := float64(draw.Score(rank))
		got, found := l.Place(r.ID)
		if !found || got != want {
			t.Errorf("%s placed at %v (found %v); want its rank's (%d) score %v", r.ID, got, found, rank, want)
		}
	}
}
