package admission

import (
	"github.com/waitroom/waitroom/internal/platform/metrics"
)

// The admitter's metrics (names fixed by DESIGN.md and the agreed list).
// Counters are per replica: sum them across replicas in queries.
var (
	admittedTotal = metrics.CounterVec("waitroom_admitted_total",
		"Waiting tickets admitted (moved to active) by this admitter.", "event")
	abandonedTotal = metrics.CounterVec("waitroom_abandoned_total",
		"Places given up as abandoned: waiting tickets whose fan stopped polling for abandon_after, and away fans' places let in but never claimed within away_claim_within.", "event")
	admitRate = metrics.GaugeVec("waitroom_admit_rate",
		"Effective admission rate (fans/s) measured in Redis while fans wait; the rate ETAs use. It starts again from the rate in force when that changes (an override, a reload, the adaptive admitter's halving or step).", "event")
	admitRateConfigured = metrics.GaugeVec("waitroom_admit_rate_configured",
		"Admission rate in force (admit_per_second, or computed from capacity); 0 while the event admits nobody on purpose (paused, closed, before opening).", "event")
	maxActiveGauge = metrics.GaugeVec("waitroom_max_active",
		"Most fans active at once (max_active, or computed by Little's law).", "event")
	tickDuration = metrics.HistogramVec("waitroom_admitter_tick_duration_seconds",
		"Duration of one event's tick (publish settings + admission script).",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}, "event")
	tickErrors = metrics.CounterVec("waitroom_admitter_tick_errors_total",
		"Ticks of an event that failed (other events are not affected).", "event")
)

// forgetEvent drops the gauges of an event no longer in the config, so a
// dashboard does not show a stale rate for it.
func forgetEvent(id string) {
	admitRate.DeleteLabelValues(id)
	admitRateConfigured.DeleteLabelValues(id)
	maxActiveGauge.DeleteLabelValues(id)
}
