package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/waitroom/waitroom/internal/line"
)

// Enter is the fan's way in, in one call: the live place it already has
// (a ticket it carries, or its account's place, from any device) is resumed
// and claimed as a poll claims it; anyone else gets a new place at the
// back, paying the sale's proof of work when it asks one and counted
// against its network's join budget. The tickets come parsed (the caller
// checked them: line.Codec.Parse); none is checked here again.
//
// Errors besides the join's (ErrClosed, ErrNotOpen, ErrSoldOut, …):
// ErrProofRequired when a new place needs a proof and none was brought;
// ErrProofSpent or ErrProofExpired for a proof that buys nothing (the
// network gets its join back); a RateLimited when the network's budget is
// spent. A new place's proof is judged before its access code: a join
// without one is ErrProofRequired whatever code it brings, and a code
// refused (presale.ErrInvalidCode, ErrCodeUsed) has cost its proof and
// the network's join. A resumed place that is closed or sold out is answered as such:
// Entry.State says it. A join that asked StraightOnly and would have waited
// is ErrWouldWait, and made nothing.
func (s *Store) Enter(ctx context.Context, r line.EnterRequest) (line.Entry, error) {
	for _, t := range r.Tickets {
		if t.IsZero() || (r.Account != "" && t.Account() != r.Account) {
			// A ticket of another account (or none) is not this fan's
			// place (the caller left out the bad ones).
			continue
		}
		st, err := s.statusOf(ctx, r.Event, t, r.Settings)
		if err != nil {
			return line.Entry{}, err
		}
		if st.State != line.Expired {
			return line.Entry{Ticket: t, Resumed: true, Status: st}, nil
		}
		// Expired: the other ticket may still be live; if not, this fan
		// gets a new place like anyone else.
	}
	if r.Account != "" {
		ticket, st, err := s.AccountPlace(ctx, r.Event, r.Account, r.Settings)
		if err != nil {
			return line.Entry{}, err
		}
		if !ticket.IsZero() && st.State != line.Expired {
			return line.Entry{Ticket: ticket, Resumed: true, Status: st}, nil
		}
	}
	if r.ProofRequired && r.Proof == nil {
		return line.Entry{}, line.ErrProofRequired
	}
	if wait, err := s.AllowJoin(ctx, r.Addr, r.Limit, r.Now); err != nil {
		return line.Entry{}, err
	} else if wait > 0 {
		return line.Entry{}, line.RateLimited{RetryAfter: wait}
	}
	// The proof is spent in the join's own script (one place per proof,
	// whatever the race), and so is the account's place (one per account).
	res, err := s.JoinWith(ctx, r.Event, r.Settings, line.JoinOptions{Proof: r.Proof, Account: r.Account, Code: r.Code, StraightOnly: r.StraightOnly})
	if errors.Is(err, line.ErrNotOpen) {
		err = notOpen(r.Settings)
	}
	if (err == nil && res.Resumed) || errors.Is(err, line.ErrProofSpent) || errors.Is(err, line.ErrProofExpired) || (r.StraightOnly && err != nil) {
		// Nothing was bought (another device of the account made its place
		// meanwhile, the proof was spent already, or a join that takes only
		// a place let in at once was refused, ErrWouldWait or any other
		// way): the network gets its join back. Best effort: if
		// Redis fails it now, the fan's network has one join less this
		// minute, and the fan still its answer.
		if r.Limit > 0 {
			_ = s.UndoJoin(ctx, r.Addr, r.Now)
		}
	}
	if err != nil {
		return line.Entry{}, err
	}
	if res.Resumed {
		if res.Status.State == line.Expired {
			return line.Entry{}, fmt.Errorf("join: the account's place %s ended as it was resumed", res.ID)
		}
		return line.Entry{Ticket: res.Ticket, Resumed: true, Status: res.Status}, nil
	}
	st := line.Status{ID: res.ID, Account: res.Account, State: res.State, Position: res.Position, ActiveUntil: res.ActiveUntil, JoinedAt: r.Now}
	if res.State == line.Admitted {
		st.FirstAdmission = true // passthrough: let in and claimed at once
	}
	return line.Entry{Ticket: res.Ticket, Status: st}, nil
}

func notOpen(set line.Settings) line.NotOpen { return line.NotOpenUnder(set) }
