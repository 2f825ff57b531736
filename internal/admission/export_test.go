package admission

import "github.com/prometheus/client_golang/prometheus"

// The package's metrics, for the external tests.
var (
	ConfigReloadsMetric      prometheus.Collector = configReloads
	ConfigReloadErrorsMetric prometheus.Collector = configReloadErrors
)

func TickErrorsMetric(event string) prometheus.Collector { return tickErrors.WithLabelValues(event) }
