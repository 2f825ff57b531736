package admission_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/admission"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// TestReplicasAcrossShards runs three admitter replicas, each with its own
// cluster client as three processes would have, over seven events spread on
// a three-master Redis Cluster. Each event is admitted at its own rate, the
// capped one never exceeds its cap, and afterwards every event's books
// balance: admitted = active (nobody completes here), nobody admitted twice,
// nobody lost.
func TestReplicasAcrossShards(t *testing.T) {
	t.Parallel()
	c, rc := testenv.Cluster(t)
	ctx := context.Background()
	const (
		rate      = 20
		fans      = 200 // more than rate × the test: the lines never empty
		cappedCap = 15
	)
	var yaml string
	events := make([]string, 6)
	for i := range events {
		events[i] = fmt.Sprintf("shard-%d", i)
		yaml += fmt.Sprintf("  - id: %q\n    admission: {admit_per_second: %d, max_active: 1000}\n", events[i], rate)
	}
	yaml += fmt.Sprintf("  - id: \"capped\"\n    admission: {admit_per_second: 100, max_active: %d}\n", cappedCap)
	cfg, err := config.Parse([]byte(`auth: {ticket_secret: "test-ticket-secret-0123456789abcdef"}
booking: {payment: {secret: "test-payment-secret-0123456789abcdef"}}
admitter: {tick: "50ms"}
events:
`+yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if masters := mastersOf(t, rc, events); len(masters) < 2 {
		t.Fatalf("events on masters %v; want at least 2 (the test must span shards)", masters)
	} else {
		t.Logf("events per master: %v", masters)
	}

	store := queue.NewStore(rc, []byte(cfg.Auth.TicketSecret))
	joined := map[string]map[string]bool{}
	for _, ev := range cfg.Events {
		set := policy.SettingsFor(ev)
		set.Mode = "paused" // nobody goes in before the replicas start
		joined[ev.ID] = map[string]bool{}
		for range fans {
			r, err := store.Join(ctx, ev.ID, set)
			if err != nil {
				t.Fatal(err)
			}
			joined[ev.ID][r.ID] = true
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 3 {
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
		defer client.Close()
		adm := admission.New(admission.Options{Line: queue.NewStore(client, []byte(cfg.Auth.TicketSecret)),
			Operators: operators.New(rdb.New(client)), Config: cfg, Log: slog.New(slog.NewJSONHandler(&syncBuffer{}, nil))})
		wg.Add(1)
		go func() { defer wg.Done(); adm.Run(runCtx) }()
	}
	var maxCapped atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			if c, err := store.Counts(ctx, "capped"); err == nil {
				for m := maxCapped.Load(); c.Active > m && !maxCapped.CompareAndSwap(m, c.Active); m = maxCapped.Load() {
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// The rate per event, by Redis's clock, after a warm-up: each event's
	// admitted count with the Redis time of the tick that left it (the
	// bucket's ts), read in one MULTI on the event's slot, so that a sample
	// read late on a busy machine still pairs a count with its own instant.
	type point struct {
		at       float64 // s
		admitted int64
	}
	sample := func() map[string]point {
		out := map[string]point{}
		for _, ev := range events {
			a, at := queuetest.Of(t, rc, ev).Admitted()
			out[ev] = point{float64(at.UnixMilli()) / 1000, a}
		}
		return out
	}
	time.Sleep(time.Second)
	p0 := sample()
	time.Sleep(5 * time.Second)
	p1 := sample()
	cancel()
	wg.Wait()

	for _, ev := range events {
		elapsed := p1[ev].at - p0[ev].at
		got := float64(p1[ev].admitted-p0[ev].admitted) / elapsed
		t.Logf("%s: %.2f admissions/s over %.1fs", ev, got, elapsed)
		if math.Abs(got-rate)/rate > 0.05 {
			t.Errorf("%s admitted %.2f/s; want %d/s ± 5%%", ev, got, rate)
		}
	}
	if m := maxCapped.Load(); m > cappedCap {
		t.Errorf("capped event: %d active sampled; want ≤ %d", m, cappedCap)
	}
	for _, ev := range cfg.Events {
		line := queuetest.Of(t, rc, ev.ID)
		active, waiting := line.Active(), line.Waiting()
		st, err := store.Stats(ctx, ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Admitted != int64(len(active)) {
			t.Errorf("%s: admitted counter %d, %d active; want equal (nobody completed)", ev.ID, st.Admitted, len(active))
		}
		seen := map[string]bool{}
		for _, id := range append(active, waiting...) {
			if seen[id] {
				t.Errorf("%s: ticket %s both active and waiting", ev.ID, id)
			}
			if !joined[ev.ID][id] {
				t.Errorf("%s: ticket %s was never joined here", ev.ID, id)
			}
			seen[id] = true
		}
		if len(seen) != fans || st.Joined != fans {
			t.Errorf("%s: %d tickets found, joined counter %d; want %d", ev.ID, len(seen), st.Joined, fans)
		}
		if ev.ID == "capped" && len(active) != cappedCap {
			t.Errorf("capped: %d active at the end; want the cap, %d", len(active), cappedCap)
		}
	}
}

// masterAddr is the host:port of a shard's master.
func masterAddr(sh redis.ClusterShard) string {
	for _, n := range sh.Nodes {
		if n.Role == "master" {
			return fmt.Sprintf("%s:%d", n.IP, n.Port)
		}
	}
	return ""
}

// mastersOf maps each master's address to the events whose slot it serves.
func mastersOf(t *testing.T, rc *redis.ClusterClient, events []string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	shards, err := rc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ev := range events {
		slot, err := rc.ClusterKeySlot(ctx, queuetest.Of(t, rc, ev).Keys().Wait).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start <= slot && slot <= r.End {
					addr := masterAddr(sh)
					out[addr] = append(out[addr], ev)
				}
			}
		}
	}
	return out
}
