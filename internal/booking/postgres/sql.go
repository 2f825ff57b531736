package postgres

// Every statement of the store, in one place. Conventions that make the rules
// hold:
//   - Seats are always locked in seat-code order (ORDER BY seat_code FOR
//     UPDATE inside the statement; seat_code is COLLATE "C"), blocks in code
//     order, and one order is used everywhere: customer row, hold row, blocks,
//     seats. Two transactions therefore never deadlock.
//   - "Now" is the database clock: statement_timestamp() of a statement sent
//     after the locking one (customer and blocks for a hold; blocks and
//     seats for a confirmation).
//   - A hold is expired iff hold_expires_at <= now; expiry is judged in the
//     WHERE of every statement (lazy), never left to the sweeper.
const (
	// $1 event, $2 customer. Locks (and creates) the customer's row: holds of
	// one customer in one event run one at a time, so the limits are exact.
	sqlLockCustomer = `
INSERT INTO customers (event_id, customer_id) VALUES ($1, $2)
ON CONFLICT (event_id, customer_id) DO UPDATE SET customer_id = EXCLUDED.customer_id`

	// $1 event, $2 customer. Sent after sqlLockCustomer: its snapshot sees
	// every hold the customer committed before we got the lock.
	// Returns now, holds taken in the last minute, the oldest of them, and
	// places held right now across the event.
	sqlCustomerLimits = `
SELECT statement_timestamp(),
       count(*) FILTER (WHERE created_at > statement_timestamp() - interval '1 minute'),
       min(created_at) FILTER (WHERE created_at > statement_timestamp() - interval '1 minute'),
       coalesce(sum(places) FILTER (WHERE status = 'HELD' AND expires_at > statement_timestamp()), 0)
  FROM holds
 WHERE event_id = $1 AND customer_id = $2
   AND (created_at > statement_timestamp() - interval '1 minute' OR status = 'HELD')`

	// $1 showtime, $2 block codes. Locks the blocks in code order.
	sqlLockBlocks = `
SELECT code FROM ga_blocks
 WHERE showtime_id = $1 AND code = ANY($2::text[])
 ORDER BY code
   FOR UPDATE`

	// $1 showtime, $2 block codes. Sent after sqlLockBlocks: places that
	// consume capacity (BOOKED, or HELD and unexpired at this statement's
	// start, i.e. after the locks), and that "now".
	sqlBlockAvailability = `
SELECT b.code,
       b.capacity - coalesce(sum(p.places), 0),
       statement_timestamp()
  FROM ga_blocks b
  LEFT JOIN ga_places p
    ON p.showtime_id = b.showtime_id AND p.block_code = b.code
   AND p.status IN ('HELD', 'BOOKED')
   AND (p.status = 'BOOKED' OR p.expires_at > statement_timestamp())
 WHERE b.showtime_id = $1 AND b.code = ANY($2::text[])
 GROUP BY b.code, b.capacity
 ORDER BY b.code`

	// $1 showtime, $2 sorted seat codes, $3 hold id, $4 customer, $5 expiry,
	// $6 now (the database clock, read after the customer and block locks).
	// THE conditional UPDATE: it locks the requested seats in code order,
	// takes those that are AVAILABLE or whose hold lapsed by $6 (lazy expiry),
	// and its row count decides: fewer rows than codes means the hold failed.
	// One "now" for the lapse test and the new expiry means two holds of a
	// seat never overlap in time, not even by the length of a lock wait; a
	// wait can only make the hold refuse a seat that lapsed meanwhile, never
	// take one still held (confirmation, which must not be late, reads its
	// "now" after the seat locks instead).
	sqlTakeSeats = `
WITH locked AS (
    SELECT seat_code FROM seats
     WHERE showtime_id = $1 AND seat_code = ANY($2::text[])
       AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= $6))
     ORDER BY seat_code
       FOR UPDATE
)
UPDATE seats s
   SET status = 'HELD', hold_id = $3, customer_id = $4, hold_expires_at = $5, booking_id = NULL
  FROM locked
 WHERE s.showtime_id = $1 AND s.seat_code = locked.seat_code
   AND (s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= $6))`

	// $1 showtime, $2 seat codes. For the 409 body only, after the failed
	// hold rolled back: which of the codes can be taken now.
	sqlTakeableSeats = `
SELECT seat_code FROM seats
 WHERE showtime_id = $1 AND seat_code = ANY($2::text[])
   AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= now()))`

	sqlInsertHold = `
INSERT INTO holds (id, event_id, showtime_id, customer_id, seats, ga, places, amount_cents, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

	// $1 hold, $2 showtime, $3 block codes, $4 counts, $5 expiry.
	sqlInsertGAPlaces = `
INSERT INTO ga_places (hold_id, showtime_id, block_code, places, status, expires_at)
SELECT $1, $2, b.code, b.places, 'HELD', $5
  FROM unnest($3::text[], $4::int[]) AS b(code, places)`

	// $1 showtime. One indexed read (the primary key's prefix).
	sqlSeatMap = `
SELECT seat_code, row_label, seat_number,
       CASE WHEN status = 'HELD' AND hold_expires_at <= now() THEN 'AVAILABLE' ELSE status END
  FROM seats
 WHERE showtime_id = $1
 ORDER BY row_label, seat_number`

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

	// $1 hold, $2 customer ('' = any). Locks the hold row.
	sqlLockHold = `
SELECT event_id, showtime_id, customer_id, seats, ga, status, expires_at, amount_cents
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

	sqlReleaseGA   = `UPDATE ga_places SET status = 'RELEASED' WHERE hold_id = $1 AND status = 'HELD'`
	sqlReleaseHold = `UPDATE holds SET status = 'RELEASED' WHERE id = $1`

	// $1 customer, $2 key. Always one row: now (after the hold lock) and the
	// booking already made with that key, if any.
	sqlBookingByKey = `
SELECT statement_timestamp(), b.id, b.hold_id, b.payment_id, b.payment_url, b.payment_expires_at
  FROM (SELECT 1) AS one
  LEFT JOIN bookings b ON b.customer_id = $1 AND b.idempotency_key = $2`

	sqlLiveBooking = `
SELECT id, payment_id, payment_url, payment_expires_at
  FROM bookings
 WHERE hold_id = $1 AND status IN ('PENDING', 'CONFIRMED')`

	sqlInsertBooking = `
INSERT INTO bookings (id, hold_id, event_id, showtime_id, customer_id, idempotency_key, status,
                      amount_cents, payment_id, payment_url, payment_expires_at)
VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', $7, $8, $9, $10)`

	sqlInsertPayment = `
INSERT INTO payments (payment_id, booking_id, amount_cents, status) VALUES ($1, $2, $3, 'PENDING')`

	// $1 payment id. Locks payment, booking and hold, in that order.
	sqlLockPayment = `
SELECT p.status, b.id, b.status, b.hold_id, b.event_id, b.customer_id, b.amount_cents,
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

	sqlConfirmGA = `
UPDATE ga_places
   SET status = 'BOOKED', booking_id = $2
 WHERE hold_id = $1 AND status = 'HELD' AND expires_at > statement_timestamp()`

	sqlBookHold = `UPDATE holds SET status = 'BOOKED' WHERE id = $1`

	sqlInsertOutbox = `
INSERT INTO outbox (booking_id, event_type, payload, event_id, customer_id) VALUES ($1, $2, $3, $4, $5)`

	sqlRecordRefund = `
INSERT INTO refunds (payment_id, booking_id, amount_cents, status) VALUES ($1, $2, $3, 'REQUESTED')
ON CONFLICT (payment_id) DO NOTHING`

	sqlRefundDone = `
UPDATE refunds SET status = 'DONE', done_at = now()
 WHERE payment_id = $1 AND status = 'REQUESTED'
RETURNING booking_id`

	sqlBookingRefunded = `UPDATE bookings SET status = 'REFUNDED', updated_at = now() WHERE id = $1 AND status = 'FAILED'`

	sqlBooking = `
SELECT b.id, b.status, h.seats, h.ga, b.showtime_id
  FROM bookings b JOIN holds h ON h.id = b.hold_id
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

	// $1 age in seconds, $2 limit.
	sqlStalePayments = `
SELECT payment_id FROM payments
 WHERE status = 'PENDING' AND created_at <= now() - make_interval(secs => $1)
 ORDER BY created_at
 LIMIT $2`

	sqlPendingRefunds = `SELECT payment_id FROM refunds WHERE status = 'REQUESTED' ORDER BY created_at LIMIT $1`

	// One relay at a time publishes, so the stream keeps the outbox's order.
	sqlRelayLock   = `SELECT pg_try_advisory_xact_lock(hashtext('booking-outbox-relay'))`
	sqlOutboxBatch = `
SELECT id, booking_id, event_type, payload, event_id, customer_id, created_at
  FROM outbox
 WHERE published_at IS NULL
 ORDER BY id
 LIMIT $1`
	sqlOutboxPublished = `UPDATE outbox SET published_at = now() WHERE id = ANY($1::bigint[])`

	sqlStatsOutbox = `SELECT count(*), min(created_at), now() FROM outbox WHERE published_at IS NULL`
	sqlStatsSeats  = `
SELECT showtime_id,
       CASE WHEN status = 'HELD' AND hold_expires_at <= now() THEN 'AVAILABLE' ELSE status END,
       count(*)
  FROM seats GROUP BY 1, 2`
	sqlStatsPayments = `SELECT status, count(*) FROM payments GROUP BY 1`
)
