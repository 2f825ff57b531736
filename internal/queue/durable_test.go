package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// With redis.wait_replicas, a place and an admission are answered only
// once a replica has them: on a cluster whose masters have one replica
// each, joins and ticks of both layouts go through; while the replica of
// an event's master stalls (its process stopped, its link still open),
// that event's joins fail as unavailable (the fan retries) instead of
// being told of a place a failover could lose, while a poll, which writes
// nothing a fan is told of, still answers; and once the master has no
// replica left at all (its replica is gone), it serves alone, as a single
// master would, rather than refuse the sale.
func TestDurableWritesWaitForAReplica(t *testing.T) {
	c, rc := testenv.ClusterWith(t, 1)
	ctx := context.Background()
	told := rdb.New(rc)
	told.WaitReplicas(1)
	s := queue.New(told, secret).WithDrawSecret(drawSecret)
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
		if st, err := s.Status(ctx, ev, r.Ticket, set); err != nil || st.State != line.Admitted {
			t.Fatalf("%d shard(s): %+v, %v; want admitted", shards, st, err)
		}
	}

	// Stall the replica of the master that holds "one".
	master, err := rc.MasterForKey(ctx, queuetest.Of(t, rc, "one").Keys().Stats)
	if err != nil {
		t.Fatal(err)
	}
	info, err := master.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	replica := c.Node(replicaAddr(t, info))
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	set := open()
	r, err := s.Join(ctx, "one", set)
	if !errors.Is(err, line.ErrUnavailable) {
		t.Fatalf("join with the replica stalled: %+v, %v; want ErrUnavailable", r, err)
	}
	plain := queue.NewStore(rc, secret).WithDrawSecret(drawSecret) // wait_replicas 0: answered at once
	r, err = plain.Join(ctx, "one", set)
	if err != nil {
		t.Fatalf("join without waiting: %v", err)
	}
	if _, err := s.Status(ctx, "one", r.Ticket, set); err != nil {
		t.Fatalf("a poll with the replica stalled: %v", err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Join(ctx, "one", set); err != nil {
		t.Fatalf("join with the replica back: %v", err)
	}
	replica.Kill()
	// The master serves alone once it has seen its replica go: waited for
	// a minute at most (a loaded machine's master may take seconds).
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := s.Join(ctx, "one", set)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("join with no replica left: %v; want the master to serve alone", err)
		}
		time.Sleep(50 * time.Millisecond)
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
