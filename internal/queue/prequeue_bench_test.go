package queue_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkJoinPrequeue is BenchmarkJoin during a pre-queue: every join
// takes a lottery place (and, since the committed lottery, is recorded
// among the draw's entries once the commitment is there).
func BenchmarkJoinPrequeue(b *testing.B) {
	set := open()
	set.PrequeueOpensAt, set.OpensAt = at(-time.Minute), at(time.Hour)
	benchJoins(b, set)
}

// BenchmarkDraw times the draw of a pre-queue of 100,000 fans (their
// places written straight into Redis as the join script writes them): the
// first tick after opens_at, which ranks them all and gives each its
// draw's score before admitting anyone.
func BenchmarkDraw(b *testing.B) {
	const n = 100_000
	for range b.N {
		b.StopTimer()
		e := setup(b)
		ctx := context.Background()
		set := open()
		set.PrequeueOpensAt, set.OpensAt = at(-time.Minute), at(2*time.Second)
		join(b, e.store, set) // commits the lottery
		for from := 1; from < n; from += 1000 {
			_, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i := from; i < min(from+1000, n); i++ {
					id := strconv.FormatInt(int64(i+1), 36) + ".AAAAAAAAAAAAAAAAAAAAAA" + strconv.Itoa(i)
					p.ZAdd(ctx, "wr:{"+event+"}:wait", redis.Z{Score: float64(-i - 1), Member: id})
					p.SAdd(ctx, "wr:{"+event+"}:lottery:entries", id)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(time.Until(*set.OpensAt))
		set.MaxActive = 0
		b.StartTimer()
		start := time.Now()
		tick(b, e.store, set)
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/draw")
		if l, err := e.store.Lottery(ctx, event, set); err != nil || !l.Drawn || l.Entries != n {
			b.Fatalf("after the draw: %+v %v", l, err)
		}
	}
}
