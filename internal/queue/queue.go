// Package queue is the waiting line of one or more events, kept in Redis.
//
// Every key of an event shares the hash tag wr:{<event>}:…, so one event
// lives on one Redis Cluster slot and every script touches one slot. Time in
// scripts comes from Redis TIME: one clock for every replica.
//
// Tickets are signed (ticket.go) so a bad one is refused before Redis; key
// names are built in keys.go; the Lua scripts, with their KEYS, ARGV and
// replies, are in scripts.go; docs/QUEUE.md explains pollAfter, the poll load
// and the memory per waiting fan.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/platform/breaker"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Sentinel errors.
var (
	// ErrUnavailable: Redis cannot serve right now (rdb.ErrUnavailable);
	// the caller answers 503 and the client retries.
	ErrUnavailable = rdb.ErrUnavailable
	// ErrInvalidTicket: forged, truncated, malformed, or of another event.
	// Returned before any Redis call.
	ErrInvalidTicket = errors.New("queue: invalid ticket")
	// ErrNotOpen: the pre-queue has not opened yet.
	ErrNotOpen = errors.New("queue: not open")
	// ErrClosed: the event is closed (mode closed, or past closes_at).
	ErrClosed = errors.New("queue: event closed")
	// ErrNoSettings: no admitter has published settings for the event yet.
	ErrNoSettings = errors.New("queue: no settings published")
	// ErrSoldOut: every place of the event is sold (see Inventory): no new
	// place in line.
	ErrSoldOut = errors.New("queue: sold out")
	// ErrProofSpent: the join's proof of work bought a place already.
	ErrProofSpent = errors.New("queue: proof already spent")
	// ErrProofExpired: the join's proof of work expired by Redis TIME.
	ErrProofExpired = errors.New("queue: proof expired")
)

// State of a ticket.
type State string

const (
	Waiting  State = "waiting"
	Admitted State = "admitted"
	Expired  State = "expired" // left, access window ended, or abandoned
	Closed   State = "closed"  // the event closed while the ticket waited
	SoldOut  State = "soldout" // every place sold while the ticket waited
)

// Settings are the admission settings in force for one event, published to
// Redis by the admitter (the only writer) and read by the gateway.
type Settings struct {
	Mode            string        `json:"mode"` // queue | passthrough | paused | closed
	AdmitPerSecond  float64       `json:"admitPerSecond"`
	MaxActive       int           `json:"maxActive"`
	AccessTTL       time.Duration `json:"accessTtl"`
	AbandonAfter    time.Duration `json:"abandonAfter"`
	AwayClaimWithin time.Duration `json:"awayClaimWithin,omitempty"` // an away fan's admitted place waits this long for its claim (away.go)
	PrequeueOpensAt *time.Time    `json:"prequeueOpensAt,omitempty"`
	OpensAt         *time.Time    `json:"opensAt,omitempty"`
	ClosesAt        *time.Time    `json:"closesAt,omitempty"`
	// Shards spreads the line over that many hash tags (shards.go); 0 or 1
	// is the one-shard layout. The admitter publishes the layout the
	// event's state really has.
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

// JoinResult is the answer to a join: a new place, or (Resumed, a join for
// an account) the account's live place.
type JoinResult struct {
	Ticket string // the opaque, signed ticket to hand to the fan
	ID     string // the ticket's id (the Redis member; the access JWT's sub)
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

// Status is the answer to a status poll.
type Status struct {
	// ID is the ticket's id: the Redis member, and the access JWT's sub.
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
	Active  int64 // ZCOUNT active now +inf
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
	// Rate is the measured admission rate (fans/s), 0 before the first tick.
	Rate float64
	// Away is what fans who stepped away did (away.go).
	Away AwayBooks
}

// Store is the line of every event, over waitroom's Redis (package rdb):
// a single node or a Cluster.
type Store struct {
	c      *rdb.Client
	secret []byte
	macs   sync.Pool // keyed HMAC-SHA256 states for tickets

	headers sync.Map     // event → *headers (headers.go)
	drawn   sync.Map     // event → drawnKey, once its lottery is drawn (lottery.go)
	draws   sync.Map     // event → *drawing, while this Store draws its lottery
	owner   string       // this replica, for a sharded tick's lease
	every   atomic.Int64 // the admitter's tick interval (ns), for the lease
}

// New returns the line over c; ticketSecret is the HMAC key of tickets
// (config auth.ticket_secret).
func New(c *rdb.Client, ticketSecret []byte) *Store {
	return &Store{c: c, secret: append([]byte(nil), ticketSecret...), owner: newOwner()}
}

// NewStore is New over a go-redis client the caller owns (tests).
func NewStore(c rdb.Cmdable, ticketSecret []byte) *Store { return New(rdb.New(c), ticketSecret) }

// TickEvery tells the Store how often its admitter ticks: a sharded event's
// tick lease lasts three intervals (at least a second), so a replica that
// dies hands its events over to another that soon.
func (s *Store) TickEvery(d time.Duration) { s.every.Store(int64(d)) }

func (s *Store) tickEvery() time.Duration { return time.Duration(s.every.Load()) }

// Ping reports whether Redis answers (readiness).
func (s *Store) Ping(ctx context.Context) error { return s.c.Ping(ctx) }

// NewBreaker is the breaker of a process's calls to the line that must not
// wait for a Redis that stopped answering (DESIGN.md, "When parts fail"):
// each waits at most a second, and while Redis stays silent the next ones
// do not wait again; ping (Store.Ping) asks every 250 ms whether it answers
// again. Only ErrUnavailable (or the second running out) opens it.
func NewBreaker(ping func(context.Context) error, log *slog.Logger) *breaker.Breaker {
	return breaker.New(breaker.Options{
		Name: "redis", Wait: time.Second, Retry: 250 * time.Millisecond, Probe: ping, Log: log,
		Outage: func(err error) bool { return errors.Is(err, ErrUnavailable) },
	})
}

// Counts reads the waiting and active counts of event.
func (s *Store) Counts(ctx context.Context, event string) (Counts, error) {
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: countsScript, Keys: []string{k.Wait, k.Active, k.Inventory, k.Stats}}).Slice()
	if err != nil {
		return Counts{}, rdb.Interpret("counts", err)
	}
	r := rdb.ReplyOf(v)
	c := Counts{Waiting: r.Int(0), Active: r.Int(1)}
	if len(v) == 7 {
		c.Inventory = inventoryOf(v[2:6])
		if n := r.Int(6); n > 1 {
			if c.Waiting, _, err = s.shardTotals(ctx, event, int(n)); err != nil {
				return Counts{}, err
			}
		}
	}
	if r.Err() != nil {
		return Counts{}, fmt.Errorf("counts: %w", r.Err())
	}
	return c, nil
}

// Stats reads the event's counters and measured rate.
func (s *Store) Stats(ctx context.Context, event string) (Stats, error) {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Stats, "joined", "admitted", "abandoned", "left", "rate", "shards",
		"away", "away_admitted", "away_claimed", "away_lapsed").Result()
	if err != nil {
		return Stats{}, rdb.Interpret("stats", err)
	}
	rate, _ := strconv.ParseFloat(fmt.Sprint(v[4]), 64)
	st := Stats{Joined: rdb.Num(v[0]), Admitted: rdb.Num(v[1]), Abandoned: rdb.Num(v[2]), Left: rdb.Num(v[3]), Rate: rate,
		Away: AwayBooks{Away: rdb.Num(v[6]), Admitted: rdb.Num(v[7]), Claimed: rdb.Num(v[8]), Lapsed: rdb.Num(v[9])}}
	if n := rdb.Num(v[5]); n > 1 {
		_, sh, err := s.shardTotals(ctx, event, int(n))
		if err != nil {
			return Stats{}, err
		}
		st.Joined += sh.Joined
		st.Left += sh.Left
		st.Abandoned += sh.Abandoned
	}
	return st, nil
}

// PublishSettings stores the settings in force for event (admitter only).
func (s *Store) PublishSettings(ctx context.Context, event string, set Settings) error {
	b, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("publish settings: %w", err)
	}
	if err := s.c.Set(ctx, rdb.KeysOf(event).Settings, b, 0).Err(); err != nil {
		return rdb.Interpret("publish settings", err)
	}
	return nil
}

// Settings reads the settings in force for event; ErrNoSettings when no
// admitter published any.
func (s *Store) Settings(ctx context.Context, event string) (Settings, error) {
	b, err := s.c.Get(ctx, rdb.KeysOf(event).Settings).Bytes()
	if errors.Is(err, redis.Nil) {
		return Settings{}, ErrNoSettings
	}
	if err != nil {
		return Settings{}, rdb.Interpret("settings", err)
	}
	var set Settings
	if err := json.Unmarshal(b, &set); err != nil {
		return Settings{}, fmt.Errorf("settings: %w", err)
	}
	return set, nil
}

// msArg is an optional instant as script argument: unix ms, or "" for none.
func msArg(t *time.Time) string {
	if t == nil {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// rateArg formats the rate the same way every time: the tick script
// compares it as a string to notice a changed configuration.
func rateArg(r float64) string { return strconv.FormatFloat(r, 'g', -1, 64) }
