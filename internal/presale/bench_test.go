package presale_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/presale/presaletest"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// BenchmarkSelection times the selection of 1,000,000 registrations (the
// contract wants it within 10 s of the close on this machine): the
// registrations written straight into Redis as the registration script
// writes them, then the admitter's step from the close to the selection
// published (ranks, the public list, the private holders). MB-heap-peak is
// the largest Go heap sampled meanwhile (what it adds to an admitter).
func BenchmarkSelection(b *testing.B) {
	for range b.N {
		benchSelection(b, 1_000_000)
	}
}

func benchSelection(b *testing.B, n int) {
	b.StopTimer()
	_, c := testenv.Redis(b)
	ctx := context.Background()
	line := queue.NewStore(c, secret)
	pre := presale.New(rdb.New(c), line, secret, "bench").WithDrawSecret(drawSecret)
	p := presale.Plan{RegistrationOpensAt: time.Now().Add(-time.Hour), RegistrationClosesAt: time.Now().Add(time.Hour), Selected: 20_000,
		GroupSize: 5_000, Window: 30 * time.Minute, OpensAt: time.Now().Add(2 * time.Hour)}
	if err := pre.Step(ctx, "tour", p); err != nil { // commits
		b.Fatal(err)
	}
	if err := presaletest.Register(ctx, c, "tour", n); err != nil {
		b.Fatal(err)
	}
	// The close, brought forward to now (as an operator's reload would).
	closes := time.Now().Add(500 * time.Millisecond)
	p.RegistrationClosesAt = closes
	time.Sleep(time.Until(closes))

	heapPeak := testenv.HeapPeak()
	b.StartTimer()
	if err := pre.Step(ctx, "tour", p); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	took := time.Since(closes)
	peak := heapPeak()
	sel, err := pre.Selection(ctx, "tour", p)
	if err != nil || !sel.Drawn || sel.Entries != int64(n) {
		b.Fatalf("after the step: %+v %v", sel, err)
	}
	b.ReportMetric(float64(took.Milliseconds()), "ms/close-to-selected")
	b.ReportMetric(float64(peak)/(1<<20), "MB-heap-peak")
}

// BenchmarkRegisterVsJoin takes registrations and joins side by side, on
// one redis-server, from as many goroutines as the benchmark runs in
// parallel: the contract wants registrations taken at a rate near the
// join's. Both go through the same pipelining client; Redis's own CPU per
// operation is reported as redis-µs/op.
func BenchmarkRegisterVsJoin(b *testing.B) {
	b.Run("register", func(b *testing.B) {
		_, c := testenv.Redis(b)
		store := queue.NewStore(c, secret)
		pre := presale.New(rdb.New(c), store, secret, "bench").WithDrawSecret(drawSecret)
		p := presale.Plan{RegistrationOpensAt: time.Now().Add(-time.Hour), RegistrationClosesAt: time.Now().Add(time.Hour)}
		var n atomic.Int64
		benchParallel(b, c, func(ctx context.Context) error {
			_, _, err := pre.Register(ctx, "tour", p, "account-"+strconv.FormatInt(n.Add(1), 10))
			return err
		})
	})
	b.Run("join", func(b *testing.B) {
		_, c := testenv.Redis(b)
		store := queue.NewStore(c, secret)
		set := line.Settings{Mode: line.ModeQueue, AdmitPerSecond: 100, MaxActive: 100, AccessTTL: time.Minute, AbandonAfter: time.Minute}
		var n atomic.Int64
		benchParallel(b, c, func(ctx context.Context) error {
			_, err := store.JoinWith(ctx, "tour", set, line.JoinOptions{Account: "account-" + strconv.FormatInt(n.Add(1), 10)})
			return err
		})
	})
}

func benchParallel(b *testing.B, c *redis.Client, op func(context.Context) error) {
	ctx := context.Background()
	if err := op(ctx); err != nil { // scripts loaded
		b.Fatal(err)
	}
	before := testenv.RedisCPU(b, c)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric((testenv.RedisCPU(b, c)-before)*1e6/float64(b.N), "redis-µs/op")
}
