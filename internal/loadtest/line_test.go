package loadtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// placed is a ticket and the position it was given at join.
type placed struct {
	Pos    int64
	Ticket string
}

// lineStore is a queue.Store on the stack's Redis, with the stack's ticket
// secret (so the gateway accepts its tickets), on a client with room for
// many concurrent scripts.
func lineStore(tb testing.TB, s *stack.Stack) (*queue.Store, *redis.Client) {
	tb.Helper()
	cfg, err := config.Load(s.ConfigPath)
	if err != nil {
		tb.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Redis.Addr, PoolSize: 64})
	tb.Cleanup(func() { rdb.Close() })
	return queue.NewStore(rdb, []byte(cfg.Auth.TicketSecret)), rdb
}

// settings waits for the admitter to publish the event's settings.
func settings(ctx context.Context, tb testing.TB, st *queue.Store, event string) line.Settings {
	tb.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		set, err := st.Settings(ctx, event)
		if err == nil {
			return set
		}
		if !errors.Is(err, line.ErrNoSettings) || time.Now().After(deadline) {
			tb.Fatalf("settings of %s: %v", event, err)
		}
	}
}

// fillLine joins n fans to event straight through queue.Store.Join (the
// same script the gateway runs, without HTTP), from 64 goroutines, and
// returns the tickets whose position keep selects, in position order, and
// how long it took.
func fillLine(ctx context.Context, tb testing.TB, s *stack.Stack, event string, n int, keep func(pos int64) bool) ([]placed, time.Duration) {
	tb.Helper()
	st, _ := lineStore(tb, s)
	set := settings(ctx, tb, st, event)
	const workers = 64
	var (
		next  atomic.Int64
		mu    sync.Mutex
		kept  []placed
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []placed
			for next.Add(1) <= int64(n) {
				res, err := st.Join(ctx, event, set)
				if err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
				if keep(res.Position.Position) {
					mine = append(mine, placed{res.Position.Position, res.Ticket.String()})
				}
			}
			mu.Lock()
			kept = append(kept, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if first != nil {
		tb.Fatalf("fill line: %v", first)
	}
	slices.SortFunc(kept, func(a, b placed) int { return int(a.Pos - b.Pos) })
	return kept, took
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
