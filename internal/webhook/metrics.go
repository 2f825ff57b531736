package webhook

import "github.com/waitroom/waitroom/internal/platform/metrics"

// Results of waitroom_webhook_deliveries_total.
const (
	ResultQueued    = "queued"    // a delivery made (once per moment and receiver)
	ResultDelivered = "delivered" // the receiver answered 2xx
	ResultFailed    = "failed"    // an attempt failed; it is tried again
	ResultExpired   = "expired"   // given up after the retry window (the log's failed)
	ResultGone      = "gone"      // not made: the receiver answered 410 Gone
)

var results = []string{ResultQueued, ResultDelivered, ResultFailed, ResultExpired, ResultGone}

var deliveries = metrics.CounterVec("waitroom_webhook_deliveries_total",
	"Webhook deliveries, by type and result (queued once per moment and receiver; delivered, failed attempts, expired after the retry window, gone).",
	"type", "result")

// Export exports every series from the start, so that a dashboard shows
// zeros and increase() sees the first one.
func Export() {
	for _, t := range Types {
		for _, r := range results {
			deliveries.WithLabelValues(t, r)
		}
	}
}

func queued(t string, n int) {
	if n > 0 {
		deliveries.WithLabelValues(t, ResultQueued).Add(float64(n))
	}
}
