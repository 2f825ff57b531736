package booking

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/platform/periodic"
)

// HealthPublisher is where the booking core publishes its health summary
// (*operators.Store): the adaptive admitter reads it (docs/OPERATIONS.md).
type HealthPublisher interface {
	PublishBookingHealth(ctx context.Context, h operators.BookingHealth) error
	RemoveBookingHealth(ctx context.Context, replica string) error
}

// healthWindow is what a summary covers: the last 10 s, one slot a second.
const healthWindow = 10

// maxHoldSamples bounds the hold latencies kept per second (beyond it a
// second's p99 is that of its first samples: plenty at any real rate).
const maxHoldSamples = 4096

// holdRoute is the route whose latency tells whether the core struggles:
// the hold is the sale's hot write.
const holdRoute = "POST /api/v1/booking/showtimes/{id}/holds"

// Health measures the booking API's own signals (the hold route's latency,
// the share of 5xx answers) over its last 10 s, and publishes them once a
// second for the admitter (admission.adaptive).
type Health struct {
	line    HealthPublisher
	log     *slog.Logger
	replica string

	// Now is the health's clock (nil = time.Now); set it before use.
	Now func() time.Time

	mu    sync.Mutex
	slots [healthWindow]healthSlot
}

type healthSlot struct {
	sec            int64
	holds          []time.Duration
	requests, errs int64
}

// NewHealth returns a Health publishing to line.
func NewHealth(line HealthPublisher, log *slog.Logger) *Health {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Health{line: line, log: log, replica: hex.EncodeToString(b[:])}
}

func (h *Health) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}

// Wrap measures every answer of next (the booking API's mux, which sets
// the request's route pattern).
func (h *Health) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := h.now()
		rec := &codeRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		h.observe(r.Pattern, rec.code, h.now().Sub(start))
	})
}

func (h *Health) observe(route string, code int, d time.Duration) {
	if route == "GET /healthz" || route == "GET /readyz" {
		return
	}
	sec := h.now().Unix()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.slots[sec%healthWindow]
	if s.sec != sec {
		*s = healthSlot{sec: sec, holds: s.holds[:0]}
	}
	s.requests++
	if code >= 500 {
		s.errs++
	}
	if route == holdRoute && len(s.holds) < maxHoldSamples {
		s.holds = append(s.holds, d)
	}
}

// Summary is the last 10 s as the admitter reads it.
func (h *Health) Summary() operators.BookingHealth {
	now := h.now()
	from := now.Unix() - healthWindow + 1
	out := operators.BookingHealth{Replica: h.replica, At: now}
	var holds []time.Duration
	h.mu.Lock()
	for _, s := range h.slots {
		if s.sec < from {
			continue
		}
		out.Requests += s.requests
		out.Errors += s.errs
		holds = append(holds, s.holds...)
	}
	h.mu.Unlock()
	out.Holds = int64(len(holds))
	if len(holds) > 0 {
		slices.Sort(holds)
		out.HoldP99 = holds[(len(holds)*99+99)/100-1]
	}
	return out
}

// Run publishes the summary every second until ctx ends, then withdraws
// it (a stopped replica says nothing rather than something stale).
func (h *Health) Run(ctx context.Context) {
	periodic.Run(ctx, periodic.Every(time.Second), func(ctx context.Context) {
		if err := h.line.PublishBookingHealth(ctx, h.Summary()); err != nil && ctx.Err() == nil {
			h.log.Warn("publish health summary", "err", err)
		}
	})
	c, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = h.line.RemoveBookingHealth(c, h.replica)
	cancel()
}

// codeRecorder keeps the status code of an answer.
type codeRecorder struct {
	http.ResponseWriter
	code int
}

func (c *codeRecorder) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeRecorder) Unwrap() http.ResponseWriter { return c.ResponseWriter }
