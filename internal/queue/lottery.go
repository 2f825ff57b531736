package queue

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

// The committed lottery (DESIGN.md "Transparency"; docs/QUEUE.md "The
// lottery"). Fans who join during the pre-queue are put in a random order
// at opening that nobody, not even we, can choose after the fact:
//
//   - when the pre-queue opens, a 32-byte seed is drawn (crypto/rand) and
//     its SHA-256 published (the commitment). The first process to get
//     there (an admitter's tick, or a gateway whose join found none) writes
//     it; a script writes it only where there is none, so there is exactly
//     one and it is never replaced. A pre-queue place is only ever given
//     once it exists (the join scripts refuse until then), so the seed is
//     fixed before anyone's ticket id is known;
//   - every pre-queue place is recorded in the draw's entries (a set under
//     the event's tag) by the same script that gives it;
//   - at opens_at the admitter draws: each entry's draw is
//     HMAC-SHA256(seed, ticket id); entries are ranked by draw, lowest
//     first, and each one still waiting gets its draw as its score (the
//     first 53 bits, what a ZSET score holds exactly; ties, which need two
//     draws to share those bits, sort by ticket id as Redis sorts equal
//     scores, and the rank follows the same order). Until the draw is
//     done, every tick admits nobody, so the order fans are let in is the
//     committed one. The draw depends on nothing but the seed and the
//     entries (frozen at opens_at by Redis TIME), so admitters racing to do
//     it, or one finishing what a dead one began, write the same figures;
//   - the seed is revealed from opens_at on: any fan can recompute their
//     draw and check their rank.

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

// lotteryPrelude: whether an event's line must wait for its draw.
const lotteryPrelude = `
local function undrawn(lottery)
  return redis.call('HEXISTS', lottery, 'commitment') == 1 and redis.call('HEXISTS', lottery, 'drawn') == 0
end
`

// lotteryStepScript commits the lottery once the pre-queue is open (with
// the seed the caller drew, only if none is committed) and says what is
// due next.
//
// KEYS: 1 lottery, 2 stats
// ARGV: 1 prequeue_opens_at ms, 2 opens_at ms, 3 seed (hex), 4 its SHA-256 (hex)
// Returns {"early"} (the pre-queue has not opened) | {"committed"} (before
// opens_at) | {"draw", seed, shards} (opens_at passed, not drawn) |
// {"drawn", seed}.
var lotteryStepScript = redis.NewScript(prelude + `
local now = clock()
if redis.call('HEXISTS', KEYS[1], 'commitment') == 0 then
  if now < tonumber(ARGV[1]) then return {'early'} end
  redis.call('HSET', KEYS[1], 'commitment', ARGV[4], 'seed', ARGV[3], 'committedAt', now)
end
local l = redis.call('HMGET', KEYS[1], 'seed', 'drawn')
if l[2] then return {'drawn', l[1]} end
if now < tonumber(ARGV[2]) then return {'committed'} end
return {'draw', l[1], tonumber(redis.call('HGET', KEYS[2], 'shards')) or 1}
`)

// drawDoneScript marks the draw done, once.
//
// KEYS: 1 lottery
// ARGV: 1 entries, 2 the highest sequence number among them
// Returns 1 if this call marked it, 0 if it was marked already.
var drawDoneScript = redis.NewScript(prelude + `
if redis.call('HEXISTS', KEYS[1], 'drawn') == 1 then return 0 end
local now = clock()
redis.call('HSET', KEYS[1], 'drawn', now, 'entries', ARGV[1], 'last', ARGV[2])
return 1
`)

// lotteryReadScript reads the lottery for its route: the seed only from
// opens_at on (by Redis TIME) or once drawn.
//
// KEYS: 1 lottery
// ARGV: 1 opens_at ms or ""
// Returns {commitment or false, committedAt, seed or "", drawn ms or "", entries or ""}.
var lotteryReadScript = redis.NewScript(prelude + `
local now = clock()
local l = redis.call('HMGET', KEYS[1], 'commitment', 'committedAt', 'seed', 'drawn', 'entries')
if not l[1] then return {false} end
local opens = tonumber(ARGV[1])
local seed = ''
if l[4] or (opens and now >= opens) then seed = l[3] end
return {l[1], l[2], seed, l[4] or '', l[5] or ''}
`)

// ticketDrawScript reads one entry's rank, and the seed once drawn.
//
// KEYS: 1 lottery, 2 ranks
// ARGV: 1 ticket id
// Returns {"none"} | {"undrawn"} | {"absent"} | {"ok", seed, rank}.
var ticketDrawScript = redis.NewScript(`
local l = redis.call('HMGET', KEYS[1], 'commitment', 'seed', 'drawn')
if not l[1] then return {'none'} end
if not l[3] then return {'undrawn'} end
local r = redis.call('HGET', KEYS[2], ARGV[1])
if not r then return {'absent'} end
return {'ok', l[2], r}
`)

// Lottery is what the lottery's route shows.
type Lottery struct {
	Commitment  string // hex SHA-256 of the seed
	CommittedAt time.Time
	DrawAt      time.Time // opens_at
	Seed        string    // hex; empty before opens_at
	Drawn       bool
	DrawnAt     time.Time
	Entries     int64 // fans in the draw, once drawn
}

// TicketDraw is one fan's draw.
type TicketDraw struct {
	TicketID string
	Draw     string // hex HMAC-SHA256(seed, ticket id)
	Rank     int64  // 1 = first
}

// Lottery reads event's lottery (ErrNoLottery when none is committed).
func (s *Store) Lottery(ctx context.Context, event string, set Settings) (Lottery, error) {
	v, err := lotteryReadScript.Run(ctx, s.rdb, []string{keysOf(event).lottery}, msArg(set.OpensAt)).Slice()
	if err != nil {
		return Lottery{}, interpretError("lottery", err)
	}
	if len(v) < 5 {
		return Lottery{}, ErrNoLottery
	}
	r := reply(v)
	out := Lottery{Commitment: r.str(0), CommittedAt: msToTime(r.int(1)), Seed: r.str(2)}
	if set.OpensAt != nil {
		out.DrawAt = *set.OpensAt
	}
	if d := r.str(3); d != "" {
		out.Drawn = true
		out.DrawnAt = msToTime(r.int(3))
		out.Entries = r.int(4)
	}
	if r.err != nil {
		return Lottery{}, fmt.Errorf("lottery: %w", r.err)
	}
	return out, nil
}

// TicketDraw reads the draw and rank of the fan holding ticket (signed; a
// bad one is ErrInvalidTicket before Redis).
func (s *Store) TicketDraw(ctx context.Context, event, ticket string) (TicketDraw, error) {
	t, err := s.decode(event, ticket)
	if err != nil {
		return TicketDraw{}, err
	}
	k := keysOf(event)
	v, err := ticketDrawScript.Run(ctx, s.rdb, []string{k.lottery, k.ranks}, t.id()).Slice()
	if err != nil {
		return TicketDraw{}, interpretError("lottery", err)
	}
	r := reply(v)
	switch r.str(0) {
	case "none":
		return TicketDraw{}, ErrNoLottery
	case "undrawn":
		return TicketDraw{}, ErrNotDrawn
	case "absent":
		return TicketDraw{}, ErrNotInLottery
	}
	seed, err := hex.DecodeString(r.str(1))
	if err != nil {
		return TicketDraw{}, fmt.Errorf("lottery: seed: %w", err)
	}
	out := TicketDraw{TicketID: t.id(), Draw: hex.EncodeToString(drawOf(seed, t.id())), Rank: r.int(2)}
	if r.err != nil {
		return TicketDraw{}, fmt.Errorf("lottery: %w", r.err)
	}
	return out, nil
}

// drawOf is an entry's draw: HMAC-SHA256(seed, ticket id).
func drawOf(seed []byte, id string) []byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(id))
	return m.Sum(nil)
}

// drawScore is the wait score of an entry: its draw's first 53 bits, less
// 2^53, so in [-2^53, -1] (exact in a float64, below every post-opening
// score) and in the draw's order.
func drawScore(seed []byte, id string) int64 {
	return int64(binary.BigEndian.Uint64(drawOf(seed, id)[:8])>>11) - 1<<53
}

// keepLottery commits event's lottery once its pre-queue is open and draws
// it once opens_at has passed (Tick, before admitting anyone).
func (s *Store) keepLottery(ctx context.Context, event string, set Settings) error {
	if set.PrequeueOpensAt == nil || set.OpensAt == nil {
		return nil
	}
	if _, ok := s.seedOf(event, true); ok {
		return nil
	}
	v, err := s.lotteryStep(ctx, event, set)
	if err != nil {
		return err
	}
	r := reply(v)
	switch r.str(0) {
	case "drawn":
		return s.remember(event, r.str(1))
	case "draw":
		seed, err := hex.DecodeString(r.str(1))
		if err != nil {
			return fmt.Errorf("lottery: seed: %w", err)
		}
		// The draw is O(entries) and runs once: it gets a budget of its
		// own, not the tick's second (a big pre-queue would never finish
		// inside it, and the line would stay shut).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drawTimeout)
		defer cancel()
		return s.draw(dctx, event, seed, int(r.int(2)))
	}
	return r.err
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
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("lottery: %w", err)
	}
	sum := sha256.Sum256(seed[:])
	k := keysOf(event)
	v, err := lotteryStepScript.Run(ctx, s.rdb, []string{k.lottery, k.stats},
		msArg(set.PrequeueOpensAt), msArg(set.OpensAt), hex.EncodeToString(seed[:]), hex.EncodeToString(sum[:])).Slice()
	if err != nil {
		return nil, interpretError("lottery", err)
	}
	return v, nil
}

// drawnSeed is what a Store remembers of a drawn lottery.
type drawnSeed struct {
	seed []byte
	at   time.Time
}

// seedKeep is how long a Store trusts the seed it remembers before it
// reads the lottery again: an event id may be used again for a later sale
// (its keys gone), which then has a lottery of its own.
const seedKeep = time.Minute

// seedOf is the seed of event's drawn lottery, if this Store remembers it
// (fresh: only if remembered less than seedKeep ago).
func (s *Store) seedOf(event string, fresh bool) ([]byte, bool) {
	v, ok := s.drawn.Load(event)
	if !ok {
		return nil, false
	}
	d := v.(drawnSeed)
	if fresh && time.Since(d.at) > seedKeep {
		return nil, false
	}
	return d.seed, true
}

func (s *Store) remember(event, seedHex string) error {
	seed, err := hex.DecodeString(seedHex)
	if err != nil {
		return fmt.Errorf("lottery: seed: %w", err)
	}
	s.drawn.Store(event, drawnSeed{seed: seed, at: time.Now()})
	return nil
}

// learnSeed remembers event's seed if its lottery is drawn (a sharded
// poll then knows its ticket's score without asking).
func (s *Store) learnSeed(ctx context.Context, event string) {
	if _, ok := s.seedOf(event, true); ok {
		return
	}
	v, err := s.rdb.HMGet(ctx, keysOf(event).lottery, "seed", "drawn").Result()
	if err != nil || v[1] == nil {
		return
	}
	if seed, ok := v[0].(string); ok {
		_ = s.remember(event, seed)
	}
}

// drawBatch bounds the commands of one pipeline of the draw.
const drawBatch = 1000

// draw ranks the entries of event's lottery and gives every one still
// waiting its draw's score; then marks the draw done. Safe to run by many
// replicas at once, and again after a replica died halfway: it writes the
// same figures every time.
func (s *Store) draw(ctx context.Context, event string, seed []byte, shards int) error {
	k := keysOf(event)
	var sks []shardKeys
	if shards > 1 {
		// From here on, a pre-queue place still on its way to its shard is
		// refused there and comes back placed at its draw (sJoinShard).
		sks = s.shardKeysFor(event, shards)
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, sk := range sks {
				p.HSet(ctx, sk.info, "drawn", 1)
			}
			return nil
		})
		if err != nil {
			return interpretError("draw", err)
		}
	}
	type entry struct {
		id    string
		score int64
	}
	var entries []entry
	var last int64
	var cursor uint64
	for {
		ids, next, err := s.rdb.SScan(ctx, k.entries, cursor, "", 5000).Result()
		if err != nil {
			return interpretError("draw", err)
		}
		for _, id := range ids {
			entries = append(entries, entry{id: id, score: drawScore(seed, id)})
			if seq, ok := seqOf(id); ok && seq > last {
				last = seq
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	// SSCAN may return an id twice.
	sort.Slice(entries, func(a, b int) bool {
		if entries[a].score != entries[b].score {
			return entries[a].score < entries[b].score
		}
		return entries[a].id < entries[b].id
	})
	uniq := entries[:0]
	for i, e := range entries {
		if i == 0 || e.id != entries[i-1].id {
			uniq = append(uniq, e)
		}
	}
	entries = uniq
	for from := 0; from < len(entries); from += drawBatch {
		part := entries[from:min(from+drawBatch, len(entries))]
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			ranks := make([]any, 0, 2*len(part))
			scores := map[string][]redis.Z{} // per wait key: one ZADD each
			for i, e := range part {
				wait := k.wait
				if shards > 1 {
					if seq, ok := seqOf(e.id); ok {
						wait = sks[seq%int64(shards)].wait
					}
				}
				scores[wait] = append(scores[wait], redis.Z{Score: float64(e.score), Member: e.id})
				ranks = append(ranks, e.id, from+i+1)
			}
			for wait, zs := range scores {
				p.ZAddXX(ctx, wait, zs...)
			}
			p.HSet(ctx, k.ranks, ranks...)
			return nil
		})
		if err != nil {
			return interpretError("draw", err)
		}
	}
	if err := drawDoneScript.Run(ctx, s.rdb, []string{k.lottery}, len(entries), last).Err(); err != nil {
		return interpretError("draw", err)
	}
	s.drawn.Store(event, drawnSeed{seed: seed, at: time.Now()})
	return nil
}

// placeDrawn places a pre-queue join that reached its shard after the draw
// began, at its draw's score, and counts the fans ahead of it elsewhere.
func (s *Store) placeDrawn(ctx context.Context, event string, set Settings, t ticket, rate string, untilOpen int64) ([]any, int64, error) {
	seedHex, err := s.rdb.HMGet(ctx, keysOf(event).lottery, "seed").Result()
	if err != nil {
		return nil, 0, interpretError("join", err)
	}
	str, _ := seedHex[0].(string)
	seed, err := hex.DecodeString(str)
	if err != nil || len(seed) == 0 {
		return nil, 0, fmt.Errorf("join: the lottery's seed: %q %v", str, err)
	}
	n := shardsOf(set)
	shards := s.shardKeysFor(event, n)
	own := int(t.seq % int64(n))
	sk := shards[own]
	score := drawScore(seed, t.id())
	place := s.startTold(ctx, sJoinShard, []string{sk.wait, sk.seen, sk.stats, sk.info},
		t.id(), score, t.seq/int64(n), rate, untilOpen, set.AbandonAfter.Milliseconds(), 0.5, n, 1)
	ahead := s.startBelow(ctx, shards, own, score)
	v, err := place.wait().Slice()
	if err != nil {
		return nil, 0, interpretError("join", err)
	}
	others, err := waitBelow(ahead)
	if err != nil {
		return nil, 0, interpretError("join", err)
	}
	return v, others, nil
}
