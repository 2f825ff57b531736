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

// Store runs the queue scripts on a single Redis or a Redis Cluster. Every
// Redis key and command of waitroom goes through it.
type Store struct {
	rdb    rediser
	secret []byte
	batch  *batcher  // pipelines the hot scripts (join, status, active) of concurrent requests
	macs   sync.Pool // keyed HMAC-SHA256 states for tickets
	close  func() error

	layouts sync.Map     // "<event>/<k>" → []shardKeys
	headers sync.Map     // event → *headers (headers.go)
	drawn   sync.Map     // event → drawnKey, once its lottery is drawn (lottery.go)
	draws   sync.Map     // event → *drawing, while this Store draws its lottery
	owner   string       // this replica, for a sharded tick's lease
	every   atomic.Int64 // the admitter's tick interval (ns), for the lease

	tickFault func(step string) error // tests only (export_test.go)
}

// NewStore returns a Store over rdb (a *redis.Client or *redis.ClusterClient
// the caller owns); ticketSecret is the HMAC key of tickets (config
// auth.ticket_secret). Processes use Open.
func NewStore(rdb rediser, ticketSecret []byte) *Store {
	return &Store{rdb: rdb, secret: append([]byte(nil), ticketSecret...), batch: newBatcher(rdb), owner: newOwner()}
}

// TickEvery tells the Store how often its admitter ticks: a sharded event's
// tick lease lasts three intervals (at least a second), so a replica that
// dies hands its events over to another that soon.
func (s *Store) TickEvery(d time.Duration) { s.every.Store(int64(d)) }

func (s *Store) tickEvery() time.Duration { return time.Duration(s.every.Load()) }

// Close closes the client Open made (a no-op for NewStore's).
func (s *Store) Close() error {
	if s.close == nil {
		return nil
	}
	return s.close()
}

// Ping reports whether Redis answers (readiness).
func (s *Store) Ping(ctx context.Context) error {
	return interpretError("ping", s.rdb.Ping(ctx).Err())
}

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
	keys := keysOf(event).join
	h := s.headersOf(event, set).join
	var args []any
	if p == nil {
		args = withHeader(h, b64.EncodeToString(random[:]), lottery, o.Account)
	} else {
		exp := p.ExpiresAt.UnixMilli()
		minute := exp / 60_000
		keys = append(keys[:len(keys):len(keys)], proofsKey(event, minute))
		args = withHeader(h, b64.EncodeToString(random[:]), lottery, o.Account,
			p.ID, exp, (minute+1)*60_000+1000)
	}
	c := s.startToldMergedHead(ctx, joinScript, keys, len(h), joinHead, args...)
	res, err := c.wait().Result()
	if err != nil {
		return JoinResult{}, interpretError("join", err)
	}
	v, ok := res.([]any)
	if !ok {
		// A refusal is its name alone.
		code, _ := res.(string)
		if err := joinRefusal(reply([]any{code})); err != nil {
			return JoinResult{}, err
		}
		return JoinResult{}, fmt.Errorf("join: unexpected reply %v", res)
	}
	r := reply(v)
	if err := joinRefusal(r); err != nil {
		return JoinResult{}, err
	}
	head := reply(c.shared)
	t := ticket{seq: r.int(0), random: random, joinedAt: head.int(0), account: o.Account}
	var out JoinResult
	if code := r.int(1); code == -1 {
		out.State = Admitted
		out.ActiveUntil = msToTime(r.int(2))
	} else {
		out.State = Waiting
		rank, poll := unpackWaiting(code)
		out.Position = position(rank, poll, head.float(1), head.int(2), t.joinedAt, set)
		if out.ETA != nil {
			ms := out.ETA.Milliseconds()
			t.joinETA = &ms
		}
	}
	if err := errors.Join(r.err, head.err); err != nil {
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
	h := s.headersOf(event, set).status
	id := t.id()
	c := s.batch.startMergedHead(ctx, statusScript, keysOf(event).status, len(h), statusHead,
		withHeader(h, id, t.slot())...)
	res, err := c.wait().Result()
	if err != nil {
		return Status{}, interpretError("status", err)
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
			head := reply(c.shared)
			out.State = Waiting
			rank, poll := unpackWaiting(code)
			out.Position = position(rank, poll, head.float(1), head.int(2), head.int(0), set)
			if head.err != nil {
				return Status{}, fmt.Errorf("status: %w", head.err)
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
	r := reply(v)
	switch r.str(0) {
	case "layout":
		return Status{}, errLayout{int(r.int(1))}
	case "admitted":
		out.State = Admitted
		out.ActiveUntil = msToTime(r.int(1))
		out.FirstAdmission = r.int(2) == 1
	default:
		return Status{}, fmt.Errorf("status: unexpected reply %v", res)
	}
	if r.err != nil {
		return Status{}, fmt.Errorf("status: %w", r.err)
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
	k := keysOf(event)
	n, err := leaveScript.Run(ctx, s.rdb, []string{k.wait, k.active, k.stats, k.inventory, k.holders}, t.id()).Int()
	if err != nil {
		return interpretError("leave", err)
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
	exp, err := s.batch.run(ctx, activeScript, []string{keysOf(event).active}, ticket).Int64()
	if err != nil {
		return false, interpretError("active", err)
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
	k := keysOf(event)
	exp, err := extendScript.Run(ctx, s.rdb, []string{k.active, k.seen, k.claims}, ticket, until.UnixMilli(), window.Milliseconds()).Int64()
	if err != nil {
		return time.Time{}, false, interpretError("extend", err)
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
	k := keysOf(event)
	if err := completeScript.Run(ctx, s.rdb, []string{k.active, k.inventory, k.holders, k.claims}, ticket).Err(); err != nil {
		return interpretError("complete", err)
	}
	return nil
}

// Counts reads the waiting and active counts of event.
func (s *Store) Counts(ctx context.Context, event string) (Counts, error) {
	k := keysOf(event)
	v, err := countsScript.Run(ctx, s.rdb, []string{k.wait, k.active, k.inventory, k.stats}).Slice()
	if err != nil {
		return Counts{}, interpretError("counts", err)
	}
	r := reply(v)
	c := Counts{Waiting: r.int(0), Active: r.int(1)}
	if len(v) == 7 {
		c.Inventory = inventoryOf(v[2:6])
		if n := r.int(6); n > 1 {
			if c.Waiting, _, err = s.shardTotals(ctx, event, int(n)); err != nil {
				return Counts{}, err
			}
		}
	}
	if r.err != nil {
		return Counts{}, fmt.Errorf("counts: %w", r.err)
	}
	return c, nil
}

// Stats reads the event's counters and measured rate.
func (s *Store) Stats(ctx context.Context, event string) (Stats, error) {
	v, err := s.rdb.HMGet(ctx, keysOf(event).stats, "joined", "admitted", "abandoned", "left", "rate", "shards").Result()
	if err != nil {
		return Stats{}, interpretError("stats", err)
	}
	rate, _ := strconv.ParseFloat(fmt.Sprint(v[4]), 64)
	st := Stats{Joined: num(v[0]), Admitted: num(v[1]), Abandoned: num(v[2]), Left: num(v[3]), Rate: rate}
	if n := num(v[5]); n > 1 {
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
	if err := s.rdb.Set(ctx, keysOf(event).settings, b, 0).Err(); err != nil {
		return interpretError("publish settings", err)
	}
	return nil
}

// Settings reads the settings in force for event; ErrNoSettings when no
// admitter published any.
func (s *Store) Settings(ctx context.Context, event string) (Settings, error) {
	b, err := s.rdb.Get(ctx, keysOf(event).settings).Bytes()
	if errors.Is(err, redis.Nil) {
		return Settings{}, ErrNoSettings
	}
	if err != nil {
		return Settings{}, interpretError("settings", err)
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
	k := keysOf(event)
	res, err := s.durably(ctx, tickScript, []string{k.wait, k.active, k.seen, k.stats, k.bucket, k.inventory, k.holders, k.lottery, k.report},
		set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rateArg(set.AdmitPerSecond),
		set.MaxActive, set.AccessTTL.Milliseconds(), maxSkip, passthroughBatch,
	).Slice()
	if err != nil {
		return TickResult{}, interpretError("tick", err)
	}
	r := reply(res)
	if r.str(0) == "layout" {
		return TickResult{}, errLayout{int(r.int(1))}
	}
	out := TickResult{
		Admitted: r.int(0), Abandoned: r.int(1), Expired: r.int(2),
		Waiting: r.int(3), Active: r.int(4), Rate: r.float(5), Room: r.int(6),
	}
	if r.err != nil {
		return TickResult{}, fmt.Errorf("tick: %w", r.err)
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

// replyReader reads a script's array reply, remembering the first mismatch.
type replyReader struct {
	v   []any
	err error
}

// joinRefusal is the error of a join script's answer that made no place
// (the one-shard join's and the sharded line's global step alike), or nil.
func joinRefusal(r *replyReader) error {
	switch r.str(0) {
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
		return errLayout{int(r.int(1))}
	case "account":
		return errAccountPlace{r.str(1)}
	}
	return nil
}

func reply(v []any) *replyReader { return &replyReader{v: v} }

func (r *replyReader) at(i int) any {
	if i >= len(r.v) {
		if r.err == nil {
			r.err = fmt.Errorf("reply %v has no element %d", r.v, i)
		}
		return nil
	}
	return r.v[i]
}

func (r *replyReader) str(i int) string {
	s, _ := r.at(i).(string)
	return s
}

func (r *replyReader) int(i int) int64 {
	switch x := r.at(i).(type) {
	case int64:
		return x
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil && r.err == nil {
			r.err = err
		}
		return n
	}
	if r.err == nil {
		r.err = fmt.Errorf("reply element %d is %T", i, r.at(i))
	}
	return 0
}

func (r *replyReader) float(i int) float64 {
	switch x := r.at(i).(type) {
	case int64:
		return float64(x)
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil && r.err == nil {
			r.err = err
		}
		return f
	}
	if r.err == nil {
		r.err = fmt.Errorf("reply element %d is %T", i, r.at(i))
	}
	return 0
}
