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
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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

	tickFault func(step string) error // tests only (export_test.go)
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

// Tick bounds: a tick skips at most maxSkip abandoned tickets (the rest go
// next tick) and admits at most passthroughBatch fans in passthrough mode,
// so no script holds Redis for long.
const (
	maxSkip          = 10000
	passthroughBatch = 10000
)

// Join gives a fan a new place in the line of event: at the back after
// opening, in the lottery before it, or admitted at once in passthrough
// mode. It returns ErrNotOpen or ErrClosed. A fan who already carries a
// ticket is resumed with Status, never here: a ticket that is no longer
// waiting or active must not turn into a new place without the caller's
// say (the per-IP join limit).
func (s *Store) Join(ctx context.Context, event string, set Settings) (JoinResult, error) {
	return s.JoinWith(ctx, event, set, JoinOptions{})
}

// JoinOptions are what a join may bring besides the event.
type JoinOptions struct {
	// Proof is the join's proof of work, verified by the caller (see
	// JoinProved).
	Proof *Proof
	// Account is the verified account the place is for ("" = none): the
	// account gets one place in the event, whatever the race and however
	// many devices it joins from (accounts.go).
	Account string
}

// JoinWith is Join with options. A join for an account whose place is
// still live makes nothing and spends no proof: it answers that place,
// Resumed, with its status.
func (s *Store) JoinWith(ctx context.Context, event string, set Settings, o JoinOptions) (JoinResult, error) {
	if o.Account != "" && (len(o.Account) > maxAccountLen) {
		return JoinResult{}, fmt.Errorf("join: account id longer than %d", maxAccountLen)
	}
	return s.joinAccount(ctx, event, set, o)
}

// Proof is a join's proof of work, verified by the caller (package proof):
// its challenge's id and when the challenge expires.
type Proof struct {
	ID        string
	ExpiresAt time.Time
}

// JoinProved is Join paid for with a proof of work, which it spends in the
// same script: exactly one join ever gets a place for one proof, however
// many present it at once and through however many gateways. A proof spent
// already is ErrProofSpent and one expired by Redis TIME ErrProofExpired;
// neither gives a place, and a join refused for another reason (ErrClosed,
// ErrNotOpen, ErrSoldOut) leaves its proof unspent.
//
// The spent proofs live in one set per event and expiry minute, kept a
// second past that minute: the script refuses an expired proof by TIME, so
// none can come back once its set is gone.
func (s *Store) JoinProved(ctx context.Context, event string, set Settings, p Proof) (JoinResult, error) {
	return s.JoinWith(ctx, event, set, JoinOptions{Proof: &p})
}

// join runs one join (for o.Account: replace is the id of the account's
// place the caller found dead, or ""), once more on a layout bounce.
func (s *Store) join(ctx context.Context, event string, set Settings, o JoinOptions, replace string) (JoinResult, error) {
	r, err := s.joinOnce(ctx, event, set, o, replace)
	if again, ok := relayout(set, err); ok {
		set = again
		r, err = s.joinOnce(ctx, event, set, o, replace)
	}
	if errors.Is(err, errUncommitted) {
		// The pre-queue is open and nobody committed its lottery yet (the
		// admitter does at its next tick): commit it, then place the fan.
		if err := s.commit(ctx, event, set); err != nil {
			return JoinResult{}, fmt.Errorf("join: %w", err)
		}
		r, err = s.joinOnce(ctx, event, set, o, replace)
	}
	return r, err
}

func (s *Store) joinOnce(ctx context.Context, event string, set Settings, o JoinOptions, replace string) (JoinResult, error) {
	if shardsOf(set) > 1 {
		return s.joinSharded(ctx, event, set, o, replace)
	}
	p := o.Proof
	random, lottery, err := newPlace()
	if err != nil {
		return JoinResult{}, fmt.Errorf("join: %w", err)
	}
	// Concurrent joins of the event share one script call (joinScript).
	hs := s.headersOf(event, set)
	keys, h := hs.joinKeys, hs.join
	var args []any
	if p == nil {
		args = withHeader(h, b64.EncodeToString(random[:]), lottery, o.Account)
	} else {
		exp := p.ExpiresAt.UnixMilli()
		minute := exp / 60_000
		keys = append(keys[:len(keys):len(keys)], rdb.ProofsKey(event, minute))
		args = withHeader(h, b64.EncodeToString(random[:]), lottery, o.Account,
			p.ID, exp, (minute+1)*60_000+1000)
	}
	c := s.c.Start(ctx, rdb.Call{Script: joinScript, Keys: keys, Args: args, Merge: true, Told: true, Header: len(h), Head: joinHead})
	res, err := c.Wait().Result()
	if err != nil {
		return JoinResult{}, rdb.Interpret("join", err)
	}
	v, ok := res.([]any)
	if !ok {
		// A refusal is its name alone.
		code, _ := res.(string)
		if err := joinRefusal(rdb.ReplyOf([]any{code})); err != nil {
			return JoinResult{}, err
		}
		return JoinResult{}, fmt.Errorf("join: unexpected reply %v", res)
	}
	r := rdb.ReplyOf(v)
	if err := joinRefusal(r); err != nil {
		return JoinResult{}, err
	}
	head := rdb.ReplyOf(c.Head())
	t := ticket{seq: r.Int(0), random: random, joinedAt: head.Int(0), account: o.Account}
	var out JoinResult
	if code := r.Int(1); code == -1 {
		out.State = Admitted
		out.ActiveUntil = msToTime(r.Int(2))
	} else {
		out.State = Waiting
		rank, poll := unpackWaiting(code)
		out.Position = position(rank, poll, head.Float(1), head.Int(2), t.joinedAt, set)
		if out.ETA != nil {
			ms := out.ETA.Milliseconds()
			t.joinETA = &ms
		}
	}
	if err := errors.Join(r.Err(), head.Err()); err != nil {
		return JoinResult{}, fmt.Errorf("join: %w (reply %v)", err, res)
	}
	out.Ticket, out.ID, out.Account = s.encode(event, t), t.id(), t.account
	return out, nil
}

// joinHead is the length of joinScript's reply head.
const joinHead = 3

// Status reports where ticket stands, and records that its fan is still there
// (polling keeps a waiting ticket from being dropped as abandoned).
func (s *Store) Status(ctx context.Context, event, ticket string, set Settings) (Status, error) {
	t, err := s.decode(event, ticket)
	if err != nil {
		return Status{}, err
	}
	return s.statusOf(ctx, event, t, set)
}

// statusOf is Status of a decoded ticket, once more on a layout bounce.
func (s *Store) statusOf(ctx context.Context, event string, t ticket, set Settings) (Status, error) {
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

func (s *Store) status(ctx context.Context, event string, t ticket, set Settings) (Status, error) {
	if shardsOf(set) > 1 {
		return s.statusSharded(ctx, event, t, set)
	}
	// Concurrent polls of the event share one script call (statusScript).
	hs := s.headersOf(event, set)
	h := hs.status
	id := t.id()
	c := s.c.Start(ctx, rdb.Call{Script: statusScript, Keys: hs.statusKeys, Args: withHeader(h, id, t.slot()), Merge: true, Header: len(h), Head: statusHead})
	res, err := c.Wait().Result()
	if err != nil {
		return Status{}, rdb.Interpret("status", err)
	}
	out := Status{ID: id, Account: t.account, JoinedAt: msToTime(t.joinedAt)}
	if t.joinETA != nil {
		d := time.Duration(*t.joinETA) * time.Millisecond
		out.JoinETA = &d
	}
	if code, ok := res.(int64); ok {
		// The common answers are a number (statusScript).
		switch {
		case code >= 0:
			head := rdb.ReplyOf(c.Head())
			out.State = Waiting
			rank, poll := unpackWaiting(code)
			out.Position = position(rank, poll, head.Float(1), head.Int(2), head.Int(0), set)
			if head.Err() != nil {
				return Status{}, fmt.Errorf("status: %w", head.Err())
			}
		case code == -1:
			out.State = Expired
		case code == -2:
			out.State = Closed
		case code == -3:
			out.State = SoldOut
		default:
			return Status{}, fmt.Errorf("status: unexpected reply %d", code)
		}
		return out, nil
	}
	v, _ := res.([]any)
	r := rdb.ReplyOf(v)
	switch r.Str(0) {
	case "layout":
		return Status{}, errLayout{int(r.Int(1))}
	case "admitted":
		out.State = Admitted
		out.ActiveUntil = msToTime(r.Int(1))
		out.FirstAdmission = r.Int(2) == 1
	default:
		return Status{}, fmt.Errorf("status: unexpected reply %v", res)
	}
	if r.Err() != nil {
		return Status{}, fmt.Errorf("status: %w", r.Err())
	}
	return out, nil
}

// statusHead is the length of statusScript's reply head.
const statusHead = 3

// unpackWaiting reads a waiting fan's answer as statusScript and joinScript
// pack it: rank × 65,536 + pollAfter ms (pollAfter < 60,000).
func unpackWaiting(code int64) (rank, pollMs int64) { return code >> 16, code & 0xffff }

// position is what a waiting fan is told. The ETA is the time for the line
// in front (and the fan) to be admitted at the measured rate; there is none
// while paused, before opening, or while nothing is being admitted.
// available < 0: the inventory is unknown.
func position(rank, pollMs int64, rate float64, available, nowMs int64, set Settings) Position {
	p := Position{Position: rank + 1, Ahead: rank, PollAfter: time.Duration(pollMs) * time.Millisecond}
	if available >= 0 {
		p.Available = &available
	}
	before := set.OpensAt != nil && nowMs < set.OpensAt.UnixMilli()
	if set.Mode != ModePaused && !before && rate > 0 {
		eta := time.Duration(float64(p.Position) / rate * float64(time.Second)).Round(time.Millisecond)
		p.ETA = &eta
	}
	return p
}

// Leave removes the ticket from the line, or gives its active place back.
func (s *Store) Leave(ctx context.Context, event, ticket string) error {
	t, err := s.decode(event, ticket)
	if err != nil {
		return err
	}
	k := rdb.KeysOf(event)
	n, err := s.c.Run(ctx, rdb.Call{Script: leaveScript, Keys: []string{k.Wait, k.Active, k.Stats, k.Inventory, k.Holders}, Args: []any{t.id()}}).Int()
	if err != nil {
		return rdb.Interpret("leave", err)
	}
	if n < 0 {
		return s.leaveSharded(ctx, event, t, int(-n))
	}
	return nil
}

// Active, Extend and Complete take the ticket id (Status.ID, the JWT sub),
// not the signed ticket string: the booking core knows only the JWT.
// A malformed id is simply not active: no Redis call is made for it.

// Active reports whether ticket is in the event's active set and unexpired.
func (s *Store) Active(ctx context.Context, event, ticket string) (bool, error) {
	if !idPattern.MatchString(ticket) {
		return false, nil
	}
	exp, err := s.c.Run(ctx, rdb.Call{Script: activeScript, Keys: []string{rdb.KeysOf(event).Active}, Args: []any{ticket}}).Int64()
	if err != nil {
		return false, rdb.Interpret("active", err)
	}
	return exp > 0, nil
}

// Extend moves an active ticket's expiry to until if that is later than it
// is now; never shortens it, and never moves it past the ticket's ceiling:
// its claim time + window (access_ttl + hold_ttl: see extendScript).
// Reports the expiry in force afterwards, and false when the ticket is not
// active.
func (s *Store) Extend(ctx context.Context, event, ticket string, until time.Time, window time.Duration) (time.Time, bool, error) {
	if !idPattern.MatchString(ticket) {
		return time.Time{}, false, nil
	}
	k := rdb.KeysOf(event)
	exp, err := s.c.Run(ctx, rdb.Call{Script: extendScript, Keys: []string{k.Active, k.Seen, k.Claims}, Args: []any{ticket, until.UnixMilli(), window.Milliseconds()}}).Int64()
	if err != nil {
		return time.Time{}, false, rdb.Interpret("extend", err)
	}
	if exp == 0 {
		return time.Time{}, false, nil
	}
	return msToTime(exp), true, nil
}

// Complete frees the ticket's active place at once (booking confirmed).
// ticket here is the ticket id as carried in the access JWT's sub.
func (s *Store) Complete(ctx context.Context, event, ticket string) error {
	if !idPattern.MatchString(ticket) {
		return nil
	}
	k := rdb.KeysOf(event)
	if err := s.c.Run(ctx, rdb.Call{Script: completeScript, Keys: []string{k.Active, k.Inventory, k.Holders, k.Claims}, Args: []any{ticket}}).Err(); err != nil {
		return rdb.Interpret("complete", err)
	}
	return nil
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
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Stats, "joined", "admitted", "abandoned", "left", "rate", "shards").Result()
	if err != nil {
		return Stats{}, rdb.Interpret("stats", err)
	}
	rate, _ := strconv.ParseFloat(fmt.Sprint(v[4]), 64)
	st := Stats{Joined: rdb.Num(v[0]), Admitted: rdb.Num(v[1]), Abandoned: rdb.Num(v[2]), Left: rdb.Num(v[3]), Rate: rate}
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

// Tick runs one atomic admission step for event (admitter only).
//
// An event with a pre-queue has its lottery committed when the pre-queue
// opens and drawn at opens_at, here, before the tick: until the draw is
// done the tick admits nobody (lottery.go). After the tick the sale's
// report notes the line's length and the rate in force (report.go).
func (s *Store) Tick(ctx context.Context, event string, set Settings) (TickResult, error) {
	if err := s.keepLottery(ctx, event, set); err != nil {
		return TickResult{Room: -1, Shards: shardsOf(set)}, err
	}
	r, err := s.tick(ctx, event, set)
	if again, ok := relayout(set, err); ok {
		set = again
		r, err = s.tick(ctx, event, set)
	}
	r.Shards = shardsOf(set)
	if err == nil && !r.Busy {
		err = s.recordLine(ctx, event, set, r)
	}
	return r, err
}

func (s *Store) tick(ctx context.Context, event string, set Settings) (TickResult, error) {
	if shardsOf(set) > 1 {
		return s.tickSharded(ctx, event, set)
	}
	k := rdb.KeysOf(event)
	res, err := s.c.Run(ctx, rdb.Call{Script: tickScript, Keys: []string{k.Wait, k.Active, k.Seen, k.Stats, k.Bucket, k.Inventory, k.Holders, k.Lottery, k.Report}, Args: []any{set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rateArg(set.AdmitPerSecond), set.MaxActive, set.AccessTTL.Milliseconds(), maxSkip, passthroughBatch}, Told: true}).Slice()
	if err != nil {
		return TickResult{}, rdb.Interpret("tick", err)
	}
	r := rdb.ReplyOf(res)
	if r.Str(0) == "layout" {
		return TickResult{}, errLayout{int(r.Int(1))}
	}
	out := TickResult{
		Admitted: r.Int(0), Abandoned: r.Int(1), Expired: r.Int(2),
		Waiting: r.Int(3), Active: r.Int(4), Rate: r.Float(5), Room: r.Int(6),
	}
	if r.Err() != nil {
		return TickResult{}, fmt.Errorf("tick: %w", r.Err())
	}
	return out, nil
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

// newPlace draws what a new place needs at random, in one read of the
// system's randomness: the random part of its ticket id, and a pre-queue
// score (used only if the pre-queue is open): a uniformly random integer in
// [-2^52, -1] (exact in a float64), below every post-opening score (the
// sequence numbers, from 1). Ties need 2 draws out of 2^52 to collide.
func newPlace() (random [16]byte, lottery string, err error) {
	var b [16 + 8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return random, "", err
	}
	copy(random[:], b[:16])
	return random, strconv.FormatInt(-int64(binary.BigEndian.Uint64(b[16:])>>12)-1, 10), nil
}

// joinRefusal is the error of a join script's answer that made no place
// (the one-shard join's and the sharded line's global step alike), or nil.
func joinRefusal(r *rdb.Reply) error {
	switch r.Str(0) {
	case "closed":
		return ErrClosed
	case "not_open":
		return ErrNotOpen
	case "sold_out":
		return ErrSoldOut
	case "reused":
		return ErrProofSpent
	case "stale":
		return ErrProofExpired
	case "uncommitted":
		return errUncommitted
	case "layout":
		return errLayout{int(r.Int(1))}
	case "account":
		return errAccountPlace{r.Str(1)}
	}
	return nil
}
