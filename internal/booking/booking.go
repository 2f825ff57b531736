// Package booking is the booking core's domain: seat maps, holds, checkout,
// payment settlement and their rules, independent of where they are stored.
//
// PostgreSQL (package booking/postgres) is the source of truth for every seat
// and general-admission place; this package validates requests against the
// catalog from the config, checks the caller's access pass, talks to the
// payment provider, and maps its sentinel errors to the HTTP contract in one
// table (http.go). Correctness never depends on a background job: holds lapse
// by time in the store's conditional statements, and the jobs here (sweeper,
// reconciler, outbox relay) only tidy, settle and publish.
package booking

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/waitroom/waitroom/internal/payment"
)

// Seat statuses as the seat map shows them. An expired hold reads AVAILABLE.
const (
	Available = "AVAILABLE"
	Held      = "HELD"
	Booked    = "BOOKED"
)

// Hold statuses (the holds table): a hold is HELD until it is booked,
// released, or swept as EXPIRED (a HELD hold past its expiry has lapsed
// already: every statement judges expiry by time).
const (
	HoldHeld     = "HELD"
	HoldBooked   = "BOOKED"
	HoldReleased = "RELEASED"
	HoldExpired  = "EXPIRED"
)

// Booking statuses.
const (
	StatusPending   = "PENDING"
	StatusConfirmed = "CONFIRMED"
	StatusFailed    = "FAILED"
	StatusRefunded  = "REFUNDED"
)

// Sentinel errors. The HTTP edge maps each to a status and an error code in
// one table (errorTable in http.go).
var (
	ErrInvalidRequest    = errors.New("booking: invalid request")
	ErrAdmissionRequired = errors.New("booking: admission required")
	// ErrWrongEvent: the showtime, hold or booking is another event's than
	// the pass's (a pass opens one event).
	ErrWrongEvent        = errors.New("booking: not in the pass's event")
	ErrNotFound          = errors.New("booking: not found")
	ErrSeatsUnavailable  = errors.New("booking: seats unavailable")
	ErrSoldOut           = errors.New("booking: sold out")
	ErrTooManySeats      = errors.New("booking: too many seats")
	ErrRateLimited       = errors.New("booking: rate limited")
	ErrHoldExpired       = errors.New("booking: hold expired")
	ErrHoldNotActive     = errors.New("booking: hold already booked")
	ErrIdempotencyReused = errors.New("booking: idempotency key used for another hold")
	ErrBadSignature      = errors.New("booking: bad payment signature")
	// ErrAccountRequired: the wallet is for fans whose place is an
	// account's (DESIGN.md, Accounts).
	ErrAccountRequired = errors.New("booking: this needs an account")
	// ErrInsufficientPoints: the wallet holds fewer points than the hold
	// costs; nothing changed.
	ErrInsufficientPoints = errors.New("booking: not enough points")
	// ErrPaymentOpen: a card payment for the hold is open; it settles
	// first (or its hold lapses) before the hold can be paid with points.
	ErrPaymentOpen = errors.New("booking: a payment for this hold is open")
	// ErrAdminRequired: the operators' token is missing or wrong.
	ErrAdminRequired = errors.New("booking: operator token required")
	// ErrUnavailable: the database cannot serve right now (down,
	// restarting, recovering, unreachable): 503, and the client retries.
	ErrUnavailable = errors.New("booking: temporarily unavailable, try again shortly")
)

// DetailError carries what a client needs besides the code: the seats that
// were taken, the block that is full, or when to retry.
type DetailError struct {
	Err        error
	Seats      []string
	Block      string
	RetryAfter time.Duration
}

func (e *DetailError) Error() string {
	switch {
	case len(e.Seats) > 0:
		return fmt.Sprintf("%v: %v", e.Err, e.Seats)
	case e.Block != "":
		return fmt.Sprintf("%v: block %s", e.Err, e.Block)
	case e.RetryAfter > 0:
		return fmt.Sprintf("%v: retry after %s", e.Err, e.RetryAfter)
	}
	return e.Err.Error()
}

func (e *DetailError) Unwrap() error { return e.Err }

// Seat is one reserved seat on the map.
type Seat struct {
	Code   string `json:"code"`
	Row    string `json:"row"`
	Number int    `json:"number"`
	Status string `json:"status"`
}

// Block is a general-admission block on the map; PriceCents is the price
// of one place in it.
type Block struct {
	Code       string `json:"code"`
	Capacity   int    `json:"capacity"`
	Available  int    `json:"available"`
	PriceCents int64  `json:"priceCents"`
}

// SeatMap of one showtime. It never says who holds a seat. PriceCents is the
// price of one reserved seat; every amount is in Currency's minor unit
// (booking.currency).
type SeatMap struct {
	ShowtimeID       int64     `json:"showtimeId"`
	Title            string    `json:"title"`
	StartsAt         time.Time `json:"startsAt"`
	PriceCents       int64     `json:"priceCents"`
	Currency         string    `json:"currency"`
	Seats            []Seat    `json:"seats"`
	GeneralAdmission []Block   `json:"generalAdmission"`
}

// HoldRequest is a validated hold: Seats sorted and unique, GA codes known.
type HoldRequest struct {
	HoldID     string
	Event      string
	ShowtimeID int64
	Customer   string
	// Ticket is the ticket taking the hold (Customer, or one of its
	// account's): who holds what in the waiting room.
	Ticket         string
	Seats          []string
	GA             map[string]int
	AmountCents    int64
	TTL            time.Duration
	MaxPlaces      int // per customer across the event, held at once
	HoldsPerMinute int
	// AttemptsPerMinute bounds the customer's hold requests, refused ones
	// included (the holds taken and the refusals of the last minute).
	AttemptsPerMinute int
	// Cooldown keeps the seats of the customer's released or lapsed holds
	// out of their reach this long (0 = off).
	Cooldown time.Duration
}

// GACodes are the blocks ga counts places of, in code order: the one order
// a hold checks them in (the same request, the same refusal), the store
// passes and locks them in, and a session describes them in. Never nil:
// the store sends it as a text[], which must be '{}' and not NULL.
func GACodes(ga map[string]int) []string {
	codes := slices.AppendSeq(make([]string, 0, len(ga)), maps.Keys(ga))
	slices.Sort(codes)
	return codes
}

// Places is the number of seats and GA places asked for.
func (r HoldRequest) Places() int {
	n := len(r.Seats)
	for _, c := range r.GA {
		n += c
	}
	return n
}

// Hold is a successful hold; AmountCents is what it costs, fixed at hold time.
type Hold struct {
	ID               string         `json:"holdId"`
	ExpiresAt        time.Time      `json:"expiresAt"`
	Seats            []string       `json:"seats"`
	GeneralAdmission map[string]int `json:"generalAdmission"`
	AmountCents      int64          `json:"amountCents"`
}

// CheckoutRequest opens (or finds again) the payment of a hold. Event is
// the pass's: a hold of another event is ErrWrongEvent.
type CheckoutRequest struct {
	HoldID         string
	Customer       string
	Event          string
	IdempotencyKey string
	SessionTTL     time.Duration
}

// PointsCheckout pays a hold with the points of Account's wallet. Event is
// the pass's: a hold of another event is ErrWrongEvent.
type PointsCheckout struct {
	HoldID         string
	Customer       string
	Event          string
	Account        string
	IdempotencyKey string
}

// PointsPaid is the answer to a points checkout; the same key gets the same
// answer. Balance is what the debit left.
type PointsPaid struct {
	BookingID string `json:"bookingId"`
	Status    string `json:"status"`
	Balance   int64  `json:"balance"`
	// Event and Ticket (not answered): for the waiting room's inventory
	// and the completion of the ticket.
	Event  string `json:"-"`
	HoldID string `json:"-"`
	Fresh  bool   `json:"-"` // false for a repeat of the key
}

// Answered is what a checkout made with an Idempotency-Key answered, as
// the store keeps it: the booking it made, for which hold of which event,
// paid how ("card" or "points"), and the answer's own fields (the payment's
// for a card, the balance the debit left for points: nil when there was no
// debit).
type Answered struct {
	BookingID, HoldID, Event, Method string
	Checkout                         Checkout
	Balance                          *int64
}

// Wallet is an account's points.
type Wallet struct {
	Account string `json:"account"`
	Balance int64  `json:"balance"`
}

// Checkout is the answer to a checkout; the same key gets the same answer.
type Checkout struct {
	BookingID  string    `json:"bookingId"`
	PaymentID  string    `json:"paymentId"`
	PaymentURL string    `json:"paymentUrl"`
	ExpiresAt  time.Time `json:"expiresAt"`
}

// SessionFor is what a checkout's payment session is for: the new booking,
// what its hold buys, and for how long the session may stay open.
type SessionFor struct {
	BookingID        string
	Event            string
	ShowtimeID       int64
	Seats            []string
	GeneralAdmission map[string]int
	AmountCents      int64
	TTL              time.Duration
}

// OpenSession asks the provider for a session; the store calls it inside the
// checkout, under the hold's row lock, so that one key opens one session.
type OpenSession func(ctx context.Context, f SessionFor) (payment.Session, error)

// Booking as the fan sees it: what was bought, for when, for how much.
type Booking struct {
	ID               string         `json:"bookingId"`
	Status           string         `json:"status"`
	Seats            []string       `json:"seats"`
	GeneralAdmission map[string]int `json:"generalAdmission,omitempty"`
	ShowtimeID       int64          `json:"showtimeId"`
	AmountCents      int64          `json:"amountCents"`
	Title            string         `json:"title"`
	StartsAt         time.Time      `json:"startsAt"`
	// HoldID and HoldExpiresAt (beyond the contract): the hold being paid
	// for, and when it lapses while it is still held (absent once it was
	// booked, released or swept), so that the page the provider sends the
	// fan back to keeps the countdown and can offer Pay again.
	HoldID        string     `json:"holdId"`
	HoldExpiresAt *time.Time `json:"holdExpiresAt,omitempty"`
	// Refund (beyond the contract): REQUESTED while the money of a late
	// payment is on its way back, DONE once the provider acknowledged it
	// (the booking is then REFUNDED); absent when nothing is refunded.
	Refund string `json:"refund,omitempty"`
}

// Outcome of settling a payment.
type Outcome string

const (
	Confirmed    Outcome = "confirmed"
	LateRefunded Outcome = "late_refunded"
	PaymentFail  Outcome = "failed"
	Duplicate    Outcome = "duplicate"
)

// Settlement is what settling one payment did.
type Settlement struct {
	Outcome   Outcome
	BookingID string
	PaymentID string
	Event     string
	HoldID    string
	BookedBy  string // the booking's customer (Pass.Customer: "acct:<id>" for an account's place)
}

// OutboxEvent is one row of the outbox, to publish.
type OutboxEvent struct {
	ID        int64
	BookingID string
	Type      string
	Payload   []byte // JSON
	Event     string // event id, for completing the fan's ticket
	Customer  string // the ticket id (JWT sub) whose place the booking completes
	BookedBy  string // the booking's customer (Pass.Customer: "acct:<id>" for an account's place)
	CreatedAt time.Time
}

// Due is a payment the reconciler has to see to: a stale payment or an
// unacknowledged refund, in the order it became due. The zero Due is before
// every other: lists start after it.
type Due struct {
	PaymentID string
	At        time.Time
}

// Stats are read at scrape time for the gauges.
type Stats struct {
	OutboxPending int64
	OutboxOldest  *time.Time
	OutboxNow     time.Time
	Seats         map[int64]map[string]int64 // showtime → status → count
	Payments      map[string]int64
}

// Store is what the booking core needs from its database. Every method that
// decides (Hold, Checkout, Settle, Release) does so in one transaction whose
// conditional statements are the source of truth.
//
// A pass opens one event: Release, Checkout, CheckoutPoints and Booking
// find the hold or booking of customer (another customer's is ErrNotFound)
// and refuse one of another event than the pass's with ErrWrongEvent, in
// the transaction that finds it and before anything is written.
type Store interface {
	SeatMap(ctx context.Context, showtimeID int64) (SeatMap, error)
	Hold(ctx context.Context, r HoldRequest) (Hold, error)
	// Written is hold r, as Hold answers it, if it was written and is held.
	Written(ctx context.Context, r HoldRequest) (Hold, bool, error)
	Release(ctx context.Context, holdID, customer, event string) error
	Checkout(ctx context.Context, r CheckoutRequest, open OpenSession) (Checkout, error)
	Settle(ctx context.Context, paymentID string, status payment.Status) (Settlement, error)
	MarkRefunded(ctx context.Context, paymentID string) error
	Booking(ctx context.Context, bookingID, customer, event string) (Booking, error)
	// Answered is what customer's checkout with key answered, read
	// without a lock or a write; ErrNotFound when the key made none.
	Answered(ctx context.Context, customer, key string) (Answered, error)

	// The points wallet.
	CheckoutPoints(ctx context.Context, r PointsCheckout) (PointsPaid, error)
	Wallet(ctx context.Context, account string) (int64, error)
	// Credit adds points to account's wallet once per reference, and
	// returns the balance.
	Credit(ctx context.Context, account string, points int64, reference string) (int64, error)

	// Jobs.
	Sweep(ctx context.Context, batch int) (int, error)
	StalePayments(ctx context.Context, olderThan time.Duration, after Due, limit int) ([]Due, error)
	PendingRefunds(ctx context.Context, after Due, limit int) ([]Due, error)
	RelayOutbox(ctx context.Context, limit int, publish func(context.Context, []OutboxEvent) error) (int, error)
	// InventorySnapshot reads an event's places at one instant, with the
	// holds confirmed in the last recent.
	InventorySnapshot(ctx context.Context, event string, recent time.Duration) (InventorySnapshot, error)
	// LapsedHolds lists up to limit holds whose expiry passed after since
	// while HELD, oldest first, and the database's now.
	LapsedHolds(ctx context.Context, since time.Time, limit int) ([]Lapsed, time.Time, error)
	Stats(ctx context.Context) (Stats, error)
	Ping(ctx context.Context) error
}
