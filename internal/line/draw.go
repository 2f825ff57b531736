package line

import (
	"errors"
	"time"
)

// The committed draw anyone can check (DESIGN.md "Transparency"; package
// draw computes it): the pre-queue's lottery, and the presale's selection.

// Errors of the lottery's routes.
var (
	// ErrNoLottery: the event has no committed lottery (no pre-queue, or it
	// has not opened yet).
	ErrNoLottery = errors.New("line: no lottery")
	// ErrNotDrawn: the lottery is committed but not drawn yet.
	ErrNotDrawn = errors.New("line: lottery not drawn yet")
	// ErrNotInLottery: the ticket did not join during the pre-queue.
	ErrNotInLottery = errors.New("line: ticket not in the lottery")
)

// Draw is what a committed draw shows anyone (the lottery's route, the
// presale's selection): the commitment from the start; the seed, the
// entries' count and digest once drawn, never before.
type Draw struct {
	Commitment  string // hex SHA-256 of the seed
	CommittedAt time.Time
	DrawAt      time.Time // when the entries freeze (zero: unknown)
	// Seed, Nonce, EntriesDigest and Entries are shown once drawn, never
	// before.
	Seed          string // hex
	Nonce         string // hex: the seed is derived from it (package draw)
	EntriesDigest string // hex SHA-256 of the entries' ids, sorted, each followed by "\n"
	Entries       int64
	Drawn         bool
	DrawnAt       time.Time
}

// TicketDraw is one fan's draw.
type TicketDraw struct {
	TicketID string
	Draw     string // hex HMAC-SHA256(key, ticket id)
	Rank     int64  // 1 = first
}

// Opening is what a frozen lottery fixed of an event's times: from the
// freeze on, a reload that moves opens_at or prequeue_opens_at changes
// nothing of its line.
type Opening struct {
	Frozen          bool
	PrequeueOpensAt *time.Time
	OpensAt         *time.Time
}
