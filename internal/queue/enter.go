package queue

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Enter is the fan's way in, in one call: the live place it already has
// (a ticket it carries, or its account's place, from any device) is resumed
// and claimed as a poll claims it; anyone else gets a new place at the
// back, paying the sale's proof of work when it asks one and counted
// against its network's join budget. Each ticket is decoded once.
//
// Errors besides the join's (ErrClosed, ErrNotOpen, ErrSoldOut, …):
// ErrProofRequired when a new place needs a proof and none was brought;
// ErrProofSpent or ErrProofExpired for a proof that buys nothing (the
// network gets its join back); a RateLimited when the network's budget is
// spent. A resumed place that is closed or sold out is answered as such:
// Entry.State says it.
func (s *Store) Enter(ctx context.Context, r EnterRequest) (Entry, error) {
	for _, str := range r.Tickets {
		t, err := s.decode(r.Event, str)
		if err != nil || (r.Account != "" && t.account != r.Account) {
			// A bad ticket never hides a good one and is no error here; a
			// ticket of another account (or none) is not this fan's place.
			continue
		}
		st, err := s.statusOf(ctx, r.Event, t, r.Settings)
		if err != nil {
			return Entry{}, err
		}
		if st.State != Expired {
			return Entry{Ticket: strings.Clone(str), Resumed: true, Status: st}, nil
		}
		// Expired: the other ticket may still be live; if not, this fan
		// gets a new place like anyone else.
	}
	if r.Account != "" {
		ticket, st, err := s.AccountPlace(ctx, r.Event, r.Account, r.Settings)
		if err != nil {
			return Entry{}, err
		}
		if ticket != "" && st.State != Expired {
			return Entry{Ticket: ticket, Resumed: true, Status: st}, nil
		}
	}
	if r.ProofRequired && r.Proof == nil {
		return Entry{}, ErrProofRequired
	}
	if wait, err := s.AllowJoin(ctx, r.Addr, r.Limit, r.Now); err != nil {
		return Entry{}, err
	} else if wait > 0 {
		return Entry{}, RateLimited{RetryAfter: wait}
	}
	// The proof is spent in the join's own script (one place per proof,
	// whatever the race), and so is the account's place (one per account).
	res, err := s.JoinWith(ctx, r.Event, r.Settings, JoinOptions{Proof: r.Proof, Account: r.Account, Code: r.Code})
	if errors.Is(err, ErrNotOpen) {
		err = notOpen(r.Settings)
	}
	if (err == nil && res.Resumed) || errors.Is(err, ErrProofSpent) || errors.Is(err, ErrProofExpired) {
		// Nothing was bought (another device of the account made its place
		// meanwhile, or the proof was spent already): the network gets its
		// join back. Best effort: if Redis fails it now, the fan's network
		// has one join less this minute, and the fan still its answer.
		if r.Limit > 0 {
			_ = s.UndoJoin(ctx, r.Addr, r.Now)
		}
	}
	if err != nil {
		return Entry{}, err
	}
	if res.Resumed {
		if res.Status.State == Expired {
			return Entry{}, fmt.Errorf("join: the account's place %s ended as it was resumed", res.ID)
		}
		return Entry{Ticket: res.Ticket, Resumed: true, Status: res.Status}, nil
	}
	st := Status{ID: res.ID, Account: res.Account, State: res.State, Position: res.Position, ActiveUntil: res.ActiveUntil, JoinedAt: r.Now}
	if res.State == Admitted {
		st.FirstAdmission = true // passthrough: let in and claimed at once
	}
	return Entry{Ticket: res.Ticket, Status: st}, nil
}

// EnterRequest is a fan at the door of event.
type EnterRequest struct {
	Event    string
	Settings Settings
	// Tickets are the tickets the fan carries (a header, a cookie), in the
	// order to try them.
	Tickets []string
	// Account is the fan's verified account ("" = none).
	Account string
	// ProofRequired: the sale asks a proof of work for a new place; Proof
	// is the fan's, verified by the caller (nil: none, or a bad one).
	ProofRequired bool
	Proof         *Proof
	// Code is the access code's hash the fan brought (presale.Store.CodeHash;
	// "" = none): spent by a new place of an event with codes.
	Code string
	// Addr is the fan's network (the caller masks an IPv6 address to its
	// prefix), counted against Limit joins per calendar minute of Now (0 =
	// no limit).
	Addr  netip.Addr
	Limit int
	Now   time.Time
}

// Entry is what Enter gave the fan: a resumed place (its status, as a
// poll would read it, the place claimed if it was admitted) or a new one.
type Entry struct {
	Ticket  string
	Resumed bool
	Status
}

// ErrProofRequired: a new place needs a proof of work and the fan brought
// none (or a bad one).
var ErrProofRequired = errors.New("queue: proof of work required")

// NotOpen is ErrNotOpen with when the line opens to joins: the pre-queue
// if the sale has one, else the opening (nil: unknown).
type NotOpen struct{ OpensAt *time.Time }

func (e NotOpen) Error() string { return ErrNotOpen.Error() }

func (e NotOpen) Unwrap() error { return ErrNotOpen }

func notOpen(set Settings) NotOpen {
	if set.PrequeueOpensAt != nil {
		return NotOpen{OpensAt: set.PrequeueOpensAt}
	}
	return NotOpen{OpensAt: set.OpensAt}
}

// RateLimited: the fan's network spent its join budget of the minute.
type RateLimited struct {
	RetryAfter time.Duration
}

func (e RateLimited) Error() string {
	return fmt.Sprintf("queue: too many joins from this network, retry after %v", e.RetryAfter)
}
