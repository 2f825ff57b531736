package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// The big seat database, seeded straight into the real (partitioned) schema
// with generate_series, since a config showtime has at most 26 × 999 seats:
// the concert design's 250,000 seats as 500 showtimes of 20 rows × 25 seats,
// plus one stadium showtime of 25 rows × 2,000 seats. A sale is under way:
// 30% of the seats BOOKED, 20% HELD (half of those lapsed), the rest
// AVAILABLE, spread by a fixed hash of the seat, so every run is the same.
const (
	bigShowtimes  = 500
	bigRows       = 20
	bigPerRow     = 25
	stadiumID     = 1000
	stadiumRows   = 25
	stadiumPerRow = 2000

	// $1 showtimes 1..$1, $2 the stadium's id.
	sqlBigShowtimes = `
INSERT INTO showtimes (id, event_id, title, starts_at, price_cents)
SELECT id, 'big', 'Show ' || id, now() + id * interval '1 hour', 1000
  FROM generate_series(1, $1::int) id
UNION ALL
SELECT $2, 'big', 'Stadium', now(), 5000`

	// $1 first showtime, $2 last, $3 rows, $4 seats per row.
	sqlBigSeats = `
INSERT INTO seats (showtime_id, seat_code, row_label, seat_number, status, hold_id, customer_id, hold_expires_at, booking_id)
SELECT st, chr(65 + r) || n, chr(65 + r), n,
       CASE WHEN h < 3 THEN 'BOOKED' WHEN h < 5 THEN 'HELD' ELSE 'AVAILABLE' END,
       CASE WHEN h < 5 THEN gen_random_uuid() END,
       CASE WHEN h < 5 THEN 'c' || (st * 7 + n) END,
       CASE WHEN h = 3 THEN now() + interval '1 hour' WHEN h = 4 THEN now() - interval '1 minute' END,
       CASE WHEN h < 3 THEN gen_random_uuid() END
  FROM generate_series($1::bigint, $2::bigint) st,
       generate_series(0, $3::int - 1) r,
       generate_series(1, $4::int) n,
       LATERAL (SELECT abs(hashint8(st * 100000 + r * 10000 + n)) % 10 AS h) x`

	// sqlSeatMapSortedInDB is the seat-map read as it was until the sort
	// moved to Go: the baseline BenchmarkSeatMapBig compares with.
	sqlSeatMapSortedInDB = sqlSeatMap + `
 ORDER BY row_label, seat_number`
)

// bigSeatDB is a migrated database seeded as above with showtimes small
// showtimes and the stadium, on a pool built as `booking serve` builds it
// (Open: generic plans).
func bigSeatDB(tb testing.TB, showtimes int) (*pgxpool.Pool, *Store) {
	tb.Helper()
	ctx := context.Background()
	url := testenv.Database(tb, "booking", Migrate)
	pool, err := Open(ctx, url+"&pool_max_conns=8") // testenv's URLs carry ?sslmode=disable
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	start := time.Now()
	for _, step := range []struct {
		sql  string
		args []any
	}{
		{sqlBigShowtimes, []any{showtimes, stadiumID}},
		{sqlBigSeats, []any{1, showtimes, bigRows, bigPerRow}},
		{sqlBigSeats, []any{stadiumID, stadiumID, stadiumRows, stadiumPerRow}},
		{`VACUUM ANALYZE seats`, nil},
	} {
		if _, err := pool.Exec(ctx, step.sql, step.args...); err != nil {
			tb.Fatalf("seed: %v", err)
		}
	}
	tb.Logf("seeded %d showtimes of %d seats and a stadium of %d in %v", showtimes, bigRows*bigPerRow,
		stadiumRows*stadiumPerRow, time.Since(start).Round(time.Millisecond))
	return pool, New(pool)
}

// seatMapSortedInDB reads a map as Store.SeatMap did before the sort moved to
// Go: the same batch (seats, then blocks), the database sorting the seats.
func seatMapSortedInDB(ctx context.Context, pool *pgxpool.Pool, showtimeID int64) ([]booking.Seat, error) {
	b := &pgx.Batch{}
	b.Queue(sqlSeatMapSortedInDB, showtimeID)
	b.Queue(sqlBlockMap, showtimeID)
	br := pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	seats := []booking.Seat{}
	for rows.Next() {
		var st booking.Seat
		if err := rows.Scan(&st.Code, &st.Row, &st.Number, &st.Status); err != nil {
			return nil, err
		}
		seats = append(seats, st)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, err
	}
	rows.Close()
	return seats, rows.Err()
}

// explain is EXPLAIN (ANALYZE, BUFFERS) of query for showtime id, as a
// prepared statement on a pool connection (so under the pool's generic
// plan, as the store runs it), run three times so the plan and the buffers
// are warm, in format ("TEXT" or "JSON").
func explain(tb testing.TB, pool *pgxpool.Pool, query string, id int64, format string) string {
	tb.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Conn().PgConn().Exec(ctx, "PREPARE seat_map AS "+query).ReadAll(); err != nil {
		tb.Fatal(err)
	}
	defer conn.Exec(ctx, "DEALLOCATE seat_map")
	var out string
	for range 3 {
		rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, BUFFERS, FORMAT %s) EXECUTE seat_map(%d)", format, id))
		if err != nil {
			tb.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			tb.Fatal(err)
		}
		out = strings.Join(lines, "\n")
	}
	return out
}

// partitionOf is the seats partition that holds showtime id.
func partitionOf(tb testing.TB, pool *pgxpool.Pool, id int64) string {
	tb.Helper()
	var part string
	if err := pool.QueryRow(context.Background(), `SELECT tableoid::regclass::text FROM seats WHERE showtime_id = $1 LIMIT 1`, id).Scan(&part); err != nil {
		tb.Fatal(err)
	}
	return part
}

// TestSeatMapPlanOnBigDatabase: on a database of 100,000 seats (100
// showtimes of 500 and a 50,000-seat stadium), the seat map of either size
// scans one partition, the showtime's, through its primary key, and sorts
// nothing in the database; the map the store returns is in exactly the order
// the database's ORDER BY row_label, seat_number gave.
func TestSeatMapPlanOnBigDatabase(t *testing.T) {
	pool, store := bigSeatDB(t, 100)
	ctx := context.Background()
	cases := []struct {
		name  string
		id    int64
		seats int
	}{
		{"a 500-seat showtime", 17, bigRows * bigPerRow},
		{"the 50,000-seat stadium", stadiumID, stadiumRows * stadiumPerRow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			part := partitionOf(t, pool, c.id)
			raw := explain(t, pool, sqlSeatMap, c.id, "JSON")
			var doc any
			if err := json.Unmarshal([]byte(raw), &doc); err != nil {
				t.Fatal(err)
			}
			top := doc.([]any)[0].(map[string]any)["Plan"].(map[string]any)
			scanned, targets := map[string]map[string]bool{}, map[string]map[string]bool{}
			walkPlan(doc, scanned, targets)
			if got := keys(scanned["seats"]); len(got) != 1 || got[0] != part {
				t.Errorf("scans partitions %v; want only %s\n%s", got, part, raw)
			}
			nodes := planNodes(top)
			if !slicesContains(nodes, "Bitmap Index Scan on "+part+"_pkey") && !slicesContains(nodes, "Index Scan on "+part+"_pkey") {
				t.Errorf("plan %v; want a scan of %s_pkey", nodes, part)
			}
			for _, n := range nodes {
				if strings.HasPrefix(n, "Sort") || strings.HasPrefix(n, "Seq Scan") {
					t.Errorf("plan has %q; want neither a sort nor a sequential scan\n%s", n, raw)
				}
			}
			if got := top["Actual Rows"]; got != float64(c.seats) {
				t.Errorf("plan returned %v rows; want %d", got, c.seats)
			}

			m, err := store.SeatMap(ctx, c.id)
			if err != nil {
				t.Fatal(err)
			}
			want, err := seatMapSortedInDB(ctx, pool, c.id)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Seats) != len(want) {
				t.Fatalf("map has %d seats; want %d", len(m.Seats), len(want))
			}
			for i := range want {
				if m.Seats[i] != want[i] {
					t.Fatalf("seat %d is %+v; want %+v (ORDER BY row_label, seat_number)", i, m.Seats[i], want[i])
				}
			}
		})
	}
}

// planNodes lists a plan's nodes as "Node Type" plus " on Index Name" (or
// " on Relation Name") when the node has one.
func planNodes(node any) []string {
	n, ok := node.(map[string]any)
	if !ok {
		return nil
	}
	name, _ := n["Node Type"].(string)
	if ix, ok := n["Index Name"].(string); ok {
		name += " on " + ix
	} else if rel, ok := n["Relation Name"].(string); ok {
		name += " on " + rel
	}
	out := []string{name}
	if kids, ok := n["Plans"].([]any); ok {
		for _, k := range kids {
			out = append(out, planNodes(k)...)
		}
	}
	return out
}

// BenchmarkSeatMapBig: one fan's seat-map read on the big database (250,000
// seats in 500 showtimes, and a 50,000-seat stadium), as the store reads it
// (sorted in Go) and as it read it before (sorted by the database), one
// read at a time, the two interleaved in three rounds so that a busy
// machine weighs on both alike. The 500-seat reads go through every
// showtime in turn. The EXPLAIN (ANALYZE, BUFFERS) of both, for both sizes,
// is in the log (go test -v, or the benchmark's output).
func BenchmarkSeatMapBig(b *testing.B) {
	pool, store := bigSeatDB(b, bigShowtimes)
	for _, id := range []int64{17, stadiumID} {
		for _, q := range []struct{ name, sql string }{{"sorted in Go (the store)", sqlSeatMap}, {"sorted in the database (before)", sqlSeatMapSortedInDB}} {
			b.Logf("EXPLAIN (ANALYZE, BUFFERS), showtime %d in %s, %s:\n%s", id, partitionOf(b, pool, id), q.name, explain(b, pool, q.sql, id, "TEXT"))
		}
	}
	ctx := context.Background()
	sizes := []struct {
		name  string
		id    func(i int) int64
		seats int
	}{
		{"showtime-500", func(i int) int64 { return int64(1 + i%bigShowtimes) }, bigRows * bigPerRow},
		{"stadium-50000", func(int) int64 { return stadiumID }, stadiumRows * stadiumPerRow},
	}
	reads := []struct {
		name string
		read func(id int64) (int, error)
	}{
		{"sorted-in-go", func(id int64) (int, error) { m, err := store.SeatMap(ctx, id); return len(m.Seats), err }},
		{"sorted-in-db", func(id int64) (int, error) { s, err := seatMapSortedInDB(ctx, pool, id); return len(s), err }},
	}
	for range 3 {
		for _, sz := range sizes {
			for _, r := range reads {
				b.Run(sz.name+"/"+r.name, func(b *testing.B) {
					for i := 0; b.Loop(); i++ {
						n, err := r.read(sz.id(i))
						if err != nil || n != sz.seats {
							b.Fatalf("seat map: %d seats, %v; want %d", n, err, sz.seats)
						}
					}
				})
			}
		}
	}
}
