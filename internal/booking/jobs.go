package booking

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/platform/periodic"
)

// Line is the waiting room's side of a confirmed booking: the Redis stream
// booking-events, and the fan's active place, freed at once (with its
// account's invitation noted used).
type Line interface {
	PublishBookings(ctx context.Context, events []line.BookingEvent) error
	CompleteFor(ctx context.Context, event, ticketID, account string) error
}

// passBudget bounds one pass of a background job: a statement on a
// connection that stopped answering (a black hole, a stalled database:
// nothing comes back and nothing is closed) would otherwise hold the job,
// its connection and all the work behind it for ever. What a pass cut short
// left, the next one does (each job's work is idempotent and kept per
// batch).
const passBudget = 2 * RequestBudget

// runEvery runs one pass of a job at once and then every interval until ctx
// ends, each within passBudget. Tests call the *Once methods directly.
func runEvery(ctx context.Context, every time.Duration, log *slog.Logger, name string, once func(context.Context) error) {
	periodic.Run(ctx, periodic.Every(every), func(ctx context.Context) {
		if err := withinBudget(ctx, once); err != nil && ctx.Err() == nil {
			log.Error(name+" pass failed", "err", err)
		}
	})
}

// withinBudget runs one pass within passBudget.
func withinBudget(ctx context.Context, pass func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, passBudget)
	defer cancel()
	return pass(ctx)
}

// Sweeper tidies lapsed holds so the seat map and the gauges show them
// AVAILABLE. Correctness never waits for it: expiry is judged by time in
// every statement. Several sweepers (replicas) share the work.
type Sweeper struct {
	Store Store
	Batch int
	Every time.Duration
	Log   *slog.Logger
}

// SweepOnce sweeps until a batch comes back short.
func (w *Sweeper) SweepOnce(ctx context.Context) error {
	batch := max(w.Batch, 1)
	for {
		n, err := w.Store.Sweep(ctx, batch)
		if err != nil {
			dbErrorsTotal.WithLabelValues("sweep").Inc()
			return err
		}
		if n > 0 {
			w.Log.Debug("swept lapsed holds", "rows", n)
		}
		if n < batch {
			return nil
		}
	}
}

// Run sweeps every w.Every until ctx ends.
func (w *Sweeper) Run(ctx context.Context) {
	runEvery(ctx, w.Every, w.Log, "sweeper", w.SweepOnce)
}

// Reconciler settles payments whose callback never came, by asking the
// provider, through the same code as the callback; and retries refunds the
// provider has not acknowledged.
type Reconciler struct {
	Service *Service
	Every   time.Duration
	Log     *slog.Logger
}

// reconcilePage is how many payments the reconciler reads at a time.
const reconcilePage = 100

// ReconcileOnce makes one pass: every payment left PENDING past the reconcile
// age and every refund the provider has not acknowledged, oldest first, page
// after page. However many the provider keeps answering PENDING or failing,
// each pass reaches every one of them: none is starved.
func (r *Reconciler) ReconcileOnce(ctx context.Context) error {
	s := r.Service
	err := eachDue(ctx, func(after Due) ([]Due, error) {
		return s.store.StalePayments(ctx, s.set.ReconcileAfter, after, reconcilePage)
	}, func(d Due) {
		st, err := s.pay.Status(ctx, d.PaymentID)
		if errors.Is(err, payment.ErrUnknownPayment) {
			st, err = payment.Failed, nil // the provider never took money for it
		}
		if err != nil {
			r.Log.Warn("reconcile: provider status", "paymentId", d.PaymentID, "err", err)
			return
		}
		if st == payment.Pending {
			return
		}
		if _, err := s.Settle(ctx, d.PaymentID, st); err != nil {
			r.Log.Error("reconcile: settle", "paymentId", d.PaymentID, "err", err)
		}
	})
	if err != nil {
		dbErrorsTotal.WithLabelValues("reconcile").Inc()
		return err
	}
	err = eachDue(ctx, func(after Due) ([]Due, error) {
		return s.store.PendingRefunds(ctx, after, reconcilePage)
	}, func(d Due) { s.refund(ctx, d.PaymentID) })
	if err != nil {
		dbErrorsTotal.WithLabelValues("reconcile").Inc()
		return err
	}
	return nil
}

// eachDue calls do for every Due that list returns, page by page, until a
// page comes back short or ctx ends.
func eachDue(ctx context.Context, list func(after Due) ([]Due, error), do func(Due)) error {
	var after Due
	for {
		page, err := list(after)
		if err != nil {
			return err
		}
		for _, d := range page {
			if ctx.Err() != nil {
				return nil
			}
			do(d)
		}
		if len(page) < reconcilePage {
			return nil
		}
		after = page[len(page)-1]
	}
}

// Run reconciles every r.Every until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	runEvery(ctx, r.Every, r.Log, "reconciler", r.ReconcileOnce)
}

// Relay publishes outbox rows to the Redis stream booking-events, at least
// once and in outbox order, then frees each fan's place in the waiting room
// and notes its account's invitation used (an invitation buys once). Rows
// are marked published only after both, in the transaction that read them:
// a relay that dies mid-batch, or whose line fails a completion, publishes
// the batch again.
type Relay struct {
	Store Store
	Line  Line
	Batch int
	Every time.Duration
	Log   *slog.Logger
}

// RelayOnce publishes until the outbox is empty (or another relay holds it).
func (r *Relay) RelayOnce(ctx context.Context) error {
	for {
		n, err := r.Store.RelayOutbox(ctx, max(r.Batch, 1), r.publish)
		if err != nil {
			dbErrorsTotal.WithLabelValues("outbox").Inc()
			return err
		}
		if n < max(r.Batch, 1) {
			return nil
		}
	}
}

func (r *Relay) publish(ctx context.Context, events []OutboxEvent) error {
	out := make([]line.BookingEvent, len(events))
	for i, e := range events {
		out[i] = line.BookingEvent{BookingID: e.BookingID, Type: e.Type, OutboxID: e.ID, Payload: e.Payload}
	}
	if err := r.Line.PublishBookings(ctx, out); err != nil {
		return err
	}
	for _, e := range events {
		// A completion lost would let the account's invitation buy again
		// (the place itself would lapse by itself): the batch fails, and is
		// published and completed again (both are safe to repeat).
		if err := r.Line.CompleteFor(ctx, e.Event, e.Customer, accountOf(e.BookedBy)); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("relay: complete booking %s: %w", e.BookingID, err)
		}
	}
	return nil
}

// Run relays every r.Every until ctx ends.
func (r *Relay) Run(ctx context.Context) {
	runEvery(ctx, r.Every, r.Log, "outbox relay", r.RelayOnce)
}
