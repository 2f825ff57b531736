package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/platform/localsvc"
	"github.com/waitroom/waitroom/internal/platform/testenv"
	"github.com/waitroom/waitroom/internal/queue"
)

func usedMemory(t testing.TB, rdb *redis.Client) int64 {
	t.Helper()
	info := rdb.Info(context.Background(), "memory").Val()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// TestMemoryPerWaitingFan joins 100k fans and reads INFO memory: the target
// is at most 150 bytes of Redis per waiting fan (docs/QUEUE.md).
func TestMemoryPerWaitingFan(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const n = 100_000
	join(t, e.store, open()) // the event's fixed keys exist before we measure
	before := usedMemory(t, e.rdb)
	joinMany(t, e.store, open(), n)
	per := float64(usedMemory(t, e.rdb)-before) / n
	t.Logf("Redis memory per waiting fan: %.1f bytes (%d fans)", per, n)
	if per > 150 {
		t.Errorf("%.1f bytes per waiting fan; want ≤ 150", per)
	}
}

// TestOnRedisCluster runs the line on a Redis Cluster client: every script
// touches one slot (no CROSSSLOT), so the same code runs on a cluster.
func TestOnRedisCluster(t *testing.T) {
	srv := testenv.RedisServer(t, localsvc.RedisOptions{Cluster: true})
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	if err := admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("addslots: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(admin.ClusterInfo(ctx).Val(), "cluster_state:ok"); {
		if time.Now().After(deadline) {
			t.Fatal("cluster never became ok")
		}
		time.Sleep(50 * time.Millisecond)
	}
	rdb, err := queue.NewClient(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("NewClient(%q) = %T; want a cluster client", srv.Addr, rdb)
	}
	s := queue.NewStore(rdb, secret)
	set := open()
	set.AdmitPerSecond = 1000
	for i, ev := range []string{"premiere", "live-20", "x"} {
		t.Run(ev, func(t *testing.T) {
			steps := []struct {
				name string
				do   func() error
			}{
				{"publish", func() error { return s.PublishSettings(ctx, ev, set) }},
				{"settings", func() error { _, err := s.Settings(ctx, ev); return err }},
				{"join+status+tick+leave", func() error {
					r, err := s.Join(ctx, ev, "", set)
					if err != nil {
						return err
					}
					if _, err := s.Status(ctx, ev, r.Ticket, set); err != nil {
						return err
					}
					if _, err := s.Tick(ctx, ev, set); err != nil {
						return err
					}
					if _, err := s.Counts(ctx, ev); err != nil {
						return err
					}
					if _, _, err := s.Extend(ctx, ev, r.ID, time.Now()); err != nil {
						return err
					}
					return s.Leave(ctx, ev, r.Ticket)
				}},
			}
			for _, st := range steps {
				if err := st.do(); err != nil {
					t.Errorf("event %d %s: %v", i, st.name, err)
				}
			}
		})
	}
}

func TestNewClient(t *testing.T) {
	cases := []struct {
		url     string
		cluster bool
		bad     bool
	}{
		{"redis://127.0.0.1:6379/0", false, false},
		{"rediss://user:pw@example.com:6380/2", false, false},
		{"10.0.0.1:7000,10.0.0.2:7000, 10.0.0.3:7000", true, false},
		{"10.0.0.1:7000", true, false},
		{"", false, true},
		{" , ", false, true},
		{"redis://host:notaport", false, true},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			rdb, err := queue.NewClient(c.url)
			if (err != nil) != c.bad {
				t.Fatalf("NewClient(%q) error %v; want error: %v", c.url, err, c.bad)
			}
			if err != nil {
				return
			}
			defer rdb.Close()
			_, isCluster := rdb.(*redis.ClusterClient)
			if isCluster != c.cluster {
				t.Errorf("NewClient(%q) = %T; want cluster: %v", c.url, rdb, c.cluster)
			}
		})
	}
}

// fill puts n placeholder fans in the line (ids in the ticket-id shape), far
// faster than joining them one by one.
func fill(b testing.TB, rdb *redis.Client, n int) {
	b.Helper()
	const chunk = 50_000
	for done := 0; done < n; done += chunk {
		c := min(chunk, n-done)
		err := rdb.Eval(context.Background(), `
for i = 1, tonumber(ARGV[2]) do
  local seq = tonumber(ARGV[1]) + i
  redis.call('ZADD', KEYS[1], seq, string.format('%x', seq) .. '.AAAAAAAAAAAAAAAAAAAAAA')
end
redis.call('HINCRBY', KEYS[2], 'seq', ARGV[2])
return 1`, []string{"wr:{" + event + "}:wait", "wr:{" + event + "}:stats"}, done, c).Err()
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJoin(b *testing.B) {
	e := setup(b)
	set := open()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.store.Join(context.Background(), event, "", set); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkStatus(b *testing.B) {
	for _, waiting := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
			e := setup(b)
			set := open()
			fill(b, e.rdb, waiting)
			tickets := make([]string, 64)
			for i := range tickets {
				tickets[i] = join(b, e.store, set).Ticket
			}
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					if _, err := e.store.Status(context.Background(), event, tickets[i%len(tickets)], set); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
