package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/booking"
)

const (
	sqlSeedShowtime = `
INSERT INTO showtimes (id, event_id, title, starts_at, price_cents) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE
   SET event_id = EXCLUDED.event_id, title = EXCLUDED.title,
       starts_at = EXCLUDED.starts_at, price_cents = EXCLUDED.price_cents`

	// $1 showtime, $2 row letters, $3 seats per row. Adds missing seats only:
	// an existing row (held, sold or not) is left as it is.
	sqlSeedSeats = `
INSERT INTO seats (showtime_id, seat_code, row_label, seat_number)
SELECT $1, r.label || n, r.label, n
  FROM unnest($2::text[]) AS r(label), generate_series(1, $3::int) AS n
ON CONFLICT (showtime_id, seat_code) DO NOTHING`

	// Seats outside the configured geometry go, unless held or sold.
	sqlSeedDropSeats = `
DELETE FROM seats
 WHERE showtime_id = $1 AND status = 'AVAILABLE'
   AND NOT (row_label = ANY($2::text[]) AND seat_number BETWEEN 1 AND $3::int)`

	sqlSeedBlock = `
INSERT INTO ga_blocks (showtime_id, code, capacity, price_cents) VALUES ($1, $2, $3, $4)
ON CONFLICT (showtime_id, code) DO NOTHING`

	// After sqlLockBlocks: a capacity may change, never below the places
	// sold or held at this moment.
	sqlSeedBlockCapacity = `
UPDATE ga_blocks b
   SET price_cents = $4,
       capacity = greatest($3::int, (
           SELECT coalesce(sum(p.places), 0) FROM ga_places p
            WHERE p.showtime_id = b.showtime_id AND p.block_code = b.code
              AND p.status IN ('HELD', 'BOOKED')
              AND (p.status = 'BOOKED' OR p.expires_at > statement_timestamp())))
 WHERE b.showtime_id = $1 AND b.code = $2
RETURNING capacity`
)

// SeedResult tells what Seed could not do as configured.
type SeedResult struct {
	// Clamped lists blocks whose configured capacity was below what is
	// already sold or held: they keep that much instead.
	Clamped []string
}

// Seed upserts the showtimes, seats and general-admission blocks of events
// (the catalog's). Seats that are held or sold are never touched.
func (s *Store) Seed(ctx context.Context, events []booking.Event) (SeedResult, error) {
	var res SeedResult
	for _, e := range events {
		for _, st := range e.Showtimes {
			if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				return seedShowtime(ctx, tx, e.ID, st, &res)
			}); err != nil {
				return res, fmt.Errorf("seed showtime %d: %w", st.ID, err)
			}
		}
	}
	return res, nil
}

func seedShowtime(ctx context.Context, tx pgx.Tx, event string, st booking.Showtime, res *SeedResult) error {
	if _, err := tx.Exec(ctx, sqlSeedShowtime, st.ID, event, st.Title, st.StartsAt, st.PriceCents); err != nil {
		return err
	}
	rows := st.RowLabels()
	if _, err := tx.Exec(ctx, sqlSeedSeats, st.ID, rows, st.SeatsPerRow); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sqlSeedDropSeats, st.ID, rows, st.SeatsPerRow); err != nil {
		return err
	}
	for _, b := range st.Blocks {
		if _, err := tx.Exec(ctx, sqlSeedBlock, st.ID, b.Code, b.Capacity, b.PriceCents); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlLockBlocks, st.ID, []string{b.Code}); err != nil {
			return err
		}
		var capacity int
		if err := tx.QueryRow(ctx, sqlSeedBlockCapacity, st.ID, b.Code, b.Capacity, b.PriceCents).Scan(&capacity); err != nil {
			return err
		}
		if capacity != b.Capacity {
			res.Clamped = append(res.Clamped, fmt.Sprintf("showtime %d block %s: capacity %d kept (%d configured, %d sold or held)",
				st.ID, b.Code, capacity, b.Capacity, capacity))
		}
	}
	return nil
}
