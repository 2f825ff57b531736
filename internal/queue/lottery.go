package queue

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/rdb"
)

// The committed lottery (DESIGN.md "Transparency"; docs/QUEUE.md "The
// lottery"). Fans who join during the pre-queue are put in a random order
// at opening that nobody, not even we or anyone who can read Redis, can
// choose:
//
//   - when the pre-queue opens, a 32-byte seed is drawn (crypto/rand) and
//     its SHA-256 published (the commitment). The first process to get
//     there (an admitter's tick, or a gateway whose join found none) writes
//     it; a script writes it only where there is none, so there is exactly
//     one and it is never replaced. A pre-queue place is only ever given
//     once it exists (the join scripts refuse until then);
//   - every pre-queue place is appended to the draw's entries (a list under
//     the event's tag) by the same script that gives it; a fan who leaves
//     stays an entry (leaving must not change the draw);
//   - at opens_at (by Redis TIME, as the admitter's settings say it then)
//     the entries freeze: the admitter marks the lottery frozen, with the
//     times in force, and from then on no join is a pre-queue place, whatever
//     opens_at a caller brings (a reload, a stale gateway): the line's times
//     are the frozen ones for good (Store.Opening);
//   - the draw's key is SHA-256(seed ‖ entriesDigest), where entriesDigest
//     is SHA-256 of the entries' ids sorted bytewise, each followed by
//     "\n". An entry's draw is HMAC-SHA256(key, ticket id); entries are
//     ranked by draw, lowest first. The key depends on every entry, so one
//     who read the seed during the pre-queue (from Redis, its AOF, a backup)
//     still cannot tell which of its tickets will draw well;
//   - each entry still waiting gets its draw as its score (the first 53
//     bits, what a ZSET score holds exactly; ties, which need two draws to
//     share them, sort by ticket id as Redis sorts equal scores, and the
//     rank follows the same order). Until the draw is done, every tick
//     admits nobody, so the order fans are let in is the drawn one. The
//     draw depends on nothing but the seed and the frozen entries, so an
//     admitter finishing what a dead one began writes the same figures;
//   - once drawn (and never before) the seed, the digest and every entry in
//     rank order are published: anyone can recompute the digest, the key,
//     every draw and every rank.

// Errors of the lottery's routes.
var (
	// ErrNoLottery: the event has no committed lottery (no pre-queue, or it
	// has not opened yet).
	ErrNoLottery = errors.New("queue: no lottery")
	// ErrNotDrawn: the lottery is committed but not drawn yet.
	ErrNotDrawn = errors.New("queue: lottery not drawn yet")
	// ErrNotInLottery: the ticket did not join during the pre-queue.
	ErrNotInLottery = errors.New("queue: ticket not in the lottery")
)

// errUncommitted: a pre-queue join found no commitment yet (Store.join
// commits one and joins again).
var errUncommitted = errors.New("queue: lottery not committed yet")

// lotteryPrelude: how far an event's line may be let in while its draw is
// applied. The draw gives the entries their scores in rank order, part by
// part (each below every score not drawn yet), and notes the highest score
// given so far as "through": until the whole draw is applied, a tick lets
// in nobody whose score is above it, so the first fans are let in moments
// after opening, in the drawn order, however many entries are still being
// written behind them.
const lotteryPrelude = `
-- nil: no lottery, or its draw applied (no bound); false: committed, no
-- score drawn yet (nobody may be let in); else the highest score drawn.
local function drawn_through(lottery)
  local l = redis.call('HMGET', lottery, 'commitment', 'applied', 'through')
  if not l[1] or l[2] then return nil end
  if not l[3] then return false end
  return tonumber(l[3])
end
`

// lotteryStepScript commits the lottery once the pre-queue is open (with
// the seed the caller drew, only if none is committed), freezes its entries
// once opens_at has passed (or at once, when the settings no longer have an
// opening: what was entered is still drawn), and says what is due next.
//
// KEYS: 1 lottery, 2 stats, 3 entries
// ARGV: 1 prequeue_opens_at ms or "", 2 opens_at ms or "", 3 seed (hex),
// 4 its SHA-256 (hex)
// Returns {"none"} (no pre-queue, no commitment) | {"early"} (the
// pre-queue has not opened) | {"committed"} (before opens_at) |
// {"draw", seed, entries, shards} (frozen, the draw not applied yet) |
// {"drawn", seed, digest} (applied).
var lotteryStepScript = redis.NewScript(prelude + `
local now = clock()
local l = redis.call('HMGET', KEYS[1], 'commitment', 'frozen', 'applied', 'seed', 'entries', 'digest')
if not l[1] then
  if ARGV[1] == '' then return {'none'} end
  if now < tonumber(ARGV[1]) then return {'early'} end
  redis.call('HSET', KEYS[1], 'commitment', ARGV[4], 'seed', ARGV[3], 'committedAt', now)
  l = {ARGV[4], false, false, ARGV[3], false, false}
end
if l[3] then return {'drawn', l[4], l[6]} end
if not l[2] then
  local opens = tonumber(ARGV[2])
  if opens and now < opens then return {'committed'} end
  l[5] = redis.call('LLEN', KEYS[3])
  redis.call('HSET', KEYS[1], 'frozen', now, 'entries', l[5], 'opensAt', opens or now, 'prequeueOpensAt', ARGV[1])
end
return {'draw', l[4], tonumber(l[5]), tonumber(redis.call('HGET', KEYS[2], 'shards')) or 1}
`)

// drawnScript publishes the draw: from now on the seed, the digest, the
// ranks and the list are shown (once, the first time).
//
// KEYS: 1 lottery
// ARGV: 1 the digest (hex), 2 the highest sequence number among the entries
var drawnScript = redis.NewScript(prelude + `
if redis.call('HEXISTS', KEYS[1], 'drawn') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'drawn', clock(), 'digest', ARGV[1], 'last', ARGV[2])
return 1
`)

// appliedScript marks the draw applied (every entry still waiting has its
// score: the bound goes) and gives back the draw's lease.
//
// KEYS: 1 lottery, 2 drawing
var appliedScript = redis.NewScript(`
redis.call('HSET', KEYS[1], 'applied', 1)
redis.call('HDEL', KEYS[1], 'through')
redis.call('DEL', KEYS[2])
return 1
`)

// lotteryFields are what the lottery's route reads, in this order.
var lotteryFields = []string{"commitment", "committedAt", "seed", "drawn", "entries", "digest", "opensAt"}

// ticketDrawScript reads one entry's rank, and the seed and digest once
// drawn.
//
// KEYS: 1 lottery, 2 ranks
// ARGV: 1 the ticket's seen slot ("#" and its seq)
// Returns {"none"} | {"undrawn"} | {"absent"} | {"ok", seed, digest, rank}.
var ticketDrawScript = redis.NewScript(`
local l = redis.call('HMGET', KEYS[1], 'commitment', 'seed', 'drawn', 'digest')
if not l[1] then return {'none'} end
if not l[3] then return {'undrawn'} end
local r = redis.call('BITFIELD_RO', KEYS[2], 'GET', 'u32', ARGV[1])[1]
if r == 0 then return {'absent'} end
return {'ok', l[2], l[4], r}
`)

// Lottery is what the lottery's route shows (the committed draw's public
// face, as the presale's selection has it too).
type Lottery = draw.Published

// TicketDraw is one fan's draw.
type TicketDraw struct {
	TicketID string
	Draw     string // hex HMAC-SHA256(key, ticket id)
	Rank     int64  // 1 = first
}

// Lottery reads event's lottery (ErrNoLottery when none is committed).
func (s *Store) Lottery(ctx context.Context, event string, set Settings) (Lottery, error) {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Lottery, lotteryFields...).Result()
	if err != nil {
		return Lottery{}, rdb.Interpret("lottery", err)
	}
	f := func(i int) string { s, _ := v[i].(string); return s }
	if f(0) == "" {
		return Lottery{}, ErrNoLottery
	}
	out := Lottery{Commitment: f(0), CommittedAt: msToTime(rdb.Num(v[1]))}
	switch {
	case f(6) != "":
		out.DrawAt = msToTime(rdb.Num(v[6]))
	case set.OpensAt != nil:
		out.DrawAt = *set.OpensAt
	}
	if f(3) != "" {
		out.Drawn, out.DrawnAt = true, msToTime(rdb.Num(v[3]))
		out.Seed, out.Entries, out.EntriesDigest = f(2), rdb.Num(v[4]), f(5)
	}
	return out, nil
}

// Opening is what a frozen lottery fixed of an event's times: from the
// freeze on, a reload that moves opens_at or prequeue_opens_at changes
// nothing of its line.
type Opening struct {
	Frozen          bool
	PrequeueOpensAt *time.Time
	OpensAt         *time.Time
}

// Opening reads the times event's lottery froze (Frozen false: none froze
// yet, the config's times are in force). The admitter publishes these in
// place of the config's.
func (s *Store) Opening(ctx context.Context, event string) (Opening, error) {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Lottery, "frozen", "opensAt", "prequeueOpensAt").Result()
	if err != nil {
		return Opening{}, rdb.Interpret("lottery", err)
	}
	if v[0] == nil {
		return Opening{}, nil
	}
	o := Opening{Frozen: true}
	if ms := rdb.Num(v[1]); ms > 0 {
		at := msToTime(ms)
		o.OpensAt = &at
	}
	if ms := rdb.Num(v[2]); ms > 0 {
		at := msToTime(ms)
		o.PrequeueOpensAt = &at
	}
	return o, nil
}

// TicketDraw reads the draw and rank of the fan holding ticket (signed; a
// bad one is ErrInvalidTicket before Redis).
func (s *Store) TicketDraw(ctx context.Context, event, ticket string) (TicketDraw, error) {
	t, err := s.decode(event, ticket)
	if err != nil {
		return TicketDraw{}, err
	}
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: ticketDrawScript, Keys: []string{k.Lottery, k.Ranks}, Args: []any{t.slot()}}).Slice()
	if err != nil {
		return TicketDraw{}, rdb.Interpret("lottery", err)
	}
	r := rdb.ReplyOf(v)
	switch r.Str(0) {
	case "none":
		return TicketDraw{}, ErrNoLottery
	case "undrawn":
		return TicketDraw{}, ErrNotDrawn
	case "absent":
		return TicketDraw{}, ErrNotInLottery
	}
	key, err := draw.KeyHex(r.Str(1), r.Str(2))
	if err != nil {
		return TicketDraw{}, err
	}
	out := TicketDraw{TicketID: t.id(), Draw: hex.EncodeToString(draw.Of(key, t.id())), Rank: r.Int(3)}
	if r.Err() != nil {
		return TicketDraw{}, fmt.Errorf("lottery: %w", r.Err())
	}
	return out, nil
}

// LotteryEntries writes every entry of event's drawn lottery to w, in rank
// order, one ticket id per line, part by part (a million entries are never
// held at once). ErrNoLottery or ErrNotDrawn (nothing written) before.
func (s *Store) LotteryEntries(ctx context.Context, event string, w io.Writer) error {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Lottery, "commitment", "drawn", "entries").Result()
	if err != nil {
		return rdb.Interpret("lottery", err)
	}
	switch {
	case v[0] == nil:
		return ErrNoLottery
	case v[1] == nil:
		return ErrNotDrawn
	}
	n := int(rdb.Num(v[2]))
	for i := 0; i*draw.PartSize < n; i++ {
		part, err := s.c.Get(ctx, rdb.RankedKey(event, i)).Result()
		if err != nil {
			return rdb.Interpret("lottery entries", err)
		}
		if _, err := io.WriteString(w, part); err != nil {
			return err
		}
	}
	return nil
}

// keepLottery commits event's lottery once its pre-queue is open, freezes
// its entries at opens_at and draws it then (Tick, before admitting
// anyone).
func (s *Store) keepLottery(ctx context.Context, event string, set Settings) error {
	if _, ok := s.keyOf(event, true); ok {
		return nil
	}
	v, err := s.lotteryStep(ctx, event, set)
	if err != nil {
		return err
	}
	r := rdb.ReplyOf(v)
	switch r.Str(0) {
	case "drawn":
		return s.remember(event, r.Str(1), r.Str(2))
	case "draw":
		seed, err := hex.DecodeString(r.Str(1))
		if err != nil {
			return fmt.Errorf("lottery: seed: %w", err)
		}
		n, shards := r.Int(2), int(r.Int(3))
		if r.Err() != nil {
			return fmt.Errorf("lottery: %w", r.Err())
		}
		return s.startDraw(ctx, event, seed, n, shards)
	}
	return r.Err()
}

// drawing is one draw this Store runs in the background.
type drawing struct {
	front chan struct{} // closed once the first part is applied and the draw published, or the draw ended
	done  chan struct{} // closed when the draw ended
	err   error         // its error, once done
}

// startDraw runs the draw in the background (one per event in this
// Store) and waits until its first part is applied and the draw published:
// the tick that called lets in the first fans, and the next ticks go on letting in the front
// while the rest is written (lotteryPrelude). A draw that failed is
// answered by the next call, which starts it again.
//
// The draw is O(entries) and runs once: it gets a budget of its own, not
// the tick's second (a big pre-queue would never finish inside it).
func (s *Store) startDraw(ctx context.Context, event string, seed []byte, n int64, shards int) error {
	d := &drawing{front: make(chan struct{}), done: make(chan struct{})}
	if v, running := s.draws.LoadOrStore(event, d); running {
		d = v.(*drawing)
		select {
		case <-d.done:
			s.draws.CompareAndDelete(event, d)
			return d.err
		default:
			return nil
		}
	}
	go func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drawTimeout)
		defer cancel()
		d.err = s.draw(dctx, event, seed, n, shards, d.front)
		close(d.done)
		if d.err == nil {
			s.draws.CompareAndDelete(event, d)
		}
	}()
	select {
	case <-d.front:
	case <-d.done:
	case <-ctx.Done():
	}
	return nil
}

// drawTimeout bounds one attempt at the draw (an attempt cut short is
// taken up again by the next tick, from the start: it writes the same).
const drawTimeout = time.Minute

// commit makes sure event's lottery is committed (a join found none).
func (s *Store) commit(ctx context.Context, event string, set Settings) error {
	if set.PrequeueOpensAt == nil || set.OpensAt == nil {
		return errors.New("lottery: a pre-queue join with no pre-queue in the settings")
	}
	_, err := s.lotteryStep(ctx, event, set)
	return err
}

func (s *Store) lotteryStep(ctx context.Context, event string, set Settings) ([]any, error) {
	seed, commitment, err := draw.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("lottery: %w", err)
	}
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: lotteryStepScript, Keys: []string{k.Lottery, k.Stats, k.Entries}, Args: []any{msArg(set.PrequeueOpensAt), msArg(set.OpensAt), seed, commitment}}).Slice()
	if err != nil {
		return nil, rdb.Interpret("lottery", err)
	}
	return v, nil
}

// drawnKey is what a Store remembers of a drawn lottery: its key.
type drawnKey struct {
	key []byte
	at  time.Time
}

// seedKeep is how long a Store trusts the key it remembers before it
// reads the lottery again: an event id may be used again for a later sale
// (its keys gone), which then has a lottery of its own.
const seedKeep = time.Minute

// keyOf is the key of event's drawn lottery, if this Store remembers it
// (fresh: only if remembered less than seedKeep ago).
func (s *Store) keyOf(event string, fresh bool) ([]byte, bool) {
	v, ok := s.drawn.Load(event)
	if !ok {
		return nil, false
	}
	d := v.(drawnKey)
	if fresh && time.Since(d.at) > seedKeep {
		return nil, false
	}
	return d.key, true
}

func (s *Store) remember(event, seedHex, digestHex string) error {
	key, err := draw.KeyHex(seedHex, digestHex)
	if err != nil {
		return err
	}
	s.drawn.Store(event, drawnKey{key: key, at: time.Now()})
	return nil
}

// learnKey remembers event's key if its lottery is drawn (a sharded poll
// then knows its ticket's score without asking).
func (s *Store) learnKey(ctx context.Context, event string) {
	if _, ok := s.keyOf(event, true); ok {
		return
	}
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Lottery, "seed", "digest", "drawn").Result()
	if err != nil || v[2] == nil {
		return
	}
	seed, _ := v[0].(string)
	digest, _ := v[1].(string)
	_ = s.remember(event, seed, digest)
}

// drawWrite is how many entries' scores the draw writes per pipeline
// (draw.PartSize, so the bound moves a part of the published list at a
// time).
const drawWrite = draw.PartSize

// drawLease is how long one admitter may draw before another takes over
// (an admitter that died mid-draw).
const drawLease = 30 * time.Second

// draw ranks the frozen entries of event's lottery and applies it: every
// entry still waiting gets its draw's score, in rank order, part by part,
// the bound moving on after each (lotteryPrelude), so the first fans are
// let in after one part; the draw is published (seed, digest, ranks, the
// list) after the first part, and front closed then. One admitter draws at a time (a lease); one
// that finds another drawing leaves it be. Safe to run again after a
// replica died halfway: it writes the same figures every time.
func (s *Store) draw(ctx context.Context, event string, seed []byte, n int64, shards int, front chan struct{}) (err error) {
	defer func() {
		select {
		case <-front:
		default:
			close(front)
		}
	}()
	k := rdb.KeysOf(event)
	ok, err := s.c.TakeLease(ctx, k.Drawing, s.owner, drawLease)
	if err != nil {
		return fmt.Errorf("draw: %w", err)
	}
	if !ok {
		return nil // another admitter draws now
	}
	defer func() {
		if err != nil {
			// Another admitter (or this one) may take it up at once.
			_ = s.c.ReleaseLease(ctx, k.Drawing, s.owner)
		}
	}()
	ids, err := s.readEntries(ctx, k.Entries, n)
	if err != nil {
		return err
	}
	digest := draw.Digest(ids)
	key := draw.Key(seed, digest)
	digestHex := hex.EncodeToString(digest)
	var sks []rdb.ShardKeys
	if shards > 1 {
		// The digest is written first: from the moment a shard is marked,
		// a pre-queue place still on its way to it is refused there, and
		// its join places it at its draw (placeDrawn), which needs the key.
		sks = rdb.ShardKeysFor(event, shards)
		_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, k.Lottery, "digest", digestHex)
			for _, sk := range sks {
				p.HSet(ctx, sk.Info, "drawn", 1)
			}
			return nil
		})
		if err != nil {
			return rdb.Interpret("draw", err)
		}
	}
	entries := draw.Rank(key, ids)
	var last int64
	for _, e := range entries {
		if seq, ok := seqOf(e.ID); ok && seq > last {
			last = seq
		}
	}
	w := drawWriter{s: s, k: k, event: event, sks: sks, entries: entries}
	// The front first: the first fans may be let in.
	if err = w.scores(ctx, 0, 1); err != nil {
		return err
	}
	// Published: the ranks and the list, then the seed and the digest.
	if err = w.ranks(ctx); err != nil {
		return err
	}
	if err = s.c.Run(ctx, rdb.Call{Script: drawnScript, Keys: []string{k.Lottery}, Args: []any{digestHex, last}}).Err(); err != nil {
		return rdb.Interpret("draw", err)
	}
	close(front)
	// The rest of the line, then the bound goes.
	if err = w.scores(ctx, 1, len(entries)); err != nil {
		return err
	}
	if err = s.c.Run(ctx, rdb.Call{Script: appliedScript, Keys: []string{k.Lottery, k.Drawing}}).Err(); err != nil {
		return rdb.Interpret("draw", err)
	}
	s.drawn.Store(event, drawnKey{key: key, at: time.Now()})
	return nil
}

// readEntries reads the n frozen entries.
func (s *Store) readEntries(ctx context.Context, list string, n int64) ([]string, error) {
	ids := make([]string, 0, n)
	if err := s.c.ReadList(ctx, list, n, func(page []string) { ids = append(ids, page...) }); err != nil {
		return nil, rdb.Interpret("draw", err)
	}
	if int64(len(ids)) != n {
		return nil, fmt.Errorf("draw: %d entries froze, %d read", n, len(ids))
	}
	return ids, nil
}

// drawWriter writes what the draw decided, part by part (drawWrite
// entries each).
type drawWriter struct {
	s       *Store
	k       rdb.Keys
	event   string
	sks     []rdb.ShardKeys // a sharded line's shards
	entries []draw.Entry    // in rank order
}

func (w drawWriter) parts() int { return (len(w.entries) + drawWrite - 1) / drawWrite }

func (w drawWriter) part(i int) []draw.Entry {
	return w.entries[i*drawWrite : min((i+1)*drawWrite, len(w.entries))]
}

func (w drawWriter) seq(e draw.Entry) (int64, error) {
	seq, ok := seqOf(e.ID)
	if !ok {
		return 0, fmt.Errorf("draw: entry %q has no sequence number", e.ID)
	}
	return seq, nil
}

// scores gives the entries of parts [from, to) still waiting their scores
// (ZADD XX: one that left stays gone), in order, and moves the bound past
// each part once it is written: with the next part's writes, in the same
// pipeline (on a cluster the shards' writes of a part have all landed
// before the event's tag hears of them).
func (w drawWriter) scores(ctx context.Context, from, to int) error {
	to = min(to, w.parts())
	for i := from; i <= to; i++ {
		_, err := w.s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if i > from {
				prev := w.part(i - 1)
				p.HSet(ctx, w.k.Lottery, "through", prev[len(prev)-1].Score)
			}
			if i == to {
				return nil
			}
			byWait := map[string][]redis.Z{}
			for _, e := range w.part(i) {
				seq, err := w.seq(e)
				if err != nil {
					return err
				}
				wait := w.k.Wait
				if len(w.sks) > 1 {
					wait = w.sks[seq%int64(len(w.sks))].Wait
				}
				byWait[wait] = append(byWait[wait], redis.Z{Score: float64(e.Score), Member: e.ID})
			}
			for wait, zs := range byWait {
				p.ZAddXX(ctx, wait, zs...)
			}
			return nil
		})
		if err != nil {
			return rdb.Interpret("draw", err)
		}
	}
	return nil
}

// ranks writes every entry's rank (draw.Ranks: one SET of the table the
// scripts read with BITFIELD_RO, rather than a million BITFIELD
// operations) and the list in rank order (rdb.RankedKey, a part a
// command), in one pipeline.
func (w drawWriter) ranks(ctx context.Context) error {
	table, err := draw.Ranks(w.entries, seqOf)
	if err != nil {
		return err
	}
	_, err = w.s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, w.k.Ranks, table, 0)
		draw.Parts(w.entries, func(i int, part string) { p.Set(ctx, rdb.RankedKey(w.event, i), part, 0) })
		return nil
	})
	return rdb.Interpret("draw", err)
}

// drawKey reads the key of event's draw from the seed and the digest (a
// draw that began has written the digest).
func (s *Store) drawKey(ctx context.Context, event string) ([]byte, error) {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Lottery, "seed", "digest").Result()
	if err != nil {
		return nil, rdb.Interpret("lottery", err)
	}
	seed, _ := v[0].(string)
	digest, _ := v[1].(string)
	return draw.KeyHex(seed, digest)
}
