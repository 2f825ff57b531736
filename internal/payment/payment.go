// Package payment is the booking core's view of a payment provider: a session
// the fan pays in, a status the reconciler can ask for, a refund, and the
// HMAC-signed callback the provider sends when a payment settles.
//
// The provider in this repository is a simulator (simulator.go) that pays by
// itself after a delay and can answer late, twice or never, so that the real
// callback path of the booking core is exercised by the demo and the tests.
package payment

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// Status of a payment at the provider.
type Status string

const (
	Pending   Status = "PENDING"
	Succeeded Status = "SUCCEEDED"
	Failed    Status = "FAILED"
)

// ErrUnknownPayment is returned by a provider asked about a payment it never
// created.
var ErrUnknownPayment = errors.New("payment: unknown payment")

// Session is where the fan pays.
type Session struct {
	PaymentID string
	URL       string
	ExpiresAt time.Time
}

// Provider is a payment provider. Implementations must be idempotent per
// bookingID in CreateSession (a retried checkout must not open two sessions)
// and per paymentID in Refund.
type Provider interface {
	CreateSession(ctx context.Context, bookingID string, amountCents int64, ttl time.Duration) (Session, error)
	Status(ctx context.Context, paymentID string) (Status, error)
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
