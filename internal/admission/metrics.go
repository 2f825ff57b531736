package admission

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The admitter's metrics (names fixed by DESIGN.md and the agreed list).
// Counters are per replica: sum them across replicas in queries.
var (
	admittedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "waitroom_admitted_total",
		Help: "Waiting tickets admitted (moved to active) by this admitter.",
	}, []string{"event"})
	abandonedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "waitroom_abandoned_total",
		Help: "Waiting tickets dropped because their fan stopped polling for abandon_after.",
	}, []string{"event"})
	admitRate = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "waitroom_admit_rate",
		Help: "Effective admission rate (fans/s) measured in Redis while fans wait; the rate ETAs use. It starts again from the rate in force when that changes (an override, a reload, the adaptive admitter's halving or step).",
	}, []string{"event"})
	admitRateConfigured = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "waitroom_admit_rate_configured",
		Help: "Admission rate in force (admit_per_second, or computed from capacity); 0 while the event admits nobody on purpose (paused, closed, before opening).",
	}, []string{"event"})
	maxActiveGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "waitroom_max_active",
		Help: "Most fans active at once (max_active, or computed by Little's law).",
	}, []string{"event"})
	tickDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "waitroom_admitter_tick_duration_seconds",
		Help:    "Duration of one event's tick (publish settings + admission script).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	}, []string{"event"})
	tickErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "waitroom_admitter_tick_errors_total",
		Help: "Ticks of an event that failed (other events are not affected).",
	}, []string{"event"})
)

// forgetEvent drops the gauges of an event no longer in the config, so a
// dashboard does not show a stale rate for it.
func forgetEvent(id string) {
	admitRate.DeleteLabelValues(id)
	admitRateConfigured.DeleteLabelValues(id)
	maxActiveGauge.DeleteLabelValues(id)
}
