package admission

import "github.com/prometheus/client_golang/prometheus"

// The package's metrics, for the external tests.
func TickErrorsMetric(event string) prometheus.Collector { return tickErrors.WithLabelValues(event) }
