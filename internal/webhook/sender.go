package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/waitroom/waitroom/internal/platform/backoff"
	"github.com/waitroom/waitroom/internal/platform/periodic"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Sender makes the deliveries of every event's outbox. Any number may run
// (every admitter runs one): each delivery is claimed by one at a time.
type Sender struct {
	store *Store
	o     SenderOptions
	owner string
}

// SenderOptions are a Sender's dependencies and bounds.
type SenderOptions struct {
	// Endpoints are the receivers the config in force names (read at
	// every round).
	Endpoints func() []Endpoint
	// Events are the config's events (read at every round).
	Events func() []string
	// Timeout bounds one attempt, connection to answer (default 15 s, as
	// the specification recommends).
	Timeout time.Duration
	// Inflight is how long a claimed delivery is nobody else's (default
	// 2 × Timeout + 5 s): a sender that dies mid-attempt leaves it to
	// another after it.
	Inflight time.Duration
	// Window is how long a delivery is retried (default 1 h); past it, it
	// is given up (failed).
	Window time.Duration
	// Backoff is the wait after each failed attempt (default 5 s,
	// doubling to 5 min, a fifth of jitter: three retries within the
	// first minute).
	Backoff backoff.Policy
	// Every is the pause between rounds that found nothing to do
	// (default 1 s).
	Every time.Duration
	// Client makes the requests (default: one that follows no redirect, a
	// 3xx being a failure as the specification says).
	Client *http.Client
	Log    *slog.Logger
	Now    func() time.Time // the webhook-timestamp's clock; nil = time.Now
}

// NewSender is a sender of store's deliveries.
func NewSender(store *Store, o SenderOptions) *Sender {
	o.Timeout = cmp.Or(o.Timeout, 15*time.Second)
	o.Inflight = cmp.Or(o.Inflight, 2*o.Timeout+5*time.Second)
	o.Window = cmp.Or(o.Window, time.Hour)
	o.Backoff = cmp.Or(o.Backoff, backoff.Policy{First: 5 * time.Second, Max: 5 * time.Minute, Jitter: 0.2})
	o.Every = cmp.Or(o.Every, time.Second)
	o.Client = cmp.Or(o.Client, &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }})
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Sender{store: store, o: o, owner: rdb.NewOwner("hooks")}
}

// Run sends until ctx ends: a round every Every, and at once again after
// a round that delivered (the next in each line is due).
func (s *Sender) Run(ctx context.Context) {
	periodic.Run(ctx, periodic.Every(s.o.Every), func(ctx context.Context) {
		for s.Round(ctx) > 0 && ctx.Err() == nil {
		}
	})
}

// Round is one pass over every event: the due head of each receiver's
// line claimed and attempted, all at once, and each recorded. It reports
// how many were delivered.
func (s *Sender) Round(ctx context.Context) int {
	eps := map[string]Endpoint{}
	for _, e := range s.o.Endpoints() {
		eps[e.ID()] = e
	}
	if len(eps) == 0 {
		return 0 // no receiver: nothing costs Redis a call
	}
	goneIDs, err := s.store.gone(ctx)
	if err != nil {
		s.warn(ctx, "webhook: gone", "err", err)
		return 0
	}
	var gone []string
	for id, e := range eps {
		if goneIDs[e.Identity()] {
			gone = append(gone, id)
		}
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		delivered int
	)
	for _, event := range s.o.Events() {
		due, err := s.store.claim(ctx, event, s.owner, s.o.Inflight, s.o.Window, gone)
		if err != nil {
			s.warn(ctx, "webhook: claim", "event", event, "err", err)
			continue
		}
		for _, t := range due {
			switch t.what {
			case StatusGone:
				deliveries.WithLabelValues(t.moment.Type, ResultGone).Inc()
				continue
			case StatusFailed:
				deliveries.WithLabelValues(t.moment.Type, ResultExpired).Inc()
				s.o.Log.Warn("webhook: given up after the retry window", "event", event, "id", t.id, "type", t.moment.Type, "attempts", t.attempts)
				continue
			}
			e, ok := eps[t.ep]
			if !ok {
				// Named by another admitter's config (a reload on its way):
				// it is that one's to make, or it fails at the window.
				_ = s.store.settle(context.WithoutCancel(ctx), event, s.owner, t, "retry", t.attempts, s.o.Every, "the config in force here does not name this receiver")
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if s.attempt(ctx, event, e, t) {
					mu.Lock()
					delivered++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return delivered
}

func (s *Sender) warn(ctx context.Context, msg string, args ...any) {
	if ctx.Err() == nil {
		s.o.Log.Warn(msg, args...)
	}
}

// attempt makes one attempt at t, and records how it went.
func (s *Sender) attempt(ctx context.Context, event string, e Endpoint, t taken) bool {
	log := s.o.Log.With("event", event, "id", t.id, "type", t.moment.Type, "url", e.URL, "attempt", t.attempts+1)
	code, wait, err := s.post(ctx, e, t)
	// Recorded even if ctx ended meanwhile: the receiver answered.
	rec := context.WithoutCancel(ctx)
	switch {
	case err == nil && code >= 200 && code < 300:
		deliveries.WithLabelValues(t.moment.Type, ResultDelivered).Inc()
		log.Info("webhook: delivered", "status", code)
		if err := s.store.settle(rec, event, s.owner, t, StatusDelivered, t.attempts+1, 0, ""); err != nil {
			log.Warn("webhook: settle", "err", err)
		}
		return true
	case err == nil && code == http.StatusGone:
		// The receiver wants nothing more: this delivery, and every other
		// to it, until the config names it again.
		deliveries.WithLabelValues(t.moment.Type, ResultGone).Inc()
		log.Warn("webhook: the receiver answered 410 Gone: no delivery more to it until the config names it again")
		if err := s.store.markGone(rec, e, s.o.Now()); err != nil {
			log.Warn("webhook: gone", "err", err)
		}
		if err := s.store.settle(rec, event, s.owner, t, StatusGone, t.attempts+1, 0, "410 Gone"); err != nil {
			log.Warn("webhook: settle", "err", err)
		}
		return false
	}
	why := fmt.Sprintf("HTTP %d", code)
	if err != nil {
		why = err.Error()
	}
	deliveries.WithLabelValues(t.moment.Type, ResultFailed).Inc()
	n := t.attempts + 1
	wait = max(wait, s.o.Backoff.After(n))
	log.Warn("webhook: attempt failed, will retry", "err", why, "retryIn", wait)
	if err := s.store.settle(rec, event, s.owner, t, "retry", n, wait, why); err != nil {
		log.Warn("webhook: settle", "err", err)
	}
	return false
}

// post sends t to e, signed: the answer's status, and how long it asked
// to be left alone (Retry-After, in seconds, bounded by the backoff's
// bound), or the error of a request that got no answer.
func (s *Sender) post(ctx context.Context, e Endpoint, t taken) (int, time.Duration, error) {
	body, err := t.moment.body()
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	ts := strconv.FormatInt(s.o.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "waitroom-webhooks")
	req.Header.Set("webhook-id", t.id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", Sign(e.Key, t.id, ts, body))
	res, err := s.o.Client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	var wait time.Duration
	if sec, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && sec > 0 {
		wait = min(time.Duration(sec)*time.Second, s.o.Backoff.Max)
	}
	return res.StatusCode, wait, nil
}

// Sign is the webhook-signature of a message: v1, then the base64 of
// HMAC-SHA256 over "<id>.<timestamp>.<body>" keyed by the secret's bytes
// (the Standard Webhooks scheme).
func Sign(key []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + timestamp + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
