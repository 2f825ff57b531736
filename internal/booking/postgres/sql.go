package postgres

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Every statement of the store, in one place. Conventions that make the rules
// hold:
//   - Seats are always locked in seat-code order (ORDER BY seat_code FOR
//     UPDATE inside the statement; seat_code is COLLATE "C"), blocks in code
//     order, and one order is used everywhere: customer lock, hold row,
//     wallet row (a points checkout), blocks, seats. Two transactions
//     therefore never deadlock. A credit locks the wallet row alone; a
//     refund of a points booking locks the booking, then the wallet.
//   - "Now" is the database clock: statement_timestamp() of a statement sent
//     after the locking one (customer and blocks for a hold; blocks and
//     seats for a confirmation).
//   - A hold is expired iff hold_expires_at <= now; expiry is judged in the
//     WHERE of every statement (lazy), never left to the sweeper.
//   - Every statement on seats, ga_blocks and ga_places names its showtime
//     (showtime_id = $n), the partition key since migration 002: it touches
//     one partition (TestHoldPrunes). Only the sweeper and the gauges read
//     all partitions.
const (
	// $1 event, $2 customer. Takes the customer's lock until the end of the
	// transaction: holds of one customer in one event run one at a time, so
	// the limits are exact. A transaction-scoped advisory lock rather than a
	// row: the lock itself writes nothing (no WAL, no dead tuple; a
	// refused hold writes only its attempt, in sqlHold), and a first hold
	// inserts no customer row. Keyed in the two-int4
	// space, which never meets the one-bigint keys of the migrator and the
	// relay; two customers whose names hash alike merely wait for each other.
	sqlLockCustomer = `
SELECT pg_advisory_xact_lock(hashtext('booking-customer'), hashtext($1::text || '/' || $2::text))`

	// $1 showtime, $2 block codes. Locks the blocks in code order.
	sqlLockBlocks = `
SELECT code FROM ga_blocks
 WHERE showtime_id = $1 AND code = ANY($2::text[])
 ORDER BY code
   FOR UPDATE`

	// THE hold: one statement, sent in the same pipeline (one round trip, one
	// implicit transaction) after sqlLockCustomer and, with GA places, after
	// sqlLockBlocks. Its snapshot and its statement_timestamp() ("now") are
	// therefore taken once those locks are ours: the limits and the block
	// counts see every hold committed before, and the one "now" judges the
	// limits, the lapses, and sets the new expiry, so two holds of a seat
	// never overlap in time.
	//
	// $1 event, $2 customer, $3 showtime, $4 sorted seat codes, $5 hold id,
	// $6 GA as JSON, $7 places asked (seats + GA), $8 amount, $9 TTL in
	// microseconds, $10 sorted block codes, $11 places per block (same
	// order), $12 holds per minute, $13 places a customer may hold, $14 the
	// re-hold cool-down in microseconds, $15 hold attempts per minute, $16
	// the ticket taking it (the customer's, or one of its account's).
	//
	// Decisions, each a condition of the statement, never a read followed by
	// a write in Go:
	//   - mine: the customer's holds that matter now (live, taken in the last
	//     minute, or cooling down), one range of holds_by_customer_expiry;
	//   - lim: holds taken in the last minute, refusals in the last minute
	//     (hold_refusals), places held now across the event; the customer
	//     lock makes them exact;
	//   - cooling: the seats of this showtime the customer released or let
	//     lapse within the cool-down: out of their reach (the reference
	//     design's open loophole: release and take again for ever);
	//   - avail: capacity left in each asked block (blocks locked before);
	//   - ok: the attempt limit (holds + refusals in the last minute), the
	//     hold limits and the blocks allow the hold;
	//   - locked: locks, in code order, the asked seats that are AVAILABLE or
	//     lapsed and not cooling, only if ok;
	//   - taken: THE conditional UPDATE: takes them only if every asked seat
	//     was locked, so it changes all of them or none;
	//   - hold, places: the hold row and GA rows, only if ok and all seats
	//     were taken;
	//   - refused: a request the rate limits let through but that took
	//     nothing is an attempt too: recorded (trimmed to the last minute).
	//     A 429 records nothing, and a success is counted by its holds row.
	// The last SELECT is one row: what Go needs to name a refusal (the limits,
	// the seats that could be taken, the blocks), read in the same snapshot,
	// and the new expiry, NULL unless the hold was written.
	sqlHold = `
WITH mine AS (
    SELECT seats, showtime_id, places, status, created_at, expires_at, ended_at
      FROM holds
     WHERE event_id = $1 AND customer_id = $2
       AND expires_at > statement_timestamp() - greatest($14::bigint * interval '1 microsecond', interval '1 minute')
), refusals AS (
    SELECT t FROM hold_refusals r, unnest(r.at) AS t
     WHERE r.event_id = $1 AND r.customer_id = $2 AND t > statement_timestamp() - interval '1 minute'
), lim AS (
    SELECT statement_timestamp() AS now,
           count(*) FILTER (WHERE created_at > statement_timestamp() - interval '1 minute') AS recent,
           min(created_at) FILTER (WHERE created_at > statement_timestamp() - interval '1 minute') AS oldest,
           coalesce(sum(places) FILTER (WHERE status = 'HELD' AND expires_at > statement_timestamp()), 0) AS held,
           (SELECT count(*) FROM refusals) AS refused,
           (SELECT min(t) FROM refusals) AS oldest_refusal
      FROM mine
), cooling AS (
    SELECT DISTINCT unnest(seats) AS seat_code
      FROM mine
     WHERE showtime_id = $3
       AND CASE WHEN status = 'RELEASED'
                THEN ended_at > statement_timestamp() - $14::bigint * interval '1 microsecond'
                WHEN status IN ('HELD', 'EXPIRED')
                THEN expires_at <= statement_timestamp()
                 AND expires_at > statement_timestamp() - $14::bigint * interval '1 microsecond'
                ELSE false END
), avail AS (
    SELECT b.code, w.n AS want, b.capacity - coalesce(sum(p.places), 0) AS left_
      FROM unnest($10::text[], $11::int[]) AS w(code, n)
      JOIN ga_blocks b ON b.showtime_id = $3 AND b.code = w.code
      LEFT JOIN ga_places p
        ON p.showtime_id = $3 AND p.block_code = b.code
       AND p.status IN ('HELD', 'BOOKED')
       AND (p.status = 'BOOKED' OR p.expires_at > statement_timestamp())
     GROUP BY b.code, w.n, b.capacity
), ok AS (
    SELECT rated, rated
           AND lim.held + $7::int <= $13::int
           AND (SELECT count(*) FROM avail) = cardinality($10::text[])
           AND NOT EXISTS (SELECT 1 FROM avail WHERE want > left_) AS allowed
      FROM lim,
           LATERAL (SELECT NOT (lim.recent >= $12::int AND lim.oldest IS NOT NULL)
                           AND lim.recent + lim.refused < $15::int AS rated) AS r
), locked AS (
    SELECT seat_code FROM seats
     WHERE showtime_id = $3 AND seat_code = ANY($4::text[])
       AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= statement_timestamp()))
       AND NOT EXISTS (SELECT 1 FROM cooling c WHERE c.seat_code = seats.seat_code)
       AND (SELECT allowed FROM ok)
     ORDER BY seat_code
       FOR UPDATE
), taken AS (
    UPDATE seats s
       SET status = 'HELD', hold_id = $5, customer_id = $2,
           hold_expires_at = statement_timestamp() + $9::bigint * interval '1 microsecond', booking_id = NULL
      FROM locked
     WHERE s.showtime_id = $3 AND s.seat_code = locked.seat_code
       AND (SELECT count(*) FROM locked) = cardinality($4::text[])
       AND (s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= statement_timestamp()))
    RETURNING s.seat_code
), hold AS (
    INSERT INTO holds (id, event_id, showtime_id, customer_id, seats, ga, places, amount_cents, created_at, expires_at, ticket_id)
    SELECT $5, $1, $3, $2, $4::text[], $6::jsonb, $7::int, $8::bigint, statement_timestamp(),
           statement_timestamp() + $9::bigint * interval '1 microsecond', $16::text
     WHERE (SELECT allowed FROM ok)
       AND (SELECT count(*) FROM taken) = cardinality($4::text[])
    RETURNING expires_at
), places AS (
    INSERT INTO ga_places (hold_id, showtime_id, block_code, places, status, expires_at)
    SELECT $5, $3, w.code, w.n, 'HELD', h.expires_at
      FROM unnest($10::text[], $11::int[]) AS w(code, n), hold h
), refused AS (
    INSERT INTO hold_refusals AS r (event_id, customer_id, at)
    SELECT $1, $2, ARRAY[statement_timestamp()]
     WHERE (SELECT rated FROM ok) AND NOT EXISTS (SELECT 1 FROM hold)
    ON CONFLICT (event_id, customer_id) DO UPDATE
       SET at = ARRAY(SELECT t FROM unnest(r.at) AS t
                       WHERE t > statement_timestamp() - interval '1 minute' ORDER BY t) || statement_timestamp()
)
SELECT lim.now, lim.recent, lim.oldest, lim.held, lim.refused, lim.oldest_refusal,
       coalesce((SELECT array_agg(seat_code ORDER BY seat_code) FROM locked), '{}'),
       (SELECT count(*) FROM avail),
       (SELECT min(code) FROM avail WHERE want > left_),
       (SELECT expires_at FROM hold)
  FROM lim`

	// $1 showtime. One indexed read (the primary key's prefix) of the
	// showtime's partition. No ORDER BY: SeatMap sorts in Go. Sorting in the
	// database cost a 50,000-seat showtime 81 of its 96 ms on the primary
	// (past work_mem, the sort spilled to disk), and an index in map order
	// did not help the generic plan, which sizes a showtime by the average
	// (docs/BOOKING.md, "The seat map on 250,000 seats").
	sqlSeatMap = `
SELECT seat_code, row_label, seat_number,
       CASE WHEN status = 'HELD' AND hold_expires_at <= now() THEN 'AVAILABLE' ELSE status END
  FROM seats
 WHERE showtime_id = $1`

	// $1 showtime.
	sqlBlockMap = `
SELECT b.code, b.capacity, greatest(b.capacity - coalesce(sum(p.places), 0), 0)
  FROM ga_blocks b
  LEFT JOIN ga_places p
    ON p.showtime_id = b.showtime_id AND p.block_code = b.code
   AND p.status IN ('HELD', 'BOOKED')
   AND (p.status = 'BOOKED' OR p.expires_at > now())
 WHERE b.showtime_id = $1
 GROUP BY b.code, b.capacity
 ORDER BY b.code`

	// $1 hold, $2 customer ('' = any). Locks the hold row. Also the ticket
	// that took it (before 006: the customer). Its event is checked against
	// the pass's (lockHold) before anything else of the transaction runs.
	sqlLockHold = `
SELECT event_id, showtime_id, customer_id, seats, ga, status, expires_at, amount_cents,
       coalesce(ticket_id, customer_id)
  FROM holds
 WHERE id = $1 AND ($2 = '' OR customer_id = $2)
   FOR UPDATE`

	// $1 showtime, $2 seat codes. Lock seats in code order, whatever they hold.
	sqlLockSeats = `
SELECT seat_code FROM seats
 WHERE showtime_id = $1 AND seat_code = ANY($2::text[])
 ORDER BY seat_code
   FOR UPDATE`

	// $1 showtime, $2 seat codes, $3 hold. After sqlLockSeats.
	sqlReleaseSeats = `
UPDATE seats
   SET status = 'AVAILABLE', hold_id = NULL, customer_id = NULL, hold_expires_at = NULL
 WHERE showtime_id = $1 AND seat_code = ANY($2::text[]) AND hold_id = $3 AND status = 'HELD'`

	// $1 showtime, $2 hold.
	sqlReleaseGA = `UPDATE ga_places SET status = 'RELEASED' WHERE showtime_id = $1 AND hold_id = $2 AND status = 'HELD'`
	// ended_at starts the customer's cool-down on the hold's seats: now, or
	// when the hold lapsed if it already had.
	sqlReleaseHold = `UPDATE holds SET status = 'RELEASED', ended_at = least(statement_timestamp(), expires_at) WHERE id = $1`

	// $1 customer, $2 key. Always one row: now (after the hold lock) and the
	// booking already made with that key, if any, with how it was paid (and
	// the balance its debit left, for points).
	sqlBookingByKey = `
SELECT statement_timestamp(), b.id, b.hold_id, b.payment_id, b.payment_url, b.payment_expires_at,
       b.method, l.balance_after
  FROM (SELECT 1) AS one
  LEFT JOIN bookings b ON b.customer_id = $1 AND b.idempotency_key = $2
  LEFT JOIN wallet_ledger l ON l.booking_id = b.id AND l.kind = 'debit'`

	// $1 customer, $2 key. The booking the key made, if any, with what its
	// checkout answered (sqlBookingByKey's, read outside a checkout: no
	// lock, nothing written).
	sqlAnswered = `
SELECT b.id, b.hold_id, b.event_id, b.method, b.payment_id, b.payment_url, b.payment_expires_at, l.balance_after
  FROM bookings b
  LEFT JOIN wallet_ledger l ON l.booking_id = b.id AND l.kind = 'debit'
 WHERE b.customer_id = $1 AND b.idempotency_key = $2`

	// $1 hold. Always one row: the hold's live booking (at most one, by
	// bookings_one_live_per_hold), or NULLs.
	sqlLiveBooking = `
SELECT b.id, b.payment_id, b.payment_url, b.payment_expires_at
  FROM (SELECT 1) AS one
  LEFT JOIN bookings b ON b.hold_id = $1 AND b.status IN ('PENDING', 'CONFIRMED')`

	sqlInsertBooking = `
INSERT INTO bookings (id, hold_id, event_id, showtime_id, customer_id, idempotency_key, status,
                      amount_cents, payment_id, payment_url, payment_expires_at)
VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', $7, $8, $9, $10)`

	sqlInsertPayment = `
INSERT INTO payments (payment_id, booking_id, amount_cents, status) VALUES ($1, $2, $3, 'PENDING')`

	// $1 payment id. Locks payment, booking and hold, in that order. The
	// ticket is the one that took the hold (completed once confirmed); the
	// booking's customer is its account's, whose invitation the sale uses.
	sqlLockPayment = `
SELECT p.status, b.id, b.status, b.hold_id, b.event_id, coalesce(h.ticket_id, b.customer_id), b.customer_id, b.amount_cents,
       h.showtime_id, h.seats, h.ga
  FROM payments p
  JOIN bookings b ON b.id = p.booking_id
  JOIN holds h ON h.id = b.hold_id
 WHERE p.payment_id = $1
   FOR UPDATE OF p, b, h`

	sqlSettlePayment = `UPDATE payments SET status = $2, settled_at = now() WHERE payment_id = $1`
	sqlBookingStatus = `UPDATE bookings SET status = $2, updated_at = now() WHERE id = $1`

	// $1 showtime, $2 seat codes, $3 hold, $4 booking. After sqlLockSeats (and
	// the blocks' locks): statement_timestamp() is "now" after every lock.
	// Confirms only seats still held by this hold and unexpired.
	sqlConfirmSeats = `
UPDATE seats
   SET status = 'BOOKED', booking_id = $4, hold_expires_at = NULL
 WHERE showtime_id = $1 AND seat_code = ANY($2::text[])
   AND hold_id = $3 AND status = 'HELD' AND hold_expires_at > statement_timestamp()`

	// $1 showtime, $2 hold, $3 booking.
	sqlConfirmGA = `
UPDATE ga_places
   SET status = 'BOOKED', booking_id = $3
 WHERE showtime_id = $1 AND hold_id = $2 AND status = 'HELD' AND expires_at > statement_timestamp()`

	sqlBookHold = `UPDATE holds SET status = 'BOOKED' WHERE id = $1`

	sqlInsertOutbox = `
INSERT INTO outbox (booking_id, event_type, payload, event_id, customer_id) VALUES ($1, $2, $3, $4, $5)`

	sqlRecordRefund = `
INSERT INTO refunds (payment_id, booking_id, amount_cents, status) VALUES ($1, $2, $3, 'REQUESTED')
ON CONFLICT (payment_id) DO NOTHING`

	// $1 payment. The provider acknowledged the refund: it is DONE and its
	// booking (FAILED) REFUNDED, once; a second acknowledgement changes nothing.
	sqlRefundDone = `
WITH done AS (
    UPDATE refunds SET status = 'DONE', done_at = now()
     WHERE payment_id = $1 AND status = 'REQUESTED'
    RETURNING booking_id
)
UPDATE bookings SET status = 'REFUNDED', updated_at = now()
 WHERE id = (SELECT booking_id FROM done) AND status = 'FAILED'`

	// $1 booking, $2 customer. Also the hold's expiry while it is HELD (the
	// fan's page keeps its countdown), the refund of a late payment, and the
	// booking's event (checked against the pass's).
	sqlBooking = `
SELECT b.id, b.status, h.seats, h.ga, b.showtime_id, b.amount_cents, h.id::text,
       CASE WHEN h.status = 'HELD' THEN h.expires_at END, r.status, b.event_id
  FROM bookings b JOIN holds h ON h.id = b.hold_id
  LEFT JOIN refunds r ON r.payment_id = b.payment_id
 WHERE b.id = $1 AND b.customer_id = $2`

	// $1 batch. The sweeper only tidies what the seat map shows: lapsed holds
	// are already AVAILABLE to every statement above. SKIP LOCKED: several
	// sweepers (replicas) share the work and never wait for each other or
	// for a hold in flight. It leaves holds that lapsed less than a grace
	// period ago: a hold in flight judges lapses by its own "now", read a
	// little earlier, and the sweeper must never free a place sooner than
	// that judgement would.
	sqlSweepSeats = `
WITH expired AS (
    SELECT showtime_id, seat_code FROM seats
     WHERE status = 'HELD' AND hold_expires_at <= now() - interval '2 seconds'
     ORDER BY hold_expires_at
     LIMIT $1
       FOR UPDATE SKIP LOCKED
)
UPDATE seats s
   SET status = 'AVAILABLE', hold_id = NULL, customer_id = NULL, hold_expires_at = NULL
  FROM expired e
 WHERE s.showtime_id = e.showtime_id AND s.seat_code = e.seat_code
   AND s.status = 'HELD' AND s.hold_expires_at <= now() - interval '2 seconds'`

	sqlSweepGA = `
WITH expired AS (
    SELECT hold_id, block_code FROM ga_places
     WHERE status = 'HELD' AND expires_at <= now() - interval '2 seconds'
     LIMIT $1
       FOR UPDATE SKIP LOCKED
)
UPDATE ga_places p SET status = 'EXPIRED'
  FROM expired e
 WHERE p.hold_id = e.hold_id AND p.block_code = e.block_code AND p.status = 'HELD'`

	sqlSweepHolds = `
WITH expired AS (
    SELECT id FROM holds
     WHERE status = 'HELD' AND expires_at <= now() - interval '2 seconds'
     LIMIT $1
       FOR UPDATE SKIP LOCKED
)
UPDATE holds h SET status = 'EXPIRED'
  FROM expired e
 WHERE h.id = e.id AND h.status = 'HELD'`

	// $1 age in seconds, $2 and $3 the last one seen (created_at, payment
	// id), $4 limit. Keyset pages, oldest first: a pass of the reconciler
	// goes through every stale payment, however many the provider keeps
	// answering PENDING, so none is starved by older ones.
	sqlStalePayments = `
SELECT payment_id, created_at FROM payments
 WHERE status = 'PENDING' AND created_at <= now() - make_interval(secs => $1)
   AND (created_at, payment_id) > ($2::timestamptz, $3::text)
 ORDER BY created_at, payment_id
 LIMIT $4`

	// $1 and $2 the last one seen, $3 limit. As sqlStalePayments: every
	// unacknowledged refund is asked for again in each pass.
	sqlPendingRefunds = `
SELECT payment_id, created_at FROM refunds
 WHERE status = 'REQUESTED' AND (created_at, payment_id) > ($1::timestamptz, $2::text)
 ORDER BY created_at, payment_id
 LIMIT $3`

	// $1 payment id, $2 its booking, $3 amount. A success reported after
	// the payment was FAILED: the provider took the money, so it is the
	// provider's truth that is kept, and the money goes back.
	sqlSucceededAfterFailure = `UPDATE payments SET status = 'SUCCEEDED', settled_at = now() WHERE payment_id = $1 AND status = 'FAILED'`

	// One relay at a time publishes, so the stream keeps the outbox's order.
	// A row's booking gives its customer (the account's, for a place of an
	// account: the waiting room notes the account's invitation used).
	// $1 how long (ms, 0: the server's default) the transaction may sit idle
	// before PostgreSQL ends it, and its lock with it (RelayOutbox).
	sqlRelayLock = `SELECT pg_try_advisory_xact_lock(hashtext('booking-outbox-relay'))
  FROM (SELECT set_config('idle_in_transaction_session_timeout', $1, true)) bound`
	sqlOutboxBatch = `
SELECT o.id, o.booking_id, o.event_type, o.payload, o.event_id, o.customer_id, coalesce(b.customer_id, ''), o.created_at
  FROM outbox o
  LEFT JOIN bookings b ON b.id = o.booking_id
 WHERE o.published_at IS NULL
 ORDER BY o.id
 LIMIT $1`
	sqlOutboxPublished = `UPDATE outbox SET published_at = now() WHERE id = ANY($1::bigint[])`

	// The inventory (queue/inventory.go), in one repeatable-read snapshot.
	// $1 event. Places that can be held now: seats AVAILABLE or held but
	// lapsed, and what each block has left.
	sqlInventoryFree = `
SELECT (SELECT count(*)
          FROM showtimes st JOIN seats s ON s.showtime_id = st.id
         WHERE st.event_id = $1
           AND (s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= now())))
     + (SELECT coalesce(sum(greatest(b.capacity - coalesce(u.used, 0), 0)), 0)
          FROM showtimes st JOIN ga_blocks b ON b.showtime_id = st.id
          LEFT JOIN LATERAL (
               SELECT sum(p.places) AS used FROM ga_places p
                WHERE p.showtime_id = b.showtime_id AND p.block_code = b.code
                  AND (p.status = 'BOOKED' OR (p.status = 'HELD' AND p.expires_at > now()))) u ON true
         WHERE st.event_id = $1)`

	// $1 event. The holds that count now, by the ticket that took each.
	sqlInventoryHolds = `
SELECT id::text, coalesce(ticket_id, customer_id), places FROM holds
 WHERE event_id = $1 AND status = 'HELD' AND expires_at > now()`

	// $1 event. The payments open.
	sqlInventoryPayments = `
SELECT p.payment_id FROM payments p JOIN bookings b ON b.id = p.booking_id
 WHERE b.event_id = $1 AND p.status = 'PENDING'`

	// $1 event, $2 seconds. Holds confirmed in the last $2 seconds.
	sqlInventoryBooked = `
SELECT hold_id::text FROM bookings
 WHERE event_id = $1 AND status = 'CONFIRMED' AND updated_at > now() - make_interval(secs => $2)`

	sqlNow = `SELECT now()`

	// The points wallet (migration 006). Points are the minor unit of
	// booking.currency: a hold of 1500 cents costs 1500 points.

	// $1 account. The balance now (no row: 0).
	sqlWallet = `SELECT coalesce((SELECT balance FROM wallets WHERE account_id = $1), 0)`

	// $1 account. Locks the wallet row, after the hold's (the lock order
	// above); no row: the account has no points.
	sqlLockWallet = `SELECT balance FROM wallets WHERE account_id = $1 FOR UPDATE`

	// $1 account, $2 points (> 0). After sqlLockWallet, which checked the
	// balance; the CHECK (balance >= 0) stands behind it.
	sqlDebitWallet = `
UPDATE wallets SET balance = balance - $2, updated_at = now() WHERE account_id = $1 RETURNING balance`

	// $1 booking, $2 hold, $3 event, $4 showtime, $5 customer, $6 key, $7 amount.
	sqlInsertPointsBooking = `
INSERT INTO bookings (id, hold_id, event_id, showtime_id, customer_id, idempotency_key, status, amount_cents, method)
VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', $7, 'points')`

	// $1 account, $2 points (< 0), $3 balance after, $4 booking.
	sqlLedgerDebit = `
INSERT INTO wallet_ledger (account_id, kind, points, balance_after, booking_id) VALUES ($1, 'debit', $2, $3, $4)`

	// $1 account. Makes the wallet row if there is none (a first credit),
	// without taking its lock when there is one.
	sqlEnsureWallet = `INSERT INTO wallets (account_id) VALUES ($1) ON CONFLICT (account_id) DO NOTHING`

	// $1 account, $2 points (> 0), $3 reference. One statement: the ledger
	// row, unless the reference credited already (then nothing at all), and
	// the balance moved by as much, locking the wallet row; the balance in
	// force either way. A concurrent credit with the same reference waits on
	// the unique index for the first one's commit, then credits nothing.
	sqlCredit = `
WITH cur AS (
    SELECT balance FROM wallets WHERE account_id = $1 FOR UPDATE
), ins AS (
    INSERT INTO wallet_ledger (account_id, kind, points, balance_after, reference)
    SELECT $1, 'credit', $2, balance + $2, $3 FROM cur
    ON CONFLICT (account_id, reference) WHERE kind = 'credit' DO NOTHING
    RETURNING balance_after
), upd AS (
    UPDATE wallets w SET balance = i.balance_after, updated_at = now()
      FROM ins i
     WHERE w.account_id = $1
    RETURNING w.balance
)
SELECT coalesce((SELECT balance FROM upd), (SELECT balance FROM cur)), EXISTS (SELECT 1 FROM ins)`

	// $1 since, $2 limit. Holds that lapsed after since and are still HELD
	// (the sweeper marks them EXPIRED a few seconds later; a lapse missed
	// meanwhile is repaired by the next inventory sync).
	sqlLapsedHolds = `
SELECT event_id, id::text, expires_at FROM holds
 WHERE status = 'HELD' AND expires_at > $1 AND expires_at <= now()
 ORDER BY expires_at
 LIMIT $2`

	sqlStatsOutbox = `SELECT count(*), min(created_at), now() FROM outbox WHERE published_at IS NULL`
	sqlStatsSeats  = `
SELECT showtime_id,
       CASE WHEN status = 'HELD' AND hold_expires_at <= now() THEN 'AVAILABLE' ELSE status END,
       count(*)
  FROM seats GROUP BY 1, 2`
	sqlStatsPayments = `SELECT status, count(*) FROM payments GROUP BY 1`
)

// sqlHoldSeats is sqlHold for a hold of seats alone (no GA places), the
// common case: the same decisions, reads and writes, without the CTEs
// on blocks and places (avail, places). Why a statement of its own: a
// generic plan locks, when it starts, every partition of every
// partitioned table it names (PostgreSQL 15), so sqlHold locks the 16
// partitions of ga_blocks and the 16 of ga_places even for a hold that
// asks for none of their places: 78 locks held by its transaction,
// against 37 for the bare conditional UPDATE and 43 for this statement,
// most of them past the 16 a backend keeps in its fast path and so
// taken in the shared lock table (docs/BOOKING.md, "A hold of seats
// alone"). It is made from sqlHold's text (withoutBlocks), so that the
// two cannot drift apart.
//
// sqlHold's parameters less the blocks': $1 event, $2 customer, $3
// showtime, $4 sorted seat codes, $5 hold id, $6 GA as JSON (written as
// sqlHold writes it), $7 places asked, $8 amount, $9 TTL in
// microseconds, $10 holds per minute, $11 places a customer may hold,
// $12 the re-hold cool-down in microseconds, $13 hold attempts per
// minute, $14 the ticket taking it. The last SELECT is sqlHold's, with
// no block asked: 0 blocks found, none full.
var sqlHoldSeats = withoutBlocks(sqlHold)

// withoutBlocks is the hold's statement q without what reads or writes GA
// blocks: the avail and places CTEs cut, the conditions and answers that
// read avail taken out (no block is asked: 0 found, none full), and the
// blocks' parameters ($10, $11) taken out of the numbering. It panics when
// a part it cuts is not in q: a change to sqlHold that it does not follow
// stops the package at start, in every test.
func withoutBlocks(q string) string {
	cut := func(from, to string) {
		i, j := strings.Index(q, from), strings.Index(q, to)
		if i < 0 || j < i {
			panic(fmt.Sprintf("withoutBlocks: the hold's statement has no %q before %q", from, to))
		}
		q = q[:i] + q[j:]
	}
	replace := func(old, new string) {
		if n := strings.Count(q, old); n != 1 {
			panic(fmt.Sprintf("withoutBlocks: the hold's statement has %d of %q, not 1", n, old))
		}
		q = strings.Replace(q, old, new, 1)
	}
	cut("), avail AS (", "), ok AS (")
	cut("), places AS (", "), refused AS (")
	replace("\n           AND (SELECT count(*) FROM avail) = cardinality($10::text[])", "")
	replace("\n           AND NOT EXISTS (SELECT 1 FROM avail WHERE want > left_)", "")
	replace("\n       (SELECT count(*) FROM avail),\n       (SELECT min(code) FROM avail WHERE want > left_),",
		"\n       0::bigint, NULL::text,")
	return param.ReplaceAllStringFunc(q, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		switch {
		case n == 10 || n == 11:
			panic("withoutBlocks: the hold's statement still reads the blocks' parameter " + p)
		case n > 11:
			n -= 2
		}
		return "$" + strconv.Itoa(n)
	})
}

// param is a statement's parameter ($1, $2, ...).
var param = regexp.MustCompile(`\$\d+`)
