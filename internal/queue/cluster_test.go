package queue_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// TestOnRedisCluster runs every store operation through the client that
// config redis.url gives for a seed list, on a three-master cluster: every
// script touches one slot (no CROSSSLOT, no MOVED left unfollowed).
func TestOnRedisCluster(t *testing.T) {
	c, _ := testenv.Cluster(t)
	ctx := context.Background()
	rc, err := rdb.Open(c.Seeds(), "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	s := queue.New(rc, secret).WithDrawSecret(drawSecret)
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
					r, err := s.Join(ctx, ev, set)
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
					if _, err := s.Stats(ctx, ev); err != nil {
						return err
					}
					if _, _, err := s.Extend(ctx, ev, r.ID, time.Now(), time.Minute); err != nil {
						return err
					}
					if err := s.Complete(ctx, ev, r.ID); err != nil {
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

// TestEventsSpreadOverShards is why the cluster is worth having: events are
// hashed by their tag to slots, so 30 events spread over the masters, while
// each event's keys all sit on one master (its scripts stay atomic). Both are
// checked where the keys really are, by scanning every master, and against
// the slot map the cluster publishes.
func TestEventsSpreadOverShards(t *testing.T) {
	c, rdb := testenv.Cluster(t)
	ctx := context.Background()
	s := queue.NewStore(rdb, secret).WithDrawSecret(drawSecret)
	set := open()
	set.AdmitPerSecond = 1000
	events := make([]string, 30)
	for i := range events {
		events[i] = fmt.Sprintf("event-%02d", i)
		if err := s.PublishSettings(ctx, events[i], set); err != nil {
			t.Fatal(err)
		}
		r, err := s.Join(ctx, events[i], set)
		if err != nil {
			t.Fatalf("join %s: %v", events[i], err)
		}
		if _, err := s.Tick(ctx, events[i], set); err != nil {
			t.Fatalf("tick %s: %v", events[i], err)
		}
		if _, err := s.Status(ctx, events[i], r.Ticket, set); err != nil {
			t.Fatalf("status %s: %v", events[i], err)
		}
	}

	// Where the keys are: scan every master.
	nodeOf := map[string]map[string]bool{} // event -> addresses holding its keys
	keysOn := map[string]int{}             // address -> keys
	for _, addr := range c.Addrs() {
		node := redis.NewClient(&redis.Options{Addr: addr})
		keys, err := scanAll(ctx, node, "wr:*")
		node.Close()
		if err != nil {
			t.Fatalf("scan %s: %v", addr, err)
		}
		keysOn[addr] = len(keys)
		for _, k := range keys {
			ev, ok := tagOf(k)
			if !ok {
				t.Errorf("key %s on %s has no {event} tag", k, addr)
				continue
			}
			if nodeOf[ev] == nil {
				nodeOf[ev] = map[string]bool{}
			}
			nodeOf[ev][addr] = true
		}
	}

	// Where the cluster says they are: slot -> master.
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ownerOf := func(slot int64) string {
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start <= slot && slot <= r.End {
					for _, n := range sh.Nodes {
						if n.Role == "master" {
							return fmt.Sprintf("%s:%d", n.IP, n.Port)
						}
					}
				}
			}
		}
		return ""
	}

	perMaster := map[string][]string{}
	for _, ev := range events {
		if len(nodeOf[ev]) != 1 {
			t.Errorf("event %s has keys on %d masters %v; want exactly 1", ev, len(nodeOf[ev]), nodeOf[ev])
			continue
		}
		var addr string
		for a := range nodeOf[ev] {
			addr = a
		}
		k := queuetest.Of(t, rdb, ev).Keys()
		slot, err := rdb.ClusterKeySlot(ctx, k.Wait).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{k.Active, k.Stats, k.Settings} {
			if got := rdb.ClusterKeySlot(ctx, key).Val(); got != slot {
				t.Errorf("%s: %s in slot %d, wait in slot %d; want one slot", ev, key, got, slot)
			}
		}
		if owner := ownerOf(slot); owner != addr {
			t.Errorf("event %s (slot %d) found on %s; the slot map says %s", ev, slot, addr, owner)
		}
		perMaster[addr] = append(perMaster[addr], ev)
	}
	for _, addr := range c.Addrs() {
		t.Logf("master %s: %d events, %d keys: %s", addr, len(perMaster[addr]), keysOn[addr], strings.Join(perMaster[addr], " "))
	}
	// CRC16 of these 30 names over redis-cli's even slot split is fixed, so
	// this does not depend on luck: every master holds some of the events.
	if len(perMaster) < len(c.Addrs()) {
		t.Errorf("events on %d of %d masters; want every master used", len(perMaster), len(c.Addrs()))
	}

	// The tag is what keeps a script on one slot: two events' keys in one
	// script are refused by the cluster.
	var a, b string
	for _, evs := range perMaster {
		if a == "" {
			a = evs[0]
		} else if b == "" {
			b = evs[0]
		}
	}
	if b == "" {
		return
	}
	err = rdb.Eval(ctx, "return redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])",
		[]string{queuetest.Of(t, rdb, a).Keys().Wait, queuetest.Of(t, rdb, b).Keys().Wait}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("a script over %s and %s = %v; want CROSSSLOT", a, b, err)
	}
}

func scanAll(ctx context.Context, rdb *redis.Client, match string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
		if cursor = next; cursor == 0 {
			sort.Strings(out)
			return out, nil
		}
	}
}

// tagOf is key's hash tag, what Redis Cluster hashes to its slot: from
// the first { to the next } (an event's keys carry the event's name).
func tagOf(key string) (string, bool) {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return "", false
	}
	tag, _, ok := strings.Cut(rest, "}")
	return tag, ok && tag != ""
}
