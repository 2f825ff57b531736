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
	"slices"
	"strconv"
	"strings"
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

// Admitted is how many fans the line has admitted and when, by Redis's
// clock, the tick that let the last of them in ran (the bucket's ts),
// read in one MULTI: a rate worked out from two of them is the line's own,
// however late a loaded machine read them.
func (l Line) Admitted() (admitted int64, at time.Time) {
	l.tb.Helper()
	ctx, k := context.Background(), l.Keys()
	var adm, ts *redis.StringCmd
	if _, err := l.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		adm = p.HGet(ctx, k.Stats, "admitted")
		ts = p.HGet(ctx, k.Bucket, "ts")
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		l.tb.Fatalf("queuetest: the admissions of %s: %v", l.event, err)
	}
	a, _ := adm.Int64()
	ms, _ := ts.Int64()
	return a, time.UnixMilli(ms)
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

// Seed is the lottery's committed seed, as an insider reading Redis (or
// its AOF, or a backup) would: nil before the lottery is committed.
func (l Line) Seed() []byte {
	l.tb.Helper()
	seed, err := hex.DecodeString(l.Lottery("seed"))
	if err != nil {
		l.tb.Fatalf("queuetest: the lottery's seed: %v", err)
	}
	return seed
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
