package queue

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// The committed lottery (DESIGN.md "Transparency"; docs/QUEUE.md "The
// lottery"). Fans who join during the pre-queue are put in a random order
// at opening that nobody, not even we or anyone who can read Redis, can
// choose:
//
//   - when the pre-queue opens, the commitment of a 32-byte seed,
//     SHA-256(seed), is published; the seed is derived from the draw secret
//     and a random nonce (package draw, secret.go), and Redis keeps the
//     nonce and the commitment, never the seed, until the draw. The first
//     process to get there (an admitter's tick, or a gateway whose join
//     found none) writes them; a script writes them only where there are
//     none, so there is exactly one and it is never replaced. A pre-queue
//     place is only ever given once it exists (the join scripts refuse
//     until then);
//   - every pre-queue place is appended to the draw's entries (a list under
//     the event's tag) by the same script that gives it; a fan who leaves
//     stays an entry (leaving must not change the draw);
//   - at opens_at (by Redis TIME, as the admitter's settings say it then)
//     the entries freeze: the admitter marks the lottery frozen, with the
//     times in force, and from then on no join is a pre-queue place, whatever
//     opens_at a caller brings (a reload, a stale gateway): the line's times
//     are the frozen ones for good (Store.Opening);
//   - the admitter derives the seed then (checked against the commitment).
//     The draw's key is SHA-256(seed ‖ entriesDigest), where entriesDigest
//     is SHA-256 of the entries' ids sorted bytewise, each followed by
//     "\n". An entry's draw is HMAC-SHA256(key, ticket id); entries are
//     ranked by draw, lowest first, the whole 32 bytes compared, then by id.
//     The key depends on every entry, so one who learnt the seed during the
//     pre-queue still cannot tell which of its tickets will draw well;
//   - each entry still waiting gets its rank's score (draw.Score), part by
//     part in rank order; until the draw is applied a tick admits nobody
//     past the parts written (lotteryPrelude), so the order fans are let in
//     is the drawn one. The draw depends on nothing but the seed and the
//     frozen entries, so an admitter finishing what a dead one began writes
//     the same figures;
//   - once drawn (and never before) the seed, the nonce, the digest and
//     every entry in rank order are published: anyone can recompute the
//     digest, the key, every draw and every rank (docs/verify_draw.py).

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

// lotteryStepScript is the lottery's step of the draw's lifecycle
// (draw.Lua): it commits once the pre-queue is open (with the seed the
// caller drew, only if none is committed), freezes the entries once
// opens_at has passed (or at once, when the settings no longer have an
// opening: what was entered is still drawn), and says what is due next.
// Its own fields at the freeze: the times in force (Store.Opening).
//
// KEYS: 1 lottery, 2 stats, 3 entries
// ARGV: 1 prequeue_opens_at ms or "", 2 opens_at ms or "", 3 a nonce
// (hex), 4 the commitment it gives (draw.Secret.Commit)
// Returns draw_step's reply, then the event's shards.
var lotteryStepScript = lua.Script("lottery_step", `
local opens = tonumber(ARGV[2])
local function freeze(now)
  local at = opens or now
  redis.call('HSET', KEYS[1], 'opensAt', int(at), 'prequeueOpensAt', ARGV[1])
  return redis.call('LLEN', KEYS[3]), at
end
local r = draw_step(KEYS[1], 'applied', clock(), tonumber(ARGV[1]), opens, ARGV[4], ARGV[3], freeze)
r[#r + 1] = tonumber(redis.call('HGET', KEYS[2], 'shards')) or 1
return r
`)

// appliedScript marks the draw applied: every entry still waiting has its
// score, and the bound goes.
//
// KEYS: 1 lottery
var appliedScript = lua.Script("applied", `
redis.call('HSET', KEYS[1], 'applied', 1)
redis.call('HDEL', KEYS[1], 'through')
return 1
`)

// ticketDrawScript reads one entry's rank, and the seed and digest once
// drawn.
//
// KEYS: 1 lottery, 2 ranks
// ARGV: 1 the ticket's seen slot ("#" and its seq)
// Returns {"none"} | {"undrawn"} | {"absent"} | {"ok", seed, digest, rank}.
var ticketDrawScript = lua.Script("ticket_draw", `
local l = redis.call('HMGET', KEYS[1], 'commitment', 'seed', 'drawn', 'digest')
if not l[1] then return {'none'} end
if not l[3] then return {'undrawn'} end
local r = redis.call('BITFIELD_RO', KEYS[2], 'GET', 'u32', ARGV[1])[1]
if r == 0 then return {'absent'} end
return {'ok', l[2], l[4], r}
`)

// Lottery reads event's lottery (ErrNoLottery when none is committed).
func (s *Store) Lottery(ctx context.Context, event string, set line.Settings) (line.Draw, error) {
	var drawAt time.Time
	if set.OpensAt != nil {
		drawAt = *set.OpensAt
	}
	l, err := draw.Read(ctx, s.c, rdb.LotteryDraw(event), drawAt)
	if errors.Is(err, draw.ErrNone) {
		return line.Draw{}, line.ErrNoLottery
	}
	return l, err
}

// Opening reads the times event's lottery froze (Frozen false: none froze
// yet, the config's times are in force). The admitter publishes these in
// place of the config's.
func (s *Store) Opening(ctx context.Context, event string) (line.Opening, error) {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Lottery, "frozen", "opensAt", "prequeueOpensAt").Result()
	if err != nil {
		return line.Opening{}, rdb.Interpret("lottery", err)
	}
	if v[0] == nil {
		return line.Opening{}, nil
	}
	o := line.Opening{Frozen: true}
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

// TicketDraw reads the draw and rank of the fan holding ticket t (parsed
// for event).
func (s *Store) TicketDraw(ctx context.Context, event string, t line.Ticket) (line.TicketDraw, error) {
	if err := known(t); err != nil {
		return line.TicketDraw{}, err
	}
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: ticketDrawScript, Keys: []string{k.Lottery, k.Ranks}, Args: []any{slot(t)}}).Slice()
	if err != nil {
		return line.TicketDraw{}, rdb.Interpret("lottery", err)
	}
	r := rdb.ReplyOf(v)
	switch r.Str(0) {
	case "none":
		return line.TicketDraw{}, line.ErrNoLottery
	case "undrawn":
		return line.TicketDraw{}, line.ErrNotDrawn
	case "absent":
		return line.TicketDraw{}, line.ErrNotInLottery
	}
	key, err := draw.KeyHex(r.Str(1), r.Str(2))
	if err != nil {
		return line.TicketDraw{}, err
	}
	out := line.TicketDraw{TicketID: t.ID(), Draw: hex.EncodeToString(draw.Of(key, t.ID())), Rank: r.Int(3)}
	if r.Err() != nil {
		return line.TicketDraw{}, fmt.Errorf("lottery: %w", r.Err())
	}
	return out, nil
}

// LotteryEntries writes every entry of event's drawn lottery to w, in rank
// order, one ticket id per line, part by part (a million entries are never
// held at once). ErrNoLottery or ErrNotDrawn (nothing written) before.
func (s *Store) LotteryEntries(ctx context.Context, event string, w io.Writer) error {
	err := draw.WriteEntries(ctx, s.c, rdb.LotteryDraw(event), w)
	switch {
	case errors.Is(err, draw.ErrNone):
		return line.ErrNoLottery
	case errors.Is(err, draw.ErrNotDrawn):
		return line.ErrNotDrawn
	}
	return err
}

// keepLottery commits event's lottery once its pre-queue is open, freezes
// its entries at opens_at and draws it then (Tick, before admitting
// anyone).
func (s *Store) keepLottery(ctx context.Context, event string, set line.Settings) error {
	if s.drawnLately(event) {
		return nil
	}
	st, err := s.lotteryStep(ctx, event, set)
	if err != nil {
		return err
	}
	if st.Phase != draw.Done && st.Phase != draw.Due {
		return nil
	}
	// The admitter derives the seed now, from the draw secret and the
	// nonce: it was never in Redis.
	seed, err := s.drawSecret.SeedOf(event, draw.Lottery, st)
	if err != nil {
		return fmt.Errorf("lottery: %w", err)
	}
	if st.Phase == draw.Done {
		s.drawn.Store(event, time.Now())
		return nil
	}
	shards := int(st.Rest.Int(0))
	if err := st.Rest.Err(); err != nil {
		return fmt.Errorf("lottery: %w", err)
	}
	return s.startDraw(ctx, event, seed, st.Entries, shards)
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
func (s *Store) commit(ctx context.Context, event string, set line.Settings) error {
	if set.PrequeueOpensAt == nil || set.OpensAt == nil {
		return errors.New("lottery: a pre-queue join with no pre-queue in the settings")
	}
	_, err := s.lotteryStep(ctx, event, set)
	return err
}

// lotteryStep runs the lottery's step (lotteryStepScript) with a nonce of
// its own and the commitment it gives, committed if nobody has yet.
func (s *Store) lotteryStep(ctx context.Context, event string, set line.Settings) (draw.Step, error) {
	// An event with no pre-queue commits nothing, and needs no secret: its
	// step only finds a lottery committed before the pre-queue was removed
	// (drawn with the secret it was committed with) or none.
	var nonce, commitment string
	if set.PrequeueOpensAt != nil || len(s.drawSecret) > 0 {
		var err error
		if nonce, commitment, err = s.drawSecret.Commit(event, draw.Lottery); err != nil {
			return draw.Step{}, fmt.Errorf("lottery: %w", err)
		}
	}
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: lotteryStepScript, Keys: []string{k.Lottery, k.Stats, k.Entries}, Args: []any{msArg(set.PrequeueOpensAt), msArg(set.OpensAt), nonce, commitment}}).Slice()
	if err != nil {
		return draw.Step{}, rdb.Interpret("lottery", err)
	}
	return draw.StepOf(v)
}

// drawnKeep is how long a Store trusts what it remembers of a drawn
// lottery (that it is drawn; its rank table) before it reads the lottery
// again: an event id may be used again for a later sale (its keys gone),
// which then has a lottery of its own. What is remembered is aged by the
// wall clock (time.Now, time.Since), not the Store's Now: only this
// process's own memory is timed.
const drawnKeep = time.Minute

// drawnLately: this Store saw event's lottery drawn and applied less than
// drawnKeep ago (its admitter's tick then skips the lottery's step).
func (s *Store) drawnLately(event string) bool {
	v, ok := s.drawn.Load(event)
	return ok && time.Since(v.(time.Time)) <= drawnKeep
}

// rankTable is a drawn lottery's rank table (draw.Ranks) as a Store keeps
// it: a sharded poll finds its ticket's score there (draw.Score of its
// rank) rather than asking Redis.
type rankTable struct {
	table []byte
	at    time.Time
}

// drawnScore is the score of t in event's drawn lottery, if this Store
// holds the rank table and t is an entry.
func (s *Store) drawnScore(event string, t line.Ticket) (int64, bool) {
	v, ok := s.ranks.Load(event)
	if !ok {
		return 0, false
	}
	table, seq := v.(*rankTable).table, t.Seq()
	if seq < 0 || int64(len(table)) < 4*seq+4 {
		return 0, false
	}
	rank := binary.BigEndian.Uint32(table[4*seq:])
	if rank == 0 {
		return 0, false
	}
	return draw.Score(int64(rank)), true
}

// learnRanks reads event's rank table once its lottery is drawn, in the
// background and one read at a time (a million entries are 4 MB): the poll
// that asked goes on with the score its shard told it, and the next polls
// find theirs in the table.
func (s *Store) learnRanks(ctx context.Context, event string) {
	if v, ok := s.ranks.Load(event); ok && time.Since(v.(*rankTable).at) <= drawnKeep {
		return
	}
	if _, busy := s.learning.LoadOrStore(event, true); busy {
		return
	}
	go func() {
		defer s.learning.Delete(event)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		k := rdb.KeysOf(event)
		drawn, err := s.c.HGet(ctx, k.Lottery, "drawn").Result()
		if err != nil || drawn == "" {
			return
		}
		table, err := s.c.Get(ctx, k.Ranks).Bytes()
		if err != nil {
			return
		}
		s.ranks.Store(event, &rankTable{table: table, at: time.Now()})
	}()
}

// rankScoreOf reads t's score in event's draw from the rank table in Redis
// (a pre-queue place the draw overtook on its way to its shard: the table
// is written before the shards are marked drawn).
func (s *Store) rankScoreOf(ctx context.Context, event string, t line.Ticket) (int64, error) {
	if score, ok := s.drawnScore(event, t); ok {
		return score, nil
	}
	v, err := s.c.BitField(ctx, rdb.KeysOf(event).Ranks, "GET", "u32", "#"+itoa(t.Seq())).Result()
	if err != nil {
		return 0, rdb.Interpret("lottery", err)
	}
	if len(v) != 1 || v[0] == 0 {
		return 0, fmt.Errorf("lottery: %s is not among the draw's entries", t.ID())
	}
	return draw.Score(v[0]), nil
}

// drawWrite is how many entries' scores the draw writes per pipeline
// (draw.PartSize, so the bound moves a part of the published list at a
// time).
const drawWrite = draw.PartSize

// draw ranks the frozen entries of event's lottery and applies it, in the
// draw's lifecycle (draw.Run): every entry still waiting gets its draw's
// score, in rank order, part by part, the bound moving on after each
// (lotteryPrelude), so the first fans are let in after one part; the draw
// is published (seed, digest, ranks, the list) after the first part, and
// front closed then. One admitter draws at a time (the draw's lease); one
// that finds another drawing leaves it be. Safe to run again after a
// replica died halfway: it writes the same figures every time.
func (s *Store) draw(ctx context.Context, event string, seed []byte, n int64, shards int, front chan struct{}) error {
	opened := func() {
		select {
		case <-front:
		default:
			close(front)
		}
	}
	defer opened()
	k := rdb.KeysOf(event)
	var sks []rdb.ShardKeys
	if shards > 1 {
		sks = rdb.ShardKeysFor(event, shards)
	}
	var w drawWriter
	d, err := draw.Run(ctx, s.c, rdb.LotteryDraw(event), s.owner, seed, draw.Apply{
		Entries: func(ctx context.Context) ([]string, error) { return s.readEntries(ctx, k.Entries, n) },
		Front: func(ctx context.Context, d *draw.Drawn) error {
			if len(sks) > 1 {
				// The shards are marked before any score is written: from
				// then on a pre-queue place still on its way to its shard
				// is refused there, and its join places it at its rank's
				// score (placeOnShard), which it reads from the rank table
				// written already.
				_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for _, sk := range sks {
						p.HSet(ctx, sk.Info, "drawn", 1)
					}
					return nil
				})
				if err != nil {
					return rdb.Interpret("draw", err)
				}
			}
			// The front first: the first fans may be let in.
			w = drawWriter{s: s, k: k, sks: sks, entries: d.Entries}
			return w.scores(ctx, 0, 1)
		},
		Fields: func(d *draw.Drawn) []any {
			var last int64
			for _, e := range d.Entries {
				if seq, ok := seqOf(e.ID); ok && seq > last {
					last = seq
				}
			}
			return []any{"last", last}
		},
		Published: func(*draw.Drawn) { opened() },
		// The rest of the line, then the bound goes.
		Rest: func(ctx context.Context, d *draw.Drawn) error {
			if err := w.scores(ctx, 1, len(d.Entries)); err != nil {
				return err
			}
			return rdb.Interpret("draw", s.c.Run(ctx, rdb.Call{Script: appliedScript, Keys: []string{k.Lottery}}).Err())
		},
	})
	if err != nil {
		return err
	}
	if d != nil {
		s.drawn.Store(event, time.Now())
	}
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
				// The last rank of the part before: i × drawWrite.
				p.HSet(ctx, w.k.Lottery, "through", draw.Score(int64(min(i*drawWrite, len(w.entries)))))
			}
			if i == to {
				return nil
			}
			byWait := map[string][]redis.Z{}
			for j, e := range w.part(i) {
				seq, err := w.seq(e)
				if err != nil {
					return err
				}
				wait := w.k.Wait
				if len(w.sks) > 1 {
					wait = w.sks[seq%int64(len(w.sks))].Wait
				}
				rank := int64(i*drawWrite + j + 1)
				byWait[wait] = append(byWait[wait], redis.Z{Score: float64(draw.Score(rank)), Member: e.ID})
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
