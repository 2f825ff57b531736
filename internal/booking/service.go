package booking

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/waitroom/waitroom/internal/payment"
)

// Pass is who is calling, from a verified access JWT.
type Pass struct {
	// Customer is who every per-customer rule applies to: the account
	// ("acct:<id>") when the place is an account's, across all its
	// tickets, else the ticket id.
	Customer string
	Ticket   string // the ticket id (JWT sub)
	Account  string // the account (JWT acct), "" = none
	Event    string // the event the pass admits to (JWT evt)
}

// accountCustomer is the customer an account is. The prefix keeps the two
// kinds of customers apart: a ticket id never contains ':'.
const accountCustomer = "acct:"

// accountOf is the account a customer is, or "" for a ticket's.
func accountOf(customer string) string {
	account, _ := strings.CutPrefix(customer, accountCustomer)
	if account == customer {
		return ""
	}
	return account
}

// NewPass is the pass of ticket (of account, "" = none) for event.
func NewPass(ticket, account, event string) Pass {
	p := Pass{Customer: ticket, Ticket: ticket, Account: account, Event: event}
	if account != "" {
		p.Customer = accountCustomer + account
	}
	return p
}

// Settings are the booking rules (the process translates its config).
type Settings struct {
	HoldTTL         time.Duration
	SessionTTL      time.Duration
	ReconcileAfter  time.Duration
	MaxSeatsPerHold int
	HoldsPerMinute  int
	// HoldAttemptsPerMinute and ReholdCooldown: see Fair play in DESIGN.md.
	HoldAttemptsPerMinute int
	ReholdCooldown        time.Duration
	// Currency is the ISO 4217 code every *_cents amount is in.
	Currency string
	// ReturnURL is the gateway's origin as fans' browsers reach it: the
	// provider sends the fan back to ReturnURL/e/{event}/book?booking=<id>
	// ("" = a path on whatever origin the provider is on).
	ReturnURL string
}

// Service applies the booking rules over a Store and a payment provider.
type Service struct {
	store Store
	pay   payment.Provider
	cat   *Catalog
	set   Settings
	log   *slog.Logger
	inv   *Inventory // nil: the waiting room is not told what is left
}

// NewService returns a service selling cat (which event owns a showtime,
// its geometry, blocks and prices) under set.
func NewService(store Store, pay payment.Provider, cat *Catalog, set Settings, log *slog.Logger) *Service {
	return &Service{store: store, pay: pay, cat: cat, set: set, log: log}
}

// WithInventory has the service tell inv of every hold, release and
// payment, and returns the service.
func (s *Service) WithInventory(inv *Inventory) *Service {
	s.inv = inv
	return s
}

// NewID returns a random UUID (version 4).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// showtime finds the showtime and checks that the pass's event owns it.
func (s *Service) showtime(p Pass, id int64) (*Showtime, error) {
	st, ok := s.cat.Showtime(id)
	if !ok {
		return nil, fmt.Errorf("showtime %d: %w", id, ErrNotFound)
	}
	if st.Event != p.Event {
		return nil, fmt.Errorf("showtime %d belongs to %s, pass is for %s: %w", id, st.Event, p.Event, ErrWrongEvent)
	}
	return st, nil
}

// SeatMap returns the showtime's seats and blocks.
func (s *Service) SeatMap(ctx context.Context, p Pass, showtimeID int64) (SeatMap, error) {
	st, err := s.showtime(p, showtimeID)
	if err != nil {
		return SeatMap{}, err
	}
	m, err := s.store.SeatMap(ctx, showtimeID)
	if err != nil {
		return m, s.dbErr("seat_map", err)
	}
	// What is at stake comes from the catalog: the store keeps seats, not prices.
	m.Title, m.StartsAt, m.PriceCents, m.Currency = st.Title, st.StartsAt, st.PriceCents, s.set.Currency
	for i := range m.GeneralAdmission {
		if blk, ok := st.Block(m.GeneralAdmission[i].Code); ok {
			m.GeneralAdmission[i].PriceCents = blk.PriceCents
		}
	}
	return m, nil
}

// HoldInput is a hold as the fan asked for it.
type HoldInput struct {
	Seats            []string       `json:"seats"`
	GeneralAdmission map[string]int `json:"generalAdmission"`
}

// Hold validates and takes a hold for the pass's customer.
func (s *Service) Hold(ctx context.Context, p Pass, showtimeID int64, in HoldInput) (Hold, error) {
	return s.holdCounted(ctx, p, showtimeID, in, nil)
}

// holdCounted is a hold, counted in the hold metrics.
func (s *Service) holdCounted(ctx context.Context, p Pass, showtimeID int64, in HoldInput, admit Admission) (Hold, error) {
	start := time.Now()
	h, err := s.hold(ctx, p, showtimeID, in, admit)
	switch {
	case errors.Is(err, ErrAdmissionRequired):
		// the pass's place is gone (HoldAdmitted): no hold was asked
	case err == nil:
		holdsTotal.WithLabelValues("ok").Inc()
		holdDuration.Observe(time.Since(start).Seconds())
	case errors.Is(err, ErrSeatsUnavailable), errors.Is(err, ErrSoldOut):
		holdsTotal.WithLabelValues("conflict").Inc()
		holdDuration.Observe(time.Since(start).Seconds())
	case isDomain(err):
		holdsTotal.WithLabelValues("invalid").Inc()
	}
	return h, err
}

// Admission checks a hold's pass against the line (the handler's
// gatekeeper): nil if its place is active, or its fan goes on while Redis
// is away; ErrAdmissionRequired, or the line's error, if not. active is
// the line's call that answers: it asks whether the place is active and,
// in the same call, counts the hold's places out (Inventory.reserveActive);
// nil asks the line whether it is active alone.
type Admission func(ctx context.Context, active func(context.Context) (bool, error)) error

// HoldAdmitted is Hold for a pass that admit checks in the hold's one call
// to the line, with its reservation, once the request was found sound (a
// request refused before does not ask: the handler asks the line then).
func (s *Service) HoldAdmitted(ctx context.Context, p Pass, showtimeID int64, in HoldInput, admit Admission) (Hold, error) {
	return s.holdCounted(ctx, p, showtimeID, in, admit)
}

func (s *Service) hold(ctx context.Context, p Pass, showtimeID int64, in HoldInput, admit Admission) (Hold, error) {
	st, err := s.showtime(p, showtimeID)
	if err != nil {
		return Hold{}, err
	}
	if len(in.Seats) == 0 && len(in.GeneralAdmission) == 0 {
		return Hold{}, fmt.Errorf("hold: nothing asked: %w", ErrInvalidRequest)
	}
	seats := append([]string{}, in.Seats...)
	sort.Strings(seats)
	amount := int64(0)
	for i, c := range seats {
		if i > 0 && seats[i-1] == c {
			return Hold{}, fmt.Errorf("hold: seat %s asked twice: %w", c, ErrInvalidRequest)
		}
		if !st.HasSeat(c) {
			return Hold{}, fmt.Errorf("hold: no seat %q in showtime %d: %w", c, st.ID, ErrInvalidRequest)
		}
		amount += st.PriceCents
	}
	// Each count is checked on its own before anything is summed (a sum of
	// huge counts must never wrap), block by block in code order, so the
	// same request always gets the same refusal.
	places := len(seats)
	for _, code := range GACodes(in.GeneralAdmission) {
		n := in.GeneralAdmission[code]
		blk, ok := st.Block(code)
		if !ok {
			return Hold{}, fmt.Errorf("hold: no block %q in showtime %d: %w", code, st.ID, ErrInvalidRequest)
		}
		if n < 1 {
			return Hold{}, fmt.Errorf("hold: block %s count %d < 1: %w", code, n, ErrInvalidRequest)
		}
		if n > s.set.MaxSeatsPerHold {
			return Hold{}, fmt.Errorf("hold: block %s count %d, at most %d: %w", code, n, s.set.MaxSeatsPerHold, ErrTooManySeats)
		}
		places += n
		amount += int64(n) * blk.PriceCents
	}
	if places > s.set.MaxSeatsPerHold {
		return Hold{}, fmt.Errorf("hold: %d places asked, at most %d: %w", places, s.set.MaxSeatsPerHold, ErrTooManySeats)
	}
	// The waiting room counts the places out before the hold is decided
	// (so it never shows a place the database may already have given
	// away), and gets them back if the hold was refused. A hold that failed
	// for another reason (the database went away mid-statement) may have
	// been written: the next sync decides.
	id, ticket := NewID(), p.Ticket
	if ticket == "" {
		ticket = p.Customer // a pass made without NewPass
	}
	switch {
	case admit != nil && s.inv != nil:
		if err := s.inv.reserveActive(ctx, admit, p.Event, id, ticket, places); err != nil {
			return Hold{}, err
		}
	case admit != nil:
		if err := admit(ctx, nil); err != nil {
			return Hold{}, err
		}
	case s.inv != nil:
		s.inv.reserve(ctx, p.Event, id, ticket, places)
	}
	hctx := ctx
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, d.Add(-confirmBudget))
		defer cancel()
	}
	req := HoldRequest{
		HoldID: id, Event: p.Event, ShowtimeID: showtimeID, Customer: p.Customer, Ticket: ticket,
		Seats: seats, GA: in.GeneralAdmission, AmountCents: amount, TTL: s.set.HoldTTL,
		MaxPlaces: s.set.MaxSeatsPerHold, HoldsPerMinute: s.set.HoldsPerMinute,
		AttemptsPerMinute: s.set.HoldAttemptsPerMinute, Cooldown: s.set.ReholdCooldown,
	}
	h, err := s.store.Hold(hctx, req)
	if err != nil && !isDomain(err) {
		// No answer from the database is no answer either way: the hold
		// may have been committed, its reply lost or late. Ask.
		if w, ok := s.written(ctx, req); ok {
			h, err = w, nil
		}
	}
	if err != nil {
		if s.inv != nil && isDomain(err) {
			s.inv.released(ctx, p.Event, id)
		}
		return Hold{}, s.dbErr("hold", err)
	}
	if h.Seats == nil {
		h.Seats = []string{}
	}
	return h, nil
}

// confirmBudget is the end of a hold's budget (its context's deadline)
// kept to ask about a hold whose statement got no answer in time: the
// statement has the rest.
const confirmBudget = 1500 * time.Millisecond

// written is hold r if it was written (and is held), asked in what is
// left of ctx: a hold whose reply was late or lost is the fan's all the
// same, and telling the fan 503 would leave its seats held for nobody
// until it lapses. false when the database still does not answer.
func (s *Service) written(ctx context.Context, r HoldRequest) (Hold, bool) {
	h, ok, err := s.store.Written(ctx, r)
	if err != nil {
		s.log.Warn("a hold without an answer could not be looked up: it lapses by itself if it was written", "hold", r.HoldID, "err", err)
		return Hold{}, false
	}
	if ok {
		s.log.Info("a hold whose answer was lost was written: answered", "hold", r.HoldID)
	}
	return h, ok
}

// Release gives the hold back at once; only its holder may, with a pass of
// the hold's event.
func (s *Service) Release(ctx context.Context, p Pass, holdID string) error {
	if !uuidPattern.MatchString(holdID) {
		return ErrNotFound
	}
	if err := s.store.Release(ctx, holdID, p.Customer, p.Event); err != nil {
		return s.dbErr("release", err)
	}
	if s.inv != nil {
		s.inv.released(ctx, p.Event, holdID)
	}
	return nil
}

// Checkout opens (or finds again, by key) the payment of a hold.
func (s *Service) Checkout(ctx context.Context, p Pass, holdID, key string) (Checkout, error) {
	if !uuidPattern.MatchString(holdID) {
		return Checkout{}, ErrNotFound
	}
	if !validKey(key) {
		return Checkout{}, fmt.Errorf("checkout: Idempotency-Key header of 1..255 printable ASCII characters required: %w", ErrInvalidRequest)
	}
	c, err := s.store.Checkout(ctx, CheckoutRequest{
		HoldID: holdID, Customer: p.Customer, Event: p.Event, IdempotencyKey: key, SessionTTL: s.set.SessionTTL,
	}, s.openSession)
	if err != nil {
		return c, s.dbErr("checkout", providerErr(err))
	}
	if s.inv != nil {
		s.inv.opened(ctx, p.Event, c.PaymentID)
	}
	return c, nil
}

// CheckoutPoints pays a hold from the pass's account's wallet, at once.
func (s *Service) CheckoutPoints(ctx context.Context, p Pass, holdID, key string) (PointsPaid, error) {
	if p.Account == "" {
		return PointsPaid{}, ErrAccountRequired
	}
	if !uuidPattern.MatchString(holdID) {
		return PointsPaid{}, ErrNotFound
	}
	if !validKey(key) {
		return PointsPaid{}, fmt.Errorf("checkout: Idempotency-Key header of 1..255 printable ASCII characters required: %w", ErrInvalidRequest)
	}
	out, err := s.store.CheckoutPoints(ctx, PointsCheckout{HoldID: holdID, Customer: p.Customer, Event: p.Event, Account: p.Account, IdempotencyKey: key})
	if err != nil {
		return out, s.dbErr("checkout_points", err)
	}
	if out.Fresh {
		confirmationsTotal.WithLabelValues(string(Confirmed)).Inc()
		pointsCheckouts.Inc()
		s.log.Info("paid with points", "bookingId", out.BookingID, "holdId", holdID, "account", p.Account, "balance", out.Balance)
		if s.inv != nil {
			s.inv.booked(ctx, out.Event, out.HoldID, "", p.Account)
		}
	}
	return out, nil
}

// Replay is the answer of the checkout the pass's customer made already of
// holdID with key, paid by method ("card" or "points"), read and written
// nowhere: what a fan whose place was freed (its booking confirmed, or its
// ticket gone) gets for a checkout it sends again (DESIGN.md, "A checkout
// replayed after it completed gets its answer"). Anything that is not such
// a replay (no such key, the key's booking of another hold, event or way of
// paying, a malformed hold or key) is ErrAdmissionRequired: a new checkout
// needs an active place, and the refusal says no more than the gate's.
func (s *Service) Replay(ctx context.Context, p Pass, holdID, key, method string) (any, error) {
	if !uuidPattern.MatchString(holdID) || !validKey(key) {
		return nil, ErrAdmissionRequired
	}
	a, err := s.store.Answered(ctx, p.Customer, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, ErrAdmissionRequired
	case err != nil:
		return nil, s.dbErr("replay", err)
	case a.HoldID != holdID || a.Event != p.Event || a.Method != method:
		return nil, ErrAdmissionRequired
	case method == "points":
		if a.Balance == nil || p.Account == "" {
			return nil, ErrAdmissionRequired
		}
		return PointsPaid{BookingID: a.BookingID, Status: StatusConfirmed, Balance: *a.Balance}, nil
	}
	return a.Checkout, nil
}

// Wallet is the pass's account's wallet.
func (s *Service) Wallet(ctx context.Context, p Pass) (Wallet, error) {
	if p.Account == "" {
		return Wallet{}, ErrAccountRequired
	}
	b, err := s.store.Wallet(ctx, p.Account)
	if err != nil {
		return Wallet{}, s.dbErr("wallet", err)
	}
	return Wallet{Account: p.Account, Balance: b}, nil
}

// CreditInput is a credit as the operators' API takes it.
type CreditInput struct {
	Points    *int64 `json:"points"`
	Reference string `json:"reference"`
}

// maxCredit bounds one credit: points are minor units, and a balance must
// never come near overflowing.
const maxCredit = 1_000_000_000_000

// Credit adds points to account's wallet, once per reference, and returns
// the balance.
func (s *Service) Credit(ctx context.Context, account string, in CreditInput) (int64, error) {
	switch {
	case !validAccount(account):
		return 0, fmt.Errorf("credit: account id must be 1..64 of [A-Za-z0-9._:@+-]: %w", ErrInvalidRequest)
	case in.Points == nil || *in.Points < 1 || *in.Points > maxCredit:
		return 0, fmt.Errorf("credit: points must be an integer 1..%d: %w", int64(maxCredit), ErrInvalidRequest)
	case !validKey(in.Reference):
		return 0, fmt.Errorf("credit: reference of 1..255 printable ASCII characters required: %w", ErrInvalidRequest)
	}
	b, err := s.store.Credit(ctx, account, *in.Points, in.Reference)
	if err != nil {
		return 0, s.dbErr("credit", err)
	}
	return b, nil
}

var accountPattern = regexp.MustCompile(`^[A-Za-z0-9._:@+-]{1,64}$`)

// validAccount is account.ValidID (the booking core does not import the
// gateway's account package: the account reaches it inside a verified pass).
func validAccount(id string) bool { return accountPattern.MatchString(id) }

// openSession opens the provider's session for a checkout: keyed by the
// booking id (a retried call for one booking opens one session), the fan
// sent back to the booking page of the event when done.
func (s *Service) openSession(ctx context.Context, f SessionFor) (payment.Session, error) {
	return s.pay.CreateSession(ctx, payment.SessionRequest{
		IdempotencyKey: f.BookingID, Reference: f.BookingID, AmountCents: f.AmountCents, Currency: s.set.Currency,
		Description: s.describe(f), TTL: f.TTL, ReturnURL: s.ReturnURL(f.Event, f.BookingID),
	})
}

// ReturnURL is where the provider sends the fan after paying or cancelling.
func (s *Service) ReturnURL(event, bookingID string) string {
	return s.set.ReturnURL + "/e/" + url.PathEscape(event) + "/book?booking=" + url.QueryEscape(bookingID)
}

// describe says what a session buys, for the provider's page: the showtime
// and the places ("Premiere 19:00: C5, C6, FLOOR × 1").
func (s *Service) describe(f SessionFor) string {
	what := append([]string{}, f.Seats...)
	for _, c := range GACodes(f.GeneralAdmission) {
		what = append(what, fmt.Sprintf("%s × %d", c, f.GeneralAdmission[c]))
	}
	title := ""
	if st, ok := s.cat.Showtime(f.ShowtimeID); ok {
		title = st.Title + ": "
	}
	return title + strings.Join(what, ", ")
}

// providerErr translates the provider's errors at the seam: the booking
// core's API never answers with a provider's words.
func providerErr(err error) error {
	switch {
	case err == nil, isDomain(err), errors.Is(err, ErrUnavailable):
		return err
	case errors.Is(err, payment.ErrUnknownPayment):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, payment.ErrBadSignature):
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	case errors.Is(err, payment.ErrBadCallback):
		return fmt.Errorf("callback: %w: %w", ErrInvalidRequest, err)
	case errors.Is(err, payment.ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// validKey reports whether key is an Idempotency-Key the contract allows:
// 1..255 printable ASCII characters (0x20..0x7E).
func validKey(key string) bool {
	if len(key) < 1 || len(key) > 255 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// Callback has the provider verify a callback (its headers and raw body),
// and applies it.
func (s *Service) Callback(ctx context.Context, h http.Header, body []byte) (Settlement, error) {
	cb, err := s.pay.VerifyCallback(h, body)
	if err != nil {
		return Settlement{}, providerErr(err)
	}
	return s.Settle(ctx, cb.PaymentID, cb.Status)
}

// Settle applies a payment's final status: the callback and the reconciler
// both come here. A late success is refunded at once when the provider
// answers, else by the reconciler later.
func (s *Service) Settle(ctx context.Context, paymentID string, st payment.Status) (Settlement, error) {
	out, err := s.store.Settle(ctx, paymentID, st)
	if err != nil {
		return out, s.dbErr("settle", err)
	}
	confirmationsTotal.WithLabelValues(string(out.Outcome)).Inc()
	s.log.Info("payment settled", "paymentId", paymentID, "bookingId", out.BookingID, "status", st, "outcome", out.Outcome)
	if s.inv != nil {
		switch out.Outcome {
		case Confirmed:
			s.inv.booked(ctx, out.Event, out.HoldID, paymentID, accountOf(out.BookedBy))
		default: // failed, late (its places lapsed), or a repeat
			s.inv.settled(ctx, out.Event, paymentID)
		}
	}
	if out.Outcome == LateRefunded {
		s.refund(ctx, paymentID)
	}
	return out, nil
}

func (s *Service) refund(ctx context.Context, paymentID string) {
	if err := s.pay.Refund(ctx, paymentID); err != nil {
		s.log.Warn("refund not acknowledged yet; the reconciler retries", "paymentId", paymentID, "err", err)
		return
	}
	if err := s.store.MarkRefunded(ctx, paymentID); err != nil {
		s.log.Error("refund acknowledged but not recorded; the reconciler retries", "paymentId", paymentID, "err", s.dbErr("refund", err))
		return
	}
	refundsTotal.Inc()
	s.log.Info("payment refunded", "paymentId", paymentID)
}

// Booking returns the pass's customer's booking of the pass's event.
func (s *Service) Booking(ctx context.Context, p Pass, id string) (Booking, error) {
	if !uuidPattern.MatchString(id) {
		return Booking{}, ErrNotFound
	}
	b, err := s.store.Booking(ctx, id, p.Customer, p.Event)
	if err != nil {
		return b, s.dbErr("booking", err)
	}
	if b.Seats == nil {
		b.Seats = []string{}
	}
	if st, ok := s.cat.Showtime(b.ShowtimeID); ok {
		b.Title, b.StartsAt = st.Title, st.StartsAt
	}
	return b, nil
}

// PaymentStatus asks the provider what it knows of a payment.
func (s *Service) PaymentStatus(ctx context.Context, paymentID string) (payment.Status, error) {
	st, err := s.pay.Status(ctx, paymentID)
	return st, providerErr(err)
}

var domainErrors = []error{
	ErrInvalidRequest, ErrAdmissionRequired, ErrWrongEvent, ErrNotFound, ErrSeatsUnavailable, ErrSoldOut,
	ErrTooManySeats, ErrRateLimited, ErrHoldExpired, ErrHoldNotActive, ErrIdempotencyReused, ErrBadSignature,
	ErrAccountRequired, ErrInsufficientPoints, ErrPaymentOpen, ErrAdminRequired,
}

func isDomain(err error) bool {
	for _, d := range domainErrors {
		if errors.Is(err, d) {
			return true
		}
	}
	return false
}

// dbErr counts an error that is not a domain answer (database or provider
// trouble) under op, and returns err unchanged.
func (s *Service) dbErr(op string, err error) error {
	if err != nil && !isDomain(err) && !errors.Is(err, context.Canceled) {
		dbErrorsTotal.WithLabelValues(op).Inc()
	}
	return err
}
