package gateway

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// queueCollector reads the line's gauges from Redis at scrape time, so the
// figures are never staler than the scrape and no loop polls Redis for them.
type queueCollector struct {
	s       *Server
	waiting *prometheus.Desc
	active  *prometheus.Desc
}

// NewCollector returns the collector of waitroom_queue_waiting and
// waitroom_queue_active for every event the gateway serves.
func (s *Server) NewCollector() prometheus.Collector {
	return &queueCollector{
		s:       s,
		waiting: prometheus.NewDesc("waitroom_queue_waiting", "Fans waiting in line (read from Redis at scrape time).", []string{"event"}, nil),
		active:  prometheus.NewDesc("waitroom_queue_active", "Fans admitted and still inside their access window (read from Redis at scrape time).", []string{"event"}, nil),
	}
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.waiting
	ch <- q.active
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, ev := range q.s.config().Events {
		c, err := q.s.line.Counts(ctx, ev.ID)
		if err != nil {
			// Missing series (not zeros) tell the SRE the edge cannot see Redis.
			continue
		}
		ch <- prometheus.MustNewConstMetric(q.waiting, prometheus.GaugeValue, float64(c.Waiting), ev.ID)
		ch <- prometheus.MustNewConstMetric(q.active, prometheus.GaugeValue, float64(c.Active), ev.ID)
	}
}
