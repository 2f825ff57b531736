package queue_test

import (
	"context"
	"testing"
	"time"
)

// BenchmarkJoinPrequeue is BenchmarkJoin during a pre-queue: every join
// takes a lottery place (and, since the committed lottery, is recorded
// among the draw's entries once the commitment is there).
func BenchmarkJoinPrequeue(b *testing.B) {
	e := setup(b)
	set := open()
	set.PrequeueOpensAt, set.OpensAt = at(-time.Minute), at(time.Hour)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.store.Join(context.Background(), event, set); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
