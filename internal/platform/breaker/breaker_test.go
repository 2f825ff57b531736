package breaker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/platform/breaker"
)

var errDown = errors.New("store down")

// A store that stops answering: the first call waits Wait and opens the
// breaker; the calls after it fail at once with ErrOpen and the outage,
// never reaching the store; the probe closes it once the store answers, and
// calls go through again. A refusal that is no outage, and a caller that
// gave up, open nothing.
func TestBreaker(t *testing.T) {
	var (
		silent atomic.Bool // the store does not answer
		calls  atomic.Int32
	)
	store := func(ctx context.Context) error {
		calls.Add(1)
		if silent.Load() {
			<-ctx.Done()
			return errors.Join(errDown, ctx.Err())
		}
		return nil
	}
	b := breaker.New(breaker.Options{
		Name: "store", Wait: 100 * time.Millisecond, Retry: 10 * time.Millisecond,
		Probe:  store,
		Outage: func(err error) bool { return errors.Is(err, errDown) },
	})

	refusal := errors.New("no such thing")
	if err := b.Do(context.Background(), func(context.Context) error { return refusal }); err != refusal || b.Open() {
		t.Fatalf("a refusal: %v, open %v; want the refusal, closed", err, b.Open())
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	silent.Store(true)
	if err := b.Do(gone, store); err == nil || b.Open() {
		t.Fatalf("a caller that gave up: %v, open %v; want its error, closed", err, b.Open())
	}

	began := time.Now()
	if err := b.Do(context.Background(), store); !errors.Is(err, errDown) || !b.Open() {
		t.Fatalf("the store silent: %v, open %v; want the outage, open", err, b.Open())
	}
	if waited := time.Since(began); waited < 100*time.Millisecond {
		t.Errorf("the first call gave up after %s; want Wait (100ms)", waited)
	}
	for i := 0; i < 10; i++ {
		err := b.Do(context.Background(), func(context.Context) error {
			t.Fatal("a call reached the store while the breaker was open")
			return nil
		})
		if !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, errDown) {
			t.Fatalf("call %d while open: %v; want ErrOpen wrapping the outage", i, err)
		}
	}

	silent.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for b.Open() {
		if time.Now().After(deadline) {
			t.Fatal("the breaker stayed open 5s after the store answered again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := b.Do(context.Background(), store); err != nil {
		t.Fatalf("after the store answered again: %v", err)
	}
}
