-- The booking core's schema. Seat codes are COLLATE "C" so that the database
-- sorts them exactly as Go's sort.Strings does: every transaction locks seats
-- in that one order, and two holds never deadlock.

CREATE TABLE showtimes (
    id          bigint      PRIMARY KEY,
    event_id    text        NOT NULL,
    title       text        NOT NULL,
    starts_at   timestamptz NOT NULL,
    price_cents bigint      NOT NULL CHECK (price_cents >= 0)
);

-- One row per showtime and seat. The hold lives on the row, so that the state
-- and the hold change in one statement.
CREATE TABLE seats (
    showtime_id     bigint      NOT NULL REFERENCES showtimes (id),
    seat_code       text        COLLATE "C" NOT NULL,
    row_label       text        NOT NULL,
    seat_number     int         NOT NULL,
    status          text        NOT NULL DEFAULT 'AVAILABLE'
                                CHECK (status IN ('AVAILABLE', 'HELD', 'BOOKED')),
    hold_id         uuid,
    customer_id     text,
    hold_expires_at timestamptz,
    booking_id      uuid,
    PRIMARY KEY (showtime_id, seat_code),
    CHECK (status <> 'HELD' OR (hold_id IS NOT NULL AND hold_expires_at IS NOT NULL)),
    CHECK (status <> 'BOOKED' OR booking_id IS NOT NULL)
);
CREATE INDEX seats_by_hold ON seats (hold_id) WHERE hold_id IS NOT NULL;
CREATE INDEX seats_held_expiry ON seats (hold_expires_at) WHERE status = 'HELD';

-- General-admission (standing) blocks, sold by count.
CREATE TABLE ga_blocks (
    showtime_id bigint NOT NULL REFERENCES showtimes (id),
    code        text   COLLATE "C" NOT NULL,
    capacity    int    NOT NULL CHECK (capacity >= 1),
    price_cents bigint NOT NULL CHECK (price_cents >= 0),
    PRIMARY KEY (showtime_id, code)
);

-- Serializes the holds of one customer in one event, so that the per-customer
-- rate limit and place limit are exact.
CREATE TABLE customers (
    event_id    text NOT NULL,
    customer_id text NOT NULL,
    PRIMARY KEY (event_id, customer_id)
);

-- A hold groups seats and GA places. No foreign keys on the hot path: a key
-- check would share-lock the showtime row from every concurrent hold.
CREATE TABLE holds (
    id           uuid        PRIMARY KEY,
    event_id     text        NOT NULL,
    showtime_id  bigint      NOT NULL,
    customer_id  text        NOT NULL,
    seats        text[]      NOT NULL,
    ga           jsonb       NOT NULL DEFAULT '{}',
    places       int         NOT NULL CHECK (places >= 1),
    amount_cents bigint      NOT NULL,
    status       text        NOT NULL DEFAULT 'HELD'
                             CHECK (status IN ('HELD', 'RELEASED', 'BOOKED', 'EXPIRED')),
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX holds_by_customer ON holds (event_id, customer_id, created_at);
CREATE INDEX holds_held_expiry ON holds (expires_at) WHERE status = 'HELD';

-- General-admission places held or booked: one row per hold and block.
-- Places consume capacity while BOOKED, or HELD and not yet expired.
CREATE TABLE ga_places (
    hold_id     uuid        NOT NULL,
    showtime_id bigint      NOT NULL,
    block_code  text        COLLATE "C" NOT NULL,
    places      int         NOT NULL CHECK (places >= 1),
    status      text        NOT NULL CHECK (status IN ('HELD', 'BOOKED', 'RELEASED', 'EXPIRED')),
    expires_at  timestamptz NOT NULL,
    booking_id  uuid,
    PRIMARY KEY (hold_id, block_code)
);
CREATE INDEX ga_places_live ON ga_places (showtime_id, block_code) WHERE status IN ('HELD', 'BOOKED');
CREATE INDEX ga_places_held_expiry ON ga_places (expires_at) WHERE status = 'HELD';

CREATE TABLE bookings (
    id                 uuid        PRIMARY KEY,
    hold_id            uuid        NOT NULL REFERENCES holds (id),
    event_id           text        NOT NULL,
    showtime_id        bigint      NOT NULL,
    customer_id        text        NOT NULL,
    idempotency_key    text        NOT NULL,
    status             text        NOT NULL
                                   CHECK (status IN ('PENDING', 'CONFIRMED', 'FAILED', 'REFUNDED')),
    amount_cents       bigint      NOT NULL,
    payment_id         text        NOT NULL UNIQUE,
    payment_url        text        NOT NULL,
    payment_expires_at timestamptz NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (customer_id, idempotency_key)
);
-- One live payment attempt per hold: a second success can never confirm twice.
CREATE UNIQUE INDEX bookings_one_live_per_hold ON bookings (hold_id) WHERE status IN ('PENDING', 'CONFIRMED');

-- Provider payment ids are UNIQUE: a repeated callback finds the same row.
CREATE TABLE payments (
    payment_id   text        PRIMARY KEY,
    booking_id   uuid        NOT NULL UNIQUE REFERENCES bookings (id),
    amount_cents bigint      NOT NULL,
    status       text        NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    settled_at   timestamptz
);
CREATE INDEX payments_pending ON payments (created_at) WHERE status = 'PENDING';

-- Money taken for a hold that had lapsed: REQUESTED until the provider
-- acknowledges the refund, then DONE (and the booking REFUNDED).
CREATE TABLE refunds (
    payment_id   text        PRIMARY KEY REFERENCES payments (payment_id),
    booking_id   uuid        NOT NULL,
    amount_cents bigint      NOT NULL,
    status       text        NOT NULL CHECK (status IN ('REQUESTED', 'DONE')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    done_at      timestamptz
);
CREATE INDEX refunds_requested ON refunds (created_at) WHERE status = 'REQUESTED';

-- Written in the confirming transaction; the relay publishes each row to the
-- Redis stream booking-events at least once, in id order.
CREATE TABLE outbox (
    id           bigserial   PRIMARY KEY,
    booking_id   uuid        NOT NULL,
    event_type   text        NOT NULL,
    payload      jsonb       NOT NULL,
    event_id     text        NOT NULL,
    customer_id  text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
