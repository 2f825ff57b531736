package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Join gives a fan a new place in the line of event: at the back after
// opening, in the lottery before it, or admitted at once in passthrough
// mode. It returns ErrNotOpen or ErrClosed. A fan who already carries a
// ticket is resumed with Status, never here: a ticket that is no longer
// waiting or active must not turn into a new place without the caller's
// say (the per-IP join limit).
func (s *Store) Join(ctx context.Context, event string, set line.Settings) (line.JoinResult, error) {
	return s.JoinWith(ctx, event, set, line.JoinOptions{})
}

// JoinWith is Join with options. A join for an account whose place is
// still live makes nothing and spends no proof: it answers that place,
// Resumed, with its status.
func (s *Store) JoinWith(ctx context.Context, event string, set line.Settings, o line.JoinOptions) (line.JoinResult, error) {
	if o.Account != "" && (len(o.Account) > line.MaxAccountLen) {
		return line.JoinResult{}, fmt.Errorf("join: account id longer than %d", line.MaxAccountLen)
	}
	return s.joinAccount(ctx, event, set, o)
}

// JoinProved is Join paid for with a proof of work, which it spends in the
// same script: exactly one join ever gets a place for one proof, however
// many present it at once and through however many gateways. A proof spent
// already is ErrProofSpent and one expired by Redis TIME ErrProofExpired;
// neither gives a place. A join refused an access code it brought
// (presale.ErrInvalidCode, ErrCodeUsed) has spent its proof, as a place
// does: every guess costs a proof. A join refused for any other reason
// (ErrClosed, ErrNotOpen, ErrSoldOut, the presale's gate, no code) leaves
// its proof unspent.
//
// The spent proofs live in one set per event and expiry minute, kept a
// second past that minute: the script refuses an expired proof by TIME, so
// none can come back once its set is gone.
func (s *Store) JoinProved(ctx context.Context, event string, set line.Settings, p line.Proof) (line.JoinResult, error) {
	return s.JoinWith(ctx, event, set, line.JoinOptions{Proof: &p})
}

// join runs one join (for o.Account: replace is the id of the account's
// place the caller found dead, or ""), once more on a layout bounce.
func (s *Store) join(ctx context.Context, event string, set line.Settings, o line.JoinOptions, replace string) (line.JoinResult, error) {
	r, err := s.joinOnce(ctx, event, set, o, replace)
	if again, ok := relayout(set, err); ok {
		set = again
		r, err = s.joinOnce(ctx, event, set, o, replace)
	}
	if errors.Is(err, errUncommitted) {
		// The pre-queue is open and nobody committed its lottery yet (the
		// admitter does at its next tick): commit it, then place the fan.
		if err := s.commit(ctx, event, set); err != nil {
			return line.JoinResult{}, fmt.Errorf("join: %w", err)
		}
		r, err = s.joinOnce(ctx, event, set, o, replace)
	}
	return r, err
}

// joinOnce is one join in the event's layout: both phases in one script
// on one shard, the event's phase then the shard's on many (lua.go).
func (s *Store) joinOnce(ctx context.Context, event string, set line.Settings, o line.JoinOptions, replace string) (line.JoinResult, error) {
	b, err := s.joinBegin(ctx, event, set, o, replace)
	if err != nil {
		return line.JoinResult{}, err
	}
	return s.joinEnd(ctx, event, set, b)
}

// begun is a join after the script on the event's tag: its ticket, its
// code, and the figures of the reply's head.
type begun struct {
	t     line.Ticket
	code  int64 // rank × 65536 + pollAfter, or joinedAdmitted, or joinedToPlace
	third int64 // the expiry of an admitted place, the ms until opening of one to place
	rate  string
	avail int64
}

// joinBegin runs the join's script on the event's tag: joinScript, which
// makes the place too, on one shard; joinGlobalScript on many.
func (s *Store) joinBegin(ctx context.Context, event string, set line.Settings, o line.JoinOptions, replace string) (begun, error) {
	random, err := newRandom()
	if err != nil {
		return begun{}, fmt.Errorf("join: %w", err)
	}
	n := shardsOf(set)
	hs := s.headersOf(event, set)
	keys, header, script := hs.joinKeys, hs.join, joinScript
	if n > 1 {
		keys, header, script = hs.joinGlobalKeys, hs.joinGlobal, joinGlobalScript
	}
	goes, proofID, proofExp := "", "", ""
	if p := o.Proof; p != nil {
		exp := p.ExpiresAt.UnixMilli()
		minute := exp / 60_000
		keys = append(keys[:len(keys):len(keys)], rdb.ProofsKey(event, minute))
		goes = strconv.FormatInt((minute+1)*60_000+1000, 10)
		proofID, proofExp = p.ID, strconv.FormatInt(exp, 10)
	}
	// The call's own header: when the proofs' set goes, the cap (an auto
	// line's straight-through joins are held to it), and whether only a
	// place let in at once will do.
	var args []any
	only := boolArg(o.StraightOnly)
	if n > 1 {
		args = withHeader(header, goes, set.MaxActive, only, b64.EncodeToString(random[:]), o.Account, replace, proofID, proofExp, o.Code)
	} else {
		args = withHeader(header, goes, set.MaxActive, only, b64.EncodeToString(random[:]), lotteryArg(random), o.Account, proofID, proofExp, o.Code)
	}
	c := s.c.Start(ctx, rdb.Call{Script: script, Keys: keys, Args: args, Merge: true, Told: true, Header: len(header) + 3, Head: joinHead})
	res, err := c.Wait().Result()
	if err != nil {
		return begun{}, rdb.Interpret("join", err)
	}
	head := rdb.ReplyOf(c.Head())
	code, seq, third, err := joinAnswer(res, head.Int(3))
	if err != nil {
		return begun{}, err
	}
	b := begun{t: line.NewTicket(seq, random, head.Int(0), o.Account),
		code: code, third: third, rate: head.Str(1), avail: head.Int(2)}
	if err := head.Err(); err != nil {
		return begun{}, fmt.Errorf("join: %w (reply %v)", err, res)
	}
	return b, nil
}

// joinEnd makes a sharded join's place on its shard, and answers the join.
func (s *Store) joinEnd(ctx context.Context, event string, set line.Settings, b begun) (line.JoinResult, error) {
	t := b.t
	var out line.JoinResult
	switch {
	case b.code == joinedAdmitted:
		out.State = line.Admitted
		out.ActiveUntil = msToTime(b.third)
	case b.code == joinedToPlace:
		score := t.Seq()
		if b.third > 0 {
			score = lotteryOf(t.Random())
		}
		code, others, err := s.placeOnShard(ctx, event, set, t, b.rate, score, b.third, false)
		if err != nil {
			return line.JoinResult{}, err
		}
		rank, poll := unpackWaiting(code)
		out.State = line.Waiting
		out.Position = position(rank+others, poll, parseRate(b.rate), b.avail, t.JoinedAtMs(), set)
	default:
		rank, poll := unpackWaiting(b.code)
		out.State = line.Waiting
		out.Position = position(rank, poll, parseRate(b.rate), b.avail, t.JoinedAtMs(), set)
	}
	if out.ETA != nil {
		t = t.WithJoinETA(out.ETA.Milliseconds())
	}
	out.Ticket, out.ID, out.Account = s.sign(event, t), t.ID(), t.Account()
	return out, nil
}

// parseRate reads a rate as the scripts answer it (a float as a string).
func parseRate(r string) float64 {
	f, _ := strconv.ParseFloat(r, 64)
	return f
}

// replyHead is the length of the head the scripts that answer many fans
// begin their replies with: {now ms, rate, available or -1}.
const replyHead = 3

// joinHead is the join scripts' head: replyHead's, then the event's
// sequence number before the call, from which a waiting join's element
// counts its own (joinAnswer): in the element's low 8 bits, as the
// batcher merges at most 128 joins in a call (rdb's maxBatch; the script
// answers a table past 255).
const joinHead = replyHead + 1

// A join's code besides a waiting place's rank × 65536 + pollAfter.
const (
	joinedAdmitted = -1 // let in at once (passthrough)
	joinedToPlace  = -2 // the event's phase is done; the shard's is next
)

// joinAnswer reads one join's element of the join scripts' reply: its
// code, sequence number and third value (the expiry of an admitted place,
// the ms until opening of one to place), or the refusal. seq0 is the
// head's sequence: a waiting join's element is one number, its code ×
// 256 plus its sequence number's offset from seq0 (joinScript).
func joinAnswer(res any, seq0 int64) (code, seq, third int64, err error) {
	if n, ok := res.(int64); ok && n >= 0 {
		return n >> 8, seq0 + n&255, 0, nil
	}
	v, ok := res.([]any)
	if !ok {
		// A refusal is its name alone.
		word, _ := res.(string)
		if err := joinRefusal(rdb.ReplyOf([]any{word})); err != nil {
			return 0, 0, 0, err
		}
		return 0, 0, 0, fmt.Errorf("join: unexpected reply %v", res)
	}
	r := rdb.ReplyOf(v)
	if err := joinRefusal(r); err != nil {
		return 0, 0, 0, err
	}
	code, seq = r.Int(0), r.Int(1)
	if code < 0 {
		third = r.Int(2)
	}
	if err := r.Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("join: %w (reply %v)", err, res)
	}
	return code, seq, third, nil
}

// placeOnShard runs the shard's phase of t's join at score (drawn: the
// score is its draw's) and counts the fans ahead of it on the other shards
// meanwhile. A pre-queue place the draw overtook is placed at its draw.
func (s *Store) placeOnShard(ctx context.Context, event string, set line.Settings, t line.Ticket, rate string, score, untilOpen int64, drawn bool) (code, others int64, err error) {
	n := shardsOf(set)
	shards := rdb.ShardKeysFor(event, n)
	own := int(t.Seq() % int64(n))
	sk := shards[own]
	made := itoa(t.JoinedAtMs()) // a place too late is never made (joinShardScript)
	place := s.c.Start(ctx, rdb.Call{Script: joinShardScript, Keys: []string{sk.Wait, sk.Seen, sk.Stats, sk.Info},
		Args:  []any{rate, set.AbandonAfter.Milliseconds(), n, t.ID(), score, "#" + itoa(t.Seq()/int64(n)), untilOpen, boolArg(drawn), made},
		Merge: true, Told: true, Header: 3})
	ahead := s.startBelow(ctx, shards, own, score)
	res, err := place.Wait().Result()
	others, berr := waitBelow(ahead)
	if err != nil {
		return 0, 0, rdb.Interpret("join", err)
	}
	switch res {
	case "redraw":
		// The draw began on this shard as the place was on its way.
		score, err := s.rankScoreOf(ctx, event, t)
		if err != nil {
			return 0, 0, fmt.Errorf("join: %w", err)
		}
		return s.placeOnShard(ctx, event, set, t, rate, score, untilOpen, true)
	case "late":
		return 0, 0, fmt.Errorf("join: %w: the place reached its shard too late", line.ErrUnavailable)
	}
	if berr != nil {
		return 0, 0, rdb.Interpret("join", berr)
	}
	code, ok := res.(int64)
	if !ok {
		return 0, 0, fmt.Errorf("join: unexpected reply %v", res)
	}
	return code, others, nil
}

// joinRefusal is the error of a join script's answer that made no place,
// or nil.
func joinRefusal(r *rdb.Reply) error {
	switch r.Str(0) {
	case "closed":
		return line.ErrClosed
	case "not_open":
		return line.ErrNotOpen
	case "sold_out":
		return line.ErrSoldOut
	case "line":
		return line.ErrWouldWait
	case "reused":
		return line.ErrProofSpent
	case "stale":
		return line.ErrProofExpired
	case "uncommitted":
		return errUncommitted
	case "layout":
		return errLayout{int(r.Int(1))}
	case "account":
		return errAccountPlace{r.Str(1)}
	case "account_required":
		return presale.ErrAccountRequired
	case "not_invited":
		return presale.ErrNotInvited
	case "invitation_used":
		return presale.ErrInvitationUsed
	case "window":
		return presale.WindowNotOpen{OpensAt: msToTime(r.Int(1)), ClosesAt: msToTime(r.Int(2))}
	case "code_required":
		return presale.ErrCodeRequired
	case "invalid_code":
		return presale.ErrInvalidCode
	case "code_used":
		return presale.ErrCodeUsed
	}
	return nil
}
