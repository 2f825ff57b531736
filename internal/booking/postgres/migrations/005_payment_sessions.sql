-- 005: the payment simulator's sessions (internal/payment, booking/postgres
-- sessions.go). The simulator is a provider apart from the booking core that
-- happens to run in its process: it keeps its sessions here so that a restart
-- of the booking core keeps every open payment, every decision the fan made
-- on its page, every refund, and every callback still to be sent. It shares
-- nothing with the core's tables: no foreign key (it opens a session inside
-- the checkout, before the booking row commits, and knows nothing of it).
-- Times are the simulator's clock.
CREATE TABLE payment_sessions (
    payment_id      text        PRIMARY KEY,
    idempotency_key text        NOT NULL UNIQUE,
    reference       text        NOT NULL,
    amount_cents    bigint      NOT NULL CHECK (amount_cents >= 0),
    currency        text        NOT NULL,
    description     text        NOT NULL,
    return_url      text        NOT NULL,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    -- What was decided (on the page, or by the simulator), in force from
    -- decided_at; PENDING and no decided_at while the session is open.
    status          text        NOT NULL DEFAULT 'PENDING'
                                CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED')),
    choice          text,
    decided_at      timestamptz,
    refunded_at     timestamptz,
    -- The callbacks still to send, the next due at callback_at (a claimed one
    -- is leased: callback_at moves to the end of the lease).
    callbacks_left  int         NOT NULL DEFAULT 0 CHECK (callbacks_left >= 0),
    callback_at     timestamptz,
    attempts        int         NOT NULL DEFAULT 0,
    CHECK ((decided_at IS NULL) = (status = 'PENDING')),
    CHECK (callbacks_left = 0 OR callback_at IS NOT NULL)
);
CREATE INDEX payment_sessions_due ON payment_sessions (callback_at) WHERE callbacks_left > 0;
