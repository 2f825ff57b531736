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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Store is the line of every event, over waitroom's Redis (package rdb):
// a single node or a Cluster.
type Store struct {
	c          *rdb.Client
	codec      *line.Codec // signs the tickets of the places made
	drawSecret draw.Secret // keys the lottery's seed (WithDrawSecret)

	headers  sync.Map     // event → *headers (headers.go)
	drawn    sync.Map     // event → when this Store saw its lottery drawn and applied (lottery.go)
	ranks    sync.Map     // event → *rankTable, its drawn lottery's ranks (a sharded poll's scores)
	learning sync.Map     // event → true while this Store reads its rank table
	draws    sync.Map     // event → *drawing, while this Store draws its lottery
	owner    string       // this replica, for a sharded tick's lease
	every    atomic.Int64 // the admitter's tick interval (ns), for the lease

	// Now is the Store's clock (nil = time.Now); set it before use. The
	// line itself runs by Redis TIME, in its scripts: this clock only
	// reads what they wrote (a wait for the report, a join's age, a
	// moving line's position).
	Now func() time.Time
}

func (s *Store) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// New returns the line over c; ticketSecret is the HMAC key of tickets
// (config auth.ticket_secret).
func New(c *rdb.Client, ticketSecret []byte) *Store {
	return &Store{c: c, codec: line.NewCodec(ticketSecret), owner: newOwner()}
}

// NewStore is New over a go-redis client the caller owns (tests).
func NewStore(c rdb.Cmdable, ticketSecret []byte) *Store { return New(rdb.New(c), ticketSecret) }

// WithDrawSecret gives the Store the draw secret (config auth.draw_secret)
// its lotteries' seeds are derived from, and returns it. A Store without
// one commits and draws no lottery (draw.ErrNoSecret): every process that
// may commit one (a gateway's pre-queue join, an admitter) needs it.
func (s *Store) WithDrawSecret(secret []byte) *Store {
	s.drawSecret = append(draw.Secret(nil), secret...)
	return s
}

// TickEvery tells the Store how often its admitter ticks: a sharded event's
// tick lease lasts three intervals (at least a second), so a replica that
// dies hands its events over to another that soon.
func (s *Store) TickEvery(d time.Duration) { s.every.Store(int64(d)) }

func (s *Store) tickEvery() time.Duration { return time.Duration(s.every.Load()) }

// Ping reports whether Redis answers (readiness).
func (s *Store) Ping(ctx context.Context) error { return s.c.Ping(ctx) }

// Counts reads the waiting and active counts of event.
func (s *Store) Counts(ctx context.Context, event string) (line.Counts, error) {
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: countsScript, Keys: []string{k.Wait, k.Active, k.Inventory, k.Stats}}).Slice()
	if err != nil {
		return line.Counts{}, rdb.Interpret("counts", err)
	}
	r := rdb.ReplyOf(v)
	c := line.Counts{Waiting: r.Int(0), Active: r.Int(1)}
	if len(v) == 7 {
		c.Inventory = inventoryOf(v[2:6])
		if n := r.Int(6); n > 1 {
			if c.Waiting, _, err = s.shardTotals(ctx, event, int(n)); err != nil {
				return line.Counts{}, err
			}
		}
	}
	if r.Err() != nil {
		return line.Counts{}, fmt.Errorf("counts: %w", r.Err())
	}
	return c, nil
}

// Stats reads the event's counters and measured rate.
func (s *Store) Stats(ctx context.Context, event string) (line.Stats, error) {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Stats, "joined", "admitted", "abandoned", "left", "rate", "shards",
		"away", "away_admitted", "away_claimed", "away_lapsed", "through").Result()
	if err != nil {
		return line.Stats{}, rdb.Interpret("stats", err)
	}
	rate, _ := strconv.ParseFloat(fmt.Sprint(v[4]), 64)
	st := line.Stats{Joined: rdb.Num(v[0]), Admitted: rdb.Num(v[1]), Abandoned: rdb.Num(v[2]), Left: rdb.Num(v[3]), Rate: rate, Through: rdb.Num(v[10]),
		Away: line.AwayBooks{Away: rdb.Num(v[6]), Admitted: rdb.Num(v[7]), Claimed: rdb.Num(v[8]), Lapsed: rdb.Num(v[9])}}
	if n := rdb.Num(v[5]); n > 1 {
		_, sh, err := s.shardTotals(ctx, event, int(n))
		if err != nil {
			return line.Stats{}, err
		}
		st.Joined += sh.Joined
		st.Left += sh.Left
		st.Abandoned += sh.Abandoned
	}
	return st, nil
}

// PublishSettings stores the settings in force for event (admitter only).
func (s *Store) PublishSettings(ctx context.Context, event string, set line.Settings) error {
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
func (s *Store) Settings(ctx context.Context, event string) (line.Settings, error) {
	b, err := s.c.Get(ctx, rdb.KeysOf(event).Settings).Bytes()
	if errors.Is(err, redis.Nil) {
		return line.Settings{}, line.ErrNoSettings
	}
	if err != nil {
		return line.Settings{}, rdb.Interpret("settings", err)
	}
	var set line.Settings
	if err := json.Unmarshal(b, &set); err != nil {
		return line.Settings{}, fmt.Errorf("settings: %w", err)
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
