package loadtest

import (
	"slices"
	"time"

	"github.com/waitroom/waitroom/internal/rehearsal"
)

// latency summarises request durations.
type latency struct {
	N             int
	P50, P99, Max time.Duration
}

// summarize sorts d in place and reads its percentiles (nearest rank:
// rehearsal.Percentile).
func summarize(d []time.Duration) latency {
	slices.Sort(d)
	l := latency{N: len(d), P50: rehearsal.Percentile(d, 50), P99: rehearsal.Percentile(d, 99)}
	if len(d) > 0 {
		l.Max = d[len(d)-1]
	}
	return l
}

// ms formats a duration as milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return trimFloat(v, 2) + " ms"
	case v < 100:
		return trimFloat(v, 1) + " ms"
	}
	return trimFloat(v, 0) + " ms"
}
