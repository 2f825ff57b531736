package loadtest

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted,
// which must be in ascending order; the zero value when sorted is empty.
// Nearest rank, not interpolation: every figure reported is a value that
// was really observed.
func percentile[T cmp.Ordered](sorted []T, p float64) T {
	var zero T
	if len(sorted) == 0 {
		return zero
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// latency summarises request durations.
type latency struct {
	N             int
	P50, P99, Max time.Duration
}

// summarize sorts d in place and reads its percentiles.
func summarize(d []time.Duration) latency {
	slices.Sort(d)
	l := latency{N: len(d), P50: percentile(d, 50), P99: percentile(d, 99)}
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
