// Package line is the waiting line's own words: what a fan, a gate, the
// booking core, the admitter and an operator say to the line and hear from
// it (DESIGN.md), with no store behind them. The ticket and its codec
// (ticket.go: a signed id, checked once at the edge), a ticket's states,
// the settings in force, a poll's status and position, the join's request
// and answer (join.go), stepping away (away.go), the inventory the booking
// core publishes and the bookings it relays (inventory.go), the lottery's
// and the selection's published draw (draw.go), the sale's report
// (report.go), a presale place's fate (PlaceState), and every sentinel
// error the line answers.
//
// It imports nothing of ours and no store's client: package queue is its
// Redis implementation, and the services (gateway, admission, booking)
// declare the small interfaces they use in these words, so none of them
// imports queue (only cmd and tests do).
package line

import (
	"errors"
	"time"
)

// Sentinel errors.
var (
	// ErrUnavailable: the line's store cannot serve right now (Redis down,
	// restarting, loading, or a write not replicated in time: package rdb
	// says so with this very error); the caller answers 503 and the client
	// retries.
	ErrUnavailable = errors.New("redis unavailable")
	// ErrInvalidTicket: forged, truncated, malformed, or of another event.
	// Refused by the codec, before any store is asked.
	ErrInvalidTicket = errors.New("line: invalid ticket")
	// ErrUnknownTicket: the ticket is neither waiting nor active.
	ErrUnknownTicket = errors.New("line: ticket neither waiting nor active")
	// ErrNotOpen: the pre-queue has not opened yet.
	ErrNotOpen = errors.New("line: not open")
	// ErrClosed: the event is closed (mode closed, or past closes_at).
	ErrClosed = errors.New("line: event closed")
	// ErrNoSettings: no admitter has published settings for the event yet.
	ErrNoSettings = errors.New("line: no settings published")
	// ErrSoldOut: every place of the event is sold (see Inventory): no new
	// place in line.
	ErrSoldOut = errors.New("line: sold out")
	// ErrProofRequired: a new place needs a proof of work and the fan
	// brought none (or a bad one).
	ErrProofRequired = errors.New("line: proof of work required")
	// ErrProofSpent: the join's proof of work bought a place already.
	ErrProofSpent = errors.New("line: proof already spent")
	// ErrProofExpired: the join's proof of work expired by the store's
	// clock.
	ErrProofExpired = errors.New("line: proof expired")
	// ErrTokenSpent: a return token (forward auth's way back to a site) was
	// traded for a pass already.
	ErrTokenSpent = errors.New("line: return token spent already")
	// ErrWouldWait: a join that asked for a place only if it is let in at
	// once (EnterRequest.StraightOnly) would have waited in line (someone
	// waits, the cap is reached, the bucket is empty, or the event is not
	// auto): nothing was made.
	ErrWouldWait = errors.New("line: the join would wait")
)

// HoldExpiresHeader is the header the booking core answers a hold (201)
// with: the hold's expiry, RFC 3339. The gate stretches the fan's active
// window to it and hands out the longer pass, reading that one header of
// the answer, never its body; it is not passed on to the fan.
const HoldExpiresHeader = "X-Waitroom-Hold-Expires"

// State of a ticket.
type State string

// A ticket's states.
const (
	Waiting  State = "waiting"
	Admitted State = "admitted"
	Expired  State = "expired" // left, access window ended, or abandoned
	Closed   State = "closed"  // the event closed while the ticket waited
	SoldOut  State = "soldout" // every place sold while the ticket waited
)

// Modes of an event (config events[].mode; the config validates the same
// five words).
const (
	ModeQueue       = "queue"       // a line, admitted at the rate, never above the cap
	ModeAuto        = "auto"        // straight through while nobody waits and there is room, else queue's line
	ModePassthrough = "passthrough" // no line: admitted at once
	ModePaused      = "paused"      // the line holds, nobody is admitted
	ModeClosed      = "closed"      // no joins, waiting tickets are told
)

// Settings are the admission settings in force for one event, published by
// the admitter (the only writer) and read by the gateway.
type Settings struct {
	Mode            string        `json:"mode"` // queue | auto | passthrough | paused | closed
	AdmitPerSecond  float64       `json:"admitPerSecond"`
	MaxActive       int           `json:"maxActive"`
	AccessTTL       time.Duration `json:"accessTtl"`
	AbandonAfter    time.Duration `json:"abandonAfter"`
	AwayClaimWithin time.Duration `json:"awayClaimWithin,omitempty"` // an away fan's admitted place waits this long for its claim (away.go)
	PrequeueOpensAt *time.Time    `json:"prequeueOpensAt,omitempty"`
	OpensAt         *time.Time    `json:"opensAt,omitempty"`
	ClosesAt        *time.Time    `json:"closesAt,omitempty"`
	// Shards spreads the line over that many hash tags (package queue's
	// shards.go); 0 or 1 is the one-shard layout. The admitter publishes
	// the layout the event's state really has.
	Shards int `json:"shards,omitempty"`
	// Sources says where mode, admitPerSecond and maxActive come from:
	// "config", or "api" for an operator's override (package admission).
	Sources map[string]string `json:"sources,omitempty"`
	// Factor is the adaptive admitter's share of the rate (0 = not
	// adaptive): AdmitPerSecond is the rate in force times it already.
	Factor float64 `json:"adaptiveFactor,omitempty"`
	// Presale: a new place needs an invited account inside its window
	// (package presale) until GeneralSaleAt (nil: for ever).
	Presale       bool       `json:"presale,omitempty"`
	GeneralSaleAt *time.Time `json:"generalSaleAt,omitempty"`
	// Codes: a new place spends one use of an access code.
	Codes bool `json:"codes,omitempty"`
}

// Admitting reports whether the settings let anyone in at t: not paused or
// closed, and inside the open window.
func (s Settings) Admitting(t time.Time) bool {
	switch {
	case s.Mode == ModePaused || s.Mode == ModeClosed:
		return false
	case s.OpensAt != nil && t.Before(*s.OpensAt):
		return false
	case s.ClosesAt != nil && !t.Before(*s.ClosesAt):
		return false
	}
	return true
}

// ClaimWithin is how long an away fan's admitted place waits for its claim
// under these settings: AwayClaimWithin, or DefaultAwayClaimWithin when
// they say nothing (settings published before the key existed).
func (s Settings) ClaimWithin() time.Duration {
	if s.AwayClaimWithin > 0 {
		return s.AwayClaimWithin
	}
	return DefaultAwayClaimWithin
}

// Position of a waiting ticket, with what the fan is told.
type Position struct {
	Position int64 // 1 = next in
	Ahead    int64
	// ETA is nil while paused or before opening.
	ETA       *time.Duration
	PollAfter time.Duration
	// Available is the places left to hold (nil until the booking core
	// publishes the event's inventory).
	Available *int64
}

// Status is the answer to a status poll.
type Status struct {
	// ID is the ticket's id: the store's member, and the access JWT's sub.
	ID string
	// Account is the account the place belongs to ("" = none), from the
	// signed ticket: the access JWT's acct.
	Account string
	State   State
	Position
	ActiveUntil time.Time // when State == Admitted: the access window's end
	JoinedAt    time.Time
	// JoinETA is the ETA the fan was told at join (nil if none was told),
	// carried in the signed ticket: the gateway compares it with the real
	// wait once, when FirstAdmission is set.
	JoinETA *time.Duration
	// FirstAdmission is true the first time a poll (or a resuming join) sees
	// the ticket admitted: that look claimed the place (for the join →
	// admitted wait-time histogram).
	FirstAdmission bool
}

// Counts of one event, read at scrape time.
type Counts struct {
	Waiting int64
	Active  int64 // places let in whose window has not ended
	Inventory
}

// TickResult is what one admission tick did for one event.
type TickResult struct {
	Admitted  int64
	Abandoned int64
	Expired   int64 // actives whose window ended, dropped
	Waiting   int64 // after the tick
	Active    int64 // after the tick
	// Lapsed are away fans' places admitted and never claimed within
	// away_claim_within, given up this tick: counted abandoned (and no
	// longer admitted) in the event's books.
	Lapsed int64
	// Rate is the measured admission rate (fans/s) ETAs are computed from.
	Rate float64
	// Room is how many more idle fans the places available allowed before
	// this tick (-1: the inventory is unknown, no bound).
	Room int64
	// Shards is the layout the event's line really has (see Settings.Shards).
	Shards int
	// Busy: another admitter replica ticks this sharded event now (it holds
	// the tick's lease), so this call did nothing.
	Busy bool
}

// Stats are the event's lifetime counters. Every ticket ever issued is in
// exactly one place, so Joined = Admitted + Waiting + Left + Abandoned.
type Stats struct {
	Joined    int64
	Admitted  int64
	Abandoned int64
	Left      int64
	// Through are the joins let in in their own step (straight through an
	// auto line with room, or passthrough): Admitted counts them too.
	Through int64
	// Rate is the measured admission rate (fans/s), 0 before the first tick.
	Rate float64
	// Away is what fans who stepped away did (away.go).
	Away AwayBooks
}

// End is an active place that ended before its window did (left, revoked,
// completed by a booking), as the line's ends stream has it: its ticket
// id, and when its window would have ended (no pass of it lasts longer).
type End struct {
	ID     string // the stream entry's id
	Ticket string
	Until  time.Time
}

// PlaceState is what became of an account's place in an event's line (the
// presale asks it of the invited accounts).
type PlaceState int

// What became of a place.
const (
	NoPlace     PlaceState = iota // never joined
	LivePlace                     // waiting, or let in and not expired
	BookedPlace                   // its booking was confirmed
	EndedPlace                    // left, abandoned or expired without a booking
)

// Used reports whether an invitation was used: a place that still may buy
// or bought.
func (p PlaceState) Used() bool { return p == LivePlace || p == BookedPlace }
