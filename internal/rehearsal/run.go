// Package rehearsal drives a waiting room with simulated fans through its
// public HTTP API alone, and sums up what they saw: the operator's
// rehearsal of a sale (cmd/rehearse) and the load benchmarks of the
// repository (internal/loadtest) both run their fans with it.
//
// Each fan joins (paying the proof of work when asked), polls as the room
// tells it (pollAfterMs), and once admitted books or gives its place back
// (Behaviour). A Sampler reads the line's length and the room's admitted
// count as the fans go; Admission reads the rate off those samples and
// FansSeen the waits, the ETA errors and the FIFO inversions off the fans.
//
// It measures a real room in real time, as its fans would: every time.Now
// here is the wall clock, never a clock a test moves.
package rehearsal

import (
	"context"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Plan is a rehearsal: which event, how many fans arrive when, and what
// they do.
type Plan struct {
	Event string
	// Arrivals is each fan's arrival, after the start (one per fan).
	Arrivals  []time.Duration
	Behaviour Behaviour
	// Seed makes the fans' choices repeatable (fan i draws from PCG(Seed, i)).
	Seed uint64
	// Live, when set, is kept up to date as the fans go (a progress line).
	Live *Live
}

// Live counts the fans as they go: those who got a place, are in line
// now, were let in, bought; those whose visit is over, and of them those
// who failed (an answer they could not use).
type Live struct {
	Joined, Waiting, Admitted, Bought, Done, Failed atomic.Int64
}

// run is one Run's shared state.
type run struct {
	live *Live

	lotteryOnce sync.Once
	asked       atomic.Bool // the lottery question was answered
	lottery     bool
}

// Run lets the plan's fans in, each at its arrival, and returns what each
// saw once every fan is done or ctx ends (its deadline is the rehearsal's
// end: fans still waiting or holding then give their place and holds back,
// Unfinished). start is the instant the arrivals count from.
func Run(ctx context.Context, c *Client, p Plan, start time.Time) []Fan {
	r := &run{live: p.Live}
	if r.live == nil {
		r.live = &Live{}
	}
	fans := make([]Fan, len(p.Arrivals))
	var wg sync.WaitGroup
	for i, at := range p.Arrivals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := &fanRun{c: c, r: r, i: i, rng: mrand.New(mrand.NewPCG(p.Seed, uint64(i))), b: p.Behaviour, event: p.Event}
			fans[i] = f.visit(ctx, start.Add(at))
			if fans[i].Outcome == Failed {
				r.live.Failed.Add(1)
			}
			r.live.Done.Add(1)
		}()
	}
	wg.Wait()
	if r.asked.Load() && !r.lottery {
		// No lottery: every place was first come, first served, those of
		// the fans never let in too.
		for i := range fans {
			fans[i].FIFO = fans[i].Joined
		}
	}
	return fans
}

// hasLottery asks the room, once per run, whether the event's sale has a
// pre-queue lottery (DESIGN.md "Transparency"): its route answers 404
// no_lottery when it has none. It is asked once a fan has got a place, so
// that a pre-queue has opened if the sale has one. An unclear answer
// counts as a lottery: a fan is then FIFO only when its own draw says so.
func (r *run) hasLottery(ctx context.Context, c *Client, event string) bool {
	r.lotteryOnce.Do(func() {
		a, err := c.Do(ctx, -1, Request{Method: http.MethodGet, Path: "/api/v1/events/" + event + "/lottery", Uncounted: true})
		r.lottery = !(err == nil && a.Status == http.StatusNotFound && a.Error() == "no_lottery")
		r.asked.Store(true)
	})
	return r.lottery
}

// Burst is n arrivals within the first second, evenly spread.
func Burst(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(int64(i) * int64(time.Second) / int64(max(n, 1)))
	}
	return out
}

// Ramp is n arrivals over span whose rate rises steadily from zero: fan i
// arrives at span × √(i/n), so twice as many arrive in the last second as
// half-way through.
func Ramp(n int, span time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(float64(span) * math.Sqrt(float64(i)/float64(max(n, 1))))
	}
	return out
}
