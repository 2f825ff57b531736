package line

import (
	"math"
	"time"
)

// Report is a sale's figures (DESIGN.md "Transparency": the route's JSON is
// the gateway's).
type Report struct {
	Joined, Admitted, Left, Abandoned int64
	// StraightThrough are the joins let in in their own step, after no
	// wait (an auto line with room, DESIGN.md "Always on"; a passthrough
	// line's every join): Admitted counts them too.
	StraightThrough int64
	// MeanPerSecond is the fans admitted per second while the open line
	// was non-empty (Busy, in all); ConfiguredPerSecond the rate configured
	// over that time, or, when nobody ever waited (Busy 0), over the
	// minutes the sale was open.
	MeanPerSecond       float64
	ConfiguredPerSecond float64
	Busy                time.Duration
	Minutes             []ReportMinute
	FIFOInversions      int64
	// RankInversions are the pre-queue entries admitted out of the draw's
	// rank order (DESIGN.md, Fair play, third round: must be 0).
	RankInversions int64
	Wait           Percentiles // seconds, join (or opens_at) → admitted
	ETAError       Percentiles // seconds, actual wait − ETA told at join
	SoldOutAt      *time.Time
}

// ReportMinute is one minute of the sale.
type ReportMinute struct {
	At time.Time
	// Admitted are the fans the line let in (the admitter's ticks);
	// StraightThrough the joins let in at once that minute, apart.
	Admitted        int64
	StraightThrough int64
	Configured      float64 // the configured rate (/s); 0 while closed or paused
	Waiting         int64   // the longest the line was in that minute
	Busy            time.Duration
}

// PerSecond is the minute's admission rate while its line was non-empty
// (over the whole minute if it never was).
func (m ReportMinute) PerSecond() float64 {
	if m.Busy > 0 {
		return float64(m.Admitted) / math.Max(m.Busy.Seconds(), 1)
	}
	return float64(m.Admitted) / 60
}

// Percentiles of a histogram.
type Percentiles struct {
	Count    int64
	P50, P95 float64
}
