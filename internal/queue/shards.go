package queue

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

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
//     halfway is finished).
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
func relayout(set Settings, err error) (Settings, bool) {
	var l errLayout
	if errors.As(err, &l) && l.shards != shardsOf(set) {
		set.Shards = l.shards
		return set, true
	}
	return set, false
}

// shardsOf is the number of shards settings ask for (0 means 1).
func shardsOf(set Settings) int { return max(set.Shards, 1) }

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
// before opening (its draw once the lottery is drawn and this Store knows
// its key; the number its random part gives until then), by sequence
// after.
func (s *Store) scoreOf(event string, t ticket, set Settings) int64 {
	if set.OpensAt != nil && t.joinedAt < set.OpensAt.UnixMilli() {
		if key, ok := s.keyOf(event, false); ok {
			return drawScore(key, t.id())
		}
		return lotteryOf(t.random)
	}
	return t.seq
}

func (s *Store) joinSharded(ctx context.Context, event string, set Settings, o JoinOptions, replace string) (JoinResult, error) {
	g, err := s.joinGlobal(ctx, event, set, o, replace)
	if err != nil || g.out.State == Admitted {
		return g.out, err
	}
	return s.joinShard(ctx, event, set, g)
}

// globalJoin is what a sharded join's first step gave: the ticket, and
// for a place in line what its second step needs.
type globalJoin struct {
	t         ticket
	out       JoinResult // complete when admitted (passthrough)
	rate      string
	avail     int64
	untilOpen int64
	random    [16]byte
}

// joinGlobal is a sharded join's first step (sJoinGlobal): on the event's
// tag, the refusals, the proof, the account and the sequence number.
func (s *Store) joinGlobal(ctx context.Context, event string, set Settings, o JoinOptions, replace string) (globalJoin, error) {
	random, err := newRandom()
	if err != nil {
		return globalJoin{}, fmt.Errorf("join: %w", err)
	}
	p := o.Proof
	k, n := rdb.KeysOf(event), shardsOf(set)
	keys := []string{k.Stats, k.Active, k.Inventory, k.Claims, k.Lottery, k.Entries, k.Accounts}
	proofGoes, proofID, proofExp := "", "", ""
	if p != nil {
		exp := p.ExpiresAt.UnixMilli()
		minute := exp / 60_000
		keys = append(keys, rdb.ProofsKey(event, minute))
		proofGoes = strconv.FormatInt((minute+1)*60_000+1000, 10)
		proofID, proofExp = p.ID, strconv.FormatInt(exp, 10)
	}
	res, err := s.c.Start(ctx, rdb.Call{Script: sJoinGlobal, Keys: keys, Args: []any{set.Mode, msArg(set.PrequeueOpensAt), msArg(set.OpensAt), msArg(set.ClosesAt), rateArg(set.AdmitPerSecond), set.AccessTTL.Milliseconds(), n, proofGoes, b64.EncodeToString(random[:]), proofID, proofExp, o.Account, replace}, Merge: true, Told: true, Header: 8}).Wait().Slice()
	if err != nil {
		return globalJoin{}, rdb.Interpret("join", err)
	}
	r := rdb.ReplyOf(res)
	if err := joinRefusal(r); err != nil {
		return globalJoin{}, err
	}
	g := globalJoin{t: ticket{seq: r.Int(1), random: random, joinedAt: r.Int(2), account: o.Account}, random: random}
	switch r.Str(0) {
	case "admitted":
		g.out.State = Admitted
		g.out.ActiveUntil = msToTime(r.Int(3))
		g.out.Ticket, g.out.ID, g.out.Account = s.encode(event, g.t), g.t.id(), g.t.account
	case "place":
		g.rate, g.avail, g.untilOpen = r.Str(3), r.Int(4), r.Int(5)
	default:
		return globalJoin{}, fmt.Errorf("join: unexpected reply %v", res)
	}
	if r.Err() != nil {
		return globalJoin{}, fmt.Errorf("join: %w", r.Err())
	}
	return g, nil
}

// joinShard is a sharded join's second step (sJoinShard): the place on
// its shard, and the fans ahead of it on the others.
func (s *Store) joinShard(ctx context.Context, event string, set Settings, g globalJoin) (JoinResult, error) {
	t, n := g.t, shardsOf(set)
	score := t.seq
	if g.untilOpen > 0 {
		score = lotteryOf(g.random)
	}
	shards := rdb.ShardKeysFor(event, n)
	own := int(t.seq % int64(n))
	sk := shards[own]
	place := s.c.Start(ctx, rdb.Call{Script: sJoinShard, Keys: []string{sk.Wait, sk.Seen, sk.Stats, sk.Info}, Args: []any{t.id(), score, t.seq / int64(n), g.rate, g.untilOpen, set.AbandonAfter.Milliseconds(), mrand.Float64(), n, 0, t.joinedAt}, Told: true})
	ahead := s.startBelow(ctx, shards, own, score)
	v, err := place.Wait().Slice()
	if err != nil {
		return JoinResult{}, rdb.Interpret("join", err)
	}
	others, err := waitBelow(ahead)
	switch {
	case len(v) == 1 && v[0] == "redraw":
		// A pre-queue join overtaken by the draw: placed at its draw.
		if v, others, err = s.placeDrawn(ctx, event, set, t, g.rate, g.untilOpen); err != nil {
			return JoinResult{}, err
		}
	case len(v) == 1 && v[0] == "late":
		return JoinResult{}, fmt.Errorf("join: %w: the place reached its shard too late", ErrUnavailable)
	}
	if err != nil {
		return JoinResult{}, rdb.Interpret("join", err)
	}
	pr := rdb.ReplyOf(v)
	rf, _ := strconv.ParseFloat(g.rate, 64)
	out := JoinResult{State: Waiting}
	out.Position = position(pr.Int(0)+others, pr.Int(1), rf, g.avail, t.joinedAt, set)
	if pr.Err() != nil {
		return JoinResult{}, fmt.Errorf("join: %w", pr.Err())
	}
	if out.ETA != nil {
		ms := out.ETA.Milliseconds()
		t.joinETA = &ms
	}
	out.Ticket, out.ID, out.Account = s.encode(event, t), t.id(), t.account
	return out, nil
}

// startBelow starts, on every shard but own, the count of fans ahead of
// score; waitBelow adds them up.
func (s *Store) startBelow(ctx context.Context, shards []rdb.ShardKeys, own int, score int64) []*rdb.Pending {
	calls := make([]*rdb.Pending, 0, len(shards)-1)
	for j, sk := range shards {
		if j != own {
			calls = append(calls, s.c.Start(ctx, rdb.Call{Script: sBelow, Keys: []string{sk.Wait, sk.Moving}, Args: []any{score}, Merge: true, Header: 0}))
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

func (s *Store) statusSharded(ctx context.Context, event string, t ticket, set Settings) (Status, error) {
	n := shardsOf(set)
	shards := rdb.ShardKeysFor(event, n)
	own := int(t.seq % int64(n))
	sk := shards[own]
	score := s.scoreOf(event, t, set)
	poll := s.c.Start(ctx, rdb.Call{Script: sStatusShard, Keys: []string{sk.Wait, sk.Seen, sk.Info, sk.Moving}, Args: []any{t.id(), t.seq / int64(n), set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rateArg(set.AdmitPerSecond), set.AbandonAfter.Milliseconds(), mrand.Float64(), n}})
	ahead := s.startBelow(ctx, shards, own, score)
	res, err := poll.Wait().Slice()
	others, berr := waitBelow(ahead)
	if err != nil {
		return Status{}, rdb.Interpret("status", err)
	}
	out := Status{ID: t.id(), Account: t.account, JoinedAt: msToTime(t.joinedAt)}
	r := rdb.ReplyOf(res)
	switch r.Str(0) {
	case "closed":
		out.State = Closed
	case "soldout":
		out.State = SoldOut
	case "waiting":
		if berr != nil {
			return Status{}, rdb.Interpret("status", berr)
		}
		if got, err := strconv.ParseInt(r.Str(6), 10, 64); err == nil && got != score {
			// The ticket sorts elsewhere than its join time says (opens_at
			// moved since, or the draw gave it its place and this Store
			// does not know the seed yet): count again from where it
			// really is.
			s.learnKey(ctx, event)
			if others, err = waitBelow(s.startBelow(ctx, shards, own, got)); err != nil {
				return Status{}, rdb.Interpret("status", err)
			}
		}
		out.State = Waiting
		out.Position = position(r.Int(2)+others, r.Int(3), r.Float(4), r.Int(5), r.Int(1), set)
	case "gone", "moving":
		k := rdb.KeysOf(event)
		v, err := s.c.Run(ctx, rdb.Call{Script: sStatusGlobal, Keys: []string{k.Active, k.Claims, k.Stats}, Args: []any{t.id(), set.AccessTTL.Milliseconds()}}).Slice()
		if err != nil {
			return Status{}, rdb.Interpret("status", err)
		}
		g := rdb.ReplyOf(v)
		switch {
		case g.Str(0) == "layout":
			return Status{}, errLayout{int(g.Int(1))}
		case g.Str(0) == "admitted":
			out.State = Admitted
			out.ActiveUntil = msToTime(g.Int(2))
			out.FirstAdmission = g.Int(3) == 1
		case r.Str(0) == "moving":
			// Being handed over right now (or put back): at the front.
			out.State = Waiting
			out.Position = position(0, time.Second.Milliseconds(), set.AdmitPerSecond, -1, time.Now().UnixMilli(), set)
		default:
			out.State = Expired
		}
		if g.Err() != nil {
			return Status{}, fmt.Errorf("status: %w", g.Err())
		}
	default:
		return Status{}, fmt.Errorf("status: unexpected reply %v", res)
	}
	if r.Err() != nil {
		return Status{}, fmt.Errorf("status: %w", r.Err())
	}
	if t.joinETA != nil {
		d := time.Duration(*t.joinETA) * time.Millisecond
		out.JoinETA = &d
	}
	return out, nil
}

func (s *Store) leaveSharded(ctx context.Context, event string, t ticket, n int) error {
	sk := rdb.ShardKeysFor(event, n)[int(t.seq%int64(n))]
	left, err := s.c.Run(ctx, rdb.Call{Script: sLeaveShard, Keys: []string{sk.Wait, sk.Stats}, Args: []any{t.id()}}).Int()
	if err != nil {
		return rdb.Interpret("leave", err)
	}
	if left == 1 {
		return nil
	}
	k := rdb.KeysOf(event)
	err = s.c.Run(ctx, rdb.Call{Script: completeScript, Keys: []string{k.Active, k.Inventory, k.Holders, k.Claims}, Args: []any{t.id()}}).Err()
	return rdb.Interpret("leave", err)
}

// shardTotals adds up the shards' waiting fans (in line or being handed
// over) and their counters.
func (s *Store) shardTotals(ctx context.Context, event string, n int) (waiting int64, st Stats, err error) {
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
		return 0, Stats{}, rdb.Interpret("shards", err)
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

// head is one fan at the front of a shard, as the tick's prepare read it.
type head struct {
	member string
	score  float64
	shard  int
}

// tickSharded is one admission tick of a sharded event (the steps are
// described with their scripts in scripts_sharded.go).
func (s *Store) tickSharded(ctx context.Context, event string, set Settings) (TickResult, error) {
	n := shardsOf(set)
	k := rdb.KeysOf(event)
	shards := rdb.ShardKeysFor(event, n)
	lease := max(3*s.tickEvery(), time.Second)
	res, err := s.c.Run(ctx, rdb.Call{Script: sTickBegin, Keys: []string{k.Stats, k.Active, k.Bucket, k.Inventory, k.Holders, k.Claims, k.Lease, k.Tick, k.Lottery}, Args: []any{s.owner, lease.Milliseconds(), set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rateArg(set.AdmitPerSecond), set.MaxActive, passthroughBatch, n}}).Slice()
	if err != nil {
		return TickResult{}, rdb.Interpret("tick", err)
	}
	r := rdb.ReplyOf(res)
	switch r.Str(0) {
	case "layout":
		return TickResult{}, errLayout{int(r.Int(1))}
	case "busy":
		return TickResult{Busy: true, Room: -1}, nil
	}
	epoch, budget, watermark := r.Int(1), r.Int(2), r.Int(5)
	// The lease goes back at the tick's end: by the accept, or here when
	// the tick hands nobody over (a tick that dies keeps it till it lapses).
	leaseGone := budget == 0 // the begin gave it back already
	defer func() {
		if !leaseGone {
			_ = s.c.Run(context.WithoutCancel(ctx), rdb.Call{Script: sTickRelease, Keys: []string{k.Lease}, Args: []any{s.owner}}).Err()
		}
	}()
	out := TickResult{Expired: r.Int(3), Active: r.Int(4), Room: r.Int(9)}
	rate, avail, soldout, queueing := r.Str(6), r.Int(7), r.Int(8), r.Int(11)
	// The draw's bound: a number while the draw is applied, "" else.
	through := float64(0)
	_, unbounded := r.At(12).(string)
	bounded := !unbounded
	if bounded {
		through = r.Float(12)
	}
	out.Rate, _ = strconv.ParseFloat(rate, 64)
	if r.Err() != nil {
		return TickResult{}, fmt.Errorf("tick: %w", r.Err())
	}

	// 2. every shard: note the epoch, copy the figures, read the front.
	fronts := make([][]any, n)
	if err := eachShard(n, func(i int) error {
		sk := shards[i]
		for range 2 {
			v, err := s.c.Run(ctx, rdb.Call{Script: sTickPrepare, Keys: []string{sk.Wait, sk.Seen, sk.Stats, sk.Info, sk.Moving, sk.Fence}, Args: []any{epoch, budget, maxSkip, n, rate, avail, soldout}}).Slice()
			if err != nil {
				return err
			}
			switch v[0] {
			case "fenced":
				return errFenced
			case "stale":
				if err := s.finishHandover(ctx, event, sk, v[1:]); err != nil {
					return err
				}
				continue
			}
			fronts[i] = v
			return nil
		}
		return fmt.Errorf("shard %d: a dead tick's handover is still there", i)
	}); err != nil {
		return tickAborted(out, err)
	}
	var heads []head
	for i, v := range fronts {
		p := rdb.ReplyOf(v)
		out.Waiting += p.Int(1)
		out.Abandoned += p.Int(2)
		for j := 3; j+1 < len(v); j += 2 {
			sc, err := strconv.ParseFloat(p.Str(j+1), 64)
			if err != nil {
				return TickResult{}, fmt.Errorf("tick: score %v: %w", v[j+1], err)
			}
			heads = append(heads, head{member: p.Str(j), score: sc, shard: i})
		}
		if p.Err() != nil {
			return TickResult{}, fmt.Errorf("tick: %w", p.Err())
		}
	}

	// 3. the one line's first budget fans, none newer than the watermark.
	sort.Slice(heads, func(a, b int) bool {
		if heads[a].score != heads[b].score {
			return heads[a].score < heads[b].score
		}
		return heads[a].member < heads[b].member
	})
	take := make([][]any, n)
	var taking int64
	for _, h := range heads {
		if taking == budget {
			break
		}
		if seq, ok := seqOf(h.member); !ok || seq > watermark {
			break
		}
		if bounded && h.score > through {
			break // the draw has not reached this fan yet
		}
		take[h.shard] = append(take[h.shard], h.member)
		taking++
	}
	if taking == 0 {
		return out, nil
	}
	if err := s.fault("prepare"); err != nil {
		leaseGone = true
		return out, err
	}

	// 4. move them out of line, shard by shard.
	taken := make([][]any, n)
	if err := eachShard(n, func(i int) error {
		if len(take[i]) == 0 {
			return nil
		}
		sk := shards[i]
		v, err := s.c.Run(ctx, rdb.Call{Script: sTickTake, Keys: []string{sk.Wait, sk.Seen, sk.Moving, sk.Fence}, Args: append([]any{epoch, n}, take[i]...), Told: true}).Slice()
		if err != nil {
			return err
		}
		if len(v) > 0 && v[0] == "fenced" {
			return errFenced
		}
		taken[i] = v
		return nil
	}); err != nil {
		// What was moved is put back by the next tick (finishHandover).
		return tickAborted(out, err)
	}
	if err := s.fault("take"); err != nil {
		leaseGone = true
		return out, err
	}

	// 5. into the active set, if this tick is still the newest.
	args := []any{epoch, queueing, set.MaxActive, set.AccessTTL.Milliseconds(), rateArg(set.AdmitPerSecond), 0, s.owner}
	members := make([][]any, n) // per shard, the members in the order sent
	var moved int64
	for i, v := range taken {
		for j := 0; j+1 < len(v); j += 2 {
			args = append(args, v[j], v[j+1])
			members[i] = append(members[i], v[j])
			moved++
		}
	}
	out.Waiting -= moved
	args[5] = out.Waiting
	leaseGone = true // the accept gives it back, or a newer tick has it
	v, err := s.c.Run(ctx, rdb.Call{Script: sTickAccept, Keys: []string{k.Stats, k.Active, k.Bucket, k.Inventory, k.Holders, k.Claims, k.Tick, rdb.OutcomeKey(event, epoch), k.Lease, k.Report, k.Lottery}, Args: args, Told: true}).Slice()
	if err != nil {
		return tickAborted(out, err)
	}
	if len(v) == 1 && v[0] == "fenced" {
		return tickAborted(out, errFenced)
	}
	a := rdb.ReplyOf(v)
	codes := a.Str(0)
	out.Active, out.Rate = a.Int(1), a.Float(2)
	if a.Err() != nil || len(codes) != int(moved) {
		return TickResult{}, fmt.Errorf("tick: accept replied %v (%v)", v, a.Err())
	}
	if err := s.fault("accept"); err != nil {
		return out, err
	}

	// 6. clear the handover, putting back whoever was not let in.
	per := make([]string, n)
	at := 0
	for i := range members {
		per[i] = codes[at : at+len(members[i])]
		at += len(members[i])
		for _, c := range per[i] {
			switch c {
			case 'a':
				out.Admitted++
			case 'x':
				out.Abandoned++
			case 'r':
				out.Waiting++
			}
		}
	}
	err = eachShard(n, func(i int) error {
		if len(members[i]) == 0 {
			return nil
		}
		sk := shards[i]
		return s.c.Run(ctx, rdb.Call{Script: sTickDone, Keys: []string{sk.Wait, sk.Moving, sk.Stats, sk.Fence}, Args: append([]any{epoch, per[i]}, members[i]...)}).Err()
	})
	if err != nil {
		// Admitted all the same; the next tick finishes the handover.
		return out, rdb.Interpret("tick", err)
	}
	return out, nil
}

// finishHandover finishes a dead tick's handover on one shard: every fan
// it had moved is let in (it was: the dead tick's accept recorded it),
// dropped as abandoned, or put back at its place.
func (s *Store) finishHandover(ctx context.Context, event string, sk rdb.ShardKeys, v []any) error {
	epoch, _ := v[0].(string)
	e, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("moving epoch %q: %w", epoch, err)
	}
	members := make([]string, 0, len(v)-1)
	for _, m := range v[1:] {
		s, _ := m.(string)
		members = append(members, s)
	}
	var codes strings.Builder
	if len(members) > 0 {
		got, err := s.c.HMGet(ctx, rdb.OutcomeKey(event, e), members...).Result()
		if err != nil {
			return err
		}
		for _, c := range got {
			cs, _ := c.(string)
			if cs == "" {
				cs = "r" // never accepted, and never can be now: back in line
			}
			codes.WriteString(cs)
		}
	}
	args := []any{epoch, codes.String()}
	for _, m := range members {
		args = append(args, m)
	}
	return s.c.Run(ctx, rdb.Call{Script: sTickDone, Keys: []string{sk.Wait, sk.Moving, sk.Stats, sk.Fence}, Args: args}).Err()
}

// fault is the tests' way to make a sharded tick die after a step (a
// process killed there): nil in production.
func (s *Store) fault(step string) error {
	if s.tickFault == nil {
		return nil
	}
	return s.tickFault(step)
}

// errFenced: a newer tick began while this one ran; this one stops, and
// admits nobody.
var errFenced = errors.New("queue: a newer tick took over")

// tickAborted ends a tick that admitted nobody: being overtaken by a newer
// tick is no error.
func tickAborted(out TickResult, err error) (TickResult, error) {
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
func seqOf(member string) (int64, bool) {
	p, _, ok := strings.Cut(member, ".")
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseInt(p, 36, 64)
	return seq, err == nil
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}
