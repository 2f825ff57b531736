package rdb_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// incr counts its runs.
var incr = rdb.NewLibrary("batch_test").Script("incr", `return redis.call('INCR', KEYS[1])`)

// A call whose caller gave up before it could be sent is never sent: its
// caller answered 503 already, and a join run after that would make a place
// nobody was told of (an orphan holding an admission until its abandon
// deadline). Redis stalls (SIGSTOP): the first calls go out on the senders'
// connections and wait there (those run once Redis is back: the bytes are
// on their way); the calls after them wait for a sender, and their callers
// give up. Once Redis answers again, only the calls that were sent have
// run.
func TestCallsGivenUpAreNotSent(t *testing.T) {
	rs, rc := testenv.Redis(t)
	c := rdb.New(rc)
	ctx := context.Background()
	if err := c.Run(ctx, rdb.Call{Script: incr, Keys: []string{"runs"}}).Err(); err != nil {
		t.Fatal(err)
	}
	resume := testenv.PauseRedis(t, rs)
	const calls = 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		gaveUp   int
		answered int
	)
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			err := c.Run(cctx, rdb.Call{Script: incr, Keys: []string{"runs"}}).Err()
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, context.DeadlineExceeded) {
				gaveUp++
			} else {
				answered++
			}
		}()
		// One at a time: each sender takes one call, the rest wait.
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	if gaveUp != calls {
		t.Fatalf("%d of %d callers gave up, %d answered; want every one to give up while Redis is stopped", gaveUp, calls, answered)
	}
	time.Sleep(200 * time.Millisecond)
	resume()
	// The calls that were sent before Redis stopped answering run now.
	time.Sleep(500 * time.Millisecond)
	runs, err := rc.Get(ctx, "runs").Int()
	if err != nil {
		t.Fatal(err)
	}
	sent := runs - 1
	t.Logf("%d of %d calls given up ran once Redis was back (sent before it stalled)", sent, calls)
	if sent > 8 {
		t.Errorf("%d of the %d calls whose callers gave up ran once Redis was back; want only those the senders had sent (at most a few)", sent, calls)
	}
}
