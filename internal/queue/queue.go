// Package queue is the waiting line of one or more events, kept in Redis.
//
// Every key of an event shares the hash tag wr:{<event>}:…, so one event
// lives on one Redis Cluster slot and every script touches one slot. Time in
// scripts comes from Redis TIME: one clock for every replica.
//
// THIS FILE IS THE AGREED API (types and method signatures) that the gateway,
// the admitter and the booking core are written against. Bodies are being
// implemented; keep the signatures.
package queue

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors.
var (
	// ErrInvalidTicket: forged, truncated, malformed, or of another event.
	// Returned before any Redis call.
	ErrInvalidTicket = errors.New("queue: invalid ticket")
	// ErrNotOpen: the pre-queue has not opened yet.
	ErrNotOpen = errors.New("queue: not open")
	// ErrClosed: the event is closed (mode closed, or past closes_at).
	ErrClosed = errors.New("queue: event closed")
	// ErrNoSettings: no admitter has published settings for the event yet.
	ErrNoSettings = errors.New("queue: no settings published")
)

// State of a ticket.
type State string

const (
	Waiting  State = "waiting"
	Admitted State = "admitted"
	Expired  State = "expired" // left, access window ended, or abandoned
	Closed   State = "closed"  // the event closed while the ticket waited
)

// Settings are the admission settings in force for one event, published to
// Redis by the admitter (the only writer) and read by the gateway.
type Settings struct {
	Mode            string        `json:"mode"` // queue | passthrough | paused | closed
	AdmitPerSecond  float64       `json:"admitPerSecond"`
	MaxActive       int           `json:"maxActive"`
	AccessTTL       time.Duration `json:"accessTtl"`
	AbandonAfter    time.Duration `json:"abandonAfter"`
	PrequeueOpensAt *time.Time    `json:"prequeueOpensAt,omitempty"`
	OpensAt         *time.Time    `json:"opensAt,omitempty"`
	ClosesAt        *time.Time    `json:"closesAt,omitempty"`
}

// Position of a waiting ticket, with what the fan is told.
type Position struct {
	Position int64 // 1 = next in
	Ahead    int64
	// ETA is nil while paused or before opening.
	ETA       *time.Duration
	PollAfter time.Duration
}

// JoinResult is the answer to a join.
type JoinResult struct {
	Ticket  string // the opaque, signed ticket to hand to the fan
	ID      string // the ticket's id (the Redis member; the access JWT's sub)
	Resumed bool   // the fan already had a live ticket: same place, HTTP 200
	State   State  // Waiting, or Admitted in passthrough mode
	Position
	ActiveUntil time.Time // when State == Admitted
}

// Status is the answer to a status poll.
type Status struct {
	// ID is the ticket's id: the Redis member, and the access JWT's sub.
	ID    string
	State State
	Position
	ActiveUntil time.Time // when State == Admitted: the access window's end
	JoinedAt    time.Time
	// FirstAdmission is true the first time a poll sees the ticket admitted
	// (for the join → admitted wait-time histogram).
	FirstAdmission bool
}

// Counts of one event, read at scrape time.
type Counts struct {
	Waiting int64
	Active  int64 // ZCOUNT active now +inf
}

// TickResult is what one admission tick did for one event.
type TickResult struct {
	Admitted  int64
	Abandoned int64
	Expired   int64 // actives whose window ended, dropped
	Waiting   int64 // after the tick
	Active    int64 // after the tick
}

// Store runs the queue scripts on a single Redis or a Redis Cluster.
type Store struct {
	rdb redis.UniversalClient
}

// Join puts a fan in the line of event, or resumes the live ticket they carry
// (existing may be ""). It returns ErrNotOpen, ErrClosed, ErrInvalidTicket is
// never returned for existing: a bad or dead existing ticket just gets a new place.
func (s *Store) Join(ctx context.Context, event, existing string, set Settings) (JoinResult, error) {
	panic("queue: not implemented yet")
}

// Status reports where ticket stands, and records that its fan is still there
// (polling keeps a waiting ticket from being dropped as abandoned).
func (s *Store) Status(ctx context.Context, event, ticket string, set Settings) (Status, error) {
	panic("queue: not implemented yet")
}

// Leave removes the ticket from the line, or gives its active place back.
func (s *Store) Leave(ctx context.Context, event, ticket string) error {
	panic("queue: not implemented yet")
}

// Active, Extend and Complete take the ticket id (Status.ID, the JWT sub),
// not the signed ticket string: the booking core knows only the JWT.

// Active reports whether ticket is in the event's active set and unexpired.
func (s *Store) Active(ctx context.Context, event, ticket string) (bool, error) {
	panic("queue: not implemented yet")
}

// Extend moves an active ticket's expiry to until if that is later than it
// is now; never shortens it. Reports the expiry in force afterwards, and false
// when the ticket is not active.
func (s *Store) Extend(ctx context.Context, event, ticket string, until time.Time) (time.Time, bool, error) {
	panic("queue: not implemented yet")
}

// Complete frees the ticket's active place at once (booking confirmed).
// ticket here is the ticket id as carried in the access JWT's sub.
func (s *Store) Complete(ctx context.Context, event, ticket string) error {
	panic("queue: not implemented yet")
}

// Counts reads the waiting and active counts of event.
func (s *Store) Counts(ctx context.Context, event string) (Counts, error) {
	panic("queue: not implemented yet")
}

// PublishSettings stores the settings in force for event (admitter only).
func (s *Store) PublishSettings(ctx context.Context, event string, set Settings) error {
	panic("queue: not implemented yet")
}

// Settings reads the settings in force for event; ErrNoSettings when no
// admitter published any.
func (s *Store) Settings(ctx context.Context, event string) (Settings, error) {
	panic("queue: not implemented yet")
}

// Tick runs one atomic admission step for event (admitter only).
func (s *Store) Tick(ctx context.Context, event string, set Settings) (TickResult, error) {
	panic("queue: not implemented yet")
}
