package postgres_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/booking/postgres"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

func TestMigrateTwiceChangesNothing(t *testing.T) {
	ctx := context.Background()
	pool, url := testenv.Pool(t, "booking", postgres.Open, postgres.Migrate)
	if err := postgres.Migrate(ctx, url); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("migration files: %v, %v", files, err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(files) {
		t.Fatalf("recorded migrations = %d, %v; want %d", n, err, len(files))
	}
}

func TestSeedUpsertsWithoutTouchingHeldOrSold(t *testing.T) {
	ctx := context.Background()
	pool, _ := testenv.Pool(t, "booking", postgres.Open, postgres.Migrate)
	store := postgres.New(pool)
	events := func(rows, capacity int) []booking.Event {
		return []booking.Event{{ID: "live", Showtimes: []booking.Showtime{{
			ID: 7, Title: "T", Rows: rows, SeatsPerRow: 3, PriceCents: 100,
			Blocks: []booking.GABlock{{Code: "FLOOR", Capacity: capacity, PriceCents: 50}},
		}}}}
	}
	if _, err := store.Seed(ctx, events(2, 10)); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string) {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO holds (id, event_id, showtime_id, customer_id, seats, places, amount_cents, created_at, expires_at)
	      VALUES ('00000000-0000-4000-8000-000000000001', 'live', 7, 'c', '{B3}', 7, 0, now(), now() + interval '1 hour')`)
	exec(`UPDATE seats SET status = 'HELD', hold_id = '00000000-0000-4000-8000-000000000001', customer_id = 'c', hold_expires_at = now() + interval '1 hour' WHERE seat_code = 'B3'`)
	exec(`INSERT INTO ga_places (hold_id, showtime_id, block_code, places, status, expires_at)
	      VALUES ('00000000-0000-4000-8000-000000000001', 7, 'FLOOR', 6, 'HELD', now() + interval '1 hour')`)

	// Shrink to one row and a capacity below what is held; run it twice.
	for range 2 {
		res, err := store.Seed(ctx, events(1, 4))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Clamped) != 1 {
			t.Fatalf("clamped = %v; want the FLOOR block", res.Clamped)
		}
	}
	var seats, held, capacity int
	pool.QueryRow(ctx, `SELECT count(*) FROM seats WHERE showtime_id = 7`).Scan(&seats)
	pool.QueryRow(ctx, `SELECT count(*) FROM seats WHERE showtime_id = 7 AND seat_code = 'B3' AND status = 'HELD'`).Scan(&held)
	pool.QueryRow(ctx, `SELECT capacity FROM ga_blocks WHERE showtime_id = 7 AND code = 'FLOOR'`).Scan(&capacity)
	if seats != 4 || held != 1 || capacity != 6 {
		t.Fatalf("seats %d (want A1..A3 + held B3 = 4), B3 held %d, capacity %d (want 6, what is held)", seats, held, capacity)
	}
	if _, err := store.Seed(ctx, events(3, 300)); err != nil {
		t.Fatal(err)
	}
	pool.QueryRow(ctx, `SELECT count(*) FROM seats WHERE showtime_id = 7`).Scan(&seats)
	pool.QueryRow(ctx, `SELECT capacity FROM ga_blocks WHERE showtime_id = 7 AND code = 'FLOOR'`).Scan(&capacity)
	if seats != 9 || capacity != 300 {
		t.Fatalf("after growing: %d seats, capacity %d; want 9 and 300", seats, capacity)
	}
}
