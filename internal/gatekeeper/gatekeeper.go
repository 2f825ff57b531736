// Package gatekeeper is the one answer the gate (and forward auth) and the
// booking core give a pass that verified: does its ticket hold its active
// place now? It asks the line (Line: any store of the line's words, package
// queue's in production) through the process's breaker of the line's store
// (NewBreaker), and follows the line's ends so that, once the breaker gave
// up on the store, a pass whose place had ended is still refused. The
// services hold a Gatekeeper; neither imports the other nor the store.
package gatekeeper

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/platform/breaker"
	"github.com/waitroom/waitroom/internal/platform/metrics"
)

// The gatekeeper's answer (DESIGN.md, "When parts fail" and "Fans cannot
// open the gate"): while Redis answers, the line says. Once the process's breaker
// has given up on Redis (3 checks in a row, or a check and a ping, without
// an answer: never one slow answer), a pass of an event sold here goes on by
// its signature, event and exp alone, unless its ticket's place had ended
// before Redis went silent: every gatekeeper follows the line's ends
// (left, revoked, completed by a booking) while Redis answers, and keeps
// them, each until the end of the window it cut short.
//
// The window's own end needs no note: no pass outlives its place's window.
// A pass is minted with the active expiry in force (the claim's, the
// hold's extension, a passthrough join's, a site pass from the return
// token's place, a sliding session's place as the very check that issues
// it again leaves it: Use), and that expiry only ever moves
// later once a fan holds a pass (package queue's claimLua moves it at the
// first look, before any pass exists; its extendScript and a renewal never
// shorten it). So a pass whose window is over has expired, and its
// signature check refuses it already.
//
// What a process heard is what it read by the moment Redis went silent:
// an end written in the last followEvery before that may be missed. A
// process that starts while Redis is silent has heard nothing.

// NewBreaker is the breaker of a process's calls to the line that must not
// wait for a Redis that stopped answering (DESIGN.md, "When parts fail"),
// nor give up on one that was slow once ("Fans cannot open the gate"):
// each call waits at most a second; three in a row without an answer (a
// line.ErrUnavailable, or the second running out) open it, and so does one
// whose ping (asked at once) gets no answer either. While Redis stays
// silent the next calls do not wait again; ping asks every 250 ms whether
// it answers again. The gate's checks and the booking core's inventory
// both go through one.
func NewBreaker(ping func(context.Context) error, log *slog.Logger) *breaker.Breaker {
	return breaker.New(breaker.Options{
		Name: "redis", Wait: time.Second, Retry: 250 * time.Millisecond, Threshold: 3, Probe: ping, Log: log,
		Outage: func(err error) bool { return errors.Is(err, line.ErrUnavailable) },
	})
}

// Verdict is what the gatekeeper says of a pass that verified.
type Verdict int

const (
	// PassRefused: the pass's ticket holds no active place (it left, was
	// revoked, its window ended, its booking completed it), or Redis is
	// away and its end was heard, or its event is not sold here.
	PassRefused Verdict = iota
	// PassActive: the line says its ticket holds its active place.
	PassActive
	// PassDegraded: Redis is away; the pass goes on by its signature alone
	// (counted in waitroom_gate_degraded_total{service}).
	PassDegraded
)

// Line is what a gatekeeper asks of the line.
type Line interface {
	// Active reports whether the ticket id holds its active place in event.
	Active(ctx context.Context, event, ticket string) (bool, error)
	// Ends reads up to count of event's ends written after the stream id
	// after ("" = from the first kept), oldest first.
	Ends(ctx context.Context, event, after string, count int64) ([]line.End, error)
}

// Renewer is a Line that renews a sliding session's place in the check of
// its pass (DESIGN.md, "Sessions that last while they are used"): one
// Redis call either way.
type Renewer interface {
	// Renew is Active, and moves the place's expiry to now + ttl when
	// that is at least every later than it is; until is the expiry in
	// force afterwards.
	Renew(ctx context.Context, event, ticket string, ttl, every time.Duration) (until time.Time, active bool, err error)
}

// Options are a gatekeeper's dependencies.
type Options struct {
	Line Line
	// Renewer renews sliding sessions (Use); nil where nothing is renewed
	// (the booking core: its passes come through the gate, which renews).
	Renewer Renewer
	// Redis is the process's breaker of its calls to the line
	// (NewBreaker): the checks go through it.
	Redis *breaker.Breaker
	// Sells reports whether this process serves event: a pass of any other
	// is refused while Redis is away.
	Sells func(event string) bool
	// Events lists the events whose ends to follow (the config's, read at
	// each round: a reload may add some).
	Events func() []string
	// Service labels the gatekeeper's metrics ("gateway", "booking").
	Service string
	Log     *slog.Logger
	// Now is the process's clock, the one its passes' exp are judged by
	// (nil = time.Now): an end is kept until its window is over by it.
	Now func() time.Time
}

const (
	// followEvery is how often a gatekeeper reads the ends written since
	// its last read: at most this much of what ended just before Redis
	// went silent is missed.
	followEvery = 100 * time.Millisecond
	// followWait bounds each read (the breaker's wait), and is how long a
	// gatekeeper waits before it tries again after a read failed.
	followWait = time.Second
	// followPage is how many ends one read takes.
	followPage = 1000
	// endsKept is how long an end is kept past its window's end: the pass
	// verifier's leeway (2 s) and some.
	endsKept = 5 * time.Second
	// forgetEvery is how often the ends whose window is over are dropped
	// (a walk over all of them).
	forgetEvery = 5 * time.Second
)

var (
	gateEnds = metrics.GaugeVec("waitroom_gate_ends",
		"Ended places a gatekeeper keeps (left, revoked, completed before their window ended), to refuse their passes while Redis is away.", "service")
	gateEndRefused = metrics.CounterVec("waitroom_gate_ended_refused_total",
		"Passes refused while Redis was away because their place's end had been heard.", "service")
)

// Gatekeeper answers Check for one process. Build it with New
// and run Follow beside it.
type Gatekeeper struct {
	o          Options
	degraded   prometheus.Counter
	endRefused prometheus.Counter
	held       prometheus.Gauge

	mu    sync.RWMutex
	ends  map[string]map[string]time.Time // event → ticket id → until
	after map[string]string               // event → the last stream id read
}

// New returns a gatekeeper that has heard of no end yet.
func New(o Options) *Gatekeeper {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	gateEndRefused.WithLabelValues(o.Service)
	return &Gatekeeper{o: o,
		degraded: metrics.GateDegraded(o.Service), endRefused: gateEndRefused.WithLabelValues(o.Service),
		held: gateEnds.WithLabelValues(o.Service),
		ends: map[string]map[string]time.Time{}, after: map[string]string{}}
}

// Check says whether the pass of ticket in event, which verified already
// (signature, audience, exp), lets its fan in now. An error is the line's
// when Redis failed this check but the breaker did not give up on it (a
// 503: the fan retries), or a bug.
func (g *Gatekeeper) Check(ctx context.Context, event, ticket string) (Verdict, error) {
	var active bool
	err := g.o.Redis.Do(ctx, func(ctx context.Context) (err error) {
		active, err = g.o.Line.Active(ctx, event, ticket)
		return err
	})
	return g.verdict(event, ticket, active, err)
}

// CheckBy is Check with the line asked by active: a call that answers the
// check and does more in the same round trip (the booking core's hold
// asks whether the place is active and counts the hold's places out in one
// script, package booking). What active did is done only when the verdict
// is PassActive.
func (g *Gatekeeper) CheckBy(ctx context.Context, event, ticket string, active func(context.Context) (bool, error)) (Verdict, error) {
	var ok bool
	err := g.o.Redis.Do(ctx, func(ctx context.Context) (err error) {
		ok, err = active(ctx)
		return err
	})
	return g.verdict(event, ticket, ok, err)
}

// Use is Check for a use of a sliding session's pass: the same check,
// which also renews the place (Renewer.Renew with ttl and every) in the
// same call; until is the place's expiry in force afterwards (zero unless
// PassActive). Nothing is renewed while Redis is away.
func (g *Gatekeeper) Use(ctx context.Context, event, ticket string, ttl, every time.Duration) (v Verdict, until time.Time, err error) {
	var active bool
	err = g.o.Redis.Do(ctx, func(ctx context.Context) (err error) {
		until, active, err = g.o.Renewer.Renew(ctx, event, ticket, ttl, every)
		return err
	})
	v, err = g.verdict(event, ticket, active, err)
	if v != PassActive {
		until = time.Time{}
	}
	return v, until, err
}

// verdict is the answer to a pass whose place the line said is active or
// not, or that the line did not answer (err).
func (g *Gatekeeper) verdict(event, ticket string, active bool, err error) (Verdict, error) {
	switch {
	case errors.Is(err, breaker.ErrOpen):
		switch {
		case !g.o.Sells(event):
			return PassRefused, nil
		case g.Heard(event, ticket):
			g.endRefused.Inc()
			return PassRefused, nil
		}
		g.degraded.Inc()
		return PassDegraded, nil
	case err != nil:
		return PassRefused, err
	case active:
		return PassActive, nil
	}
	return PassRefused, nil
}

// Heard reports whether the gatekeeper heard that ticket's place in event
// ended early, and its window is not over yet.
func (g *Gatekeeper) Heard(event, ticket string) bool {
	g.mu.RLock()
	until, ok := g.ends[event][ticket]
	g.mu.RUnlock()
	return ok && g.o.Now().Before(until.Add(endsKept))
}

// Follow reads the ends of every event every followEvery until ctx ends,
// and forgets each once its window is over.
func (g *Gatekeeper) Follow(ctx context.Context) {
	failing := false
	var forgot time.Time
	for {
		err := g.follow(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			g.o.Log.Warn("gatekeeper: the line's ends cannot be read; those heard so far are kept", "err", err)
		case err == nil && failing:
			g.o.Log.Info("gatekeeper: the line's ends are read again")
		}
		failing = err != nil
		if now := g.o.Now(); now.Sub(forgot) >= forgetEvery {
			g.forget(now)
			forgot = now
		}
		next := followEvery
		if failing {
			next = followWait
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// follow reads every event's new ends once; a Redis that does not answer
// one read is not asked the others' this round.
func (g *Gatekeeper) follow(ctx context.Context) error {
	var errs []error
	for _, event := range g.o.Events() {
		if err := g.followEvent(ctx, event); err != nil {
			if errors.Is(err, line.ErrUnavailable) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (g *Gatekeeper) followEvent(ctx context.Context, event string) error {
	for {
		g.mu.RLock()
		after := g.after[event]
		g.mu.RUnlock()
		rctx, cancel := context.WithTimeout(ctx, followWait)
		ends, err := g.o.Line.Ends(rctx, event, after, followPage)
		cancel()
		if err != nil {
			return err
		}
		if len(ends) == 0 {
			return nil
		}
		now := g.o.Now()
		g.mu.Lock()
		m := g.ends[event]
		if m == nil {
			m = map[string]time.Time{}
			g.ends[event] = m
		}
		for _, e := range ends {
			if now.Before(e.Until.Add(endsKept)) {
				m[e.Ticket] = e.Until
			}
		}
		g.after[event] = ends[len(ends)-1].ID
		g.mu.Unlock()
		if len(ends) < followPage {
			return nil
		}
	}
}

// forget drops the ends whose window is over at now.
func (g *Gatekeeper) forget(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for event, m := range g.ends {
		for ticket, until := range m {
			if !now.Before(until.Add(endsKept)) {
				delete(m, ticket)
			}
		}
		if len(m) == 0 {
			delete(g.ends, event)
		}
		n += len(m)
	}
	g.held.Set(float64(n))
}
