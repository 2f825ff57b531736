-- 006: accounts and the points wallet (DESIGN.md, "Accounts").
--
-- With an account the customer is the account ("acct:<id>"), across all its
-- tickets; the ticket that took a hold is kept apart, for what belongs to
-- the place in line rather than to the customer: the waiting room's
-- holders (who holds what) and the completion of a confirmed booking's
-- ticket. NULL on the holds of before: their customer is their ticket.
ALTER TABLE holds ADD COLUMN ticket_id text;

-- A booking is paid by card (a provider's payment) or with points (the
-- wallet, at once: no payment row, no session).
ALTER TABLE bookings ADD COLUMN method text NOT NULL DEFAULT 'card' CHECK (method IN ('card', 'points'));
ALTER TABLE bookings ALTER COLUMN payment_id DROP NOT NULL;
ALTER TABLE bookings ALTER COLUMN payment_url DROP NOT NULL;
ALTER TABLE bookings ALTER COLUMN payment_expires_at DROP NOT NULL;
ALTER TABLE bookings ADD CONSTRAINT bookings_card_has_payment
    CHECK (method <> 'card' OR (payment_id IS NOT NULL AND payment_url IS NOT NULL AND payment_expires_at IS NOT NULL));

-- One row per account that ever had points: its balance, which never goes
-- below zero (the CHECK is the last word, whatever the code above it does).
-- A points checkout locks this row (SELECT … FOR UPDATE) after the hold's
-- row and before the blocks and seats: the one lock order of sql.go.
CREATE TABLE wallets (
    account_id text        PRIMARY KEY,
    balance    bigint      NOT NULL DEFAULT 0 CHECK (balance >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Every change of a balance, append-only: credits (the origin site's, by
-- reference), debits (a points checkout) and refunds (a points booking
-- refunded). The sum of an account's points is its balance, always: each
-- row is written in the transaction that moves the balance by as much.
CREATE TABLE wallet_ledger (
    id            bigserial   PRIMARY KEY,
    account_id    text        NOT NULL REFERENCES wallets (account_id),
    kind          text        NOT NULL CHECK (kind IN ('credit', 'debit', 'refund')),
    points        bigint      NOT NULL CHECK ((kind = 'debit') = (points < 0) AND points <> 0),
    balance_after bigint      NOT NULL CHECK (balance_after >= 0),
    reference     text,
    booking_id    uuid,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'credit') = (reference IS NOT NULL)),
    CHECK ((kind = 'credit') = (booking_id IS NULL))
);
-- The same reference credits once.
CREATE UNIQUE INDEX wallet_ledger_credit_once ON wallet_ledger (account_id, reference) WHERE kind = 'credit';
-- A booking is debited once and refunded once.
CREATE UNIQUE INDEX wallet_ledger_booking_once ON wallet_ledger (booking_id, kind) WHERE booking_id IS NOT NULL;
CREATE INDEX wallet_ledger_by_account ON wallet_ledger (account_id, id);

-- A points booking refunded, for whatever reason and by whatever statement,
-- gives its points back in the same transaction: the wallet row (locked by
-- the UPDATE, after the booking row the refunding statement locked) and the
-- ledger move together. A repeat (REFUNDED again) changes nothing.
CREATE FUNCTION refund_points() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    acct    text;
    debited bigint;
    after   bigint;
BEGIN
    SELECT account_id, -points INTO acct, debited FROM wallet_ledger
     WHERE booking_id = NEW.id AND kind = 'debit';
    IF debited IS NULL OR EXISTS (SELECT 1 FROM wallet_ledger WHERE booking_id = NEW.id AND kind = 'refund') THEN
        RETURN NEW;
    END IF;
    UPDATE wallets SET balance = balance + debited, updated_at = now()
     WHERE account_id = acct
    RETURNING balance INTO after;
    INSERT INTO wallet_ledger (account_id, kind, points, balance_after, booking_id)
    VALUES (acct, 'refund', debited, after, NEW.id);
    RETURN NEW;
END
$$;

CREATE TRIGGER bookings_refund_points
    AFTER UPDATE OF status ON bookings
    FOR EACH ROW
    WHEN (NEW.status = 'REFUNDED' AND OLD.status <> 'REFUNDED' AND NEW.method = 'points')
    EXECUTE FUNCTION refund_points();
