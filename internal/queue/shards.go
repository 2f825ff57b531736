package queue

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// One sale over several shards (DESIGN.md; docs/QUEUE.md). With
// Settings.Shards = K > 1 an event's waiting fans are spread over K hash
// tags (slots.go), so on a Redis Cluster the line's work is shared by K
// masters, while the fans see one line:
//
//   - a ticket lives on shard seq mod K; its abandon deadline in that
//     shard's seen string at seq div K;
//   - the event's tag keeps what must be one: the sequence (a join's first,
//     tiny step, merged for many joins into one script call), the token
//     bucket, the active set, the claims of admitted fans, the inventory,
//     the tick's lease and epoch. Each of these is touched once per join,
//     once per admitted fan or once per tick, never once per poll, and the
//     active set is bounded by max_active: the global tag does not become
//     the line's ceiling (docs/SCALING.md measures it);
//   - a position is exact: the fan's rank on its own shard plus, on every
//     other shard, the fans with a lower score, counted in the same round
//     trip (the counts of many polls to one shard are merged into one
//     script call: batch.go). A fan knows its own score before asking: its
//     sequence number after opening, the lottery number its ticket's random
//     part gives before;
//   - the order stays one FIFO and one lottery: the tick merges the shards'
//     fronts by score (scripts_sharded.go says how, and how a tick that dies
//     halfway is finished);
//   - an auto line lets nobody straight through while its mark stands
//     (stats lined: the last place sent to a shard), which only a tick that
//     found every shard empty, and no place able to arrive on one any more,
//     lifts (docs/QUEUE.md, "Always on").
//
// K = 1 is the one-shard layout and its scripts, unchanged. An event's
// layout is fixed by its first join or tick (stored in its stats) and kept
// while it has state; a config that asks for another one is told so by the
// scripts ({'layout', k}) and the stored one is used.

// errLayout: the event's state has another layout than the settings said.
type errLayout struct{ shards int }

func (e errLayout) Error() string {
	return fmt.Sprintf("queue: the event's line has %d shard(s)", e.shards)
}

// relayout returns set with the layout err names, if it is a layout
// bounce; callers run the operation again with it.
func relayout(set line.Settings, err error) (line.Settings, bool) {
	var l errLayout
	if errors.As(err, &l) && l.shards != shardsOf(set) {
		set.Shards = l.shards
		return set, true
	}
	return set, false
}

// shardsOf is the number of shards settings ask for (0 means 1).
func shardsOf(set line.Settings) int { return max(set.Shards, 1) }

// ShardTags lists the hash tags of event's shards when spread over k (for
// operators and tests: wr:{<tag>}:wait is shard i's line).
func ShardTags(event string, k int) []string { return rdb.ShardTags(event, k) }

// lotteryOf is the pre-queue score of a sharded event's ticket: a number
// in [-2^52, -1] from the ticket's random part, below every post-opening
// score, so that any process holding the ticket knows where it sorts.
func lotteryOf(random [16]byte) int64 {
	return -int64(binary.BigEndian.Uint64(random[:8])>>12) - 1
}

// scoreOf is where t sorts in a sharded line: by lottery if it joined
// before opening (its rank's score once the lottery is drawn and this
// Store holds its rank table; the number its random part gives until
// then), by sequence after.
func (s *Store) scoreOf(event string, t line.Ticket, set line.Settings) int64 {
	if set.OpensAt != nil && t.JoinedAtMs() < set.OpensAt.UnixMilli() {
		if score, ok := s.drawnScore(event, t); ok {
			return score
		}
		return lotteryOf(t.Random())
	}
	return t.Seq()
}

// startBelow starts, on every shard but own, the count of fans ahead of
// score; waitBelow adds them up.
func (s *Store) startBelow(ctx context.Context, shards []rdb.ShardKeys, own int, score int64) []*rdb.Pending {
	calls := make([]*rdb.Pending, 0, len(shards)-1)
	for j, sk := range shards {
		if j != own {
			calls = append(calls, s.c.Start(ctx, rdb.Call{Script: belowScript, Keys: []string{sk.Wait, sk.Moving}, Args: []any{score}, Merge: true, Header: 0}))
		}
	}
	return calls
}

func waitBelow(calls []*rdb.Pending) (int64, error) {
	var sum int64
	var first error
	for _, c := range calls {
		n, err := c.Wait().Int64()
		if err != nil && first == nil {
			first = err
		}
		sum += n
	}
	return sum, first
}

// shardTotals adds up the shards' waiting fans (in line or being handed
// over) and their counters.
func (s *Store) shardTotals(ctx context.Context, event string, n int) (waiting int64, st line.Stats, err error) {
	shards := rdb.ShardKeysFor(event, n)
	type cmds struct {
		wait, moving *redis.IntCmd
		stats        *redis.SliceCmd
	}
	cs := make([]cmds, n)
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sk := range shards {
			cs[i] = cmds{p.ZCard(ctx, sk.Wait), p.ZCard(ctx, sk.Moving), p.HMGet(ctx, sk.Stats, "joined", "left", "abandoned")}
		}
		return nil
	})
	if err != nil {
		return 0, line.Stats{}, rdb.Interpret("shards", err)
	}
	for _, c := range cs {
		waiting += c.wait.Val() + c.moving.Val()
		v := c.stats.Val()
		st.Joined += rdb.Num(v[0])
		st.Left += rdb.Num(v[1])
		st.Abandoned += rdb.Num(v[2])
	}
	return waiting, st, nil
}

// newOwner names this Store's replica for the sharded tick's lease.
func newOwner() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errFenced: a newer tick began while this one ran; this one stops, and
// admits nobody.
var errFenced = errors.New("queue: a newer tick took over")

// tickAborted ends a tick that admitted nobody: being overtaken by a newer
// tick is no error.
func tickAborted(out line.TickResult, err error) (line.TickResult, error) {
	if errors.Is(err, errFenced) {
		out.Busy = true
		return out, nil
	}
	return out, rdb.Interpret("tick", err)
}

// eachShard runs f for every shard at once and returns the first error.
func eachShard(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// seqOf is the sequence number in front of a ticket id.
func seqOf(member string) (int64, bool) { return draw.Seq(member) }

// lotteryArg is a ticket's lottery number as the join scripts take it.
func lotteryArg(random [16]byte) string { return strconv.FormatInt(lotteryOf(random), 10) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}
