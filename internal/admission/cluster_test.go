package admission_test

import (
	"context"
	"fmt"
	"log/slog"
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
	cfg, err := config.Parse([]byte(`auth: {ticket_secret: "test-ticket-secret-0123456789abcdef", draw_secret: "test-draw-secret-0123456789abcdef"}
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

	store := queue.NewStore(rc, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret))
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
		adm := admission.New(admission.Options{Line: queue.NewStore(client, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret)),
			Operators: operators.New(rdb.New(client)), Config: cfg, Log: slog.New(slog.NewJSONHandler(&testenv.LogBuffer{}, nil))})
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

	// The rate per event, once each admits: its admissions over five
	// seconds of Redis's clock against its token bucket's own accounts
	// (queuetest.RateError), read in one MULTI on the event's slot, so that
	// a reading late on a busy machine still pairs a count with its own
	// instant.
	lines := map[string]queuetest.Line{}
	for _, ev := range events {
		lines[ev] = queuetest.Of(t, rc, ev)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		started := 0
		for _, ev := range events {
			if lines[ev].Admissions().Admitted > 0 {
				started++
			}
		}
		if started == len(events) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events admitting after 30s", started, len(events))
		}
	}
	watches := map[string]*queuetest.TickWatch{}
	p0 := map[string]queuetest.Admissions{}
	for _, ev := range events {
		watches[ev] = lines[ev].WatchTicks()
		p0[ev] = lines[ev].Admissions()
	}
	time.Sleep(5 * time.Second)
	p1 := map[string]queuetest.Admissions{}
	for _, ev := range events {
		p1[ev] = lines[ev].Admissions()
		watches[ev].Stop()
	}
	cancel()
	wg.Wait()

	for _, ev := range events {
		a, b := p0[ev], p1[ev]
		span := b.At.Sub(a.At).Seconds()
		t.Logf("%s: %.2f admissions/s over %.1fs", ev, float64(b.Admitted-a.Admitted)/span, span)
		if err := queuetest.RateError(a, b, rate, watches[ev].Lost(a, b, rate)); err != nil {
			t.Errorf("%s: %v", ev, err)
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
