// Package breaker keeps a request from waiting on a store that stopped
// answering (DESIGN.md, "When parts fail"): a call waits at most Wait for
// the store; once a call fails as an outage, the breaker opens and the
// calls after it fail at once, with the outage that opened it, while one
// probe in the background asks the store again every Retry and closes the
// breaker as soon as it answers. The caller decides what a failed call
// means (the gate honours a valid pass by its signature alone; the booking
// core's inventory waits for its next sync).
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

// ErrOpen: the breaker is open, the call was not made. The error returned
// wraps it and the outage that opened the breaker.
var ErrOpen = errors.New("breaker open: the store did not answer lately")

// Options shape a breaker.
type Options struct {
	// Name says which store, as the logs name it (e.g. "redis").
	Name string
	// Wait bounds each call while the breaker is closed.
	Wait time.Duration
	// Retry is how often the probe asks the store while the breaker is
	// open.
	Retry time.Duration
	// Probe asks the store whether it answers (a ping), within its
	// context.
	Probe func(context.Context) error
	// Outage reports whether a call's error means the store cannot serve
	// (as opposed to a refusal or a bug, which open nothing).
	Outage func(error) bool
	Log    *slog.Logger
}

// Breaker guards the calls of one process to one store. Its zero value is
// not usable: build it with New.
type Breaker struct {
	o    Options
	open atomic.Bool

	mu       sync.Mutex
	cause    error     // the outage that opened it
	openedAt time.Time // when
	refused  int64     // calls failed at once since
}

// New returns a closed breaker.
func New(o Options) *Breaker {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Breaker{o: o}
}

// Open reports whether calls fail at once now.
func (b *Breaker) Open() bool { return b.open.Load() }

// Do runs call with at most Wait of ctx, unless the breaker is open: then
// it fails at once with ErrOpen (wrapping the outage that opened it). A
// call that fails as an outage opens the breaker, unless it failed because
// ctx itself ended (the caller went away or ran out of its own time).
func (b *Breaker) Do(ctx context.Context, call func(context.Context) error) error {
	if b.open.Load() {
		return b.refuse()
	}
	cctx, cancel := context.WithTimeout(ctx, b.o.Wait)
	defer cancel()
	err := call(cctx)
	if err != nil && ctx.Err() == nil && (b.o.Outage(err) || cctx.Err() != nil) {
		b.trip(err)
	}
	return err
}

func (b *Breaker) refuse() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refused++
	return fmt.Errorf("%s: %w: %w", b.o.Name, ErrOpen, b.cause)
}

// trip opens the breaker and starts its probe, once per opening.
func (b *Breaker) trip(cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open.Load() {
		return
	}
	b.cause, b.openedAt, b.refused = cause, time.Now(), 0
	b.open.Store(true)
	b.o.Log.Warn("breaker open: "+b.o.Name+" did not answer; calls to it fail at once until it does", "store", b.o.Name, "wait", b.o.Wait, "err", cause)
	go b.probe()
}

// probe asks the store every Retry until it answers, then closes the
// breaker.
func (b *Breaker) probe() {
	for {
		time.Sleep(b.o.Retry)
		ctx, cancel := context.WithTimeout(context.Background(), b.o.Wait)
		err := b.o.Probe(ctx)
		cancel()
		if err == nil {
			break
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open.Store(false)
	b.o.Log.Info("breaker closed: "+b.o.Name+" answers again", "store", b.o.Name, "open", time.Since(b.openedAt).Round(time.Millisecond).String(), "refused", b.refused)
}
