package testenv

import (
	"sync"
	"time"
)

// Race runs f(0), …, f(n-1) in n goroutines released together (each
// started and waiting before any runs) and returns once all have returned:
// the start of every test of "exactly one winner" or "never above the cap".
func Race(n int, f func(i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			f(i)
		}()
	}
	start.Done()
	done.Wait()
}

// Repeat runs f in a goroutine of its own, again and again, each run d()
// after the last one ended, until the returned stop is called; stop returns
// once f has. The samplers and background actors a race test runs beside
// its racers.
func Repeat(d func() time.Duration, f func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(d()):
			}
			f()
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
