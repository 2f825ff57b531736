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

	"github.com/waitroom/waitroom/internal/platform/periodic"
)

// Choice is what decided a session: the fan on the hosted page, or the
// simulator itself.
type Choice string

const (
	ChoiceSucceed Choice = "succeed" // paid; settled (and the callback sent) Delay later
	ChoiceFail    Choice = "fail"    // declined: FAILED
	ChoiceLate    Choice = "late"    // paid; settled only LateBy after the session's end
	ChoiceTwice   Choice = "twice"   // paid; the callback sent twice
	ChoiceNever   Choice = "never"   // paid; no callback: the reconciler has to ask
	ChoiceCancel  Choice = "cancel"  // the fan gave up: FAILED
	ChoiceAuto    Choice = "auto"    // AutoPay: the simulator paid by itself
	ChoiceExpired Choice = "expired" // nobody decided, and the booking core asked after the end: FAILED
)

// PageChoices are the outcomes the hosted page offers for tests and the
// demo, in its order.
var PageChoices = []Choice{ChoiceSucceed, ChoiceFail, ChoiceLate, ChoiceTwice, ChoiceNever}

// Record is one session as the simulator keeps it (in a SessionStore). All
// times are the simulator's clock.
type Record struct {
	PaymentID      string
	IdempotencyKey string
	Reference      string
	AmountCents    int64
	Currency       string
	Description    string
	ReturnURL      string
	CreatedAt      time.Time
	ExpiresAt      time.Time
	// Status is what was decided, in force from DecidedAt (nil: open).
	Status     Status
	Choice     Choice
	DecidedAt  *time.Time
	RefundedAt *time.Time
	// CallbacksLeft callbacks are still to be sent, the next at CallbackAt;
	// Attempts failed so far for the next one.
	CallbacksLeft int
	CallbackAt    *time.Time
	Attempts      int
}

// Decision settles an open session.
type Decision struct {
	Status     Status
	Choice     Choice
	At         time.Time // when the decision takes effect
	Callbacks  int       // how many callbacks to send
	CallbackAt time.Time // when the first is due
}

// SessionStore keeps the simulator's sessions where a restart of the
// process does not lose them (booking/postgres.Sessions: PostgreSQL). Each
// method answers ErrUnknownPayment for a payment it does not have and
// ErrUnavailable when it cannot serve now.
type SessionStore interface {
	// Create stores r, unless a session with r's idempotency key exists;
	// it returns the one stored.
	Create(ctx context.Context, r Record) (Record, error)
	Get(ctx context.Context, paymentID string) (Record, error)
	// Decide settles the session if it is still open, and reports whether
	// it did; it returns the session as it is now.
	Decide(ctx context.Context, paymentID string, d Decision) (Record, bool, error)
	// Refund marks the session refunded at at (once: a repeat keeps the
	// first time).
	Refund(ctx context.Context, paymentID string, at time.Time) error
	// ClaimCallbacks takes up to limit sessions whose next callback is due
	// at now, and holds them until leaseUntil (a simulator that dies while
	// sending leaves them to be sent again then).
	ClaimCallbacks(ctx context.Context, now, leaseUntil time.Time, limit int) ([]Record, error)
	// CallbackSent counts one callback delivered; the next (if any) is due
	// at next.
	CallbackSent(ctx context.Context, paymentID string, next time.Time) error
	// CallbackFailed counts a failed attempt, due again at retryAt; after
	// maxAttempts the callbacks are given up, and it reports so.
	CallbackFailed(ctx context.Context, paymentID string, retryAt time.Time, maxAttempts int) (bool, error)
}

// SimulatorConfig shapes the simulator (config key booking.payment.simulator
// and the keys beyond the contract in README).
type SimulatorConfig struct {
	// Outcome is "succeed" or "fail": what AutoPay sessions do, and the
	// outcome the hosted page offers first.
	Outcome   string
	Delay     time.Duration // how long the provider takes to settle a decision (then its callback comes)
	Duplicate bool          // send every callback twice
	Drop      bool          // never send the callback (the reconciler must settle)
	// Manual: no callback is ever sent (config simulator.enabled false):
	// callbacks come from outside (a real provider, or a test). The page
	// still takes the fan's decision, and Status tells it.
	Manual bool
	// AutoPay: the simulator decides every session by itself, with
	// Outcome, Delay after it opens, nobody on its page (API clients, load
	// tests).
	AutoPay bool
	// LateBy is how long after a session's end a "late" callback comes; the
	// booking core sets it so that the callback lands after the hold lapsed.
	LateBy time.Duration
	// CallbackURL is the booking core's own callback route: the simulator
	// goes through the real, signed path.
	CallbackURL string
	Secret      []byte
	// PageURL is where the fan's browser reaches the hosted page (an
	// origin, e.g. http://localhost:8081): paymentUrl is
	// PageURL/pay/{paymentId}.
	PageURL string
	// Tick is how often due callbacks are sent (default 100ms).
	Tick time.Duration
	// Now is the simulator's clock (default time.Now).
	Now func() time.Time
}

// maxAttempts is how many times one callback is tried before the simulator
// gives up on it (the reconciler then asks).
const maxAttempts = 8

// Simulator is a Provider with a hosted payment page (Handler). Its
// sessions live in a SessionStore, so a restarted booking core's simulator
// still knows every session, its outcome and its refund, and still sends the
// callbacks that were due.
type Simulator struct {
	cfg    SimulatorConfig
	store  SessionStore
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
}

var _ Provider = (*Simulator)(nil)

// NewSimulator returns a simulator keeping its sessions in store; Run sends
// its callbacks.
func NewSimulator(cfg SimulatorConfig, store SessionStore, client *http.Client, log *slog.Logger) *Simulator {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Simulator{cfg: cfg, store: store, client: client, log: log, now: now}
}

// CreateSession opens a session, or returns the one already open for the
// request's idempotency key.
func (s *Simulator) CreateSession(ctx context.Context, r SessionRequest) (Session, error) {
	if r.IdempotencyKey == "" || r.AmountCents < 0 || r.TTL <= 0 {
		return Session{}, fmt.Errorf("payment: session needs a key, an amount and a ttl (%+v)", r)
	}
	now := s.now()
	rec := Record{
		PaymentID: "pay_" + randHex(12), IdempotencyKey: r.IdempotencyKey, Reference: r.Reference,
		AmountCents: r.AmountCents, Currency: r.Currency, Description: r.Description, ReturnURL: r.ReturnURL,
		CreatedAt: now, ExpiresAt: now.Add(r.TTL), Status: Pending,
	}
	if s.cfg.AutoPay {
		d := s.decision(rec, ChoiceAuto, now)
		rec.Status, rec.Choice, rec.DecidedAt = d.Status, d.Choice, &d.At
		rec.CallbacksLeft, rec.CallbackAt = d.Callbacks, &d.CallbackAt
	}
	rec, err := s.store.Create(ctx, rec)
	if err != nil {
		return Session{}, fmt.Errorf("payment: create session: %w", err)
	}
	return s.session(rec), nil
}

func (s *Simulator) session(r Record) Session {
	return Session{PaymentID: r.PaymentID, URL: s.PageURL(r.PaymentID), ExpiresAt: r.ExpiresAt}
}

// PageURL is the hosted page of a payment.
func (s *Simulator) PageURL(paymentID string) string {
	return s.cfg.PageURL + "/pay/" + paymentID
}

// decision is what choice c, made at at, means: the status, when the
// provider has settled it (Delay later: until then the payment is in flight
// and Status says PENDING; a late one only LateBy after the session's end),
// and how often its callback comes then (the configured delay, duplicate
// and drop apply to every choice). An expiry is in force at once and sends
// nothing.
func (s *Simulator) decision(r Record, c Choice, at time.Time) Decision {
	d := Decision{Status: Succeeded, Choice: c, At: at.Add(s.cfg.Delay), Callbacks: 1}
	switch c {
	case ChoiceFail, ChoiceCancel:
		d.Status = Failed
	case ChoiceExpired:
		d.Status, d.At = Failed, at
	case ChoiceAuto:
		if s.cfg.Outcome == "fail" {
			d.Status = Failed
		}
	case ChoiceLate:
		if late := r.ExpiresAt.Add(s.cfg.LateBy); late.After(d.At) {
			d.At = late
		}
	}
	if c == ChoiceTwice || s.cfg.Duplicate {
		d.Callbacks = 2
	}
	if c == ChoiceNever || c == ChoiceExpired || s.cfg.Drop || s.cfg.Manual {
		d.Callbacks = 0
	}
	d.CallbackAt = d.At
	return d
}

// Decide takes the fan's choice on the hosted page for an open session. A
// session decided already stays as it is (a second click, another tab):
// ok is false.
func (s *Simulator) Decide(ctx context.Context, paymentID string, c Choice) (_ Record, ok bool, err error) {
	rec, err := s.store.Get(ctx, paymentID)
	if err != nil {
		return rec, false, err
	}
	if rec.DecidedAt != nil {
		return rec, false, nil
	}
	d := s.decision(rec, c, s.now())
	rec, ok, err = s.store.Decide(ctx, paymentID, d)
	if err != nil {
		return rec, false, fmt.Errorf("payment: decide: %w", err)
	}
	if ok {
		s.log.Info("simulator: payment decided", "paymentId", paymentID, "choice", c, "status", d.Status,
			"callbacks", d.Callbacks, "callbackAt", d.CallbackAt)
	}
	return rec, ok, nil
}

// VerifyCallback checks the contract's signature with the payment secret.
func (s *Simulator) VerifyCallback(h http.Header, body []byte) (Callback, error) {
	return ParseCallback(s.cfg.Secret, h, body)
}

// Status reports what the fan decided, once in force; PENDING while the
// session is open. A session still open past its end is expired when asked
// (FAILED from then on, and its page says so): until then its page still
// takes a payment, so that a payment after the hold lapsed can be made on
// purpose (the booking core refunds it).
func (s *Simulator) Status(ctx context.Context, paymentID string) (Status, error) {
	rec, err := s.store.Get(ctx, paymentID)
	if err != nil {
		return "", err
	}
	now := s.now()
	if rec.DecidedAt == nil && now.After(rec.ExpiresAt) {
		d := s.decision(rec, ChoiceExpired, now)
		if rec, _, err = s.store.Decide(ctx, paymentID, d); err != nil {
			return "", fmt.Errorf("payment: expire: %w", err)
		}
	}
	return effective(rec, now), nil
}

// effective is the record's status at now.
func effective(r Record, now time.Time) Status {
	if r.DecidedAt == nil || r.DecidedAt.After(now) {
		return Pending
	}
	return r.Status
}

// Refund records the refund of a payment; repeating it is harmless.
func (s *Simulator) Refund(ctx context.Context, paymentID string) error {
	return s.store.Refund(ctx, paymentID, s.now())
}

// Refunded reports whether paymentID was refunded (for tests and the page).
func (s *Simulator) Refunded(ctx context.Context, paymentID string) bool {
	rec, err := s.store.Get(ctx, paymentID)
	return err == nil && rec.RefundedAt != nil
}

// Run sends due callbacks every Tick until ctx ends. Nothing to send with
// Manual.
func (s *Simulator) Run(ctx context.Context) {
	if s.cfg.Manual {
		return
	}
	periodic.Run(ctx, periodic.Every(s.cfg.Tick), func(ctx context.Context) {
		if err := s.DeliverOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("simulator: callbacks not sent this tick", "err", err)
		}
	})
}

// claimBatch is how many callbacks one pass claims at a time, and lease how
// long a claimed one is held before another pass may send it again.
const (
	claimBatch = 64
	lease      = 30 * time.Second
)

// DeliverOnce sends every callback due now, a batch at a time, each batch
// concurrently; a callback the booking core did not take is retried later,
// with back-off, like a real provider's webhook.
func (s *Simulator) DeliverOnce(ctx context.Context) error {
	for {
		now := s.now()
		due, err := s.store.ClaimCallbacks(ctx, now, now.Add(lease), claimBatch)
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		for _, r := range due {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.deliver(ctx, r)
			}()
		}
		wg.Wait()
		if len(due) < claimBatch || ctx.Err() != nil {
			return nil
		}
	}
}

func (s *Simulator) deliver(ctx context.Context, r Record) {
	body, _ := json.Marshal(Callback{PaymentID: r.PaymentID, Status: r.Status})
	err := s.post(ctx, body)
	if err == nil {
		if err := s.store.CallbackSent(ctx, r.PaymentID, s.now()); err != nil {
			s.log.Warn("simulator: callback sent but not recorded (it will be sent again)", "paymentId", r.PaymentID, "err", err)
		}
		return
	}
	if ctx.Err() != nil {
		return // the lease lapses and the next start sends it
	}
	backoff := min(200*time.Millisecond<<r.Attempts, 30*time.Second)
	gaveUp, ferr := s.store.CallbackFailed(ctx, r.PaymentID, s.now().Add(backoff), maxAttempts)
	switch {
	case ferr != nil:
		s.log.Warn("simulator: callback failed and not recorded", "paymentId", r.PaymentID, "err", ferr)
	case gaveUp:
		s.log.Warn("simulator: callback given up; the reconciler will ask", "paymentId", r.PaymentID, "err", err, "attempts", r.Attempts+1)
	default:
		s.log.Warn("simulator: callback not accepted, retrying", "paymentId", r.PaymentID, "err", err, "attempt", r.Attempts+1)
	}
}

// post delivers one callback, signed.
func (s *Simulator) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(s.cfg.Secret, body))
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
