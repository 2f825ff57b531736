// Package metrics holds the Prometheus pieces every process shares: the HTTP
// request pair (for net/http and fiber), Redis latency and errors (recorded
// by the queue store's client), and the /metrics handler. Labels are route templates, never raw
// paths, so cardinality stays bounded whatever fans send.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

var (
	httpRequests = CounterVec("waitroom_http_requests_total",
		"HTTP requests answered, by service, route template and status code.", "service", "route", "code")
	httpDuration = HistogramVec("waitroom_http_request_duration_seconds",
		"HTTP request latency by service and route template.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "service", "route")
	redisErrors = CounterVec("waitroom_redis_errors_total",
		"Redis commands or pipelines that failed (not counting redis.Nil).", "service")
	redisDuration = HistogramVec("waitroom_redis_duration_seconds",
		"Latency of Redis commands and pipelines.",
		[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}, "service")
	gateDegraded = CounterVec("waitroom_gate_degraded_total",
		"Passes honoured by their signature, event and exp alone because Redis did not answer whether their ticket is active.", "service")
)

// The config reload pair, the same in every process that follows its file.
var (
	ConfigReloads = Counter("waitroom_config_reloads_total",
		"Config file edits re-read and put in force.")
	ConfigReloadErrors = Counter("waitroom_config_reload_errors_total",
		"Config file edits refused (unreadable, invalid YAML or failed validation); the previous config stayed in force.")
)

// Handler serves the default registry.
func Handler() http.Handler { return promhttp.Handler() }

// unmatched is the route label of requests no route matched.
const unmatched = "unmatched"

// HTTP wraps a net/http handler (a ServeMux with patterns) with the request
// pair; the route label is the matched pattern.
func HTTP(service string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" {
			route = unmatched
		}
		Observe(service, route, rec.code, time.Since(start))
	})
}

// Observe records one request.
func Observe(service, route string, code int, d time.Duration) {
	s := seriesOf(service, route, code)
	s.requests.Inc()
	s.duration.Observe(d.Seconds())
}

// series are the request pair's children for one service, route and code,
// looked up once: WithLabelValues hashes every label on every call, a
// cost the edge pays per request. Routes are templates and codes few, so
// the cache stays small.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

type seriesKey struct {
	service, route string
	code           int
}

var seriesCache sync.Map // seriesKey → *series

func seriesOf(service, route string, code int) *series {
	k := seriesKey{service, route, code}
	if s, ok := seriesCache.Load(k); ok {
		return s.(*series)
	}
	s := &series{
		requests: httpRequests.WithLabelValues(service, route, strconv.Itoa(code)),
		duration: httpDuration.WithLabelValues(service, route),
	}
	seriesCache.Store(k, s)
	return s
}

type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Fiber is the request pair as fiber middleware; the route label is the
// matched route template (c.Route().Path: a string of the route table, not
// of the request's reused buffers, so it needs no copy).
func Fiber(service string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		start := time.Now()
		// An error is answered here, by the app's error handler, so that the
		// status recorded is the one the client gets (an API error is a 4xx,
		// not the 500 an unanswered error would suggest).
		if err := c.Next(); err != nil {
			if herr := c.App().ErrorHandler(c, err); herr != nil {
				_ = c.SendStatus(fiber.StatusInternalServerError)
			}
		}
		code := c.Response().StatusCode()
		// A request that no route matched ends in a Use handler (the 404);
		// label it once, not by its path.
		route := unmatched
		if r := c.Route(); r != nil && r.Method != "USE" {
			route = r.Path
		}
		Observe(service, route, code, time.Since(start))
		return nil
	}
}

// ObserveRedis records one Redis command or pipeline of service (the queue
// store's client hook calls it).
func ObserveRedis(service string, d time.Duration) {
	redisDuration.WithLabelValues(service).Observe(d.Seconds())
}

// RedisFailed counts one failed Redis command, pipeline or dial of service
// (replies such as redis.Nil are not failures).
func RedisFailed(service string) { redisErrors.WithLabelValues(service).Inc() }

// GateDegraded is service's count of passes honoured without Redis (the
// gate's or the booking core's check of the active set did not answer);
// asking for it exports the series at zero.
func GateDegraded(service string) prometheus.Counter { return gateDegraded.WithLabelValues(service) }

// CounterVec registers a counter with labels in the default registry.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return promauto.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// GaugeVec registers a gauge with labels in the default registry.
func GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return promauto.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// HistogramVec registers a histogram with labels in the default registry.
func HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return promauto.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// Counter registers a counter without labels in the default registry.
func Counter(name, help string) prometheus.Counter {
	return promauto.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// Histogram registers a histogram without labels in the default registry.
func Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return promauto.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}
