package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// TestMemoryPerWaitingFan joins 100k fans and reads INFO memory: the target
// is at most 150 bytes of Redis per waiting fan (docs/QUEUE.md). It measures
// Redis, not the client's goroutines: it runs without the race detector
// (make test runs it with the allocation budgets), where its 100k joins
// take a tenth of the time or less.
func TestMemoryPerWaitingFan(t *testing.T) {
	if queue.RaceEnabled {
		t.Skip("Redis's memory per fan is measured without -race (make test runs it so)")
	}
	t.Parallel()
	e := setup(t)
	const n = 100_000
	join(t, e.store, open()) // the event's fixed keys exist before we measure
	before := testenv.RedisInfoInt(t, e.rdb, "memory", "used_memory")
	joinMany(t, e.store, open(), n)
	per := float64(testenv.RedisInfoInt(t, e.rdb, "memory", "used_memory")-before) / n
	t.Logf("Redis memory per waiting fan: %.1f bytes (%d fans)", per, n)
	if per > 150 {
		t.Errorf("%.1f bytes per waiting fan; want ≤ 150", per)
	}
}

// fill puts n placeholder fans in the line (ids in the ticket-id shape), far
// faster than joining them one by one.
func fill(b testing.TB, rdb redis.UniversalClient, n int) {
	b.Helper()
	const chunk = 50_000
	k := queuetest.Of(b, rdb, event).Keys()
	for done := 0; done < n; done += chunk {
		c := min(chunk, n-done)
		err := rdb.Eval(context.Background(), `
for i = 1, tonumber(ARGV[2]) do
  local seq = tonumber(ARGV[1]) + i
  redis.call('ZADD', KEYS[1], seq, string.format('%x', seq) .. '.AAAAAAAAAAAAAAAAAAAAAA')
end
redis.call('HINCRBY', KEYS[2], 'seq', ARGV[2])
return 1`, []string{k.Wait, k.Stats}, done, c).Err()
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJoin(b *testing.B) { benchJoins(b, open()) }

// benchJoins joins event under set from 8×GOMAXPROCS goroutines, and
// reports Redis's main-thread CPU per join (redis-cpu-µs/op: the joins of
// a moment share a script call, as at the gateway).
func benchJoins(b *testing.B, set line.Settings) {
	e := setup(b)
	benchRedis(b, e, func(int) error {
		_, err := e.store.Join(context.Background(), event, set)
		return err
	})
}

// BenchmarkJoinProved is BenchmarkJoin with a proof of work spent in the
// same script (one SADD more), each join its own proof.
func BenchmarkJoinProved(b *testing.B) {
	e := setup(b)
	set := open()
	exp := time.Now().Add(2 * time.Minute)
	var n atomic.Int64
	benchRedis(b, e, func(int) error {
		p := line.Proof{ID: strconv.FormatInt(n.Add(1), 36), ExpiresAt: exp}
		_, err := e.store.JoinProved(context.Background(), event, set, p)
		return err
	})
}

// BenchmarkStatus polls from 8×GOMAXPROCS goroutines, the line this long,
// and reports Redis's main-thread CPU per poll.
func BenchmarkStatus(b *testing.B) {
	for _, waiting := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
			e := setup(b)
			set := open()
			fill(b, e.rdb, waiting)
			tickets := make([]line.Ticket, 64)
			for i := range tickets {
				tickets[i] = join(b, e.store, set).Ticket
			}
			benchRedis(b, e, func(i int) error {
				_, err := e.store.Status(context.Background(), event, tickets[i%len(tickets)], set)
				return err
			})
		})
	}
}
