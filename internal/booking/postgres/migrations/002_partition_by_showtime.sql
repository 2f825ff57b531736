-- 002: the tables a hold touches seat by seat or block by block are hash
-- partitioned by showtime_id (16 partitions). Every statement of a hold names
-- its showtime, so it touches exactly one partition of each (TestHoldPrunes
-- checks the plans), and the same key is what would shard them across
-- machines (docs/BOOKING.md, "Past one machine").
--
-- holds and customers stay unpartitioned: the per-customer limits read holds
-- by (event, customer) across every showtime of the event, so a showtime
-- partitioning would make that read visit all 16 partitions.
--
-- Works on a database with data: each table is renamed, recreated as a
-- partitioned table, filled from the old one in this transaction, and the old
-- one dropped; keys and indexes are built after the copy, with their old
-- names. The whole migration is one transaction (Migrate), so it either
-- happens or not. It holds ACCESS EXCLUSIVE locks on the three tables while
-- it copies: run it before the sale opens, not during one.

CREATE FUNCTION pg_temp.partition_by_showtime(parent text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 0..15 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 16, REMAINDER %s)',
                       parent || '_p' || lpad(i::text, 2, '0'), parent, i);
    END LOOP;
END
$$;

-- seats
ALTER TABLE seats RENAME TO seats_unpartitioned;
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
    CHECK (status <> 'HELD' OR (hold_id IS NOT NULL AND hold_expires_at IS NOT NULL)),
    CHECK (status <> 'BOOKED' OR booking_id IS NOT NULL)
) PARTITION BY HASH (showtime_id);
SELECT pg_temp.partition_by_showtime('seats');
INSERT INTO seats (showtime_id, seat_code, row_label, seat_number, status, hold_id, customer_id, hold_expires_at, booking_id)
SELECT showtime_id, seat_code, row_label, seat_number, status, hold_id, customer_id, hold_expires_at, booking_id
  FROM seats_unpartitioned;
DROP TABLE seats_unpartitioned;
ALTER TABLE seats ADD PRIMARY KEY (showtime_id, seat_code);
CREATE INDEX seats_by_hold ON seats (hold_id) WHERE hold_id IS NOT NULL;
CREATE INDEX seats_held_expiry ON seats (hold_expires_at) WHERE status = 'HELD';

-- ga_blocks
ALTER TABLE ga_blocks RENAME TO ga_blocks_unpartitioned;
CREATE TABLE ga_blocks (
    showtime_id bigint NOT NULL REFERENCES showtimes (id),
    code        text   COLLATE "C" NOT NULL,
    capacity    int    NOT NULL CHECK (capacity >= 1),
    price_cents bigint NOT NULL CHECK (price_cents >= 0)
) PARTITION BY HASH (showtime_id);
SELECT pg_temp.partition_by_showtime('ga_blocks');
INSERT INTO ga_blocks (showtime_id, code, capacity, price_cents)
SELECT showtime_id, code, capacity, price_cents FROM ga_blocks_unpartitioned;
DROP TABLE ga_blocks_unpartitioned;
ALTER TABLE ga_blocks ADD PRIMARY KEY (showtime_id, code);

-- ga_places: the primary key must hold the partition key, so it becomes
-- (showtime_id, hold_id, block_code); every statement on places names the
-- showtime (the sweeper's excepted: it visits all partitions on purpose).
ALTER TABLE ga_places RENAME TO ga_places_unpartitioned;
CREATE TABLE ga_places (
    hold_id     uuid        NOT NULL,
    showtime_id bigint      NOT NULL,
    block_code  text        COLLATE "C" NOT NULL,
    places      int         NOT NULL CHECK (places >= 1),
    status      text        NOT NULL CHECK (status IN ('HELD', 'BOOKED', 'RELEASED', 'EXPIRED')),
    expires_at  timestamptz NOT NULL,
    booking_id  uuid
) PARTITION BY HASH (showtime_id);
SELECT pg_temp.partition_by_showtime('ga_places');
INSERT INTO ga_places (hold_id, showtime_id, block_code, places, status, expires_at, booking_id)
SELECT hold_id, showtime_id, block_code, places, status, expires_at, booking_id FROM ga_places_unpartitioned;
DROP TABLE ga_places_unpartitioned;
ALTER TABLE ga_places ADD PRIMARY KEY (showtime_id, hold_id, block_code);
CREATE INDEX ga_places_live ON ga_places (showtime_id, block_code) WHERE status IN ('HELD', 'BOOKED');
CREATE INDEX ga_places_held_expiry ON ga_places (expires_at) WHERE status = 'HELD';

ANALYZE seats, ga_blocks, ga_places;
