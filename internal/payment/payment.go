// Package payment is the booking core's view of a payment provider with a
// hosted payment page: a session the fan is sent to (opened with an
// idempotency key and a return URL), the signed callback the provider sends
// when a payment settles, the status the reconciler asks for, and a refund.
//
// Provider is the seam for a real provider (docs/BOOKING.md says what an
// adapter must do). The provider in this repository is a simulator
// (simulator.go, page.go): a small provider of its own, with a hosted page
// where the fan pays or cancels, sessions kept in PostgreSQL (through a
// SessionStore) so that they survive a restart, and callbacks that can come
// late, twice or never, so that the real callback path of the booking core is
// exercised by the demo and the tests.
package payment

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Status of a payment at the provider.
type Status string

const (
	Pending   Status = "PENDING"
	Succeeded Status = "SUCCEEDED"
	Failed    Status = "FAILED"
)

// Errors a Provider answers with; the booking core translates them at the
// seam (booking.Service), so a provider's own errors never reach its API.
var (
	// ErrUnknownPayment: the provider never created this payment.
	ErrUnknownPayment = errors.New("payment: unknown payment")
	// ErrBadSignature: a callback whose signature does not verify.
	ErrBadSignature = errors.New("payment: bad callback signature")
	// ErrBadCallback: a verified callback whose body says nothing usable.
	ErrBadCallback = errors.New("payment: malformed callback")
	// ErrUnavailable: the provider cannot answer now; the caller retries.
	ErrUnavailable = errors.New("payment: provider unavailable, try again")
)

// SessionRequest opens a hosted payment session.
type SessionRequest struct {
	// IdempotencyKey: the same key always gets the same session back, so a
	// retried request never opens two (the booking core sends the booking
	// id: one session per booking).
	IdempotencyKey string
	// Reference is the merchant's own name for the payment (the booking id).
	Reference   string
	AmountCents int64  // in Currency's minor unit
	Currency    string // ISO 4217
	// Description says what is bought, on the provider's page.
	Description string
	// TTL is how long the session stays open; the booking core keeps it
	// inside the hold, so that a payment in time finds its seats held.
	TTL time.Duration
	// ReturnURL is where the provider sends the fan after paying or
	// cancelling: /e/{event}/book?booking=<id> on the gateway.
	ReturnURL string
}

// Session is where the fan pays: URL opens the provider's hosted page.
type Session struct {
	PaymentID string
	URL       string
	ExpiresAt time.Time
}

// Provider is a payment provider with a hosted payment page. booking.Service
// is its only caller. Implementations must be idempotent per
// IdempotencyKey in CreateSession and per payment in Refund, and answer the
// errors above.
type Provider interface {
	// CreateSession opens (or finds again, by key) a session.
	CreateSession(ctx context.Context, r SessionRequest) (Session, error)
	// VerifyCallback checks a callback the provider sent (its headers and
	// raw body) and says what it reports: ErrBadSignature or ErrBadCallback
	// otherwise.
	VerifyCallback(h http.Header, body []byte) (Callback, error)
	// Status is what the provider knows of a payment now: PENDING while the
	// fan has not paid (or the provider is still deciding).
	Status(ctx context.Context, paymentID string) (Status, error)
	// Refund gives a payment's money back.
	Refund(ctx context.Context, paymentID string) error
}

// Callback is the body the provider POSTs when a payment settles.
type Callback struct {
	PaymentID string `json:"paymentId"`
	Status    Status `json:"status"`
}

// SignatureHeader carries the hex HMAC-SHA256 of the raw callback body.
const SignatureHeader = "X-Payment-Signature"

// Sign returns the hex HMAC-SHA256 of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is the signature of body under secret, in
// constant time. An empty secret verifies nothing.
func Verify(secret, body []byte, sig string) bool {
	if len(secret) == 0 {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// ParseCallback verifies and reads a callback of the contract's scheme
// (X-Payment-Signature over the raw body, {"paymentId","status"}). The body
// is signed, so fields a provider adds (amount, currency…) are tolerated:
// refusing them would leave payments to the reconciler.
func ParseCallback(secret []byte, h http.Header, body []byte) (Callback, error) {
	if !Verify(secret, body, h.Get(SignatureHeader)) {
		return Callback{}, ErrBadSignature
	}
	var cb Callback
	if err := json.Unmarshal(body, &cb); err != nil || cb.PaymentID == "" ||
		(cb.Status != Succeeded && cb.Status != Failed) {
		return Callback{}, fmt.Errorf("body must be {paymentId, status SUCCEEDED|FAILED}: %w", ErrBadCallback)
	}
	return cb, nil
}
