package queue_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// benchRedis runs op from 8×GOMAXPROCS goroutines (i counts a goroutine's
// calls) and reports Redis's main-thread CPU per operation
// (redis-cpu-µs/op).
func benchRedis(b *testing.B, e env, op func(i int) error) {
	b.SetParallelism(8)
	cpu0 := mainThreadCPU(b, e.rdb)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 1; pb.Next(); i++ {
			if err := op(i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric((mainThreadCPU(b, e.rdb)-cpu0)*1e6/float64(b.N), "redis-cpu-µs/op")
}

// mainThreadCPU is the CPU time (seconds) Redis's main thread has used: the
// thread that runs every command, so its time per operation is what bounds
// one shard (one event) on one core, whatever else shares the machine.
func mainThreadCPU(tb testing.TB, rdb redis.UniversalClient) float64 {
	return testenv.RedisCPU(tb, rdb, "used_cpu_sys_main_thread", "used_cpu_user_main_thread")
}

// BenchmarkShardCost reports the Redis main-thread CPU per queue operation
// (redis-cpu-µs/op), network handling included: 1e6 divided by it is the
// ceiling of operations per second of one event, which lives on one slot,
// so one Redis core (docs/SCALING.md). The line holds 100,000 fans.
func BenchmarkShardCost(b *testing.B) {
	set := open()
	cases := []struct {
		name string
		op   func(e env, fans []line.JoinResult, i int) error
	}{
		{"join", func(e env, _ []line.JoinResult, _ int) error {
			_, err := e.store.Join(context.Background(), event, set)
			return err
		}},
		{"status", func(e env, fans []line.JoinResult, i int) error {
			_, err := e.store.Status(context.Background(), event, fans[i%len(fans)].Ticket, set)
			return err
		}},
		{"active", func(e env, fans []line.JoinResult, i int) error {
			_, err := e.store.Active(context.Background(), event, fans[i%len(fans)].ID)
			return err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			e := setup(b)
			fill(b, e.rdb, 100_000)
			var fans []line.JoinResult
			for range 64 {
				fans = append(fans, join(b, e.store, set))
			}
			benchRedis(b, e, func(i int) error { return c.op(e, fans, i) })
		})
	}
}
