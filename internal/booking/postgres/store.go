// Package postgres is the booking core's store on PostgreSQL (pgx v5): the
// source of truth for every seat and general-admission place.
//
// Each deciding operation is one short transaction whose conditional
// statements decide by their row counts; no lock outlives a request, and no
// decision reads a row and writes it in two steps. The statements and the
// lock order they share are in sql.go; the schema is in migrations/.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/payment"
)

// Store implements booking.Store.
type Store struct {
	pool *pgxpool.Pool
}

var _ booking.Store = (*Store)(nil)

// maxConns is the pool's size unless the URL's pool_max_conns says
// otherwise: pgxpool's default (max(4, CPUs)) starves a sale's holds.
const maxConns = 32

// Open connects to the database at url (config postgres.url) as the booking
// core and every test use it, so that tests run under production's plan
// cache mode:
//   - at most 32 connections, unless the URL sets pool_max_conns;
//   - plan_cache_mode=force_generic_plan, unless the URL sets it. Since 002
//     the hot statements read partitioned tables; PostgreSQL's plan cache
//     then prices a generic plan as if it scanned every partition and keeps
//     planning a custom plan per execution, which costs more than the hold
//     itself (0.7 ms of planning for 0.3 ms of execution, measured). The
//     generic plan prunes to the showtime's partition when it starts
//     (TestHoldPrunes) and is planned once per connection. Every statement
//     of the store looks rows up by key, so none needs a plan fitted to its
//     values.
//
// It does not wait for the database: the first statement connects.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return OpenPool(ctx, url, maxConns)
}

// OpenPool is Open with at most conns connections unless the URL sets
// pool_max_conns (the payment simulator's own, smaller pool).
func OpenPool(ctx context.Context, url string, conns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = conns
	}
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return pool, nil
}

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error { return interpretError(s.pool.Ping(ctx)) }

// SeatMap reads a showtime's seats and blocks in one round trip.
func (s *Store) SeatMap(ctx context.Context, showtimeID int64) (_ booking.SeatMap, err error) {
	defer translate(&err)
	m := booking.SeatMap{ShowtimeID: showtimeID, Seats: []booking.Seat{}, GeneralAdmission: []booking.Block{}}
	b := &pgx.Batch{}
	b.Queue(sqlSeatMap, showtimeID)
	b.Queue(sqlBlockMap, showtimeID)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err == nil {
		m.Seats, err = pgx.AppendRows(m.Seats, rows, pgx.RowToStructByPos[booking.Seat])
	}
	if err != nil {
		return m, fmt.Errorf("seat map: %w", err)
	}
	sortSeats(m.Seats)
	rows, err = br.Query()
	if err == nil {
		// A block's price is the catalog's: the row has code, capacity and
		// what is available.
		m.GeneralAdmission, err = pgx.AppendRows(m.GeneralAdmission, rows, func(row pgx.CollectableRow) (booking.Block, error) {
			var bl booking.Block
			err := row.Scan(&bl.Code, &bl.Capacity, &bl.Available)
			return bl, err
		})
	}
	if err != nil {
		return m, fmt.Errorf("seat map: %w", err)
	}
	return m, nil
}

// sortSeats puts a map's seats in row order, then by number (A1, A2, …, A10,
// B1): the order the page draws, and the same on every read, so a page that
// polls sees an unchanged map as unchanged. Rows are single letters, which
// every collation orders alike.
func sortSeats(seats []booking.Seat) {
	slices.SortFunc(seats, func(a, b booking.Seat) int {
		if c := strings.Compare(a.Row, b.Row); c != 0 {
			return c
		}
		return a.Number - b.Number
	})
}

// serverMargin is how much sooner than the caller's deadline PostgreSQL
// itself ends a statement bounded by boundByServer.
const serverMargin = 250 * time.Millisecond

// boundByServer makes PostgreSQL end b's implicit transaction by itself,
// rolled back, a little before ctx's deadline (statement_timeout, local to
// that transaction). A client that gives up on its own deadline cannot
// tell whether the server committed: a backend waiting on a lock learns of
// its client's leaving only when it answers, so it may take the lock,
// commit, and fail to say so, seconds later. Bounded by the server, a
// statement ending for want of time is rolled back for certain (57014,
// answered as an outage: nothing written), and the caller's deadline
// seldom comes first. No deadline: no bound.
func boundByServer(ctx context.Context, b *pgx.Batch) {
	d, ok := ctx.Deadline()
	if !ok {
		return
	}
	ms := max(time.Until(d)-serverMargin, 10*time.Millisecond).Milliseconds()
	b.Queue(`SELECT set_config('statement_timeout', $1, true)`, strconv.FormatInt(ms, 10))
}

// Hold takes r's seats and GA places together, all or nothing, in one round
// trip: a pipeline of sqlLockCustomer, sqlLockBlocks (with GA places) and
// sqlHold (sqlHoldSeats for seats alone), which PostgreSQL runs as one
// implicit transaction (no BEGIN, one Sync: an error anywhere rolls it all
// back). Locks come in the one order: customer, blocks (code order), seats
// (code order). Each statement starts once the previous one finished, so
// sqlHold's snapshot and "now" come after the customer and block locks.
// sqlHold decides; Go only names the refusal from what that same statement
// read.
func (s *Store) Hold(ctx context.Context, r booking.HoldRequest) (_ booking.Hold, err error) {
	defer translate(&err)
	codes := booking.GACodes(r.GA)
	counts := make([]int32, len(codes))
	for i, c := range codes {
		counts[i] = int32(r.GA[c])
	}
	seats := r.Seats
	if seats == nil {
		seats = []string{}
	}
	ga, _ := json.Marshal(r.GA)

	var (
		now           time.Time
		recent        int
		oldest        *time.Time
		held          int
		refused       int
		oldestRefusal *time.Time
		takeable      []string
		blocks        int
		full          *string
		expiresAt     *time.Time
	)
	b := &pgx.Batch{}
	boundByServer(ctx, b)
	b.Queue(sqlLockCustomer, r.Event, r.Customer)
	if len(codes) > 0 {
		b.Queue(sqlLockBlocks, r.ShowtimeID, codes)
	}
	// A hold of seats alone names no block: its statement then locks no
	// partition of the blocks' tables (sqlHoldSeats).
	var q *pgx.QueuedQuery
	if len(codes) > 0 {
		q = b.Queue(sqlHold, r.Event, r.Customer, r.ShowtimeID, seats, r.HoldID, ga, r.Places(), r.AmountCents,
			r.TTL.Microseconds(), codes, counts, r.HoldsPerMinute, r.MaxPlaces, r.Cooldown.Microseconds(),
			r.AttemptsPerMinute, r.Ticket)
	} else {
		q = b.Queue(sqlHoldSeats, r.Event, r.Customer, r.ShowtimeID, seats, r.HoldID, ga, r.Places(), r.AmountCents,
			r.TTL.Microseconds(), r.HoldsPerMinute, r.MaxPlaces, r.Cooldown.Microseconds(),
			r.AttemptsPerMinute, r.Ticket)
	}
	q.QueryRow(func(row pgx.Row) error {
		return row.Scan(&now, &recent, &oldest, &held, &refused, &oldestRefusal, &takeable, &blocks, &full, &expiresAt)
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return booking.Hold{}, fmt.Errorf("hold: %w", err)
	}
	if expiresAt != nil {
		return heldAs(r, *expiresAt), nil
	}
	// Refused: name why, in the order the statement's conditions read.
	switch {
	case recent >= r.HoldsPerMinute && oldest != nil:
		wait := oldest.Add(time.Minute).Sub(now)
		return booking.Hold{}, &booking.DetailError{Err: booking.ErrRateLimited, RetryAfter: max(wait, time.Second)}
	case recent+refused >= r.AttemptsPerMinute:
		// The attempt that leaves the minute first lets the next one in.
		first := oldestRefusal
		if first == nil || (oldest != nil && oldest.Before(*first)) {
			first = oldest
		}
		wait := time.Second
		if first != nil {
			wait = max(first.Add(time.Minute).Sub(now), time.Second)
		}
		return booking.Hold{}, &booking.DetailError{Err: booking.ErrRateLimited, RetryAfter: wait}
	case held+r.Places() > r.MaxPlaces:
		return booking.Hold{}, fmt.Errorf("hold: %d places held, %d asked, %d allowed: %w", held, r.Places(), r.MaxPlaces, booking.ErrTooManySeats)
	case blocks != len(codes):
		return booking.Hold{}, fmt.Errorf("hold: unknown block among %v: %w", codes, booking.ErrInvalidRequest)
	case full != nil:
		return booking.Hold{}, &booking.DetailError{Err: booking.ErrSoldOut, Block: *full}
	}
	// The seats the conditional UPDATE could not take (held by someone, sold,
	// or cooling down for this customer): a report read in the statement
	// that decided, never a decision of its own.
	var taken []string
	for _, c := range seats {
		if !slices.Contains(takeable, c) {
			taken = append(taken, c)
		}
	}
	if len(taken) == 0 {
		return booking.Hold{}, fmt.Errorf("hold: refused with every condition met: %w", errHoldNotWritten)
	}
	return booking.Hold{}, &booking.DetailError{Err: booking.ErrSeatsUnavailable, Seats: taken}
}

// heldAs is hold r as a hold written answers it, expiring at exp.
func heldAs(r booking.HoldRequest, exp time.Time) booking.Hold {
	ga := r.GA
	if ga == nil {
		ga = map[string]int{}
	}
	return booking.Hold{ID: r.HoldID, ExpiresAt: exp, Seats: r.Seats, GeneralAdmission: ga, AmountCents: r.AmountCents}
}

// Written reads hold r back, as Hold answers it, while it is held. One
// round trip (no statement prepared first): it is asked when time is
// short.
func (s *Store) Written(ctx context.Context, r booking.HoldRequest) (_ booking.Hold, ok bool, err error) {
	defer translate(&err)
	var exp time.Time
	err = s.pool.QueryRow(ctx, `SELECT expires_at FROM holds WHERE id = $1 AND status = 'HELD'`,
		pgx.QueryExecModeSimpleProtocol, r.HoldID).Scan(&exp)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return booking.Hold{}, false, nil
	case err != nil:
		return booking.Hold{}, false, err
	}
	return heldAs(r, exp), true, nil
}

// errHoldNotWritten would mean sqlHold and Hold disagree on a rule: a bug,
// reported as an internal error rather than guessed at.
var errHoldNotWritten = errors.New("hold not written")

type holdRow struct {
	event, customer, status string
	ticket                  string // the ticket that took it
	showtime                int64
	seats                   []string
	ga                      map[string]int
	expires                 time.Time
	amount                  int64
}

// lockHold locks and reads customer's hold for a pass of event. A hold of
// another event is refused here, under its lock and before the caller
// writes anything: a pass opens one event, and an account (one customer
// across events) must not release or pay, from one event, a hold of
// another, nor have the line's inventory told of it under the wrong event.
func lockHold(ctx context.Context, tx pgx.Tx, holdID, customer, event string) (holdRow, error) {
	var h holdRow
	var ga []byte
	// No row (another customer's hold, or none): ErrNotFound, by interpretError.
	if err := tx.QueryRow(ctx, sqlLockHold, holdID, customer).Scan(
		&h.event, &h.showtime, &h.customer, &h.seats, &ga, &h.status, &h.expires, &h.amount, &h.ticket); err != nil {
		return h, err
	}
	if h.event != event {
		return h, fmt.Errorf("hold %s is of %s, the pass of %s: %w", holdID, h.event, event, booking.ErrWrongEvent)
	}
	if err := json.Unmarshal(ga, &h.ga); err != nil {
		return h, err
	}
	return h, nil
}

// Release gives a hold's seats and places back at once; only its holder may,
// with a pass of its event. Releasing a hold that already lapsed or was
// released is a no-op.
func (s *Store) Release(ctx context.Context, holdID, customer, event string) (err error) {
	defer translate(&err)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer tx.Rollback(context.Background())
	h, err := lockHold(ctx, tx, holdID, customer, event)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	switch h.status {
	case booking.HoldBooked:
		return fmt.Errorf("release: %w", booking.ErrHoldNotActive)
	case booking.HoldReleased, booking.HoldExpired:
		return nil
	}
	if len(h.seats) > 0 {
		if _, err := tx.Exec(ctx, sqlLockSeats, h.showtime, h.seats); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlReleaseSeats, h.showtime, h.seats, holdID); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, sqlReleaseGA, h.showtime, holdID); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlReleaseHold, holdID); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return tx.Commit(ctx)
}

// keyed is what a checkout finds under its hold's lock before it writes:
// the database's now, and the booking its idempotency key already made (id
// nil when none), with how it was paid (and, for points, the balance its
// debit left).
type keyed struct {
	now                                     time.Time
	id, hold, paymentID, paymentURL, method *string
	paymentExpires                          *time.Time
	balance                                 *int64
}

func bookingByKey(ctx context.Context, tx pgx.Tx, customer, key string) (keyed, error) {
	var k keyed
	err := tx.QueryRow(ctx, sqlBookingByKey, customer, key).Scan(&k.now, &k.id, &k.hold, &k.paymentID, &k.paymentURL,
		&k.paymentExpires, &k.method, &k.balance)
	return k, err
}

// reuses reports whether k is a booking its key made for another hold or
// another way of paying: the key may not buy anything else.
func (k keyed) reuses(hold, method string) bool { return *k.hold != hold || *k.method != method }

// checkoutable is nil if the hold can still be checked out at now.
func (h holdRow) checkoutable(now time.Time) error {
	switch {
	case h.status == booking.HoldBooked:
		return booking.ErrHoldNotActive
	case h.status != booking.HoldHeld || !h.expires.After(now):
		return booking.ErrHoldExpired
	}
	return nil
}

// liveBooking is a hold's booking whose payment is open or done (id nil
// when none): at most one per hold.
type liveBooking struct {
	id, paymentID, paymentURL *string
	paymentExpires            *time.Time
}

// beginCheckout opens a checkout's transaction, card or points: the hold's
// row locked (the first lock of the order), then what the idempotency key
// bought already. The caller rolls tx back (a no-op once committed).
func (s *Store) beginCheckout(ctx context.Context, holdID, customer, event, key string) (pgx.Tx, holdRow, keyed, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, holdRow{}, keyed{}, err
	}
	h, err := lockHold(ctx, tx, holdID, customer, event)
	var k keyed
	if err == nil {
		k, err = bookingByKey(ctx, tx, customer, key)
	}
	if err != nil {
		_ = tx.Rollback(context.Background())
		return nil, holdRow{}, keyed{}, err
	}
	return tx, h, k, nil
}

// liveBookingOf checks that h can still be checked out at now, then reads
// its live booking (card or points alike: one per hold).
func liveBookingOf(ctx context.Context, tx pgx.Tx, h holdRow, hold string, now time.Time) (liveBooking, error) {
	var l liveBooking
	if err := h.checkoutable(now); err != nil {
		return l, err
	}
	err := tx.QueryRow(ctx, sqlLiveBooking, hold).Scan(&l.id, &l.paymentID, &l.paymentURL, &l.paymentExpires)
	return l, err
}

// Checkout creates the booking (PENDING) and its payment session under the
// hold's row lock, so that concurrent identical requests open one session and
// all get the same answer.
func (s *Store) Checkout(ctx context.Context, r booking.CheckoutRequest, open booking.OpenSession) (_ booking.Checkout, err error) {
	defer translate(&err)
	tx, h, k, err := s.beginCheckout(ctx, r.HoldID, r.Customer, r.Event, r.IdempotencyKey)
	if err != nil {
		return booking.Checkout{}, fmt.Errorf("checkout: %w", err)
	}
	defer tx.Rollback(context.Background())
	if k.id != nil {
		if k.reuses(r.HoldID, "card") {
			return booking.Checkout{}, booking.ErrIdempotencyReused
		}
		return booking.Checkout{BookingID: *k.id, PaymentID: *k.paymentID, PaymentURL: *k.paymentURL, ExpiresAt: *k.paymentExpires}, nil
	}
	live, err := liveBookingOf(ctx, tx, h, r.HoldID, k.now)
	if err != nil {
		return booking.Checkout{}, fmt.Errorf("checkout: %w", err)
	}
	if live.id != nil {
		// A payment for this hold is already open: the fan continues with it.
		return booking.Checkout{BookingID: *live.id, PaymentID: *live.paymentID, PaymentURL: *live.paymentURL, ExpiresAt: *live.paymentExpires}, nil
	}
	// The session must end before the hold does, so that a payment in time
	// finds its seats still held.
	var c booking.Checkout
	ttl := min(r.SessionTTL, h.expires.Sub(k.now))
	c.BookingID = booking.NewID()
	sess, err := open(ctx, booking.SessionFor{
		BookingID: c.BookingID, Event: h.event, ShowtimeID: h.showtime, Seats: h.seats,
		GeneralAdmission: h.ga, AmountCents: h.amount, TTL: ttl,
	})
	if err != nil {
		return booking.Checkout{}, fmt.Errorf("checkout: payment session: %w", err)
	}
	// Stored at the database's precision, so a replay answers the same bytes.
	c.PaymentID, c.PaymentURL, c.ExpiresAt = sess.PaymentID, sess.URL, sess.ExpiresAt.Truncate(time.Microsecond)
	b := &pgx.Batch{}
	b.Queue(sqlInsertBooking, c.BookingID, r.HoldID, h.event, h.showtime, r.Customer, r.IdempotencyKey,
		h.amount, c.PaymentID, c.PaymentURL, c.ExpiresAt)
	b.Queue(sqlInsertPayment, c.PaymentID, c.BookingID, h.amount)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		// A concurrent checkout with the same key won: ErrIdempotencyReused,
		// by interpretError.
		return booking.Checkout{}, fmt.Errorf("checkout: insert: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return booking.Checkout{}, fmt.Errorf("checkout: commit: %w", err)
	}
	return c, nil
}

// Settle applies a payment's final status once. A success confirms the hold's
// seats and places only if they are still this hold's and unexpired ("now"
// after the locks); otherwise the booking is FAILED and a refund recorded,
// and nothing is taken back from whoever holds the seats now.
func (s *Store) Settle(ctx context.Context, paymentID string, status payment.Status) (_ booking.Settlement, err error) {
	defer translate(&err)
	out := booking.Settlement{PaymentID: paymentID}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return out, fmt.Errorf("settle: %w", err)
	}
	defer tx.Rollback(context.Background())
	var (
		pStatus, bStatus, holdID, event, customer string
		amount, showtime                          int64
		seats                                     []string
		gaRaw                                     []byte
	)
	if err := tx.QueryRow(ctx, sqlLockPayment, paymentID).Scan(&pStatus, &out.BookingID, &bStatus, &holdID,
		&event, &customer, &out.BookedBy, &amount, &showtime, &seats, &gaRaw); err != nil {
		return out, fmt.Errorf("settle %s: %w", paymentID, err) // an unknown payment: ErrNotFound
	}
	out.Event, out.HoldID = event, holdID
	if pStatus == string(payment.Failed) && status == payment.Succeeded {
		// A success after the failure: the provider did take the money.
		// Nothing is confirmed (the fan was told it failed, and may have
		// paid again since); the money goes back, as for a late success.
		b := &pgx.Batch{}
		b.Queue(sqlSucceededAfterFailure, paymentID)
		b.Queue(sqlRecordRefund, paymentID, out.BookingID, amount)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return out, fmt.Errorf("settle: refund: %w", err)
		}
		out.Outcome = booking.LateRefunded
		return out, tx.Commit(ctx)
	}
	if pStatus != string(payment.Pending) {
		out.Outcome = booking.Duplicate
		return out, nil
	}
	if _, err := tx.Exec(ctx, sqlSettlePayment, paymentID, string(status)); err != nil {
		return out, fmt.Errorf("settle: %w", err)
	}
	if status != payment.Succeeded {
		if _, err := tx.Exec(ctx, sqlBookingStatus, out.BookingID, booking.StatusFailed); err != nil {
			return out, fmt.Errorf("settle: %w", err)
		}
		out.Outcome = booking.PaymentFail
		return out, tx.Commit(ctx)
	}
	var ga map[string]int
	if err := json.Unmarshal(gaRaw, &ga); err != nil {
		return out, fmt.Errorf("settle: %w", err)
	}
	confirmed, err := confirm(ctx, tx, holdID, out.BookingID, showtime, seats, ga)
	if err != nil {
		return out, err
	}
	if confirmed {
		payload, _ := json.Marshal(map[string]any{
			"type": "BookingConfirmed", "bookingId": out.BookingID, "eventId": event,
			"showtimeId": showtime, "seats": seats, "generalAdmission": ga, "amountCents": amount,
		})
		b := &pgx.Batch{}
		b.Queue(sqlBookHold, holdID)
		b.Queue(sqlBookingStatus, out.BookingID, booking.StatusConfirmed)
		b.Queue(sqlInsertOutbox, out.BookingID, "BookingConfirmed", payload, event, customer)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return out, fmt.Errorf("settle: confirm: %w", err)
		}
		out.Outcome = booking.Confirmed
	} else {
		b := &pgx.Batch{}
		b.Queue(sqlBookingStatus, out.BookingID, booking.StatusFailed)
		b.Queue(sqlRecordRefund, paymentID, out.BookingID, amount)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return out, fmt.Errorf("settle: refund: %w", err)
		}
		out.Outcome = booking.LateRefunded
	}
	return out, tx.Commit(ctx)
}

// confirm books the hold's seats and places in a savepoint, and reports
// whether all of them were still this hold's and unexpired; if not, the
// savepoint is rolled back and nothing changed.
func confirm(ctx context.Context, tx pgx.Tx, holdID, bookingID string, showtime int64, seats []string, ga map[string]int) (bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("settle: %w", err)
	}
	defer sp.Rollback(context.Background())
	if len(ga) > 0 {
		if _, err := sp.Exec(ctx, sqlLockBlocks, showtime, booking.GACodes(ga)); err != nil {
			return false, fmt.Errorf("settle: lock blocks: %w", err)
		}
	}
	if len(seats) > 0 {
		if _, err := sp.Exec(ctx, sqlLockSeats, showtime, seats); err != nil {
			return false, fmt.Errorf("settle: lock seats: %w", err)
		}
		tag, err := sp.Exec(ctx, sqlConfirmSeats, showtime, seats, holdID, bookingID)
		if err != nil {
			return false, fmt.Errorf("settle: seats: %w", err)
		}
		if int(tag.RowsAffected()) != len(seats) {
			return false, nil
		}
	}
	if len(ga) > 0 {
		tag, err := sp.Exec(ctx, sqlConfirmGA, showtime, holdID, bookingID)
		if err != nil {
			return false, fmt.Errorf("settle: places: %w", err)
		}
		if int(tag.RowsAffected()) != len(ga) {
			return false, nil
		}
	}
	return true, sp.Commit(ctx)
}

// MarkRefunded records the provider's acknowledgement of a refund: the refund
// is DONE and the booking REFUNDED.
func (s *Store) MarkRefunded(ctx context.Context, paymentID string) (err error) {
	defer translate(&err)
	// One statement: the refund DONE and its booking REFUNDED, or nothing if
	// it was done already.
	if _, err := s.pool.Exec(ctx, sqlRefundDone, paymentID); err != nil {
		return fmt.Errorf("refund: %w", err)
	}
	return nil
}

// Booking returns a booking of customer in event; ErrNotFound for anyone
// else's, ErrWrongEvent for the customer's booking of another event.
func (s *Store) Booking(ctx context.Context, bookingID, customer, event string) (_ booking.Booking, err error) {
	defer translate(&err)
	var b booking.Booking
	var ga []byte
	var refund *string
	var of string
	// Anyone else's booking is no row: ErrNotFound, by interpretError.
	if err := s.pool.QueryRow(ctx, sqlBooking, bookingID, customer).Scan(&b.ID, &b.Status, &b.Seats, &ga,
		&b.ShowtimeID, &b.AmountCents, &b.HoldID, &b.HoldExpiresAt, &refund, &of); err != nil {
		return b, fmt.Errorf("booking: %w", err)
	}
	if of != event {
		return booking.Booking{}, fmt.Errorf("booking %s is of %s, the pass of %s: %w", bookingID, of, event, booking.ErrWrongEvent)
	}
	if refund != nil {
		b.Refund = *refund
	}
	if err := json.Unmarshal(ga, &b.GeneralAdmission); err != nil {
		return b, fmt.Errorf("booking: %w", err)
	}
	return b, nil
}

// Answered is what customer's checkout with key answered (card or points);
// booking.ErrNotFound when the key made no booking.
func (s *Store) Answered(ctx context.Context, customer, key string) (_ booking.Answered, err error) {
	defer translate(&err)
	var (
		a             booking.Answered
		payID, payURL *string
		payExpires    *time.Time
	)
	// No row: ErrNotFound, by interpretError.
	if err := s.pool.QueryRow(ctx, sqlAnswered, customer, key).Scan(&a.BookingID, &a.HoldID, &a.Event, &a.Method,
		&payID, &payURL, &payExpires, &a.Balance); err != nil {
		return a, fmt.Errorf("answered: %w", err)
	}
	a.Checkout.BookingID = a.BookingID
	if payID != nil && payURL != nil && payExpires != nil {
		a.Checkout.PaymentID, a.Checkout.PaymentURL, a.Checkout.ExpiresAt = *payID, *payURL, *payExpires
	}
	return a, nil
}

// Sweep tidies up to batch lapsed seats, places and holds per table, and
// reports how many rows it changed.
func (s *Store) Sweep(ctx context.Context, batch int) (_ int, err error) {
	defer translate(&err)
	total := 0
	for _, q := range []string{sqlSweepSeats, sqlSweepGA, sqlSweepHolds} {
		tag, err := s.pool.Exec(ctx, q, batch)
		if err != nil {
			return total, fmt.Errorf("sweep: %w", err)
		}
		total += int(tag.RowsAffected())
	}
	return total, nil
}

// StalePayments lists up to limit payments still PENDING after olderThan,
// oldest first, after the one given (the zero Due: from the start).
func (s *Store) StalePayments(ctx context.Context, olderThan time.Duration, after booking.Due, limit int) (_ []booking.Due, err error) {
	defer translate(&err)
	rows, err := s.pool.Query(ctx, sqlStalePayments, olderThan.Seconds(), after.At, after.PaymentID, limit)
	if err != nil {
		return nil, fmt.Errorf("stale payments: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[booking.Due])
}

// PendingRefunds lists up to limit refunds the provider has not acknowledged
// yet, oldest first, after the one given.
func (s *Store) PendingRefunds(ctx context.Context, after booking.Due, limit int) (_ []booking.Due, err error) {
	defer translate(&err)
	rows, err := s.pool.Query(ctx, sqlPendingRefunds, after.At, after.PaymentID, limit)
	if err != nil {
		return nil, fmt.Errorf("pending refunds: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[booking.Due])
}

// RelayOutbox hands up to limit unpublished rows, oldest first, to publish,
// and marks them published only once publish succeeded, in the same
// transaction: a crash anywhere publishes them again (at least once). One
// relay runs at a time across replicas (an advisory lock), which keeps the
// stream in outbox order.
func (s *Store) RelayOutbox(ctx context.Context, limit int, publish func(context.Context, []booking.OutboxEvent) error) (_ int, err error) {
	defer translate(&err)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	defer tx.Rollback(context.Background())
	// The lock is the transaction's, on the server: a connection black-holed
	// while it is held (nothing comes back, nothing is closed) left its
	// backend idle in the transaction, holding the lock, until the close of
	// the client reached it (pgx gives a connection it gives up on up to 15 s
	// more to say goodbye; a middlebox that forgot the connection never
	// passes it on, and the server's TCP keepalive takes hours), and every
	// pass meanwhile, on a new connection, found the lock taken and
	// published nothing (TestRelayOutlivesABlackHoledConnection: 25 s to
	// publish after a black hole in a pass, over its 20 s at load average
	// 20-27, where a pass is in its transaction much of the time). The
	// server now ends such a transaction once it sat idle as long as the
	// pass's whole deadline: no pass that still runs waits that long between
	// two statements.
	idle := "0"
	if d, ok := ctx.Deadline(); ok {
		idle = strconv.FormatInt(max(time.Until(d), time.Millisecond).Milliseconds(), 10)
	}
	var mine bool
	if err := tx.QueryRow(ctx, sqlRelayLock, idle).Scan(&mine); err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	if !mine {
		return 0, nil
	}
	rows, err := tx.Query(ctx, sqlOutboxBatch, limit)
	if err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (booking.OutboxEvent, error) {
		var e booking.OutboxEvent
		err := row.Scan(&e.ID, &e.BookingID, &e.Type, &e.Payload, &e.Event, &e.Customer, &e.BookedBy, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	if len(events) == 0 {
		return 0, nil
	}
	if err := publish(ctx, events); err != nil {
		return 0, fmt.Errorf("outbox: publish: %w", err)
	}
	ids := make([]int64, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	if _, err := tx.Exec(ctx, sqlOutboxPublished, ids); err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	return len(events), nil
}

// InventorySnapshot reads an event's places at one instant (one repeatable
// read transaction): the places free to hold, the live holds, the open
// payments, and the holds confirmed in the last recent.
func (s *Store) InventorySnapshot(ctx context.Context, event string, recent time.Duration) (_ booking.InventorySnapshot, err error) {
	defer translate(&err)
	snap := booking.InventorySnapshot{Holds: []booking.LiveHold{}, Payments: []string{}, Booked: []string{}}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, sqlInventoryFree, event).Scan(&snap.Free); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlInventoryHolds, event)
		if err != nil {
			return err
		}
		if snap.Holds, err = pgx.CollectRows(rows, pgx.RowToStructByPos[booking.LiveHold]); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, sqlInventoryPayments, event)
		if err != nil {
			return err
		}
		if snap.Payments, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, sqlInventoryBooked, event, recent.Seconds())
		if err != nil {
			return err
		}
		snap.Booked, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return snap, fmt.Errorf("inventory snapshot %s: %w", event, err)
	}
	return snap, nil
}

// LapsedHolds lists up to limit holds whose expiry passed after since while
// they were HELD, oldest first, and the database's now.
func (s *Store) LapsedHolds(ctx context.Context, since time.Time, limit int) (_ []booking.Lapsed, now time.Time, err error) {
	defer translate(&err)
	var out []booking.Lapsed
	b := &pgx.Batch{}
	b.Queue(sqlNow).QueryRow(func(row pgx.Row) error { return row.Scan(&now) })
	b.Queue(sqlLapsedHolds, since, limit).Query(func(rows pgx.Rows) error {
		var err error
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[booking.Lapsed])
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, now, fmt.Errorf("lapsed holds: %w", err)
	}
	return out, now, nil
}

// Stats reads what the gauges show, at scrape time.
func (s *Store) Stats(ctx context.Context) (_ booking.Stats, err error) {
	defer translate(&err)
	st := booking.Stats{Seats: map[int64]map[string]int64{}, Payments: map[string]int64{}}
	b := &pgx.Batch{}
	b.Queue(sqlStatsOutbox).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.OutboxPending, &st.OutboxOldest, &st.OutboxNow)
	})
	b.Queue(sqlStatsSeats).Query(func(rows pgx.Rows) error {
		var id, n int64
		var status string
		_, err := pgx.ForEachRow(rows, []any{&id, &status, &n}, func() error {
			if st.Seats[id] == nil {
				st.Seats[id] = map[string]int64{}
			}
			st.Seats[id][status] = n
			return nil
		})
		return err
	})
	b.Queue(sqlStatsPayments).Query(func(rows pgx.Rows) error {
		var status string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error {
			st.Payments[status] = n
			return nil
		})
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}
