// Package backoff is the wait between two attempts at something that
// failed and is tried again (a webhook's delivery): it doubles from a first
// wait up to a bound, and a random part of it is taken off, so that many
// attempts that failed together are not all made again together.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is a doubling wait.
type Policy struct {
	// First is the wait after the first failed attempt.
	First time.Duration
	// Max bounds every wait.
	Max time.Duration
	// Jitter is the largest share of a wait taken off at random (0.2 =
	// up to a fifth); 0 = none.
	Jitter float64
}

// After is the wait after the n-th failed attempt (n >= 1): First × 2^(n-1),
// at most Max, less up to Jitter of it.
func (p Policy) After(n int) time.Duration {
	d := p.First
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	if cut := int64(float64(d) * p.Jitter); cut > 0 {
		d -= time.Duration(rand.Int64N(cut + 1))
	}
	return d
}
