package rdb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

var spinScript = rdb.NewLibrary("busy_test").Script("spin", `
local t = redis.call('TIME')
local until_ = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[1])
repeat
  t = redis.call('TIME')
until tonumber(t[1]) * 1000000 + tonumber(t[2]) >= until_
return 1`)

// A Redis busy running a script past busy-reply-threshold answers every
// other client BUSY until the script ends or is killed: it cannot serve now,
// as while it loads its data, so the caller is told ErrUnavailable (503,
// try again) and not an error of its own (500).
func TestBusyRedisIsUnavailable(t *testing.T) {
	_, rc := testenv.Redis(t)
	ctx := context.Background()
	was, err := rc.ConfigGet(ctx, "busy-reply-threshold").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "busy-reply-threshold", "50").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.ConfigSet(context.Background(), "busy-reply-threshold", was["busy-reply-threshold"]) })
	c := rdb.New(rc)
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}

	spun := make(chan error, 1)
	go func() {
		spun <- c.Run(ctx, rdb.Call{Script: spinScript, Keys: []string{"spin"}, Args: []any{int64(30 * time.Second / time.Microsecond)}}).Err()
	}()
	t.Cleanup(func() {
		// The spinning script writes nothing: FUNCTION KILL ends it.
		for {
			if err := rc.Do(context.Background(), "FUNCTION", "KILL").Err(); err != nil && strings.HasPrefix(err.Error(), "NOTBUSY") {
				break
			}
			select {
			case <-spun:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		<-spun
	})

	// Redis answers BUSY once the script has run past the threshold.
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := c.Get(ctx, "k").Err()
		if err != nil && strings.HasPrefix(err.Error(), "BUSY") {
			if got := rdb.Interpret("get", err); !errors.Is(got, rdb.ErrUnavailable) {
				t.Fatalf("a BUSY Redis: %v; want it to wrap ErrUnavailable", got)
			}
			return
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("get while the script spins: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("Redis never answered BUSY while the script spun")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
