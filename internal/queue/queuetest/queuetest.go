// Package queuetest reads an event's line straight from Redis, for tests:
// who waits and in what order, who is in and until when, the line's
// counters, its bucket, its lottery. It reads the keys package rdb names
// (rdb.KeysOf, rdb.ShardKeysFor), for one shard or many, so that no test
// spells a wr:{…} key out and a renamed key breaks no test but its own.
//
// Every method fails the test (tb.Fatal) when Redis does not answer, so
// call them from the test's goroutine; a sampler running beside the test
// reads Keys() itself and decides what a failed read means.
package queuetest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
)

// Line is one event's line as Redis holds it.
type Line struct {
	tb     testing.TB
	c      redis.UniversalClient
	event  string
	shards int
}

// Of is event's line on c, in the one-shard layout (Spread for the other).
func Of(tb testing.TB, c redis.UniversalClient, event string) Line {
	return Line{tb: tb, c: c, event: event, shards: 1}
}

// Spread is the same line spread over k shards (admission.shards: k): its
// waiting fans are read from every shard.
func (l Line) Spread(k int) Line {
	l.shards = max(k, 1)
	return l
}

// Keys are the event's keys, for a test that writes one itself (to break
// it, or to move a clock) or reads it inside its own pipeline.
func (l Line) Keys() rdb.Keys { return rdb.KeysOf(l.event) }

// Shards are the keys of each shard of a spread line; none for one shard.
func (l Line) Shards() []rdb.ShardKeys {
	if l.shards <= 1 {
		return nil
	}
	return rdb.ShardKeysFor(l.event, l.shards)
}

// WaitKeys are the line's wait ZSETs: one, or one per shard.
func (l Line) WaitKeys() []string {
	if l.shards <= 1 {
		return []string{l.Keys().Wait}
	}
	var out []string
	for _, sk := range l.Shards() {
		out = append(out, sk.Wait)
	}
	return out
}

// Waiting is the whole line, front first (by place, then ticket id), from
// every wait ZSET.
func (l Line) Waiting() []string {
	l.tb.Helper()
	var all []redis.Z
	for _, k := range l.WaitKeys() {
		all = append(all, must(l, l.c.ZRangeWithScores(context.Background(), k, 0, -1))...)
	}
	slices.SortFunc(all, func(a, b redis.Z) int {
		if a.Score != b.Score {
			if a.Score < b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Member.(string), b.Member.(string))
	})
	out := make([]string, len(all))
	for i, z := range all {
		out[i] = z.Member.(string)
	}
	return out
}

// WaitingCount is how many tickets wait in line (ZCARD of every wait ZSET;
// not those a sharded tick is handing over: Moving).
func (l Line) WaitingCount() int64 {
	l.tb.Helper()
	var n int64
	for _, k := range l.WaitKeys() {
		n += must(l, l.c.ZCard(context.Background(), k))
	}
	return n
}

// Place is id's score in line (its place, or its rank of the draw's
// order), and whether it waits.
func (l Line) Place(id string) (float64, bool) {
	l.tb.Helper()
	for _, k := range l.WaitKeys() {
		if s, ok := score(l, k, id); ok {
			return s, true
		}
	}
	return 0, false
}

// SetPlace moves id, waiting, to score (a test that tampers with the
// line, as a writer of Redis could).
func (l Line) SetPlace(id string, at float64) {
	l.tb.Helper()
	for _, k := range l.WaitKeys() {
		if _, ok := score(l, k, id); ok {
			must(l, l.c.ZAdd(context.Background(), k, redis.Z{Score: at, Member: id}))
			return
		}
	}
	l.tb.Fatalf("queuetest: %s is not waiting", id)
}

// Moving is how many tickets a sharded tick is handing to the active set
// (0 once every handover is finished).
func (l Line) Moving() int64 {
	l.tb.Helper()
	var n int64
	for _, sk := range l.Shards() {
		n += must(l, l.c.ZCard(context.Background(), sk.Moving))
	}
	return n
}

// Active is every ticket in the active set, soonest expiry first, expired
// or not.
func (l Line) Active() []string {
	l.tb.Helper()
	return must(l, l.c.ZRange(context.Background(), l.Keys().Active, 0, -1))
}

// ActiveCount is the size of the active set, expired or not.
func (l Line) ActiveCount() int64 {
	l.tb.Helper()
	return must(l, l.c.ZCard(context.Background(), l.Keys().Active))
}

// IsActive says whether id is in the active set.
func (l Line) IsActive(id string) bool {
	l.tb.Helper()
	_, ok := score(l, l.Keys().Active, id)
	return ok
}

// Window is when id's access window ends: the zero time when id is not in
// the active set.
func (l Line) Window(id string) time.Time {
	l.tb.Helper()
	if ms, ok := score(l, l.Keys().Active, id); ok {
		return time.UnixMilli(int64(ms))
	}
	return time.Time{}
}

// EndWindow moves the end of id's access window to at, as time would
// (a test's clock); id must be in the active set.
func (l Line) EndWindow(id string, at time.Time) {
	l.tb.Helper()
	z := redis.Z{Score: float64(at.UnixMilli()), Member: id}
	if n := must(l, l.c.ZAddArgs(context.Background(), l.Keys().Active, redis.ZAddArgs{XX: true, Ch: true, Members: []redis.Z{z}})); n != 1 {
		l.tb.Fatalf("queuetest: %s is not active: its window cannot end", id)
	}
}

// ExpiresIn is how long key has to live: 0 or less when it has no expiry
// or is gone.
func (l Line) ExpiresIn(key string) time.Duration {
	l.tb.Helper()
	return must(l, l.c.PTTL(context.Background(), key))
}

// Stat is one counter of the event's stats hash (seq, joined, admitted,
// left, abandoned; 0 when never written). A spread line counts joined,
// left and abandoned per shard: Stat adds the shards' share.
func (l Line) Stat(field string) int64 {
	l.tb.Helper()
	keys := []string{l.Keys().Stats}
	if field == "joined" || field == "left" || field == "abandoned" {
		for _, sk := range l.Shards() {
			keys = append(keys, sk.Stats)
		}
	}
	var n int64
	for _, k := range keys {
		v, err := l.c.HGet(context.Background(), k, field).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		n += parse(l, v, err)
	}
	return n
}

// Marked says whether a spread line carries its mark: a place was sent
// to a shard and the tick has not found the line empty since (an auto
// line lets nobody straight through while it stands).
func (l Line) Marked() bool {
	l.tb.Helper()
	return must(l, l.c.HExists(context.Background(), l.Keys().Stats, "lined"))
}

// Books are a one-shard line's counters and its waiting fans, read in one
// MULTI so that no tick falls in between: Joined = Admitted + Waiting +
// Left + Abandoned once every fan is accounted for.
type Books struct {
	Joined, Admitted, Left, Abandoned, Waiting int64
}

// Books reads a one-shard line's books at one instant.
func (l Line) Books() Books {
	l.tb.Helper()
	ctx, k := context.Background(), l.Keys()
	var h *redis.SliceCmd
	var w *redis.IntCmd
	if _, err := l.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		h = p.HMGet(ctx, k.Stats, "joined", "admitted", "left", "abandoned")
		w = p.ZCard(ctx, k.Wait)
		return nil
	}); err != nil {
		l.tb.Fatalf("queuetest: the books of %s: %v", l.event, err)
	}
	v := h.Val()
	return Books{Joined: rdb.Num(v[0]), Admitted: rdb.Num(v[1]), Left: rdb.Num(v[2]), Abandoned: rdb.Num(v[3]), Waiting: w.Val()}
}

// Admissions are a line's admitted counter and its token bucket, read
// together (Line.Admissions).
type Admissions struct {
	Admitted int64     // fans admitted so far
	Tokens   float64   // what the bucket holds
	At       time.Time // the Redis time of the tick that left them (the bucket's ts)
}

// Admissions reads the admitted counter and the bucket in one MULTI (both
// on the event's slot), so that no tick falls in between: two readings
// give the line's own accounts over their span, however late a loaded
// machine read them (RateError).
func (l Line) Admissions() Admissions {
	l.tb.Helper()
	ctx, k := context.Background(), l.Keys()
	var adm *redis.StringCmd
	var b *redis.SliceCmd
	if _, err := l.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		adm = p.HGet(ctx, k.Stats, "admitted")
		b = p.HMGet(ctx, k.Bucket, "tokens", "ts")
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		l.tb.Fatalf("queuetest: the admissions of %s: %v", l.event, err)
	}
	a, _ := adm.Int64()
	v := b.Val()
	tokens, _ := strconv.ParseFloat(str(v[0]), 64)
	ms, _ := strconv.ParseInt(str(v[1]), 10, 64)
	return Admissions{Admitted: a, Tokens: tokens, At: time.UnixMilli(ms)}
}

// RateError says whether the admissions between the readings a and b kept
// to a token bucket of rate per second. Over their span the bucket was
// given rate × (b.At − a.At) tokens, by Redis's clock, and what it did not
// spend it still holds: so the admissions are a.Tokens + given − b.Tokens,
// less what the bucket could not hold. More admissions than that is a token
// spent twice (replicas racing), whatever the machine's load. Fewer, beyond
// lost (what late ticks may have lost: TickWatch.Lost) and a slack of 1%
// (two admissions at least), is admissions lost. It asks the line to
// have had fans waiting and the cap not binding all along. nil when the
// admissions kept to the bucket.
func RateError(a, b Admissions, rate, lost float64) error {
	span := b.At.Sub(a.At).Seconds()
	given := rate * span
	due := a.Tokens + given - b.Tokens
	got := float64(b.Admitted - a.Admitted)
	switch {
	case got > due+1e-6:
		return fmt.Errorf("admitted %d over %.2fs; the bucket (%g/s) gave out %.2f tokens and kept %.2f: %.2f at most, so some token was spent twice",
			b.Admitted-a.Admitted, span, rate, given+a.Tokens, b.Tokens, due)
	case got < due-lost-max(2, 0.01*given):
		return fmt.Errorf("admitted %d over %.2fs (%.2f/s); the bucket (%g/s) gave out %.2f tokens and kept %.2f: %.2f due, %.2f of them lost at most to late ticks",
			b.Admitted-a.Admitted, span, got/span, rate, given+a.Tokens, b.Tokens, due, lost)
	}
	return nil
}

// TickWatch follows when a line's ticks run (its bucket's ts) and what the
// bucket held after each, from a goroutine of its own, to know what the
// bucket may have lost.
type TickWatch struct {
	mu   sync.Mutex
	gaps []tickGap // consecutive ticks seen more than 1 s apart
	stop func()
}

// tickGap is two consecutive ticks seen more than a second apart: the ts
// (ms) of each, and the tokens the bucket held when last seen at the first.
type tickGap struct {
	from, to int64
	tokens   float64
}

// WatchTicks reads the bucket's ts and tokens every 10 ms until Stop.
func (l Line) WatchTicks() *TickWatch {
	w := &TickWatch{}
	quit, done := make(chan struct{}), make(chan struct{})
	key := l.Keys().Bucket
	go func() {
		defer close(done)
		var last int64
		var tokens float64
		for {
			select {
			case <-quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
			v, err := l.c.HMGet(context.Background(), key, "tokens", "ts").Result()
			if err != nil {
				continue
			}
			ts, err := strconv.ParseInt(str(v[1]), 10, 64)
			if err != nil {
				continue
			}
			if last != 0 && ts-last > 1000 {
				w.mu.Lock()
				w.gaps = append(w.gaps, tickGap{from: last, to: ts, tokens: tokens})
				w.mu.Unlock()
			}
			// Between two ticks the tokens only go down (a tick's admissions
			// are taken off after it wrote them), so the last reading at a
			// ts is the most the bucket held when the next tick came.
			last = ts
			tokens, _ = strconv.ParseFloat(str(v[0]), 64)
		}
	}()
	w.stop = func() { close(quit); <-done }
	return w
}

// Stop ends the watch.
func (w *TickWatch) Stop() { w.stop() }

// Lost bounds the tokens of a bucket of rate per second the ticks between
// the readings a and b may have lost. Ticks come every few tens of
// milliseconds; one more than a second after the last may find more than
// the bucket holds (a second's or two's refill, and one token). Two ways:
// a stalled admitter, whose one-second lease lapsed, leaves its budget in
// the bucket (a sharded line's tick takes its admissions off only at its
// accept, which the next tick's newer epoch then fences), so the next
// tick, the lease's second later, finds those tokens on top of a second's
// refill; and a gap of more than two seconds refills past the bucket's
// size. The bound counts, for each such gap, the tokens the bucket held
// at its start but one, and all the refill past its first second. A gap
// the watch saw may hold ticks it missed (the watch stalled too): that can
// only overstate it.
func (w *TickWatch) Lost(a, b Admissions, rate float64) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var lost float64
	for _, g := range w.gaps {
		// The tick that ends a gap is the one that may lose.
		if g.to > a.At.UnixMilli() && g.to <= b.At.UnixMilli() {
			lost += max(0, g.tokens-1) + float64(g.to-g.from-1000)/1000*rate
		}
	}
	return lost
}

// Bucket is the admission token bucket: its tokens, and the Redis time
// (ms) of the tick that left them.
func (l Line) Bucket() (tokens float64, ts int64) {
	l.tb.Helper()
	v := must(l, l.c.HMGet(context.Background(), l.Keys().Bucket, "tokens", "ts"))
	tokens, err := strconv.ParseFloat(str(v[0]), 64)
	if err != nil {
		l.tb.Fatalf("queuetest: the bucket's tokens %v: %v", v[0], err)
	}
	ts, err = strconv.ParseInt(str(v[1]), 10, 64)
	if err != nil {
		l.tb.Fatalf("queuetest: the bucket's ts %v: %v", v[1], err)
	}
	return tokens, ts
}

// Lottery is one field of the event's committed lottery ("" when unset).
func (l Line) Lottery(field string) string {
	l.tb.Helper()
	v, err := l.c.HGet(context.Background(), l.Keys().Lottery, field).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		l.tb.Fatalf("queuetest: %s: %v", l.event, err)
	}
	return v
}

// Nonce is the lottery's committed nonce, as an insider reading Redis (or
// its AOF, or a backup) would: nil before the lottery is committed. The
// seed is derived from it and the draw secret (draw.Secret), which Redis
// never holds.
func (l Line) Nonce() []byte {
	l.tb.Helper()
	nonce, err := hex.DecodeString(l.Lottery("nonce"))
	if err != nil {
		l.tb.Fatalf("queuetest: the lottery's nonce: %v", err)
	}
	return nonce
}

// Has says whether key exists (one of Keys() or Shards()).
func (l Line) Has(key string) bool {
	l.tb.Helper()
	return must(l, l.c.Exists(context.Background(), key)) == 1
}

// Dump is every key of the event's (every key under its hash tag, not its
// shards'), as DUMP serializes it: two dumps are equal when the line is
// unchanged byte for byte.
func (l Line) Dump() map[string]string {
	l.tb.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range must(l, l.c.Keys(ctx, "wr:{"+l.event+"}:*")) {
		out[k] = must(l, l.c.Dump(ctx, k))
	}
	return out
}

// must is a command's value; a failed command fails the test.
func must[T any](l Line, cmd interface{ Result() (T, error) }) T {
	l.tb.Helper()
	v, err := cmd.Result()
	if err != nil {
		l.tb.Fatalf("queuetest: %s: %v", l.event, err)
	}
	return v
}

// score is member's score in the ZSET key, and whether it is there.
func score(l Line, key, member string) (float64, bool) {
	l.tb.Helper()
	s, err := l.c.ZScore(context.Background(), key, member).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, false
	case err != nil:
		l.tb.Fatalf("queuetest: %s: %v", l.event, err)
	}
	return s, true
}

// parse reads the integer a counter holds ("" is 0).
func parse(l Line, v string, err error) int64 {
	l.tb.Helper()
	if err != nil {
		l.tb.Fatalf("queuetest: %s: %v", l.event, err)
	}
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		l.tb.Fatalf("queuetest: %s: counter %q: %v", l.event, v, err)
	}
	return n
}

// str is an HMGET field as a string ("" when the field is missing).
func str(v any) string {
	s, _ := v.(string)
	return s
}
