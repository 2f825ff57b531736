package e2e_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
)

// sampler reads how many fans are active every few milliseconds, all
// along a sale, and keeps the most it saw: the cap must hold at every
// instant, not only at the end. A read that fails (a master down, a slow
// machine) is counted and skipped.
type sampler struct {
	max, samples, errs atomic.Int64
	// maxWhile is the most seen while the flag given to startSampler held.
	maxWhile atomic.Int64
	stop     func()
	done     chan struct{}
}

// startSampler samples read every `every` until close; while, when not
// nil, marks the samples that count towards maxWhile.
func startSampler(every time.Duration, read func(context.Context) (int64, error), while *atomic.Bool) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	sm := &sampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(sm.done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			n, err := read(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				sm.errs.Add(1)
			default:
				sm.samples.Add(1)
				raise(&sm.max, n)
				if while != nil && while.Load() {
					raise(&sm.maxWhile, n)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return sm
}

func (sm *sampler) close() { sm.stop(); <-sm.done }

// liveActive reads the contract's count of event's active fans: ZCOUNT of
// the active set from now to +inf, each read bounded by within (0: none).
func liveActive(c redis.UniversalClient, event string, within time.Duration) func(context.Context) (int64, error) {
	key := rdb.KeysOf(event).Active
	return func(ctx context.Context) (int64, error) {
		if within > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, within)
			defer cancel()
		}
		return c.ZCount(ctx, key, strconv.FormatInt(time.Now().UnixMilli(), 10), "+inf").Result()
	}
}

// raise makes m at least v.
func raise(m *atomic.Int64, v int64) {
	for cur := m.Load(); v > cur && !m.CompareAndSwap(cur, v); cur = m.Load() {
	}
}
