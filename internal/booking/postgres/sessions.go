package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/payment"
)

// Sessions keeps the payment simulator's sessions (payment.SessionStore) in
// the booking core's database, in a table of their own (migration 005). The
// simulator is a provider, not part of the core: its errors are the payment
// package's words (sessionError), and it should have a pool of its own, so
// that a checkout holding a connection while it opens a session never waits
// for another from the same pool.
type Sessions struct {
	pool *pgxpool.Pool
}

var _ payment.SessionStore = (*Sessions)(nil)

// NewSessions returns the simulator's store on pool.
func NewSessions(pool *pgxpool.Pool) *Sessions { return &Sessions{pool: pool} }

// Every statement of the simulator's store. Each returns (or reads) the
// session's columns in the order scanSession takes them. Times are
// parameters: the simulator's clock, not the database's.
const (
	// $1 payment id, $2 idempotency key, $3 reference, $4 amount, $5
	// currency, $6 description, $7 return URL, $8 created, $9 expires, $10
	// status, $11 choice, $12 decided, $13 callbacks, $14 first callback.
	// A key seen before inserts nothing (the caller reads that session).
	sqlCreateSession = `
INSERT INTO payment_sessions (payment_id, idempotency_key, reference, amount_cents, currency, description,
                              return_url, created_at, expires_at, status, choice, decided_at, callbacks_left, callback_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING payment_id, idempotency_key, reference, amount_cents, currency, description, return_url, created_at,
          expires_at, status, choice, decided_at, refunded_at, callbacks_left, callback_at, attempts`

	// $1 idempotency key.
	sqlSessionByKey = `
SELECT payment_id, idempotency_key, reference, amount_cents, currency, description, return_url, created_at,
       expires_at, status, choice, decided_at, refunded_at, callbacks_left, callback_at, attempts
  FROM payment_sessions WHERE idempotency_key = $1`

	// $1 payment id.
	sqlSession = `
SELECT payment_id, idempotency_key, reference, amount_cents, currency, description, return_url, created_at,
       expires_at, status, choice, decided_at, refunded_at, callbacks_left, callback_at, attempts
  FROM payment_sessions WHERE payment_id = $1`

	// $1 payment id, $2 status, $3 choice, $4 decided at, $5 callbacks, $6
	// first callback. Only an open session: the first decision stands.
	sqlDecideSession = `
UPDATE payment_sessions
   SET status = $2, choice = $3, decided_at = $4, callbacks_left = $5, callback_at = $6, attempts = 0
 WHERE payment_id = $1 AND decided_at IS NULL
RETURNING payment_id, idempotency_key, reference, amount_cents, currency, description, return_url, created_at,
          expires_at, status, choice, decided_at, refunded_at, callbacks_left, callback_at, attempts`

	// $1 payment id, $2 now. A repeat keeps the first refund's time.
	sqlRefundSession = `
UPDATE payment_sessions SET refunded_at = coalesce(refunded_at, $2) WHERE payment_id = $1`

	// $1 now, $2 end of the lease, $3 limit. Oldest due first; SKIP LOCKED:
	// two simulators (replicas) never claim the same callback at once, and
	// the lease keeps a claimed one from being sent again before it was
	// tried (or its sender died).
	sqlClaimCallbacks = `
UPDATE payment_sessions s
   SET callback_at = $2
  FROM (SELECT payment_id FROM payment_sessions
         WHERE callbacks_left > 0 AND callback_at <= $1
         ORDER BY callback_at
         LIMIT $3
           FOR UPDATE SKIP LOCKED) due
 WHERE s.payment_id = due.payment_id
RETURNING s.payment_id, s.idempotency_key, s.reference, s.amount_cents, s.currency, s.description, s.return_url,
          s.created_at, s.expires_at, s.status, s.choice, s.decided_at, s.refunded_at, s.callbacks_left,
          s.callback_at, s.attempts`

	// $1 payment id, $2 when the next one is due.
	sqlCallbackSent = `
UPDATE payment_sessions
   SET callbacks_left = callbacks_left - 1, callback_at = $2, attempts = 0
 WHERE payment_id = $1 AND callbacks_left > 0`

	// $1 payment id, $2 retry at, $3 attempts before giving up. Answers
	// whether the callbacks were given up.
	sqlCallbackFailed = `
UPDATE payment_sessions
   SET attempts = attempts + 1, callback_at = $2,
       callbacks_left = CASE WHEN attempts + 1 >= $3 THEN 0 ELSE callbacks_left END
 WHERE payment_id = $1 AND callbacks_left > 0
RETURNING callbacks_left = 0`
)

func scanSession(row pgx.Row) (payment.Record, error) {
	var (
		r      payment.Record
		status string
		choice *string
	)
	err := row.Scan(&r.PaymentID, &r.IdempotencyKey, &r.Reference, &r.AmountCents, &r.Currency, &r.Description,
		&r.ReturnURL, &r.CreatedAt, &r.ExpiresAt, &status, &choice, &r.DecidedAt, &r.RefundedAt, &r.CallbacksLeft,
		&r.CallbackAt, &r.Attempts)
	r.Status = payment.Status(status)
	if choice != nil {
		r.Choice = payment.Choice(*choice)
	}
	return r, err
}

// Create stores r, or returns the session already stored under its key.
func (s *Sessions) Create(ctx context.Context, r payment.Record) (_ payment.Record, err error) {
	defer translateSession(&err)
	var choice *string
	if r.Choice != "" {
		c := string(r.Choice)
		choice = &c
	}
	out, err := scanSession(s.pool.QueryRow(ctx, sqlCreateSession, r.PaymentID, r.IdempotencyKey, r.Reference,
		r.AmountCents, r.Currency, r.Description, r.ReturnURL, r.CreatedAt, r.ExpiresAt, string(r.Status), choice,
		r.DecidedAt, r.CallbacksLeft, r.CallbackAt))
	if errors.Is(err, pgx.ErrNoRows) {
		// The key was there already (or a concurrent request just stored
		// it: ON CONFLICT waited for it to commit): that session, in a
		// snapshot of its own that sees it.
		out, err = scanSession(s.pool.QueryRow(ctx, sqlSessionByKey, r.IdempotencyKey))
	}
	if err != nil {
		return out, fmt.Errorf("create session: %w", err)
	}
	return out, nil
}

// Get reads a session.
func (s *Sessions) Get(ctx context.Context, paymentID string) (_ payment.Record, err error) {
	defer translateSession(&err)
	r, err := scanSession(s.pool.QueryRow(ctx, sqlSession, paymentID))
	if err != nil {
		return r, fmt.Errorf("session %s: %w", paymentID, err)
	}
	return r, nil
}

// Decide settles an open session; a decided one is returned unchanged.
func (s *Sessions) Decide(ctx context.Context, paymentID string, d payment.Decision) (_ payment.Record, ok bool, err error) {
	defer translateSession(&err)
	r, err := scanSession(s.pool.QueryRow(ctx, sqlDecideSession, paymentID, string(d.Status), string(d.Choice),
		d.At, d.Callbacks, d.CallbackAt))
	if errors.Is(err, pgx.ErrNoRows) {
		r, err = s.Get(ctx, paymentID) // decided before, or unknown
		return r, false, err
	}
	if err != nil {
		return r, false, fmt.Errorf("decide %s: %w", paymentID, err)
	}
	return r, true, nil
}

// Refund marks a session refunded.
func (s *Sessions) Refund(ctx context.Context, paymentID string, at time.Time) (err error) {
	defer translateSession(&err)
	tag, err := s.pool.Exec(ctx, sqlRefundSession, paymentID, at)
	if err != nil {
		return fmt.Errorf("refund %s: %w", paymentID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("refund %s: %w", paymentID, payment.ErrUnknownPayment)
	}
	return nil
}

// ClaimCallbacks leases the callbacks due at now.
func (s *Sessions) ClaimCallbacks(ctx context.Context, now, leaseUntil time.Time, limit int) (_ []payment.Record, err error) {
	defer translateSession(&err)
	rows, err := s.pool.Query(ctx, sqlClaimCallbacks, now, leaseUntil, limit)
	if err != nil {
		return nil, fmt.Errorf("claim callbacks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (payment.Record, error) { return scanSession(row) })
	if err != nil {
		return nil, fmt.Errorf("claim callbacks: %w", err)
	}
	return out, nil
}

// CallbackSent counts a delivered callback.
func (s *Sessions) CallbackSent(ctx context.Context, paymentID string, next time.Time) (err error) {
	defer translateSession(&err)
	if _, err := s.pool.Exec(ctx, sqlCallbackSent, paymentID, next); err != nil {
		return fmt.Errorf("callback sent %s: %w", paymentID, err)
	}
	return nil
}

// CallbackFailed counts a failed attempt; it reports whether the callbacks
// were given up.
func (s *Sessions) CallbackFailed(ctx context.Context, paymentID string, retryAt time.Time, maxAttempts int) (_ bool, err error) {
	defer translateSession(&err)
	var gaveUp bool
	err = s.pool.QueryRow(ctx, sqlCallbackFailed, paymentID, retryAt, maxAttempts).Scan(&gaveUp)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // sent meanwhile by another simulator
	}
	if err != nil {
		return false, fmt.Errorf("callback failed %s: %w", paymentID, err)
	}
	return gaveUp, nil
}
