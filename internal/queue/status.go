package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Status reports where the place of ticket t (parsed for event) stands, and
// records that its fan is still there (polling keeps a waiting ticket from
// being dropped as abandoned).
func (s *Store) Status(ctx context.Context, event string, t line.Ticket, set line.Settings) (line.Status, error) {
	if err := known(t); err != nil {
		return line.Status{}, err
	}
	return s.statusOf(ctx, event, t, set)
}

// statusOf is Status, once more on a layout bounce.
func (s *Store) statusOf(ctx context.Context, event string, t line.Ticket, set line.Settings) (line.Status, error) {
	st, err := s.status(ctx, event, t, set)
	if again, ok := relayout(set, err); ok {
		set = again
		st, err = s.status(ctx, event, t, set)
	}
	if err == nil && st.FirstAdmission {
		s.recordWait(ctx, event, st, set)
	}
	return st, err
}

// A poll's code besides a waiting fan's rank × 65536 + pollAfter
// (statusScript, statusShardScript).
const (
	polledExpired = -1
	polledClosed  = -2
	polledSoldOut = -3
	polledGone    = -4 // not on its shard: admitted, or gone (many shards)
	polledMoving  = -5 // a tick hands it to the active set right now
)

// status is one poll in the event's layout: both phases in one script on
// one shard; on many, the shard's phase (with the counts of the other
// shards started at once), then, for a fan no longer on its shard, the
// event's.
func (s *Store) status(ctx context.Context, event string, t line.Ticket, set line.Settings) (line.Status, error) {
	out := line.Status{ID: t.ID(), Account: t.Account(), JoinedAt: msToTime(t.JoinedAtMs())}
	if ms, ok := t.JoinETA(); ok {
		d := time.Duration(ms) * time.Millisecond
		out.JoinETA = &d
	}
	n := shardsOf(set)
	hs := s.headersOf(event, set)
	var (
		c      *rdb.Pending
		ahead  []*rdb.Pending
		shards []rdb.ShardKeys
		own    int
		score  int64
	)
	if n == 1 {
		// Concurrent polls of the event share one script call.
		c = s.c.Start(ctx, rdb.Call{Script: statusScript, Keys: hs.statusKeys, Args: withHeader(hs.status, out.ID, slot(t)),
			Merge: true, Header: len(hs.status), Head: replyHead})
	} else {
		shards = rdb.ShardKeysFor(event, n)
		own = int(t.Seq() % int64(n))
		sk := shards[own]
		score = s.scoreOf(event, t, set)
		c = s.c.Start(ctx, rdb.Call{Script: statusShardScript, Keys: []string{sk.Wait, sk.Seen, sk.Info, sk.Moving},
			Args: withHeader(hs.statusShard, out.ID, "#"+itoa(t.Seq()/int64(n)), score), Merge: true, Header: len(hs.statusShard), Head: replyHead})
		ahead = s.startBelow(ctx, shards, own, score)
	}
	res, err := c.Wait().Result()
	others, berr := waitBelow(ahead)
	if err != nil {
		return line.Status{}, rdb.Interpret("status", err)
	}
	head := rdb.ReplyOf(c.Head())
	code, ok := res.(int64)
	if v, isList := res.([]any); isList && n > 1 && len(v) == 2 {
		// Waiting at another score than the one it expected: count the
		// other shards again from where it really is.
		r := rdb.ReplyOf(v)
		code, ok = r.Int(0), true
		got := int64(r.Float(1))
		if r.Err() != nil {
			return line.Status{}, fmt.Errorf("status: %w", r.Err())
		}
		s.learnRanks(ctx, event)
		others, berr = waitBelow(s.startBelow(ctx, shards, own, got))
	}
	if !ok {
		return s.admittedOf(out, res)
	}
	switch {
	case code >= 0:
		if berr != nil {
			return line.Status{}, rdb.Interpret("status", berr)
		}
		rank, poll := unpackWaiting(code)
		out.State = line.Waiting
		out.Position = position(rank+others, poll, head.Float(1), head.Int(2), head.Int(0), set)
	case code == polledExpired:
		out.State = line.Expired
	case code == polledClosed:
		out.State = line.Closed
	case code == polledSoldOut:
		out.State = line.SoldOut
	case code == polledGone || code == polledMoving:
		// Off its shard: admitted, or gone; or being handed over right now
		// (in already, or still at the front).
		k := rdb.KeysOf(event)
		v, err := s.c.Run(ctx, rdb.Call{Script: statusGlobalScript, Keys: []string{k.Active, k.Claims, k.Stats}, Args: []any{out.ID, set.AccessTTL.Milliseconds()}}).Result()
		if err != nil {
			return line.Status{}, rdb.Interpret("status", err)
		}
		switch {
		case v != int64(polledExpired):
			return s.admittedOf(out, v)
		case code == polledMoving:
			out.State = line.Waiting
			out.Position = position(0, time.Second.Milliseconds(), set.AdmitPerSecond, -1, s.now().UnixMilli(), set)
		default:
			out.State = line.Expired
		}
	default:
		return line.Status{}, fmt.Errorf("status: unexpected reply %d", code)
	}
	if err := head.Err(); err != nil {
		return line.Status{}, fmt.Errorf("status: %w", err)
	}
	return out, nil
}

// admittedOf reads an admitted place's element ({"admitted", expiry ms,
// first 0|1}) into out, or a layout bounce.
func (s *Store) admittedOf(out line.Status, res any) (line.Status, error) {
	v, _ := res.([]any)
	r := rdb.ReplyOf(v)
	switch r.Str(0) {
	case "layout":
		return line.Status{}, errLayout{int(r.Int(1))}
	case "admitted":
		out.State = line.Admitted
		out.ActiveUntil = msToTime(r.Int(1))
		out.FirstAdmission = r.Int(2) == 1
	default:
		return line.Status{}, fmt.Errorf("status: unexpected reply %v", res)
	}
	if err := r.Err(); err != nil {
		return line.Status{}, fmt.Errorf("status: %w", err)
	}
	return out, nil
}

// unpackWaiting reads a waiting fan's answer as the scripts pack it: rank
// × 65,536 + pollAfter ms (pollAfter < 60,000).
func unpackWaiting(code int64) (rank, pollMs int64) { return code >> 16, code & 0xffff }

// position is what a waiting fan is told. The ETA is the time for the line
// in front (and the fan) to be admitted at the measured rate; there is none
// while paused, before opening, or while nothing is being admitted.
// available < 0: the inventory is unknown.
func position(rank, pollMs int64, rate float64, available, nowMs int64, set line.Settings) line.Position {
	p := line.Position{Position: rank + 1, Ahead: rank, PollAfter: time.Duration(pollMs) * time.Millisecond}
	if available >= 0 {
		p.Available = &available
	}
	before := set.OpensAt != nil && nowMs < set.OpensAt.UnixMilli()
	if set.Mode != line.ModePaused && !before && rate > 0 {
		eta := time.Duration(float64(p.Position) / rate * float64(time.Second)).Round(time.Millisecond)
		p.ETA = &eta
	}
	return p
}
