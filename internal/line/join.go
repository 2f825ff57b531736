package line

import (
	"fmt"
	"net/netip"
	"time"
)

// EnterRequest is a fan at the door of event: the join's request (the
// line's Enter, one call).
type EnterRequest struct {
	Event    string
	Settings Settings
	// Tickets are the authentic tickets of Event the fan carries (a header,
	// a cookie), in the order to try them: parsed by the caller
	// (Codec.Parse), which leaves out a bad one (a bad ticket never hides
	// a good one, and is no error of the join).
	Tickets []Ticket
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
	// StraightOnly: a new place only if it is let in at once (an auto
	// line with room, DESIGN.md "Always on"), never one in line: a join
	// that would wait makes nothing, spends nothing (the network gets its
	// join back) and is ErrWouldWait. Forward auth's visitors with no pass
	// ask so: they are sent to the room, which makes their place there.
	StraightOnly bool
}

// Entry is what Enter gave the fan, the join's answer: a resumed place
// (its status, as a poll would read it, the place claimed if it was
// admitted) or a new one.
type Entry struct {
	Ticket  Ticket // signed: its String is what the fan holds
	Resumed bool
	Status
}

// JoinOptions are what a join may bring besides the event.
type JoinOptions struct {
	// Proof is the join's proof of work, verified by the caller.
	Proof *Proof
	// Account is the verified account the place is for ("" = none): the
	// account gets one place in the event, whatever the race and however
	// many devices it joins from.
	Account string
	// Code is the access code's hash (presale.Store.CodeHash; "" = none):
	// a new place of an event with codes spends one of its uses.
	Code string
	// StraightOnly: a place only if it is let in at once, else nothing
	// and ErrWouldWait (EnterRequest.StraightOnly).
	StraightOnly bool
}

// Proof is a join's proof of work, verified by the caller (package proof):
// its challenge's id and when the challenge expires.
type Proof struct {
	ID        string
	ExpiresAt time.Time
}

// JoinResult is the answer to a join: a new place, or (Resumed, a join for
// an account) the account's live place.
type JoinResult struct {
	Ticket Ticket // signed: its String is the opaque ticket to hand to the fan
	ID     string // the ticket's id (the store's member; the access JWT's sub)
	State  State  // Waiting, or Admitted (and claimed) in passthrough mode
	Position
	ActiveUntil time.Time // when State == Admitted
	// Account is the account the place belongs to ("" = none).
	Account string
	// Resumed: the account had this place already and nothing was made;
	// Status is its status, exactly as a poll would have it (a place
	// admitted meanwhile is claimed by this look).
	Resumed bool
	Status  Status
}

// NotOpen is ErrNotOpen with when the line opens to joins: the pre-queue
// if the sale has one, else the opening (nil: unknown).
type NotOpen struct{ OpensAt *time.Time }

func (e NotOpen) Error() string { return ErrNotOpen.Error() }

// Unwrap makes a NotOpen ErrNotOpen.
func (e NotOpen) Unwrap() error { return ErrNotOpen }

// NotOpenUnder is the NotOpen of a join refused under set.
func NotOpenUnder(set Settings) NotOpen {
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
	return fmt.Sprintf("line: too many joins from this network, retry after %v", e.RetryAfter)
}
