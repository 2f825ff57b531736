package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// With redis.wait_replicas, a place and an admission are answered only
// once a replica has them: on a cluster whose masters have one replica
// each, joins and ticks of both layouts go through; once the replica of
// an event's master is gone, that event's joins fail as unavailable (the
// fan retries) instead of being told of a place a failover could lose,
// while a poll, which writes nothing a fan is told of, still answers.
func TestDurableWritesWaitForAReplica(t *testing.T) {
	c, rdb := testenv.ClusterWith(t, 1)
	ctx := context.Background()
	s := queue.NewStore(rdb, secret)
	s.WaitReplicas(1)
	for _, shards := range []int{1, 3} {
		set := open()
		set.AdmitPerSecond = 1000
		set.Shards = shards
		ev := map[int]string{1: "one", 3: "three"}[shards]
		r, err := s.Join(ctx, ev, set)
		if err != nil {
			t.Fatalf("%d shard(s): join with a replica up: %v", shards, err)
		}
		for range 3 {
			if _, err := s.Tick(ctx, ev, set); err != nil {
				t.Fatalf("%d shard(s): tick: %v", shards, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if st, err := s.Status(ctx, ev, r.Ticket, set); err != nil || st.State != queue.Admitted {
			t.Fatalf("%d shard(s): %+v, %v; want admitted", shards, st, err)
		}
	}

	// Kill the replica of the master that holds "one".
	master, err := rdb.MasterForKey(ctx, "wr:{one}:stats")
	if err != nil {
		t.Fatal(err)
	}
	info, err := master.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	replica := replicaAddr(t, info)
	c.Node(replica).Kill()
	set := open()
	r, err := s.Join(ctx, "one", set)
	if !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("join with the replica gone: %+v, %v; want ErrUnavailable", r, err)
	}
	plain := queue.NewStore(rdb, secret) // wait_replicas 0: answered at once
	r, err = plain.Join(ctx, "one", set)
	if err != nil {
		t.Fatalf("join without waiting: %v", err)
	}
	if _, err := s.Status(ctx, "one", r.Ticket, set); err != nil {
		t.Fatalf("a poll with the replica gone: %v", err)
	}
}

// replicaAddr is the first replica's host:port in an INFO replication.
func replicaAddr(t *testing.T, info string) string {
	t.Helper()
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "slave0:"); ok {
			var ip, port string
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "ip="); ok {
					ip = v
				}
				if v, ok := strings.CutPrefix(kv, "port="); ok {
					port = v
				}
			}
			return ip + ":" + port
		}
	}
	t.Fatalf("no replica in %q", info)
	return ""
}

// A single Redis with no replica never acknowledges: every place fails.
func TestDurableWritesWithoutReplicaFail(t *testing.T) {
	_, rdb := testenv.Redis(t)
	s := queue.NewStore(redis.UniversalClient(rdb), secret)
	s.WaitReplicas(1)
	if _, err := s.Join(context.Background(), event, open()); !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("join = %v; want ErrUnavailable", err)
	}
}
