package testenv

import "sync"

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
