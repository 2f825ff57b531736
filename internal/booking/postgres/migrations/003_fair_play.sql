-- 003: fair play (DESIGN.md, "Fair play").
--
-- holds.ended_at: when a released hold gave its places back. A customer's
-- released or lapsed seat stays out of their reach for booking.rehold_cooldown
-- after that moment (a lapse ends at expires_at), so nobody keeps a seat for
-- ever by releasing and taking it again.
ALTER TABLE holds ADD COLUMN ended_at timestamptz;

-- Every hold statement reads a customer's holds that matter now: live ones,
-- those taken in the last minute (the limits) and those cooling down. All of
-- them end after now - max(cooldown, 1 minute), so one range of this index
-- holds them; the old (event, customer, created_at) index made the read visit
-- every hold the customer ever took.
CREATE INDEX holds_by_customer_expiry ON holds (event_id, customer_id, expires_at);
DROP INDEX holds_by_customer;

-- Hold requests a customer made in the last minute that were refused (409,
-- 422 by the per-customer place limit): with the holds taken in that minute
-- they are the attempts booking.hold_attempts_per_minute limits. One row per
-- customer and event, at most that many instants, trimmed on every write; a
-- refusal writes here, a success does not (its holds row counts it).
CREATE TABLE hold_refusals (
    event_id    text          NOT NULL,
    customer_id text          NOT NULL,
    at          timestamptz[] NOT NULL,
    PRIMARY KEY (event_id, customer_id)
);

-- The reconciler pages through stale payments and unacknowledged refunds by
-- (created_at, payment_id), oldest first, so that every pass reaches every
-- one of them.
DROP INDEX payments_pending;
CREATE INDEX payments_pending ON payments (created_at, payment_id) WHERE status = 'PENDING';
DROP INDEX refunds_requested;
CREATE INDEX refunds_requested ON refunds (created_at, payment_id) WHERE status = 'REQUESTED';
