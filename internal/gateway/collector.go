package gateway

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// queueCollector reads the line's gauges from Redis at scrape time, so the
// figures are never staler than the scrape and no loop polls Redis for them.
type queueCollector struct {
	edge      *edge
	line      EventsLine
	waiting   *prometheus.Desc
	active    *prometheus.Desc
	available *prometheus.Desc
	held      *prometheus.Desc
}

// NewCollector returns the collector of waitroom_queue_waiting and
// waitroom_queue_active for every event the gateway serves.
func (s *Server) NewCollector() prometheus.Collector {
	return &queueCollector{
		edge:      s.edge,
		line:      s.line,
		waiting:   prometheus.NewDesc("waitroom_queue_waiting", "Fans waiting in line (read from Redis at scrape time).", []string{"event"}, nil),
		active:    prometheus.NewDesc("waitroom_queue_active", "Fans admitted and still inside their access window (read from Redis at scrape time).", []string{"event"}, nil),
		available: prometheus.NewDesc("waitroom_places_available", "Places (seats and general-admission) that can be held now, as the booking core published them.", []string{"event"}, nil),
		held:      prometheus.NewDesc("waitroom_places_held", "Places in live holds, as the booking core published them.", []string{"event"}, nil),
	}
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.waiting
	ch <- q.active
	ch <- q.available
	ch <- q.held
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, ev := range q.edge.config().Events {
		c, err := q.line.Counts(ctx, ev.ID)
		if err != nil {
			// Missing series (not zeros) tell the SRE the edge cannot see Redis.
			continue
		}
		ch <- prometheus.MustNewConstMetric(q.waiting, prometheus.GaugeValue, float64(c.Waiting), ev.ID)
		ch <- prometheus.MustNewConstMetric(q.active, prometheus.GaugeValue, float64(c.Active), ev.ID)
		if c.Known {
			ch <- prometheus.MustNewConstMetric(q.available, prometheus.GaugeValue, float64(max(c.Available, 0)), ev.ID)
			ch <- prometheus.MustNewConstMetric(q.held, prometheus.GaugeValue, float64(c.Held), ev.ID)
		}
	}
}
