package queue_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// Every Join is a new place: the store never turns a ticket the fan sends
// back into a place by itself (the gateway resumes live tickets with Status
// and counts every new place against the per-IP limit).
func TestJoinIsAlwaysANewPlace(t *testing.T) { onEachLayout(t, testJoinIsAlwaysANewPlace) }

func testJoinIsAlwaysANewPlace(t *testing.T, e env) {
	set := e.open()
	seen := map[string]bool{}
	for i := range 5 {
		r := join(t, e.store, set)
		if seen[r.ID] || r.Position.Position != int64(i+1) {
			t.Fatalf("join %d: %+v; want a new id at place %d", i, r, i+1)
		}
		seen[r.ID] = true
	}
	checkBooks(t, e)
}

// No endless window: however many holds ask to stretch it, and however many
// at once, an access window never ends later than claim + window.
func TestExtendNeverPassesTheCeiling(t *testing.T) { onEachLayout(t, testExtendNeverPassesTheCeiling) }

func testExtendNeverPassesTheCeiling(t *testing.T, e env) {
	ctx := context.Background()
	set := e.open()
	set.AdmitPerSecond = 1000
	set.AccessTTL = 30 * time.Second
	const window = 50 * time.Second // access_ttl 30s + hold_ttl 20s
	r := joinAndLetIn(t, e.store, set)
	before := time.Now().Truncate(time.Second) // the claim time is kept in whole seconds
	st := status(t, e.store, r.Ticket, set)
	if st.State != line.Admitted || !st.FirstAdmission {
		t.Fatalf("status: %+v; want the claim", st)
	}
	ceiling := time.Now().Add(window)

	ends := make([]time.Time, 64) // each hold's reported window end
	testenv.Race(len(ends), func(i int) {
		// Holds cycled for ever: each asks for up to an hour more.
		until := time.Now().Add(time.Duration(1+rand.IntN(3600)) * time.Second)
		got, ok, err := e.store.Extend(ctx, event, r.ID, until, window)
		if err != nil || !ok {
			t.Errorf("extend %d: %v, %v", i, ok, err)
			return
		}
		ends[i] = got
	})
	latest := slices.MaxFunc(ends, time.Time.Compare)
	inRedis := e.state(t).Window(r.ID)
	if inRedis.After(ceiling) || latest.After(ceiling) {
		t.Fatalf("window ends at %v (reported %v); want no later than claim + %v = %v", inRedis, latest, window, ceiling)
	}
	if inRedis.Before(before.Add(window - time.Second)) {
		t.Fatalf("window ends at %v; want about claim + %v (%v): the ceiling must not cut honest holds short", inRedis, window, before.Add(window))
	}
}

// Every error of a Redis that is gone is ErrUnavailable (the edge answers
// 503 and the fan retries), from the one translation in redis.go.
func TestRedisDownIsUnavailable(t *testing.T) {
	t.Parallel()
	srv, rdb := testenv.Redis(t)
	s := queue.NewStore(rdb, secret).WithDrawSecret(drawSecret)
	ctx := context.Background()
	set := open()
	r := join(t, s, set)
	srv.Kill()
	checks := map[string]error{}
	_, checks["join"] = s.Join(ctx, event, set)
	_, checks["status"] = s.Status(ctx, event, r.Ticket, set)
	checks["leave"] = s.Leave(ctx, event, r.Ticket)
	_, checks["active"] = s.Active(ctx, event, r.ID)
	_, checks["counts"] = s.Counts(ctx, event)
	_, checks["tick"] = s.Tick(ctx, event, set)
	checks["ping"] = s.Ping(ctx)
	for op, err := range checks {
		if !errors.Is(err, line.ErrUnavailable) {
			t.Errorf("%s with Redis gone: %v; want ErrUnavailable", op, err)
		}
	}
}
