package queue

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom/internal/rdb"
)

// Tick bounds: a tick skips at most maxSkip abandoned tickets (the rest go
// next tick) and admits at most passthroughBatch fans in passthrough mode,
// so no script holds Redis for long.
const (
	maxSkip          = 10000
	passthroughBatch = 10000
)

// Tick runs one admission step for event (admitter only): in one script on
// a line of one shard, in the six steps of tickBeginScript and its peers on
// many (scripts.go).
//
// An event with a pre-queue has its lottery committed when the pre-queue
// opens and drawn at opens_at, here, before the tick: until the draw gave
// its first scores the tick admits nobody, and nobody it has not reached
// while it is applied (lottery.go). After the tick the sale's report notes
// the line's length and the rate in force (report.go).
func (s *Store) Tick(ctx context.Context, event string, set Settings) (TickResult, error) {
	if err := s.keepLottery(ctx, event, set); err != nil {
		return TickResult{Room: -1, Shards: shardsOf(set)}, err
	}
	r, err := s.tick(ctx, event, set)
	if again, ok := relayout(set, err); ok {
		set = again
		r, err = s.tick(ctx, event, set)
	}
	r.Shards = shardsOf(set)
	if err == nil && !r.Busy {
		err = s.recordLine(ctx, event, set, r)
	}
	return r, err
}

func (s *Store) tick(ctx context.Context, event string, set Settings) (TickResult, error) {
	if shardsOf(set) > 1 {
		return s.tickSharded(ctx, event, set)
	}
	k := rdb.KeysOf(event)
	res, err := s.c.Run(ctx, rdb.Call{Script: tickScript,
		Keys: []string{k.Wait, k.Active, k.Seen, k.Stats, k.Bucket, k.Inventory, k.Holders, k.Lottery, k.Report, k.Claims},
		Args: []any{set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rateArg(set.AdmitPerSecond), set.MaxActive,
			set.AccessTTL.Milliseconds(), maxSkip, passthroughBatch}, Told: true}).Slice()
	if err != nil {
		return TickResult{}, rdb.Interpret("tick", err)
	}
	r := rdb.ReplyOf(res)
	if r.Str(0) == "layout" {
		return TickResult{}, errLayout{int(r.Int(1))}
	}
	out := TickResult{
		Admitted: r.Int(0), Abandoned: r.Int(1), Expired: r.Int(2),
		Waiting: r.Int(3), Active: r.Int(4), Rate: r.Float(5), Room: r.Int(6),
	}
	if r.Err() != nil {
		return TickResult{}, fmt.Errorf("tick: %w", r.Err())
	}
	return out, nil
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
	res, err := s.c.Run(ctx, rdb.Call{Script: tickBeginScript, Keys: []string{k.Stats, k.Active, k.Bucket, k.Inventory, k.Holders, k.Claims, k.Lease, k.Tick, k.Lottery}, Args: []any{s.owner, lease.Milliseconds(), set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rateArg(set.AdmitPerSecond), set.MaxActive, passthroughBatch, n}}).Slice()
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
			_ = s.c.Run(context.WithoutCancel(ctx), rdb.Call{Script: releaseScript, Keys: []string{k.Lease}, Args: []any{s.owner}}).Err()
		}
	}()
	out := TickResult{Expired: r.Int(3), Active: r.Int(4), Room: r.Int(9)}
	rate, avail, soldout, queueing := r.Str(6), r.Int(7), r.Int(8), r.Int(11)
	// The draw's bound: a number while the draw is applied, "" else.
	through, throughArg := float64(0), any("")
	_, unbounded := r.At(12).(string)
	bounded := !unbounded
	if bounded {
		through, throughArg = r.Float(12), r.At(12)
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
			v, err := s.c.Run(ctx, rdb.Call{Script: tickPrepareScript, Keys: []string{sk.Wait, sk.Seen, sk.Stats, sk.Info, sk.Moving, sk.Fence}, Args: []any{epoch, budget, maxSkip, n, rate, avail, soldout, throughArg}}).Slice()
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
		v, err := s.c.Run(ctx, rdb.Call{Script: tickTakeScript, Keys: []string{sk.Wait, sk.Seen, sk.Moving, sk.Fence}, Args: append([]any{epoch, n}, take[i]...), Told: true}).Slice()
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
		for j := 0; j+2 < len(v); j += 3 {
			args = append(args, v[j], v[j+1], v[j+2])
			members[i] = append(members[i], v[j])
			moved++
		}
	}
	out.Waiting -= moved
	args[5] = out.Waiting
	leaseGone = true // the accept gives it back, or a newer tick has it
	v, err := s.c.Run(ctx, rdb.Call{Script: tickAcceptScript, Keys: []string{k.Stats, k.Active, k.Bucket, k.Inventory, k.Holders, k.Claims, k.Tick, rdb.OutcomeKey(event, epoch), k.Lease, k.Report}, Args: args, Told: true}).Slice()
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
		return s.c.Run(ctx, rdb.Call{Script: tickDoneScript, Keys: []string{sk.Wait, sk.Moving, sk.Stats, sk.Fence}, Args: append([]any{epoch, per[i]}, members[i]...)}).Err()
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
	return s.c.Run(ctx, rdb.Call{Script: tickDoneScript, Keys: []string{sk.Wait, sk.Moving, sk.Stats, sk.Fence}, Args: args}).Err()
}

// fault is the tests' way to make a sharded tick die after a step (a
// process killed there): nil in production.
func (s *Store) fault(step string) error {
	if s.tickFault == nil {
		return nil
	}
	return s.tickFault(step)
}
