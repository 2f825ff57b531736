package policy

import (
	"math"

	"github.com/waitroom/waitroom/internal/config"
)

// The capacity model (DESIGN.md, "computed rate"): an event's admission rate
// and cap, when the config does not give them, come from what the booking
// core can serve. docs/QUEUE.md works the concert design's sizing through.

// Rate is the admission rate in force: admit_per_second when given, else the
// capacity model's backend_tps / (calls_per_user × retry_factor) fans per
// second, exactly: 1000 TPS, 3 calls, ×2 retries is 166.666… fans/s, which
// the token bucket refills at as it is. Rounding it up to 167 would admit
// 0.2% more fans than the booking core can serve; rounding only ever happens
// for display (the event route).
func Rate(a config.Admission) float64 {
	if a.AdmitPerSecond != nil {
		return *a.AdmitPerSecond
	}
	c := a.Capacity
	return math.Max(minComputedRate, c.BackendTPS/(c.CallsPerUser*c.RetryFactor))
}

// minComputedRate is the least rate the capacity model yields. A validated
// model (every figure > 0) always gives more than 0; the bound keeps a
// degenerate one (a backend_tps far below one call per second) admitting a fan
// now and then rather than no one while the event says open, and is the floor
// the queue's scripts already put under the rate for ETAs and pollAfter.
const minComputedRate = 0.01

// Cap is the most fans active at once: max_active when given, else the rate
// times the mean session length (Little's law: L = λW), rounded down, so the
// fans inside never need more than backend_tps: with a computed rate,
// floor(backend_tps × session_seconds / (calls_per_user × retry_factor)),
// 1000 × 60 / (3 × 2) = 10,000; with admit_per_second given,
// floor(admit_per_second × session_seconds). At least 1.
func Cap(a config.Admission) int {
	if a.MaxActive != nil {
		return *a.MaxActive
	}
	c := a.Capacity
	fans := Rate(a) * c.SessionSeconds
	if a.AdmitPerSecond == nil {
		// From the model's own figures, so that the one division comes last.
		fans = c.BackendTPS * c.SessionSeconds / (c.CallsPerUser * c.RetryFactor)
	}
	return max(1, floorExact(fans))
}

// floorExact is ⌊x⌋ for an x computed in floating point from decimal
// figures: when x is within a relative 1e-9 of a whole number it is taken as
// that number. The figures' decimal product or quotient may be whole while
// the float one falls just below it: 330 × 60 / (3 × 1.1) is exactly 6,000,
// but 3 × 1.1 is 3.3000000000000003 in binary and the quotient
// 5999.999999999999, whose floor would lose a fan. Float error after these
// few operations is about 1e-15 relative; a true fraction within 1e-9 of a
// whole fan would need figures of ten significant digits.
func floorExact(x float64) int {
	if n := math.Round(x); math.Abs(x-n) <= 1e-9*math.Max(1, math.Abs(n)) {
		return int(n)
	}
	return int(math.Floor(x))
}
