package testenv_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

func TestRedisAndPostgresAreRealAndPrivate(t *testing.T) {
	_, rdb := testenv.Redis(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("redis set: %v", err)
	}
	if got := rdb.DBSize(ctx).Val(); got != 1 {
		t.Fatalf("private redis has %d keys; want 1", got)
	}
	migrate := func(ctx context.Context, url string) error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "CREATE TABLE marker (id int); INSERT INTO marker VALUES (1)")
		return err
	}
	a, _ := testenv.Pool(t, "testenv", pgxpool.New, migrate)
	b, _ := testenv.Pool(t, "testenv", pgxpool.New, migrate)
	if _, err := a.Exec(ctx, "INSERT INTO marker VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	var na, nb int
	a.QueryRow(ctx, "SELECT count(*) FROM marker").Scan(&na)
	b.QueryRow(ctx, "SELECT count(*) FROM marker").Scan(&nb)
	if na != 2 || nb != 1 {
		t.Fatalf("rows: a=%d b=%d; want 2 and 1 (databases must be separate clones)", na, nb)
	}
}

// A pooled server comes to each test empty (no keys, scripts, functions,
// statistics), is never lent to two running tests at once, and a server a
// test left changed (stopped, reconfigured, a client still connected) is
// not lent again.
func TestPooledRedisIsEmptyAndPrivate(t *testing.T) {
	ctx := context.Background()
	var first string
	var leftOpen []*redis.Client
	t.Cleanup(func() {
		for _, c := range leftOpen {
			c.Close()
		}
	})
	t.Run("dirty it", func(t *testing.T) {
		srv, rdb := testenv.Redis(t)
		first = srv.Addr
		must(t, rdb.Set(ctx, "k", "v", 0).Err())
		must(t, rdb.ScriptLoad(ctx, "return 1").Err())
		must(t, rdb.FunctionLoad(ctx, "#!lua name=lib\nredis.register_function('f', function() return 1 end)").Err())
		other, _ := testenv.Redis(t)
		if other.Addr == srv.Addr {
			t.Fatalf("two leases of one test share %s", srv.Addr)
		}
	})
	t.Run("next test", func(t *testing.T) {
		srv, rdb := testenv.Redis(t)
		if srv.Addr != first {
			t.Logf("got %s, not the first test's %s", srv.Addr, first)
		}
		if n := rdb.DBSize(ctx).Val(); n != 0 {
			t.Errorf("%d keys left; want 0", n)
		}
		if ok := rdb.ScriptExists(ctx, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db").Val(); len(ok) != 1 || ok[0] {
			t.Errorf("script cache %v; want empty", ok)
		}
		if fns := rdb.FunctionList(ctx, redis.FunctionListQuery{}).Val(); len(fns) != 0 {
			t.Errorf("functions %v; want none", fns)
		}
		if n := testenv.RedisInfoInt(t, rdb, "stats", "total_commands_processed"); n > 50 {
			t.Errorf("%d commands counted; want statistics reset", n)
		}
	})
	for name, spoil := range map[string]func(t *testing.T, srv *localsvc.Redis, rdb *redis.Client){
		"killed": func(t *testing.T, srv *localsvc.Redis, _ *redis.Client) { srv.Kill() },
		"reconfigured": func(t *testing.T, _ *localsvc.Redis, rdb *redis.Client) {
			must(t, rdb.ConfigSet(ctx, "maxmemory", "1mb").Err())
		},
		"left connected": func(t *testing.T, srv *localsvc.Redis, _ *redis.Client) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr})
			must(t, c.Ping(ctx).Err())
			leftOpen = append(leftOpen, c) // closed after the pool looked
		},
	} {
		t.Run(name, func(t *testing.T) {
			var spoilt string
			t.Run("spoil", func(t *testing.T) {
				srv, rdb := testenv.Redis(t)
				spoilt = srv.Addr
				spoil(t, srv, rdb)
			})
			for range 3 {
				srv, rdb := testenv.Redis(t)
				if srv.Addr == spoilt {
					t.Fatalf("the server left %s was lent again", name)
				}
				if mm := rdb.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]; mm != "0" {
					t.Errorf("maxmemory %s; want the default", mm)
				}
			}
		})
	}
}

// A pooled cluster comes to the next test empty, and one whose layout the
// test changed (a master killed) is not lent again.
func TestPooledClusterIsEmptyAndWhole(t *testing.T) {
	ctx := context.Background()
	var seeds string
	t.Run("dirty it", func(t *testing.T) {
		c, rdb := testenv.Cluster(t)
		seeds = c.Seeds()
		for i := range 100 {
			must(t, rdb.Set(ctx, fmt.Sprint("k", i), "v", 0).Err())
		}
	})
	t.Run("next test", func(t *testing.T) {
		c, rdb := testenv.Cluster(t)
		if c.Seeds() != seeds {
			t.Logf("got %s, not the first test's %s", c.Seeds(), seeds)
		}
		must(t, rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			if n := m.DBSize(ctx).Val(); n != 0 {
				t.Errorf("%s holds %d keys; want 0", m.Options().Addr, n)
			}
			return nil
		}))
		c.Masters[1].Kill()
	})
	t.Run("after a master died", func(t *testing.T) {
		c, rdb := testenv.Cluster(t)
		if c.Seeds() == seeds {
			t.Fatal("the cluster whose master was killed was lent again")
		}
		must(t, rdb.Set(ctx, "k", "v", 0).Err())
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
