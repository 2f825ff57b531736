package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/platform/periodic"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Results of waitroom_notifications_total.
const (
	ResultQueued  = "queued"  // a message queued (once per identity)
	ResultSent    = "sent"    // the SMTP server accepted it
	ResultFailed  = "failed"  // one attempt failed; it is tried again
	ResultExpired = "expired" // still unsent at its deadline: dropped
)

var notifications = metrics.CounterVec("waitroom_notifications_total",
	"Emails to fans, by event, kind and result (queued once per message; sent, failed attempts, expired unsent).",
	"event", "kind", "result")

// Kinds are the kinds of message there are.
var Kinds = []string{KindYourTurn, KindPresaleSelected}

// Export exports the series of event and kinds from the start, so that a
// dashboard shows zeros and increase() sees the first one. A Sender does
// it for every event it sends for (Events), from its start and as a
// reload adds events.
func Export(event string, kinds ...string) {
	for _, k := range kinds {
		for _, r := range []string{ResultQueued, ResultSent, ResultFailed, ResultExpired} {
			notifications.WithLabelValues(event, k, r)
		}
	}
}

// Mail is a message as written for its reader.
type Mail struct {
	Subject string
	Text    string // plain text
	HTML    string // the same as HTML
}

// Renderer writes a message of event (its template, its language, the
// event's facts).
type Renderer func(event string, m Message) (Mail, error)

// Mailer hands a written email to the mail system (SMTP is the one we
// have).
type Mailer interface {
	// Send sends msg (a whole RFC 5322 message) from the envelope
	// address from to to.
	Send(ctx context.Context, from, to string, msg []byte) error
	// Close ends what Send kept open (a connection), if anything.
	Close() error
}

// Sender sends every event's outbox, one sender at a time.
type Sender struct {
	outbox *Outbox
	o      SenderOptions
	owner  string
	held   bool // this sender held the lease at the last round

	mu       sync.Mutex
	exported map[string]bool // events whose series are exported
}

// SenderOptions are a Sender's dependencies and bounds.
type SenderOptions struct {
	Mailer Mailer
	Render Renderer
	// From is the From header ("name <address>"); its address is the
	// envelope sender too.
	From string
	// Events lists the events whose outboxes to send (the config's, read
	// at every round).
	Events func() []string
	// Lease is how long the sender's lease lasts unrenewed (default 15 s):
	// another sender takes over that long after this one dies. It is
	// renewed before every message.
	Lease time.Duration
	// Inflight is how long a message is claimed for its send (default
	// 45 s): no other sender takes it meanwhile; this one gives the send
	// up at three quarters of it, and one that dies mid-send leaves it to
	// be sent again once it lapses. Keep it above the Mailer's own
	// time-out (the admitter: 2 × notify.timeout + 5 s).
	Inflight time.Duration
	// Batch is how many messages of one event one round takes at most
	// (default 100).
	Batch int
	// MaxBackoff bounds the wait between two attempts (default 1 min;
	// the first retry waits 1 s, each next twice as long).
	MaxBackoff time.Duration
	Log        *slog.Logger
	Now        func() time.Time // nil = time.Now
}

// NewSender is a sender of outbox.
func NewSender(outbox *Outbox, o SenderOptions) *Sender {
	if o.Lease == 0 {
		o.Lease = 15 * time.Second
	}
	if o.Inflight == 0 {
		o.Inflight = 45 * time.Second
	}
	if o.Batch == 0 {
		o.Batch = 100
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	s := &Sender{outbox: outbox, o: o, owner: "sender-" + hex.EncodeToString(b[:]), exported: map[string]bool{}}
	s.export()
	return s
}

// export exports the series of every event the sender sends for that has
// none yet: waitroom_notifications_total is on /metrics, at 0, before the
// first email, and a new event's as soon as a reload names it.
func (s *Sender) export() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.o.Events() {
		if !s.exported[ev] {
			Export(ev, Kinds...)
			s.exported[ev] = true
		}
	}
}

// Owner is this sender's id, as its lease names it (rdb.SenderLease).
func (s *Sender) Owner() string { return s.owner }

// Run sends once a second until ctx ends, then gives the lease back.
func (s *Sender) Run(ctx context.Context) {
	defer func() {
		_ = s.o.Mailer.Close()
		if s.held {
			_ = s.outbox.c.ReleaseLease(ctx, rdb.SenderLease, s.owner)
		}
	}()
	periodic.Run(ctx, periodic.Every(time.Second), func(ctx context.Context) { s.Round(ctx) })
}

// Round is one pass: while this sender holds the lease (taking or
// renewing it before every message), every event's due messages, each
// claimed, then sent or put back for later. It reports how many were sent.
func (s *Sender) Round(ctx context.Context) int {
	s.export() // every replica's, lease or not: each serves its own /metrics
	if !s.lease(ctx) {
		return 0
	}
	defer s.o.Mailer.Close()
	sent := 0
	for i, event := range s.o.Events() {
		for n := range s.o.Batch {
			// Renewed before each message: a round of slow sends keeps
			// its lease, and one that lost it stops.
			if (i > 0 || n > 0) && !s.lease(ctx) {
				return sent
			}
			claimed := s.o.Now()
			due, err := s.outbox.take(ctx, event, 1, s.o.Inflight, s.owner)
			if err != nil {
				s.o.Log.Warn("notify: take", "event", event, "err", err)
				break
			}
			if len(due) == 0 {
				break
			}
			if s.send(ctx, event, due[0], claimed) {
				sent++
			}
			if ctx.Err() != nil {
				return sent // the rest is due as it was; this one once its claim lapses
			}
		}
	}
	return sent
}

// lease takes or renews the sender's lease, and says whether it holds it.
func (s *Sender) lease(ctx context.Context) bool {
	ok, err := s.outbox.c.TakeLease(ctx, rdb.SenderLease, s.owner, s.o.Lease)
	if err != nil {
		if ctx.Err() == nil {
			s.o.Log.Warn("notify: lease", "err", err)
		}
		return false
	}
	s.held = ok
	return ok // false: another sender sends
}

// send tries one message once, claimed at claimed, and records how it
// went. The attempt is given up at three quarters of the claim, so that
// no other sender takes the message while this one may still send it.
func (s *Sender) send(ctx context.Context, event string, t taken, claimed time.Time) bool {
	now := s.o.Now()
	log := s.o.Log.With("event", event, "message", t.id, "attempt", t.Attempts+1)
	if !t.NotAfter.IsZero() && now.After(t.NotAfter) {
		notifications.WithLabelValues(event, t.Kind, ResultExpired).Inc()
		log.Warn("notify: message expired unsent", "notAfter", t.NotAfter, "lastError", t.Error)
		if err := s.outbox.settle(ctx, event, t, "expired", 0, s.owner); err != nil {
			log.Warn("notify: settle", "err", err)
		}
		return false
	}
	sendCtx, cancel := context.WithTimeout(ctx, s.o.Inflight*3/4-now.Sub(claimed))
	err := s.deliver(sendCtx, event, t, now)
	cancel()
	if err == nil {
		notifications.WithLabelValues(event, t.Kind, ResultSent).Inc()
		log.Info("notify: sent", "kind", t.Kind)
		// Settled even if ctx ended meanwhile: the server has it.
		if err := s.outbox.settle(context.WithoutCancel(ctx), event, t, "sent", 0, s.owner); err != nil {
			log.Warn("notify: settle", "err", err)
		}
		return true
	}
	notifications.WithLabelValues(event, t.Kind, ResultFailed).Inc()
	t.Attempts++
	t.Error = err.Error()
	wait := s.backoff(t.Attempts)
	log.Warn("notify: send failed, will retry", "err", err, "retryIn", wait)
	if err := s.outbox.settle(context.WithoutCancel(ctx), event, t, "", wait, s.owner); err != nil {
		log.Warn("notify: settle", "err", err)
	}
	return false
}

func (s *Sender) deliver(ctx context.Context, event string, t taken, now time.Time) error {
	m, err := s.o.Render(event, t.Message)
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	msg, err := compose(s.o.From, t.To, t.Lang, messageID(event, t.id, s.o.From), now, m)
	if err != nil {
		return err
	}
	return s.o.Mailer.Send(ctx, envelope(s.o.From), t.To, msg)
}

// backoff is the wait after the n-th failed attempt: 1 s, 2 s, 4 s, … up
// to MaxBackoff, less up to a fifth at random (senders that fail together
// do not retry together).
func (s *Sender) backoff(n int) time.Duration {
	d := time.Duration(float64(time.Second) * math.Pow(2, float64(min(n-1, 30))))
	d = min(d, s.o.MaxBackoff)
	return d - time.Duration(mrand.Int64N(int64(d)/5+1))
}
