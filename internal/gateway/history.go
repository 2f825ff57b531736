package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/platform/periodic"
)

// history is what the operators' page charts: each event sampled every
// few seconds by this gateway, from Redis (the admitted counter, the line,
// the active set), over the last 30 minutes. It is kept in memory: a
// gateway that restarts draws from then on, and each replica draws its own
// (the same figures, read from the same Redis).
type history struct {
	every time.Duration
	keep  int

	mu     sync.Mutex
	events map[string]*samples
}

type samples struct {
	ring []sample
	next int
	full bool
}

type sample struct {
	at       time.Time
	admitted int64
	waiting  int64
	active   int64
}

// historyPoint is one point of the chart.
type historyPoint struct {
	At                time.Time `json:"at"`
	AdmittedPerSecond float64   `json:"admittedPerSecond"`
	Waiting           int64     `json:"waiting"`
	Active            int64     `json:"active"`
}

func newHistory(every, span time.Duration) *history {
	return &history{every: every, keep: int(span/every) + 1, events: map[string]*samples{}}
}

func (h *history) add(event string, s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.events[event]
	if e == nil {
		e = &samples{ring: make([]sample, h.keep)}
		h.events[event] = e
	}
	e.ring[e.next] = s
	e.next = (e.next + 1) % h.keep
	e.full = e.full || e.next == 0
}

// ordered is an event's samples, oldest first (h.mu held).
func (h *history) ordered(event string) []sample {
	e := h.events[event]
	if e == nil {
		return nil
	}
	if !e.full {
		return append([]sample(nil), e.ring[:e.next]...)
	}
	return append(append([]sample(nil), e.ring[e.next:]...), e.ring[:e.next]...)
}

// points is the chart of event: admitted per second between samples.
func (h *history) points(event string) []historyPoint {
	h.mu.Lock()
	ss := h.ordered(event)
	h.mu.Unlock()
	out := make([]historyPoint, 0, len(ss))
	for i, s := range ss {
		p := historyPoint{At: s.at.UTC(), Waiting: s.waiting, Active: s.active}
		if i > 0 {
			p.AdmittedPerSecond = perSecond(ss[i-1], s)
		}
		out = append(out, p)
	}
	return out
}

// rate is event's admitted per second between its last two samples.
func (h *history) rate(event string) float64 {
	h.mu.Lock()
	ss := h.ordered(event)
	h.mu.Unlock()
	if len(ss) < 2 {
		return 0
	}
	return perSecond(ss[len(ss)-2], ss[len(ss)-1])
}

func perSecond(a, b sample) float64 {
	dt := b.at.Sub(a.at).Seconds()
	if dt <= 0 || b.admitted < a.admitted {
		return 0
	}
	return float64(int64((float64(b.admitted-a.admitted)/dt)*100+0.5)) / 100
}

// sampleHistory samples every event until ctx ends, while the operators'
// API is on (with no operators' token it costs nothing).
func (s *operatorsAPI) sampleHistory(ctx context.Context) {
	periodic.Run(ctx, periodic.Every(s.history.every), func(ctx context.Context) {
		if cfg := s.config(); cfg.Auth.OperatorsOn() {
			s.sampleOnce(ctx, cfg)
		}
	})
}

func (s *operatorsAPI) sampleOnce(ctx context.Context, cfg *config.Config) {
	ctx, cancel := context.WithTimeout(ctx, s.history.every)
	defer cancel()
	for _, ev := range cfg.Events {
		st, err := s.line.Stats(ctx, ev.ID)
		if err != nil {
			continue
		}
		c, err := s.line.Counts(ctx, ev.ID)
		if err != nil {
			continue
		}
		s.history.add(ev.ID, sample{at: s.now(), admitted: st.Admitted, waiting: c.Waiting, active: c.Active})
	}
}
