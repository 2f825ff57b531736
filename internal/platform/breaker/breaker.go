// Package breaker keeps a request from waiting on a store that stopped
// answering (DESIGN.md, "When parts fail"), without giving up on one that
// was merely slow once ("Fans cannot open the gate"): a call waits at most
// Wait for the store. A call that fails as an outage (an error that says
// so, or no answer within Wait) counts; Threshold of them in a row open
// the breaker, and so does one whose confirming probe (a ping, asked at
// once) fails too. A slow answer that comes within Wait is an answer, and
// any answer starts the count again. Once open, calls fail at once, with
// the outage that opened it, while one probe in the background asks the
// store again every Retry and closes the breaker as soon as it answers.
// The caller decides what a failed call means: a call's own failure while
// the breaker stays closed is an outage of that call (the gate answers
// 503); ErrOpen is the store given up on (the gate honours a valid pass by
// its signature, the booking core's inventory waits for its next sync).
package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrOpen: the breaker is open (the call was not made), or the call's
// failure opened it. The error returned wraps it and the outage that opened
// the breaker.
var ErrOpen = errors.New("breaker open: the store did not answer lately")

// Options shape a breaker.
type Options struct {
	// Name says which store, as the logs name it (e.g. "redis").
	Name string
	// Wait bounds each call while the breaker is closed, and each probe.
	Wait time.Duration
	// Retry is how often the probe asks the store while the breaker is
	// open.
	Retry time.Duration
	// Threshold is how many calls in a row must fail as outages to open
	// the breaker (at least 1). Below it, a failure has the probe confirm
	// it at once: a store that answers no ping either is given up on then.
	Threshold int
	// Probe asks the store whether it answers (a ping), within its
	// context.
	Probe func(context.Context) error
	// Outage reports whether a call's error means the store cannot serve
	// (as opposed to a refusal or a bug, which count nothing).
	Outage func(error) bool
	Log    *slog.Logger
}

// Breaker guards the calls of one process to one store. Its zero value is
// not usable: build it with New.
type Breaker struct {
	o    Options
	open atomic.Bool

	mu         sync.Mutex
	failed     int           // outages in a row while closed
	confirming chan struct{} // closed when the confirming probe in flight is done
	confirmed  error         // what that probe answered
	cause      error         // the outage that opened it
	openedAt   time.Time     // when, by the wall clock: only how long it stayed open is logged
	refused    int64         // calls failed at once since
}

// New returns a closed breaker.
func New(o Options) *Breaker {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Threshold = max(o.Threshold, 1)
	return &Breaker{o: o}
}

// Open reports whether calls fail at once now.
func (b *Breaker) Open() bool { return b.open.Load() }

// Do runs call with at most Wait of ctx, unless the breaker is open: then
// it fails at once with ErrOpen (wrapping the outage that opened it). A
// call that fails as an outage counts towards Threshold, unless it failed
// because ctx itself ended (the caller went away or ran out of its own
// time); below Threshold the probe is asked at once, and Do waits for its
// answer. The failure of a call that finds the breaker open afterwards
// (this one, or another, opened it) wraps ErrOpen too. A call that returns
// without an outage starts the count again.
func (b *Breaker) Do(ctx context.Context, call func(context.Context) error) error {
	if b.open.Load() {
		return b.refuse()
	}
	cctx, cancel := context.WithTimeout(ctx, b.o.Wait)
	err := call(cctx)
	timedOut := cctx.Err() != nil
	cancel()
	switch {
	case ctx.Err() != nil:
		// The caller went away: that says nothing of the store.
		return err
	case err == nil || !(b.o.Outage(err) || timedOut):
		b.answered()
		return err
	}
	if b.failure(err) {
		return fmt.Errorf("%s: %w: %w", b.o.Name, ErrOpen, err)
	}
	return err
}

// answered starts the count of failures in a row again.
func (b *Breaker) answered() {
	b.mu.Lock()
	b.failed = 0
	b.mu.Unlock()
}

// failure counts an outage of a call and reports whether the breaker is
// open after it: at Threshold in a row it opens; below, the probe (one at
// a time, shared by the calls failing meanwhile) confirms it or not.
func (b *Breaker) failure(cause error) bool {
	b.mu.Lock()
	if b.open.Load() {
		b.mu.Unlock()
		return true
	}
	b.failed++
	if b.failed >= b.o.Threshold {
		b.tripLocked(cause, fmt.Sprintf("%d calls in a row got no answer", b.failed))
		b.mu.Unlock()
		return true
	}
	done := b.confirming
	if done == nil {
		done = make(chan struct{})
		b.confirming = done
		go b.confirm(done, cause)
	}
	b.mu.Unlock()
	<-done
	return b.open.Load()
}

// confirm asks the probe once, after a call's failure: a store that does
// not answer it either opens the breaker.
func (b *Breaker) confirm(done chan struct{}, cause error) {
	err := b.ping()
	b.mu.Lock()
	if err != nil && !b.open.Load() {
		b.tripLocked(fmt.Errorf("%w (and the ping: %w)", cause, err), "a call and the ping after it got no answer")
	}
	b.confirming = nil
	b.mu.Unlock()
	close(done)
}

func (b *Breaker) refuse() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refused++
	return fmt.Errorf("%s: %w: %w", b.o.Name, ErrOpen, b.cause)
}

// tripLocked opens the breaker and starts its probe, once per opening; b.mu
// is held.
func (b *Breaker) tripLocked(cause error, why string) {
	if b.open.Load() {
		return
	}
	b.cause, b.openedAt, b.refused, b.failed = cause, time.Now(), 0, 0
	b.open.Store(true)
	b.o.Log.Warn("breaker open: "+b.o.Name+" did not answer; calls to it fail at once until it does", "store", b.o.Name, "why", why, "wait", b.o.Wait, "err", cause)
	go b.probe()
}

// probe asks the store every Retry until it answers, then closes the
// breaker.
func (b *Breaker) probe() {
	for {
		time.Sleep(b.o.Retry)
		if b.ping() == nil {
			break
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open.Store(false)
	b.o.Log.Info("breaker closed: "+b.o.Name+" answers again", "store", b.o.Name, "open", time.Since(b.openedAt).Round(time.Millisecond).String(), "refused", b.refused)
}

// ping asks the probe, and takes no answer within Wait for a failure
// whatever the probe does with its context (a client may wait longer than
// its context for a connection to a store that stopped answering: the
// probe then finishes on its own).
func (b *Breaker) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.o.Wait)
	defer cancel()
	answer := make(chan error, 1)
	go func() { answer <- b.o.Probe(ctx) }()
	select {
	case err := <-answer:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: no answer to the ping within %s: %w", b.o.Name, b.o.Wait, ctx.Err())
	}
}
