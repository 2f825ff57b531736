package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/booking"
)

// CheckoutPoints pays a hold with its account's points, in one transaction
// (the reference design's pessimistic lock): the hold's row, then the
// wallet's (SELECT … FOR UPDATE), then the blocks and seats, the one lock
// order of sql.go. The balance is checked under the wallet's lock, so
// concurrent checkouts of one account queue on it and exactly as many as
// the balance covers are confirmed; the debit, its ledger row, the seats
// booked, the booking CONFIRMED and the outbox row commit together or not
// at all. A repeat of the key answers what the first answered.
func (s *Store) CheckoutPoints(ctx context.Context, r booking.PointsCheckout) (_ booking.PointsPaid, err error) {
	defer translate(&err)
	tx, h, k, err := s.beginCheckout(ctx, r.HoldID, r.Customer, r.Event, r.IdempotencyKey)
	if err != nil {
		return booking.PointsPaid{}, fmt.Errorf("points: %w", err)
	}
	defer tx.Rollback(context.Background())
	out := booking.PointsPaid{Event: h.event, HoldID: r.HoldID, Status: booking.StatusConfirmed}
	if k.id != nil {
		if k.reuses(r.HoldID, "points") || k.balance == nil {
			return booking.PointsPaid{}, booking.ErrIdempotencyReused
		}
		out.BookingID, out.Balance = *k.id, *k.balance
		return out, nil
	}
	live, err := liveBookingOf(ctx, tx, h, r.HoldID, k.now)
	if err != nil {
		return booking.PointsPaid{}, fmt.Errorf("points: %w", err)
	}
	if live.id != nil {
		return booking.PointsPaid{}, fmt.Errorf("points: booking %s: %w", *live.id, booking.ErrPaymentOpen)
	}
	// The wallet's lock, then the check: nothing is written before it.
	var have int64
	switch err := tx.QueryRow(ctx, sqlLockWallet, r.Account).Scan(&have); {
	case errors.Is(err, pgx.ErrNoRows):
		have = 0
	case err != nil:
		return booking.PointsPaid{}, fmt.Errorf("points: wallet: %w", err)
	}
	if have < h.amount {
		return booking.PointsPaid{}, fmt.Errorf("points: %d asked, %d in the wallet: %w", h.amount, have, booking.ErrInsufficientPoints)
	}
	out.BookingID = booking.NewID()
	if _, err := tx.Exec(ctx, sqlInsertPointsBooking, out.BookingID, r.HoldID, h.event, h.showtime, r.Customer,
		r.IdempotencyKey, h.amount); err != nil {
		// A concurrent checkout with the same key won: ErrIdempotencyReused.
		return booking.PointsPaid{}, fmt.Errorf("points: insert: %w", err)
	}
	// The expiry is judged here, by the statements that book, after every
	// lock (confirm): a hold that lapsed meanwhile books nothing.
	confirmed, err := confirm(ctx, tx, r.HoldID, out.BookingID, h.showtime, h.seats, h.ga)
	if err != nil {
		return booking.PointsPaid{}, err
	}
	if !confirmed {
		return booking.PointsPaid{}, fmt.Errorf("points: %w", booking.ErrHoldExpired)
	}
	out.Balance = have
	if h.amount > 0 {
		if err := tx.QueryRow(ctx, sqlDebitWallet, r.Account, h.amount).Scan(&out.Balance); err != nil {
			return booking.PointsPaid{}, fmt.Errorf("points: debit: %w", err)
		}
	}
	payload, _ := json.Marshal(map[string]any{
		"type": "BookingConfirmed", "bookingId": out.BookingID, "eventId": h.event,
		"showtimeId": h.showtime, "seats": h.seats, "generalAdmission": h.ga, "amountCents": h.amount,
		"method": "points",
	})
	b := &pgx.Batch{}
	if h.amount > 0 {
		b.Queue(sqlLedgerDebit, r.Account, -h.amount, out.Balance, out.BookingID)
	}
	b.Queue(sqlBookHold, r.HoldID)
	b.Queue(sqlBookingStatus, out.BookingID, booking.StatusConfirmed)
	b.Queue(sqlInsertOutbox, out.BookingID, "BookingConfirmed", payload, h.event, h.ticket)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return booking.PointsPaid{}, fmt.Errorf("points: confirm: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return booking.PointsPaid{}, fmt.Errorf("points: commit: %w", err)
	}
	out.Fresh = true
	return out, nil
}

// Wallet returns account's balance (0 for an account that never had points).
func (s *Store) Wallet(ctx context.Context, account string) (_ int64, err error) {
	defer translate(&err)
	var balance int64
	if err := s.pool.QueryRow(ctx, sqlWallet, account).Scan(&balance); err != nil {
		return 0, fmt.Errorf("wallet: %w", err)
	}
	return balance, nil
}

// Credit adds points to account's wallet once per reference (a second
// credit with the same reference, concurrent or later, adds nothing) and
// returns the balance.
func (s *Store) Credit(ctx context.Context, account string, points int64, reference string) (_ int64, err error) {
	defer translate(&err)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("credit: %w", err)
	}
	defer tx.Rollback(context.Background())
	var (
		balance  int64
		credited bool
	)
	b := &pgx.Batch{}
	b.Queue(sqlEnsureWallet, account)
	b.Queue(sqlCredit, account, points, reference).QueryRow(func(row pgx.Row) error {
		return row.Scan(&balance, &credited)
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("credit: %w", err)
	}
	return balance, tx.Commit(ctx)
}
