package payment

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// SimulatorConfig shapes the simulator (config key booking.payment.simulator).
type SimulatorConfig struct {
	Outcome   string        // "succeed" or "fail"
	Delay     time.Duration // how long after the session opens the fan "pays"
	Duplicate bool          // send every callback twice
	Drop      bool          // never send the callback (the reconciler must settle)
	// Manual sessions never settle by themselves: the callback comes from
	// outside (config simulator.enabled false: a real provider, or a test).
	Manual bool
	// CallbackURL is the booking core's own callback route: the simulator goes
	// through the real, signed path.
	CallbackURL string
	Secret      []byte
	// PageURL is the prefix of the paymentUrl shown to the fan; the payment id
	// is appended.
	PageURL string
}

// Simulator is an in-process Provider that settles every session by itself
// after Delay and POSTs the signed callback, once, twice or never.
type Simulator struct {
	cfg    SimulatorConfig
	client *http.Client
	log    *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	payments  map[string]*simPayment
	byBooking map[string]string
}

type simPayment struct {
	id       string
	status   Status
	refunded bool
	timer    *time.Timer
	session  Session
}

// NewSimulator returns a running simulator; Close stops it.
func NewSimulator(cfg SimulatorConfig, client *http.Client, log *slog.Logger) *Simulator {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Simulator{
		cfg: cfg, client: client, log: log, ctx: ctx, cancel: cancel,
		payments: map[string]*simPayment{}, byBooking: map[string]string{},
	}
}

// CreateSession opens a session for bookingID, or returns the one already
// open for it.
func (s *Simulator) CreateSession(ctx context.Context, bookingID string, amountCents int64, ttl time.Duration) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.byBooking[bookingID]; ok {
		return s.payments[id].session, nil
	}
	if err := s.ctx.Err(); err != nil {
		return Session{}, fmt.Errorf("payment: simulator closed")
	}
	id := "pay_" + randHex(12)
	p := &simPayment{id: id, status: Pending, session: Session{
		PaymentID: id, URL: s.cfg.PageURL + id, ExpiresAt: time.Now().Add(ttl),
	}}
	s.payments[id] = p
	s.byBooking[bookingID] = id
	if s.cfg.Manual {
		return p.session, nil
	}
	s.wg.Add(1)
	p.timer = time.AfterFunc(s.cfg.Delay, func() {
		defer s.wg.Done()
		s.settle(p)
	})
	return p.session, nil
}

func (s *Simulator) settle(p *simPayment) {
	st := Succeeded
	if s.cfg.Outcome == "fail" {
		st = Failed
	}
	s.mu.Lock()
	p.status = st
	s.mu.Unlock()
	if s.cfg.Drop {
		s.log.Info("simulator: callback dropped", "paymentId", p.id, "status", st)
		return
	}
	body, _ := json.Marshal(Callback{PaymentID: p.id, Status: st})
	n := 1
	if s.cfg.Duplicate {
		n = 2
	}
	for range n {
		s.post(body)
	}
}

// post delivers one callback, retrying a few times like a real provider
// would when the receiver is not ready (e.g. the checkout has not committed).
func (s *Simulator) post(body []byte) {
	backoff := 200 * time.Millisecond
	for attempt := 0; attempt < 5; attempt++ {
		req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.cfg.CallbackURL, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(SignatureHeader, Sign(s.cfg.Secret, body))
		resp, err := s.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		s.log.Warn("simulator: callback not accepted", "err", err, "attempt", attempt+1)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// Status reports the payment's status (PENDING until Delay has passed).
func (s *Simulator) Status(ctx context.Context, paymentID string) (Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[paymentID]
	if !ok {
		return "", ErrUnknownPayment
	}
	return p.status, nil
}

// Refund records the refund of a payment; repeating it is harmless.
func (s *Simulator) Refund(ctx context.Context, paymentID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[paymentID]
	if !ok {
		return ErrUnknownPayment
	}
	p.refunded = true
	return nil
}

// Refunded reports whether paymentID was refunded (for tests and the page).
func (s *Simulator) Refunded(paymentID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[paymentID]
	return ok && p.refunded
}

// Close stops pending timers and waits for callbacks in flight.
func (s *Simulator) Close() {
	s.cancel()
	s.mu.Lock()
	for _, p := range s.payments {
		if p.timer != nil && p.timer.Stop() {
			s.wg.Done()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
