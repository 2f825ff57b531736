package queue_test

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// BenchmarkShardScaling is one event's line on private Redis Clusters of 1,
// 2 and 3 masters, on one shard (admission.shards: 1) and over one shard
// per master, side by side: polls of a line of 20,000 fans, and joins. Each
// master is pinned to a core of its own with taskset where the machine has
// enough (else they share). Reported per operation: the Redis main-thread
// CPU of the busiest master (the one that saturates first: 1e6 divided by
// it is the event's ceiling in operations per second, capacity-ops/s) and
// of all masters together (what the cluster spends), and the throughput
// this machine reached, its client included (ops/s).
func BenchmarkShardScaling(b *testing.B) {
	for masters := 1; masters <= 3; masters++ {
		b.Run(fmt.Sprintf("masters=%d", masters), func(b *testing.B) {
			c, rdb := testenv.ClusterOf(b, localsvc.ClusterOptions{Masters: masters})
			for i, n := range c.Nodes {
				cpu := i % runtime.NumCPU()
				_ = exec.Command("taskset", "-acp", strconv.Itoa(cpu), strconv.Itoa(n.Pid())).Run()
			}
			layouts := []int{1}
			if masters > 1 {
				layouts = append(layouts, masters)
			}
			for _, op := range []string{"status", "join"} {
				for _, shards := range layouts {
					b.Run(fmt.Sprintf("%s/shards=%d", op, shards), func(b *testing.B) {
						benchScaling(b, c, rdb, op, shards)
					})
				}
			}
		})
	}
}

func benchScaling(b *testing.B, c *localsvc.Cluster, rdb *redis.ClusterClient, op string, shards int) {
	ev := fmt.Sprintf("scale-%s-%d-%d", op, len(c.Nodes), shards)
	s := queue.NewStore(rdb, secret).WithDrawSecret(drawSecret)
	set := open()
	set.Shards = shards
	ctx := context.Background()
	var tickets []line.Ticket
	if op == "status" {
		for i := 0; i < 20_000; i += 1000 {
			for _, r := range joinManyOf(b, s, ev, set, 1000) {
				tickets = append(tickets, r.Ticket)
			}
		}
	}
	cpu0 := make([]float64, len(c.Nodes))
	for i, n := range c.Nodes {
		cpu0[i] = nodeCPU(b, n.Addr)
	}
	b.SetParallelism(128)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			var err error
			if op == "status" {
				_, err = s.Status(ctx, ev, tickets[(i*7919)%len(tickets)], set)
			} else {
				_, err = s.Join(ctx, ev, set)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	var busiest, total float64
	per := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		d := nodeCPU(b, n.Addr) - cpu0[i]
		busiest = max(busiest, d)
		total += d
		per[i] = fmt.Sprintf("%.1f", d*1e6/float64(b.N))
	}
	b.Logf("%d ops: µs/op per master %v", b.N, per)
	perOp := busiest * 1e6 / float64(b.N)
	b.ReportMetric(perOp, "busiest-master-cpu-µs/op")
	b.ReportMetric(total*1e6/float64(b.N), "all-masters-cpu-µs/op")
	b.ReportMetric(1e6/perOp, "capacity-ops/s")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// nodeCPU is mainThreadCPU of the node at addr.
func nodeCPU(b *testing.B, addr string) float64 {
	n := redis.NewClient(&redis.Options{Addr: addr})
	defer n.Close()
	return mainThreadCPU(b, n)
}

// BenchmarkDurableJoin prices redis.wait_replicas: joins (and polls) of one
// event on a three-master cluster with a replica each, with the writes a
// fan is told of answered at once (wait=0) and only once a replica has
// them (wait=1), in interleaved rounds (this machine is shared: compare
// the rounds side by side). A poll writes nothing a fan is told of, so it
// never waits.
func BenchmarkDurableJoin(b *testing.B) {
	_, rc := testenv.ClusterWith(b, 1)
	for round := range 3 {
		for _, wait := range []int{0, 1} {
			for _, shards := range []int{1, 3} {
				b.Run(fmt.Sprintf("round=%d/wait=%d/shards=%d", round, wait, shards), func(b *testing.B) {
					told := rdb.New(rc)
					told.WaitReplicas(wait)
					s := queue.New(told, secret).WithDrawSecret(drawSecret)
					set := open()
					set.Shards = shards
					ev := fmt.Sprintf("durable-%d-%d", wait, shards)
					b.SetParallelism(32)
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := s.Join(context.Background(), ev, set); err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "joins/s")
				})
			}
		}
	}
}
