package e2e_test

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

const (
	failoverEvent = "finale"
	failoverRate  = 25
	failoverCap   = 40
	failoverFans  = 400
)

var failoverEvents = shardedSale(failoverEvent, "Finale", failoverRate, failoverCap, "120s", 91)

// TestRedisFailover kills -9 a Redis master in the middle of a sale and
// checks what waitroom promises about it (docs/RELIABILITY.md, "Redis fails
// over"): a three-master cluster with a replica each, the sale's line over
// three shards, two gateways, two admitters, writes that a fan is told of
// waiting for a replica (redis.wait_replicas: 1). The master killed is the
// one holding the event's global keys (the sequence, the bucket, the active
// set: the worst one to lose). While the cluster fails over the test
// measures how long joins answer 503; afterwards every invariant holds:
// every join that was answered 201 is still in line or admitted (none lost
// to the promotion), nobody who gave a place back is admitted again, the
// cap held throughout, and the books balance in Redis.
func TestRedisFailover(t *testing.T) {
	t.Parallel() // its own stack; see doc.go, "Parallel scenarios"
	s := stack.Start(t, stack.Options{
		Events: failoverEvents, RedisCluster: true, ClusterReplicas: 1, RedisWaitReplicas: 1,
		Gateways: 2, Admitters: 2, Tick: "200ms",
	})
	ctx := context.Background()
	// The test's own client is made as the processes make theirs (it
	// follows the failover at once, see queue.reloadHook).
	rc, err := rdb.Open(s.Cluster.Seeds(), "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	line := queue.New(rc, nil)
	hc := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 200, MaxConnsPerHost: 200},
	}
	gw := s.Gateways
	base := func(i int) string { return gw[i%len(gw)] + "/api/v1/events/" + failoverEvent + "/tickets" }

	// The cap, sampled all along (errors while the master is down skipped).
	active := startSampler(20*time.Millisecond, func(ctx context.Context) (int64, error) {
		c, err := line.Counts(ctx, failoverEvent)
		return c.Active, err
	}, nil)
	defer active.close()

	var (
		mu        sync.Mutex
		fans      []*saleFan
		joinCodes = map[int]int{}
		events    []probe // every join's answer, in time
		leaving   atomic.Bool
	)
	leaving.Store(true)
	fansCtx, stopFans := context.WithCancel(ctx)
	var wg sync.WaitGroup
	join := func(i int) {
		defer wg.Done()
		f, pollMs, code, _, err := joinSale(fansCtx, hc, base(i))
		if fansCtx.Err() != nil {
			return
		}
		mu.Lock()
		joinCodes[code]++
		events = append(events, probe{time.Now(), code})
		mu.Unlock()
		if code != http.StatusCreated {
			return // told to try again: no place was promised
		}
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		fans = append(fans, f)
		mu.Unlock()
		f.follow(fansCtx, hc, base(i+1), base(i+1), pollMs, &leaving, true)
	}
	// The first fans, then one more every 50 ms all through the failover.
	for i := range failoverFans {
		wg.Add(1)
		go join(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := failoverFans; fansCtx.Err() == nil; i++ {
			wg.Add(1)
			go join(i)
			time.Sleep(50 * time.Millisecond)
		}
	}()

	// The master of the event's global keys.
	time.Sleep(4 * time.Second)
	slot, err := s.RDB.ClusterKeySlot(ctx, rdb.KeysOf(failoverEvent).Stats).Result()
	if err != nil {
		t.Fatal(err)
	}
	seed := s.Cluster.Nodes[len(s.Cluster.Nodes)-1].Addr
	master, err := s.Cluster.MasterOf(seed, int(slot))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.Cluster.Nodes {
		if n.Addr != master {
			seed = n.Addr
			break
		}
	}
	before, _ := line.Stats(ctx, failoverEvent)
	killed := time.Now()
	s.Cluster.Node(master).Kill()
	t.Logf("killed master %s (the event's global slot %d) with %d joined, %d admitted", master, slot, before.Joined, before.Admitted)
	var promoted time.Duration
	for deadline := time.Now().Add(30 * time.Second); ; {
		if m, err := s.Cluster.MasterOf(seed, int(slot)); err == nil && m != master {
			promoted = time.Since(killed)
			t.Logf("replica %s promoted after %v", m, promoted.Round(10*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no replica promoted within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(6 * time.Second) // the sale goes on after the failover
	leaving.Store(false)
	time.Sleep(3 * time.Second) // the cap fills and binds
	stopFans()
	wg.Wait()

	// How long joins were refused.
	mu.Lock()
	sort.Slice(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	var first503, back time.Time
	for _, e := range events {
		if e.at.Before(killed) {
			continue
		}
		if e.code != http.StatusCreated && first503.IsZero() {
			first503 = e.at
		}
		if e.code == http.StatusCreated && !first503.IsZero() {
			back = e.at
		}
	}
	var lastFail time.Time
	for _, e := range events {
		if e.at.After(killed) && e.code != http.StatusCreated {
			lastFail = e.at
		}
	}
	t.Logf("joins answered %v; refused from %v to %v after the kill (promotion at %v)", joinCodes,
		sinceOr(first503, killed), sinceOr(lastFail, killed), promoted.Round(10*time.Millisecond))
	for code := range joinCodes {
		if code != http.StatusCreated && code != http.StatusServiceUnavailable {
			t.Errorf("%d joins answered %d; want only 201 and 503", joinCodes[code], code)
		}
	}
	if back.IsZero() && !lastFail.IsZero() {
		t.Error("joins never came back after the failover")
	}
	mu.Unlock()

	// Every fan told of a place has it: waiting or admitted, never lost.
	var admitted, left, waiting, lost int
	for i, f := range fans {
		if f.left {
			left++
		}
		code, body, err := clusterCall(ctx, hc, http.MethodGet, base(i)+"/"+f.ticket)
		st := clusterStatus(body)
		switch {
		case err != nil:
			t.Fatalf("fan %d final poll: %v", i, err)
		case f.left:
			if code == http.StatusOK && st == "admitted" {
				t.Errorf("fan %d gave its place back, and is admitted again", i)
			}
			admitted++
		case code == http.StatusOK && st == "admitted":
			admitted++
		case code == http.StatusOK && st == "waiting":
			if f.admitted {
				t.Errorf("fan %d was admitted, and is waiting again", i)
			}
			waiting++
		default:
			lost++
			t.Errorf("fan %d, whose join was answered 201, now %d %s (%s): a place lost", i, code, body, f.err)
		}
	}
	st, c := lineBooks(ctx, t, line, failoverEvent)
	t.Logf("after: %+v, %d waiting, %d active; fans told of a place: %d (%d admitted, %d of them left, %d waiting, %d lost); max active %d",
		st, c.Waiting, c.Active, len(fans), admitted, left, waiting, lost, active.max.Load())
	if m := active.max.Load(); m > failoverCap {
		t.Errorf("max active sampled %d; want ≤ %d", m, failoverCap)
	}
	if got := st.Admitted + c.Waiting + st.Left + st.Abandoned; got != st.Joined {
		t.Errorf("admitted %d + waiting %d + left %d + abandoned %d = %d; want joined %d",
			st.Admitted, c.Waiting, st.Left, st.Abandoned, got, st.Joined)
	}
	// Places written but not answered 201 (the WAIT timed out, or the
	// answer was lost with the master) are in line, nobody's: as many as
	// the joins refused, at most.
	orphans := st.Joined - int64(len(fans))
	if orphans < 0 || orphans > int64(joinCodes[http.StatusServiceUnavailable]) {
		t.Errorf("joined %d, fans told of a place %d: %d orphan places for %d joins refused", st.Joined, len(fans), orphans, joinCodes[http.StatusServiceUnavailable])
	}
	if st.Admitted < int64(admitted) {
		t.Errorf("the queue counts %d admissions; %d fans were admitted", st.Admitted, admitted)
	}
	// What the processes did meanwhile, for docs/RELIABILITY.md.
	for _, name := range []string{"admitter", "admitter2"} {
		p := s.Proc(name)
		t.Logf("%s: %v ticks failed, %v admitted", name,
			metric(t, "http://"+p.Addr, `waitroom_admitter_tick_errors_total{event="`+failoverEvent+`"}`),
			metric(t, "http://"+p.Addr, `waitroom_admitted_total{event="`+failoverEvent+`"}`))
	}
}

type probe struct {
	at   time.Time
	code int
}

func sinceOr(t, from time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return t.Sub(from).Round(10 * time.Millisecond)
}
