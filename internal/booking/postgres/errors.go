package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/payment"
)

// idempotencyKeyUnique is the constraint a second checkout with one
// customer's key meets (migrations/001_booking.sql, UNIQUE (customer_id,
// idempotency_key)).
const idempotencyKeyUnique = "bookings_customer_id_idempotency_key_key"

// interpretError is the one place the store's errors are translated to the
// domain's (river's interpretError): a missing row is booking.ErrNotFound, a
// second booking with one customer's Idempotency-Key is
// booking.ErrIdempotencyReused, a database that cannot serve right now is
// booking.ErrUnavailable. The sentinel is added, the cause kept (errors.Is
// finds both). Every exported method ends with it (see translate).
func interpretError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %w", booking.ErrNotFound, err)
	case isOutage(err):
		return fmt.Errorf("%w: %w", booking.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == idempotencyKeyUnique {
		return fmt.Errorf("%w: %w", booking.ErrIdempotencyReused, err)
	}
	return err
}

// translate runs *err through interpretError: `defer translate(&err)` at
// the top of each exported method.
func translate(err *error) { *err = interpretError(*err) }

// isOutage reports whether err means the database cannot serve right now
// (down, restarting, recovering, unreachable, silent) rather than that the
// request or the code is wrong: the caller answers 503 and the client
// retries. Decided by the error itself, never by a ping after the fact
// (recovery may end between the two): TestOutageIsUnavailable produces each
// of these on a real server.
func isOutage(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // admin/crash shutdown, cannot connect now (starting up, in recovery, shutting down)
			return true
		case pgErr.Code == "53300": // too many connections
			return true
		case pgErr.Code == "57014": // the statement's time ran out (boundByServer): rolled back
			return true
		}
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connErr), errors.As(err, &netErr): // refused, reset, unreachable
		return true
	case pgconn.Timeout(err), errors.Is(err, context.DeadlineExceeded): // no answer within the request's bound
		return true
	case pgconn.SafeToRetry(err), errors.Is(err, pgconn.ErrConnClosed): // never sent, or on a connection already lost
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// The server closed the connection mid-statement without a word: its
		// backend crashed or was killed (the postmaster then restarts every
		// backend, 57P02, and recovers, 57P03).
		return true
	}
	return false
}

// sessionError is interpretError for the payment simulator's store
// (sessions.go), in the payment package's words: the simulator is a
// provider, and the booking core translates a provider's errors at its own
// seam. A missing session is payment.ErrUnknownPayment, a database that
// cannot serve now payment.ErrUnavailable.
func sessionError(err error) error {
	switch {
	case err == nil, errors.Is(err, payment.ErrUnknownPayment), errors.Is(err, payment.ErrUnavailable):
		return err
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %w", payment.ErrUnknownPayment, err)
	case isOutage(err):
		return fmt.Errorf("%w: %w", payment.ErrUnavailable, err)
	}
	return err
}

// translateSession runs *err through sessionError.
func translateSession(err *error) { *err = sessionError(*err) }
