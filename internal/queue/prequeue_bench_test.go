package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// BenchmarkJoinPrequeue is BenchmarkJoin during a pre-queue: every join
// takes a lottery place (and, since the committed lottery, is recorded
// among the draw's entries once the commitment is there).
func BenchmarkJoinPrequeue(b *testing.B) {
	set := prequeue(open())
	benchJoins(b, set)
}

// BenchmarkDraw times the draw of a pre-queue of 1,000,000 fans, one shard
// and spread over four, on one redis-server (their places written straight
// into Redis as the join scripts write them): from opens_at to the first
// fans let in, which the contract wants within 5 s on a 2-core machine.
// The ticks run as the admitter runs them (its round wakes at opens_at);
// ms/first-admitted is opens_at → the first tick that let anyone in, and
// MB-heap-peak the largest Go heap sampled meanwhile (what the draw adds to
// an admitter).
func BenchmarkDraw(b *testing.B) {
	for _, shards := range []int{1, 4} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			for range b.N {
				benchDraw(b, 1_000_000, shards)
			}
		})
	}
}

func benchDraw(b *testing.B, n, shards int) {
	b.StopTimer()
	e := setup(b)
	ctx := context.Background()
	set := prequeue(open())
	set.Shards = shards
	join(b, e.store, set) // commits the lottery, fixes the layout
	fillPrequeue(b, e.rdb, n, shards)
	opens := time.Now().Add(time.Second)
	set.OpensAt = &opens
	tick(b, e.store, set) // a tick before opening: the bucket's clock starts
	time.Sleep(time.Until(opens))

	heapPeak := testenv.HeapPeak()
	b.StartTimer()
	for {
		if r := tick(b, e.store, set); r.Admitted > 0 {
			break
		}
		if time.Since(opens) > time.Minute {
			b.Fatal("nobody let in a minute after opening")
		}
	}
	b.StopTimer()
	took := time.Since(opens)
	peak := heapPeak()
	b.ReportMetric(float64(took.Milliseconds()), "ms/first-admitted")
	b.ReportMetric(float64(peak)/(1<<20), "MB-heap-peak")
	if l, err := e.store.Lottery(ctx, event, set); err != nil || !l.Drawn || l.Entries != int64(n) {
		b.Fatalf("after the draw: %+v %v", l, err)
	}
}

// fillPrequeue writes n-1 more pre-queue places (sequence numbers 2…n) as
// the join scripts write them: in line at a random score, among the
// entries, with an abandon deadline far off.
func fillPrequeue(b testing.TB, rdb redis.UniversalClient, n, shards int) {
	ctx := context.Background()
	line := queuetest.Of(b, rdb, event).Spread(shards)
	k := line.Keys()
	// placeOf is where the join scripts put sequence number seq: its wait
	// and seen keys, and its slot in seen.
	placeOf := func(seq int) (wait, seen string, slot int) {
		if shards <= 1 {
			return k.Wait, k.Seen, seq
		}
		sk := line.Shards()[seq%shards]
		return sk.Wait, sk.Seen, seq / shards
	}
	deadline := time.Now().Add(24 * time.Hour).Unix()
	const batch = 5000
	for from := 2; from <= n; from += batch {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			ids := make([]any, 0, batch)
			for seq := from; seq < min(from+batch, n+1); seq++ {
				id := strconv.FormatInt(int64(seq), 36) + "." + fmt.Sprintf("%022d", seq)
				wait, seen, slot := placeOf(seq)
				p.ZAdd(ctx, wait, redis.Z{Score: float64(-seq), Member: id})
				p.Do(ctx, "BITFIELD", seen, "SET", "u32", "#"+strconv.Itoa(slot), deadline)
				ids = append(ids, id)
			}
			p.RPush(ctx, k.Entries, ids...)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := rdb.HSet(ctx, k.Stats, "seq", n).Err(); err != nil {
		b.Fatal(err)
	}
}
