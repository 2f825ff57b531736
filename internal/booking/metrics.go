package booking

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/platform/metrics"
)

// Metrics are registered once on the default registry (the only package-level
// state of this package). Names are the contract of DESIGN.md plus the agreed
// booking extras.
var (
	holdsTotal = metrics.CounterVec("booking_holds_total",
		"Hold attempts by result (ok, conflict, invalid).", "result")
	confirmationsTotal = metrics.CounterVec("booking_confirmations_total",
		"Settled payments by result (confirmed, late_refunded, failed, duplicate).", "result")
	dbErrorsTotal = metrics.CounterVec("booking_db_errors_total",
		"Operations that failed on the database or the provider, by operation.", "op")
	holdDuration = metrics.Histogram("booking_hold_duration_seconds",
		"Time to decide a hold (ok or conflict).",
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5})
	refundsTotal = metrics.Counter("booking_refunds_total",
		"Refunds acknowledged by the payment provider.")
	pointsCheckouts = metrics.Counter("booking_points_checkouts_total",
		"Holds paid from a points wallet (also counted as confirmed in booking_confirmations_total).")
)

// Every labelled counter is exported from the start, so that dashboards
// show zeros and increase() sees the first event after a restart.
func init() {
	for _, r := range []string{"ok", "conflict", "invalid"} {
		holdsTotal.WithLabelValues(r)
	}
	for _, r := range []string{"confirmed", "late_refunded", "failed", "duplicate"} {
		confirmationsTotal.WithLabelValues(r)
	}
	for _, op := range []string{"api", "outbox", "reconcile", "stats", "sweep"} {
		dbErrorsTotal.WithLabelValues(op)
	}
}

var (
	descOutboxPending = prometheus.NewDesc("booking_outbox_pending", "Outbox rows not yet published.", nil, nil)
	descOutboxLag     = prometheus.NewDesc("booking_outbox_lag_seconds", "Age of the oldest unpublished outbox row.", nil, nil)
	descSeats         = prometheus.NewDesc("booking_seats", "Seats by showtime and status (an expired hold counts AVAILABLE).", []string{"showtime", "status"}, nil)
	descPayments      = prometheus.NewDesc("booking_payments", "Payments by status.", []string{"status"}, nil)
)

// Collector reads the database-backed gauges at scrape time.
type Collector struct {
	store Store
}

// NewCollector returns a collector on store; register it once.
func NewCollector(store Store) *Collector { return &Collector{store: store} }

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOutboxPending
	ch <- descOutboxLag
	ch <- descSeats
	ch <- descPayments
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := c.store.Stats(ctx)
	if err != nil {
		dbErrorsTotal.WithLabelValues("stats").Inc()
		return
	}
	ch <- prometheus.MustNewConstMetric(descOutboxPending, prometheus.GaugeValue, float64(st.OutboxPending))
	lag := 0.0
	if st.OutboxOldest != nil {
		lag = st.OutboxNow.Sub(*st.OutboxOldest).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descOutboxLag, prometheus.GaugeValue, lag)
	for id, by := range st.Seats {
		for _, status := range []string{Available, Held, Booked} {
			ch <- prometheus.MustNewConstMetric(descSeats, prometheus.GaugeValue, float64(by[status]),
				strconv.FormatInt(id, 10), status)
		}
	}
	for _, status := range []payment.Status{payment.Pending, payment.Succeeded, payment.Failed} {
		ch <- prometheus.MustNewConstMetric(descPayments, prometheus.GaugeValue, float64(st.Payments[string(status)]), string(status))
	}
}
