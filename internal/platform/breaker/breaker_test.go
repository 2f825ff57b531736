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

// A store that fails now and then does not open the breaker: one call that
// finds no answer within Wait (or fails as an outage) while the store
// answers its probe is that call's failure alone; a slow answer that comes
// within Wait is an answer. Only Threshold failures in a row open it, or one
// failure whose probe fails too (the store does not answer a ping either).
// The call that opens it, and any in flight that fail once it is open, say
// so (ErrOpen): the caller falls back for them too.
func TestBreakerOpensOnFailuresInARowOrAFailedProbe(t *testing.T) {
	type store struct {
		calls, probes       atomic.Int32
		silent, probeSilent atomic.Bool
		slow                atomic.Int64 // an answer this late (ns), within Wait
	}
	setup := func(t *testing.T) (*store, *breaker.Breaker, func(context.Context) error) {
		s := &store{}
		answer := func(ctx context.Context, silent bool) error {
			if silent {
				<-ctx.Done()
				return errors.Join(errDown, ctx.Err())
			}
			if d := time.Duration(s.slow.Load()); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}
		b := breaker.New(breaker.Options{
			Name: "store", Wait: 100 * time.Millisecond, Retry: 10 * time.Millisecond, Threshold: 3,
			Probe: func(ctx context.Context) error {
				s.probes.Add(1)
				return answer(ctx, s.probeSilent.Load())
			},
			Outage: func(err error) bool { return errors.Is(err, errDown) },
		})
		call := func(ctx context.Context) error {
			s.calls.Add(1)
			return answer(ctx, s.silent.Load())
		}
		return s, b, call
	}

	t.Run("one call without an answer, the probe answers", func(t *testing.T) {
		s, b, call := setup(t)
		s.silent.Store(true)
		err := b.Do(context.Background(), call)
		if !errors.Is(err, errDown) || errors.Is(err, breaker.ErrOpen) || b.Open() {
			t.Fatalf("one call timed out, the probe answered: %v, open %v; want the call's own failure, closed", err, b.Open())
		}
		if s.probes.Load() != 1 {
			t.Errorf("probes after a failed call: %d; want 1 (the failure confirmed or not at once)", s.probes.Load())
		}
		s.silent.Store(false)
		if err := b.Do(context.Background(), call); err != nil || b.Open() {
			t.Fatalf("the next call: %v, open %v; want an answer, closed", err, b.Open())
		}
	})
	t.Run("slow answers within Wait are answers", func(t *testing.T) {
		s, b, call := setup(t)
		s.slow.Store(int64(60 * time.Millisecond))
		for i := 0; i < 5; i++ {
			if err := b.Do(context.Background(), call); err != nil || b.Open() {
				t.Fatalf("slow answer %d: %v, open %v; want an answer, closed", i, err, b.Open())
			}
		}
		if s.probes.Load() != 0 {
			t.Errorf("slow answers made %d probes; want none", s.probes.Load())
		}
	})
	t.Run("a success between failures starts the count again", func(t *testing.T) {
		s, b, call := setup(t)
		for i := 0; i < 3; i++ {
			s.silent.Store(true)
			for j := 0; j < 2; j++ {
				if err := b.Do(context.Background(), call); errors.Is(err, breaker.ErrOpen) || b.Open() {
					t.Fatalf("round %d, failure %d: %v, open %v; want closed", i, j, err, b.Open())
				}
			}
			s.silent.Store(false)
			if err := b.Do(context.Background(), call); err != nil {
				t.Fatalf("round %d, the answer: %v", i, err)
			}
		}
	})
	t.Run("three failures in a row open it", func(t *testing.T) {
		s, b, call := setup(t)
		s.silent.Store(true)
		for i := 0; i < 2; i++ {
			if err := b.Do(context.Background(), call); errors.Is(err, breaker.ErrOpen) || b.Open() {
				t.Fatalf("failure %d: %v, open %v; want closed", i, err, b.Open())
			}
		}
		err := b.Do(context.Background(), call)
		if !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, errDown) || !b.Open() {
			t.Fatalf("the third failure in a row: %v, open %v; want ErrOpen wrapping the outage, open", err, b.Open())
		}
		n := s.calls.Load()
		if err := b.Do(context.Background(), call); !errors.Is(err, breaker.ErrOpen) || s.calls.Load() != n {
			t.Fatalf("a call while open: %v, reached the store %v; want ErrOpen at once", err, s.calls.Load() != n)
		}
		s.silent.Store(false)
		waitClosed(t, b)
	})
	t.Run("one failure whose probe fails too opens it", func(t *testing.T) {
		s, b, call := setup(t)
		s.silent.Store(true)
		s.probeSilent.Store(true)
		err := b.Do(context.Background(), call)
		if !errors.Is(err, breaker.ErrOpen) || !b.Open() {
			t.Fatalf("a failure and a silent probe: %v, open %v; want ErrOpen, open", err, b.Open())
		}
		s.silent.Store(false)
		s.probeSilent.Store(false)
		waitClosed(t, b)
	})
	t.Run("calls failing together both fall back once it opens", func(t *testing.T) {
		s, b, call := setup(t)
		s.silent.Store(true)
		s.probeSilent.Store(true)
		errs := make(chan error, 2)
		for i := 0; i < 2; i++ {
			go func() { errs <- b.Do(context.Background(), call) }()
		}
		for i := 0; i < 2; i++ {
			if err := <-errs; !errors.Is(err, breaker.ErrOpen) {
				t.Errorf("a call failed while the probe failed: %v; want ErrOpen", err)
			}
		}
	})
}

// waitClosed waits until b closes (its probe found the store again).
func waitClosed(t *testing.T, b *breaker.Breaker) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.Open() {
		if time.Now().After(deadline) {
			t.Fatal("the breaker stayed open 5s after the store answered again")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
