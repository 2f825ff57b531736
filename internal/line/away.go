package line

import (
	"errors"
	"fmt"
	"time"
)

// Away from the page (DESIGN.md): a fan with an account whose token carries
// an email may step away; its place is kept without polls, and the fan is
// emailed when it is let in.

// Sentinel errors of stepping away.
var (
	// ErrNotYours: the ticket has no account, or another one than the
	// token's: only a place's own account may have its turn emailed.
	ErrNotYours = errors.New("line: the ticket is not this account's")
	// ErrAlreadyAdmitted: the place is let in already; there is nothing
	// to keep.
	ErrAlreadyAdmitted = errors.New("line: the place is admitted already")
)

// AwayLimited is stepping away's answer when the account stepped away its
// hour's share of times already.
type AwayLimited struct {
	RetryAfter time.Duration
}

func (e AwayLimited) Error() string {
	return fmt.Sprintf("line: this account stepped away too often, retry after %v", e.RetryAfter)
}

// DefaultAwayClaimWithin is how long an away place waits for its claim when
// the settings say nothing (settings published before the key existed).
const DefaultAwayClaimWithin = 10 * time.Minute

// AwayRequest is a fan stepping away.
type AwayRequest struct {
	Event    string
	Settings Settings
	// Ticket is the fan's place, parsed by the caller (Codec.Parse).
	Ticket Ticket
	// Account is the verified account token's sub, and Email its email
	// claim, checked by the caller: the place must be this account's.
	Account, Email string
	// Lang is the language the email is to speak.
	Lang string
	// Limit is how many times an account may step away per hour (0 = no
	// bound); Now is the caller's clock, the hour counted.
	Limit int
	Now   time.Time
}

// AwayFan is an away fan let in, whose email is due.
type AwayFan struct {
	ID string // the ticket's id
	// Place is what the emailed link's ticket is rebuilt from, for Email
	// only: the ticket's id and facts and a seal, never the ticket itself.
	Place      string
	Account    string
	Email      string // "" when the fan left since (nothing to send)
	Lang       string
	AdmittedAt time.Time
}

// AwayBooks are what away changed in an event's books.
type AwayBooks struct {
	Away     int64 // places whose fans stepped away
	Admitted int64 // of them, let in (counted in Stats.Admitted while claimed or waiting for the claim)
	Claimed  int64 // of those, claimed (the link opened, or any poll)
	Lapsed   int64 // let in, never claimed: given up (counted in Stats.Abandoned, no longer in Stats.Admitted)
}
