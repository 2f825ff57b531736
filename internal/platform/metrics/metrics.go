// Package metrics holds the Prometheus pieces every process shares: the HTTP
// request pair (for net/http and fiber), a go-redis hook for Redis latency
// and errors, and the /metrics handler. Labels are route templates, never raw
// paths, so cardinality stays bounded whatever fans send.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

var (
	httpRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "waitroom_http_requests_total",
		Help: "HTTP requests answered, by service, route template and status code.",
	}, []string{"service", "route", "code"})
	httpDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "waitroom_http_request_duration_seconds",
		Help:    "HTTP request latency by service and route template.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"service", "route"})
	redisErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "waitroom_redis_errors_total",
		Help: "Redis commands or pipelines that failed (not counting redis.Nil).",
	}, []string{"service"})
	redisDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "waitroom_redis_duration_seconds",
		Help:    "Latency of Redis commands and pipelines.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	}, []string{"service"})
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
	httpRequests.WithLabelValues(service, route, strconv.Itoa(code)).Inc()
	httpDuration.WithLabelValues(service, route).Observe(d.Seconds())
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
		err := c.Next()
		code := c.Response().StatusCode()
		if err != nil {
			var fe *fiber.Error
			if errors.As(err, &fe) {
				code = fe.Code
			} else {
				code = fiber.StatusInternalServerError
			}
		}
		// A request that no route matched ends in a Use handler (the 404);
		// label it once, not by its path.
		route := unmatched
		if r := c.Route(); r != nil && r.Method != "USE" {
			route = r.Path
		}
		Observe(service, route, code, time.Since(start))
		return err
	}
}

// RedisHook measures every command and pipeline of a go-redis client.
func RedisHook(service string) redis.Hook { return redisHook{service: service} }

type redisHook struct{ service string }

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			redisErrors.WithLabelValues(h.service).Inc()
		}
		return c, err
	}
}

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.done(start, err)
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		h.done(start, err)
		return err
	}
}

func (h redisHook) done(start time.Time, err error) {
	redisDuration.WithLabelValues(h.service).Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, redis.Nil) && !isScriptMiss(err) {
		redisErrors.WithLabelValues(h.service).Inc()
	}
}

// isScriptMiss: go-redis tries EVALSHA first and falls back to EVAL on
// NOSCRIPT; that first miss is not a fault.
func isScriptMiss(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re.Error()) >= 8 && re.Error()[:8] == "NOSCRIPT"
}
