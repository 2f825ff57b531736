package queue

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom/internal/line"
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
func (s *Store) Tick(ctx context.Context, event string, set line.Settings) (line.TickResult, error) {
	if err := s.keepLottery(ctx, event, set); err != nil {
		return line.TickResult{Room: -1, Shards: shardsOf(set)}, err
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

func (s *Store) tick(ctx context.Context, event string, set line.Settings) (line.TickResult, error) {
	if shardsOf(set) > 1 {
		return s.tickSharded(ctx, event, set)
	}
	k := rdb.KeysOf(event)
	res, err := s.c.Run(ctx, rdb.Call{Script: tickScript,
		Keys: []string{k.Wait, k.Active, k.Seen, k.Stats, k.Bucket, k.Inventory, k.Holders, k.Lottery, k.Report, k.Claims, k.Away, k.AwayDue, k.Ranks},
		Args: []any{set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rateArg(set.AdmitPerSecond), set.MaxActive,
			set.AccessTTL.Milliseconds(), maxSkip, passthroughBatch, awayClaimWithin(set).Milliseconds()}, Told: true}).Slice()
	if err != nil {
		return line.TickResult{}, rdb.Interpret("tick", err)
	}
	r := rdb.ReplyOf(res)
	if r.Str(0) == "layout" {
		return line.TickResult{}, errLayout{int(r.Int(1))}
	}
	out := line.TickResult{
		Admitted: r.Int(0), Abandoned: r.Int(1), Expired: r.Int(2),
		Waiting: r.Int(3), Active: r.Int(4), Rate: r.Float(5), Room: r.Int(6), Lapsed: r.Int(7),
	}
	if r.Err() != nil {
		return line.TickResult{}, fmt.Errorf("tick: %w", r.Err())
	}
	return out, nil
}

// head is one fan at the front of a shard, as the tick's prepare read it.
type head struct {
	member string
	score  float64
	shard  int
}

// tickSharded is one admission tick of a sharded event: the six steps of
// tickBeginScript and its peers (scripts.go), one method of a handover
// each. The lease goes back at the tick's end: by the accept, or here when
// the tick hands nobody over; a tick that dies (its process killed) keeps
// it till it lapses, and the next tick finishes what it left.
func (s *Store) tickSharded(ctx context.Context, event string, set line.Settings) (line.TickResult, error) {
	h, err := s.beginHandover(ctx, event, set)
	if err != nil || h.out.Busy {
		return h.out, err
	}
	defer h.giveBackLease()
	if err := h.prepare(); err != nil || h.taking == 0 {
		if err == nil {
			err = h.lift()
		}
		return tickAborted(h.out, err)
	}
	if err := h.takeFronts(); err != nil {
		// What was moved is put back by the next tick (finishHandover).
		return tickAborted(h.out, err)
	}
	if err := h.accept(); err != nil {
		return tickAborted(h.out, err)
	}
	if err := h.done(); err != nil {
		// Admitted all the same; the next tick finishes the handover.
		return h.out, rdb.Interpret("tick", err)
	}
	return h.out, nil
}

// handover is one tick of a sharded event, step by step.
type handover struct {
	s      *Store
	ctx    context.Context
	event  string
	set    line.Settings
	n      int
	k      rdb.Keys
	shards []rdb.ShardKeys

	epoch, budget, watermark int64
	rate                     string
	avail, soldout, queueing int64
	through                  float64 // the draw's bound, when bounded
	bounded                  bool
	throughArg               any
	leaseGone                bool
	// mark is the line's mark this tick may lift ("" none): an auto
	// line's, set no later than accountGraceMs before the begin.
	mark string

	out     line.TickResult
	taking  int64
	take    [][]any // per shard, the members to take
	taken   [][]any // per shard, the triples the take moved
	members [][]any // per shard, the members in the order sent to the accept
	codes   string  // the accept's outcomes
	moved   int64
}

// beginHandover is step 1: the lease, the epoch, the budget (out.Busy:
// another replica ticks the event now).
func (s *Store) beginHandover(ctx context.Context, event string, set line.Settings) (*handover, error) {
	h := &handover{s: s, ctx: ctx, event: event, set: set, n: shardsOf(set), k: rdb.KeysOf(event)}
	h.shards = rdb.ShardKeysFor(event, h.n)
	k := h.k
	lease := max(3*s.tickEvery(), time.Second)
	res, err := s.c.Run(ctx, rdb.Call{Script: tickBeginScript, Keys: []string{k.Stats, k.Active, k.Bucket, k.Inventory, k.Holders, k.Claims, k.Lease, k.Tick, k.Lottery},
		Args: []any{s.owner, lease.Milliseconds(), set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rateArg(set.AdmitPerSecond), set.MaxActive, passthroughBatch, h.n}}).Slice()
	if err != nil {
		return h, rdb.Interpret("tick", err)
	}
	r := rdb.ReplyOf(res)
	switch r.Str(0) {
	case "layout":
		return h, errLayout{int(r.Int(1))}
	case "busy":
		h.out = line.TickResult{Busy: true, Room: -1}
		return h, nil
	}
	h.epoch, h.budget, h.watermark = r.Int(1), r.Int(2), r.Int(5)
	h.leaseGone = h.budget == 0 // the begin gave it back already
	h.out = line.TickResult{Expired: r.Int(3), Active: r.Int(4), Room: r.Int(9), Lapsed: r.Int(13)}
	h.rate, h.avail, h.soldout, h.queueing = r.Str(6), r.Int(7), r.Int(8), r.Int(11)
	// The draw's bound: a number while the draw is applied, "" else.
	h.throughArg = ""
	if _, unbounded := r.At(12).(string); !unbounded {
		h.bounded, h.through, h.throughArg = true, r.Float(12), r.At(12)
	}
	h.out.Rate = parseRate(h.rate)
	h.mark = r.Str(14)
	if r.Err() != nil {
		return h, fmt.Errorf("tick: %w", r.Err())
	}
	return h, nil
}

// lift lifts the line's mark the begin allowed when the prepare found
// every shard empty and nobody was handed over (the accept lifts it
// otherwise).
func (h *handover) lift() error {
	if h.mark == "" || h.out.Waiting != 0 {
		return nil
	}
	return h.s.c.Run(h.ctx, rdb.Call{Script: liftScript, Keys: []string{h.k.Stats}, Args: []any{h.mark}}).Err()
}

// giveBackLease gives the lease back if this tick still holds it.
func (h *handover) giveBackLease() {
	if !h.leaseGone {
		_ = h.s.c.ReleaseLease(h.ctx, h.k.Lease, h.s.owner)
	}
}

// prepare is steps 2 and 3: every shard notes the epoch, copies the
// figures and reads its front; then the one line's first budget fans,
// none newer than the watermark, none the draw has not reached.
func (h *handover) prepare() error {
	fronts := make([][]any, h.n)
	if err := eachShard(h.n, func(i int) error {
		sk := h.shards[i]
		for range 2 {
			v, err := h.s.c.Run(h.ctx, rdb.Call{Script: tickPrepareScript, Keys: []string{sk.Wait, sk.Seen, sk.Stats, sk.Info, sk.Moving, sk.Fence},
				Args: []any{h.epoch, h.budget, maxSkip, h.n, h.rate, h.avail, h.soldout, h.throughArg}}).Slice()
			if err != nil {
				return err
			}
			switch v[0] {
			case "fenced":
				return errFenced
			case "stale":
				if err := h.s.finishHandover(h.ctx, h.event, sk, v[1:]); err != nil {
					return err
				}
				continue
			}
			fronts[i] = v
			return nil
		}
		return fmt.Errorf("shard %d: a dead tick's handover is still there", i)
	}); err != nil {
		return err
	}
	var heads []head
	for i, v := range fronts {
		p := rdb.ReplyOf(v)
		h.out.Waiting += p.Int(1)
		h.out.Abandoned += p.Int(2)
		for j := 3; j+1 < len(v); j += 2 {
			sc, err := strconv.ParseFloat(p.Str(j+1), 64)
			if err != nil {
				return fmt.Errorf("tick: score %v: %w", v[j+1], err)
			}
			heads = append(heads, head{member: p.Str(j), score: sc, shard: i})
		}
		if p.Err() != nil {
			return fmt.Errorf("tick: %w", p.Err())
		}
	}
	sort.Slice(heads, func(a, b int) bool {
		if heads[a].score != heads[b].score {
			return heads[a].score < heads[b].score
		}
		return heads[a].member < heads[b].member
	})
	h.take = make([][]any, h.n)
	for _, hd := range heads {
		if h.taking == h.budget {
			break
		}
		if seq, ok := seqOf(hd.member); !ok || seq > h.watermark {
			break
		}
		if h.bounded && hd.score > h.through {
			break // the draw has not reached this fan yet
		}
		h.take[hd.shard] = append(h.take[hd.shard], hd.member)
		h.taking++
	}
	return nil
}

// takeFronts is step 4: the fans taken move out of line, shard by shard.
func (h *handover) takeFronts() error {
	h.taken = make([][]any, h.n)
	return eachShard(h.n, func(i int) error {
		if len(h.take[i]) == 0 {
			return nil
		}
		sk := h.shards[i]
		v, err := h.s.c.Run(h.ctx, rdb.Call{Script: tickTakeScript, Keys: []string{sk.Wait, sk.Seen, sk.Moving, sk.Fence},
			Args: append([]any{h.epoch, h.n}, h.take[i]...), Told: true}).Slice()
		if err != nil {
			return err
		}
		if len(v) > 0 && v[0] == "fenced" {
			return errFenced
		}
		h.taken[i] = v
		return nil
	})
}

// accept is step 5: into the active set, if this tick is still the
// newest; the accept gives the lease back (or a newer tick has it).
func (h *handover) accept() error {
	set, k := h.set, h.k
	args := []any{h.epoch, h.queueing, set.MaxActive, set.AccessTTL.Milliseconds(), rateArg(set.AdmitPerSecond), 0, h.s.owner,
		awayClaimWithin(set).Milliseconds(), h.mark, boolArg(set.Mode == line.ModeAuto)}
	h.members = make([][]any, h.n)
	for i, v := range h.taken {
		for j := 0; j+2 < len(v); j += 3 {
			args = append(args, v[j], v[j+1], v[j+2])
			h.members[i] = append(h.members[i], v[j])
			h.moved++
		}
	}
	h.out.Waiting -= h.moved
	args[5] = h.out.Waiting
	h.leaseGone = true
	v, err := h.s.c.Run(h.ctx, rdb.Call{Script: tickAcceptScript,
		Keys: []string{k.Stats, k.Active, k.Bucket, k.Inventory, k.Holders, k.Claims, k.Tick, rdb.OutcomeKey(h.event, h.epoch), k.Lease, k.Report, k.Away, k.AwayDue, k.Ranks},
		Args: args, Told: true}).Slice()
	if err != nil {
		return err
	}
	if len(v) == 1 && v[0] == "fenced" {
		return errFenced
	}
	a := rdb.ReplyOf(v)
	h.codes = a.Str(0)
	h.out.Active, h.out.Rate = a.Int(1), a.Float(2)
	if a.Err() != nil || len(h.codes) != int(h.moved) {
		return fmt.Errorf("tick: accept replied %v (%v)", v, a.Err())
	}
	return nil
}

// done is step 6: the handover cleared on every shard, whoever was not
// let in back in line at its place.
func (h *handover) done() error {
	per := make([]string, h.n)
	at := 0
	for i := range h.members {
		per[i] = h.codes[at : at+len(h.members[i])]
		at += len(h.members[i])
		for _, c := range per[i] {
			switch c {
			case 'a':
				h.out.Admitted++
			case 'x':
				h.out.Abandoned++
			case 'r':
				h.out.Waiting++
			}
		}
	}
	return eachShard(h.n, func(i int) error {
		if len(h.members[i]) == 0 {
			return nil
		}
		sk := h.shards[i]
		return h.s.c.Run(h.ctx, rdb.Call{Script: tickDoneScript, Keys: []string{sk.Wait, sk.Moving, sk.Stats, sk.Fence},
			Args: append([]any{h.epoch, per[i]}, h.members[i]...)}).Err()
	})
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
