package rdb_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// counted is a library whose fragment reads the running script's KEYS and
// ARGV, as an EVAL script's helpers read its globals.
var (
	counted = rdb.NewLibrary("function_test", `
local function bump(by) return redis.call('INCRBY', KEYS[1], by or ARGV[1]) end
local STEP = 1
`)
	bumpScript  = counted.Script("bump", `return bump()`)
	stepScript  = counted.Script("step", `return bump(STEP)`)
	echoScript  = counted.Script("echo", `return {KEYS[1], ARGV[1], #ARGV}`)
	otherScript = rdb.NewLibrary("function_test_other").Script("get", `return redis.call('GET', KEYS[1])`)
)

// A Redis that lost our functions (FUNCTION FLUSH, a restart that kept
// nothing) gets the library again at the next call, which is answered as
// if nothing had happened; the library is there once, under its versioned
// name.
func TestFunctionsLoadedAgainAfterAFlushAndARestart(t *testing.T) {
	dir, err := os.MkdirTemp("", "wr-fn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv := testenv.RedisServer(t, localsvc.RedisOptions{Dir: dir})
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rc.Close() })
	c := rdb.New(rc)
	ctx := context.Background()

	bump := func(want int64) {
		t.Helper()
		n, err := c.Run(ctx, rdb.Call{Script: bumpScript, Keys: []string{"n"}, Args: []any{2}}).Int64()
		if err != nil || n != want {
			t.Fatalf("bump = %d, %v; want %d", n, err, want)
		}
	}
	bump(2) // loaded at the first call: New does not load
	if got := libraries(t, rc); !got[counted.Name()] {
		t.Fatalf("FUNCTION LIST = %v; want %s", got, counted.Name())
	}
	bump(4)
	if err := rc.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	bump(6)
	if n, err := c.Run(ctx, rdb.Call{Script: stepScript, Keys: []string{"n"}}).Int64(); err != nil || n != 7 {
		t.Fatalf("step = %d, %v; want 7", n, err)
	}

	// A restart keeps nothing here (no AOF, no RDB): data and functions
	// are gone. The first call may meet the closed connection; the next
	// finds the function missing and loads it.
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Run(ctx, rdb.Call{Script: bumpScript, Keys: []string{"n"}, Args: []any{5}}).Int64()
		if err == nil {
			if n != 5 {
				t.Fatalf("bump after the restart = %d; want 5 (the data went with it)", n)
			}
			break
		}
		if strings.Contains(err.Error(), "Function not found") || time.Now().After(deadline) {
			t.Fatalf("bump after the restart: %v", err)
		}
	}
	v, err := c.Run(ctx, rdb.Call{Script: echoScript, Keys: []string{"k"}, Args: []any{"a", "b"}}).Slice()
	if err != nil || len(v) != 3 || v[0] != "k" || v[1] != "a" || v[2] != int64(2) {
		t.Fatalf("echo = %v, %v; want [k a 2]", v, err)
	}
}

// Load puts every library of the binary on every master of a cluster; a
// call on any slot finds its function, and after a FUNCTION FLUSH of every
// master the calls load it again where they go.
func TestFunctionsOnEveryClusterMaster(t *testing.T) {
	_, cc := testenv.Cluster(t)
	c := rdb.New(cc)
	ctx := context.Background()
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	var masters atomic.Int32 // ForEachMaster calls each master's in its own goroutine
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		masters.Add(1)
		if got := libraries(t, node); !got[counted.Name()] || !got[otherScript.Library().Name()] {
			t.Errorf("master %s: FUNCTION LIST = %v; want %s and %s", node.Options().Addr, got, counted.Name(), otherScript.Library().Name())
		}
		return nil
	})
	if err != nil || masters.Load() != 3 {
		t.Fatalf("%d masters, %v; want 3", masters.Load(), err)
	}
	calls := func(round int) {
		t.Helper()
		var ps []*rdb.Pending
		for i := range 30 { // keys on every master, in one pipeline
			ps = append(ps, c.Start(ctx, rdb.Call{Script: bumpScript, Keys: []string{"{k" + string(rune('a'+i)) + "}"}, Args: []any{1}}))
		}
		for i, p := range ps {
			if n, err := p.Wait().Int64(); err != nil || n != int64(round) {
				t.Fatalf("round %d, key %d: %d, %v; want %d", round, i, n, err, round)
			}
		}
	}
	calls(1)
	err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		return node.FunctionFlush(ctx).Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	calls(2)
	if _, err := c.Run(ctx, rdb.Call{Script: otherScript, Keys: []string{"{ka}"}}).Result(); err != nil {
		t.Fatalf("the other library after the flush: %v", err)
	}
}

// A told call waits for its replica (durable.go) and loads a library its
// master lacks there too.
func TestFunctionsLoadedAgainForDurableCalls(t *testing.T) {
	_, cc := testenv.ClusterWith(t, 1)
	c := rdb.New(cc)
	c.WaitReplicas(1)
	ctx := context.Background()
	for round := int64(1); round <= 2; round++ {
		n, err := c.Run(ctx, rdb.Call{Script: bumpScript, Keys: []string{"{d}"}, Args: []any{1}, Told: true}).Int64()
		if err != nil || n != round {
			t.Fatalf("round %d: %d, %v; want %d", round, n, err, round)
		}
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return node.FunctionFlush(ctx).Err()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Two fragments of one library defining one name is a bug found at start.
func TestLibraryRefusesTwoDefinitionsOfAName(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"clock"`) {
			t.Errorf("recover() = %v; want a panic naming clock", r)
		}
	}()
	rdb.NewLibrary("function_test_twice", rdb.Prelude, "local function clock() return 1 end")
}

// libraries is the names of the libraries a node holds.
func libraries(t testing.TB, c redis.Cmdable) map[string]bool {
	t.Helper()
	libs, err := c.FunctionList(context.Background(), redis.FunctionListQuery{}).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range libs {
		out[l.Name] = true
	}
	return out
}
