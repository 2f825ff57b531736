package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// partitioned are the tables migration 002 partitions by showtime.
var partitioned = []string{"seats", "ga_blocks", "ga_places"}

var partitionName = regexp.MustCompile(`^(seats|ga_blocks|ga_places)_p(\d\d)$`)

func showtimes(ids ...int64) []booking.Event {
	ev := booking.Event{ID: "live"}
	for _, id := range ids {
		ev.Showtimes = append(ev.Showtimes, booking.Showtime{
			ID: id, Title: "T", Rows: 3, SeatsPerRow: 4, PriceCents: 100,
			Blocks: []booking.GABlock{{Code: "FLOOR", Capacity: 10, PriceCents: 50}},
		})
	}
	return []booking.Event{ev}
}

func holdReq(showtime int64, customer string, seats []string, ga map[string]int) booking.HoldRequest {
	r := booking.HoldRequest{
		HoldID: booking.NewID(), Event: "live", ShowtimeID: showtime, Customer: customer,
		Seats: seats, GA: ga, AmountCents: 100, TTL: time.Hour, MaxPlaces: 20, HoldsPerMinute: 100, AttemptsPerMinute: 100,
	}
	return r
}

// legacyHold writes a hold as releases before 003 did (seats, places and the
// hold row, an hour long), and returns its id.
func legacyHold(t *testing.T, pool *pgxpool.Pool, showtime int64, customer string, seats []string, ga map[string]int) string {
	t.Helper()
	ctx := context.Background()
	id := booking.NewID()
	places := len(seats)
	for _, n := range ga {
		places += n
	}
	gaJSON, _ := json.Marshal(ga)
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO holds (id, event_id, showtime_id, customer_id, seats, ga, places, amount_cents, created_at, expires_at)
	         VALUES ($1, 'live', $2, $3, $4, $5, $6, 100, now(), now() + interval '1 hour')`, id, showtime, customer, seats, gaJSON, places)
	b.Queue(`UPDATE seats SET status = 'HELD', hold_id = $1, customer_id = $3, hold_expires_at = now() + interval '1 hour'
	          WHERE showtime_id = $2 AND seat_code = ANY($4)`, id, showtime, customer, seats)
	for code, n := range ga {
		b.Queue(`INSERT INTO ga_places (hold_id, showtime_id, block_code, places, status, expires_at)
		         VALUES ($1, $2, $3, $4, 'HELD', now() + interval '1 hour')`, id, showtime, code, n)
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatalf("legacy hold: %v", err)
	}
	return id
}

// dump is every row of the three tables, in a stable order, as JSON lines:
// what a migration must keep exactly.
func dump(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var out strings.Builder
	for _, q := range []string{
		`SELECT row_to_json(x)::text FROM (SELECT * FROM seats ORDER BY showtime_id, seat_code) x`,
		`SELECT row_to_json(x)::text FROM (SELECT * FROM ga_blocks ORDER BY showtime_id, code) x`,
		`SELECT row_to_json(x)::text FROM (SELECT hold_id, showtime_id, block_code, places, status, expires_at, booking_id
		                                     FROM ga_places ORDER BY hold_id, block_code) x`,
		`SELECT row_to_json(x)::text FROM (SELECT * FROM holds ORDER BY id) x`,
		`SELECT row_to_json(x)::text FROM (SELECT * FROM bookings ORDER BY id) x`,
	} {
		rows, err := pool.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(strings.Join(lines, "\n") + "\n--\n")
	}
	return out.String()
}

// An existing database (001) with seats held, sold, and a payment under way
// is migrated to 002: every row is still there, unchanged, in the partition of
// its showtime, and the holds, payments and releases started before go on.
func TestMigratePartitionsExistingData(t *testing.T) {
	ctx := context.Background()
	pool, url := testenv.Pool(t, "booking_001", Open, func(ctx context.Context, url string) error {
		return migrateUpTo(ctx, url, "001_booking")
	})
	var kind string
	if err := pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = 'seats'`).Scan(&kind); err != nil || kind != "r" {
		t.Fatalf("before 002 seats is relkind %q, %v; want a plain table", kind, err)
	}
	store := New(pool)
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	if _, err := store.Seed(ctx, showtimes(ids...)); err != nil {
		t.Fatal(err)
	}
	// Held (seats and places), sold, released, and a checkout whose payment
	// will come after the migration: written as a release of that time wrote
	// them (today's hold statement needs what 003 adds).
	held := legacyHold(t, pool, 1, "ann", []string{"A1", "A2"}, map[string]int{"FLOOR": 3})
	sold := legacyHold(t, pool, 2, "bob", []string{"B1"}, map[string]int{"FLOOR": 2})
	// A checkout and a confirmation as the store of that time wrote them
	// (today's statements need what later migrations add).
	pay := func(holdID, customer, key string) booking.Checkout {
		c := booking.Checkout{BookingID: booking.NewID(), PaymentID: "pay-" + key, PaymentURL: "/p/" + key, ExpiresAt: time.Now().Add(time.Minute).Truncate(time.Microsecond)}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO bookings (id, hold_id, event_id, showtime_id, customer_id, idempotency_key, status,
		                               amount_cents, payment_id, payment_url, payment_expires_at)
		         SELECT $1, id, event_id, showtime_id, $2, $3, 'PENDING', amount_cents, $4, $5, $6 FROM holds WHERE id = $7`,
			c.BookingID, customer, key, c.PaymentID, c.PaymentURL, c.ExpiresAt, holdID)
		b.Queue(`INSERT INTO payments (payment_id, booking_id, amount_cents, status) VALUES ($1, $2, 100, 'PENDING')`, c.PaymentID, c.BookingID)
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			t.Fatalf("legacy checkout: %v", err)
		}
		return c
	}
	sale := pay(sold, "bob", "k1")
	b := &pgx.Batch{}
	b.Queue(`UPDATE payments SET status = 'SUCCEEDED', settled_at = now() WHERE payment_id = $1`, sale.PaymentID)
	b.Queue(`UPDATE seats SET status = 'BOOKED', booking_id = $1, hold_expires_at = NULL WHERE hold_id = $2`, sale.BookingID, sold)
	b.Queue(`UPDATE ga_places SET status = 'BOOKED', booking_id = $1 WHERE hold_id = $2`, sale.BookingID, sold)
	b.Queue(`UPDATE holds SET status = 'BOOKED' WHERE id = $1`, sold)
	b.Queue(`UPDATE bookings SET status = 'CONFIRMED' WHERE id = $1`, sale.BookingID)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatalf("legacy confirmation: %v", err)
	}
	gone := legacyHold(t, pool, 3, "cat", []string{"C4"}, map[string]int{"FLOOR": 1})
	for _, q := range []string{
		`UPDATE seats SET status = 'AVAILABLE', hold_id = NULL, customer_id = NULL, hold_expires_at = NULL WHERE hold_id = $1`,
		`UPDATE ga_places SET status = 'RELEASED' WHERE hold_id = $1`,
		`UPDATE holds SET status = 'RELEASED' WHERE id = $1`,
	} {
		if _, err := pool.Exec(ctx, q, gone); err != nil {
			t.Fatal(err)
		}
	}
	pending := legacyHold(t, pool, 4, "dan", []string{"A3"}, map[string]int{"FLOOR": 4})
	pendingPay := pay(pending, "dan", "k2")
	before := dump(t, pool)

	if err := migrateUpTo(ctx, url, "002_partition_by_showtime"); err != nil {
		t.Fatalf("migrate 002 on data: %v", err)
	}
	if after := dump(t, pool); after != before {
		t.Fatalf("rows changed by the migration:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if err := Migrate(ctx, url); err != nil {
		t.Fatalf("migrate the rest on data: %v", err)
	}
	for _, table := range partitioned {
		var kind string
		var parts int
		if err := pool.QueryRow(ctx, `
SELECT c.relkind::text, (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid)
  FROM pg_class c WHERE c.relname = $1`, table).Scan(&kind, &parts); err != nil {
			t.Fatal(err)
		}
		if kind != "p" || parts != 16 {
			t.Fatalf("%s: relkind %q with %d partitions; want p with 16", table, kind, parts)
		}
		// Every showtime's rows sit in one partition, and not all showtimes
		// in the same one.
		var perShowtime, spread int
		if err := pool.QueryRow(ctx, fmt.Sprintf(`
SELECT max(n), count(DISTINCT p) FROM (
  SELECT showtime_id, count(DISTINCT tableoid) AS n, min(tableoid::regclass::text) AS p FROM %s GROUP BY 1) x`, table)).Scan(&perShowtime, &spread); err != nil {
			t.Fatal(err)
		}
		if perShowtime != 1 || spread < 2 {
			t.Fatalf("%s: a showtime spans %d partitions, showtimes use %d partitions; want 1 and several", table, perShowtime, spread)
		}
	}

	// Life goes on: held seats and places stay taken, the payment started
	// before confirms, the release of a hold taken before works, free seats
	// can be held.
	if _, err := store.Hold(ctx, holdReq(1, "eve", []string{"A2", "A4"}, nil)); !errors.Is(err, booking.ErrSeatsUnavailable) {
		t.Fatalf("hold of a seat held before the migration: %v; want seats unavailable", err)
	}
	if _, err := store.Hold(ctx, holdReq(2, "eve", []string{"B1"}, nil)); !errors.Is(err, booking.ErrSeatsUnavailable) {
		t.Fatalf("hold of a seat sold before the migration: %v; want seats unavailable", err)
	}
	if _, err := store.Hold(ctx, holdReq(1, "fay", nil, map[string]int{"FLOOR": 8})); !errors.Is(err, booking.ErrSoldOut) {
		t.Fatalf("8 places where 3 of 10 are held: %v; want sold out", err)
	}
	if s, err := store.Settle(ctx, pendingPay.PaymentID, payment.Succeeded); err != nil || s.Outcome != booking.Confirmed {
		t.Fatalf("settle after migration: %+v, %v", s, err)
	}
	if err := store.Release(ctx, held, "ann", "live"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Hold(ctx, holdReq(1, "eve", []string{"A2", "A4"}, map[string]int{"FLOOR": 10})); err != nil {
		t.Fatalf("hold after the release: %v", err)
	}
	var states string
	if err := pool.QueryRow(ctx, `
SELECT string_agg(showtime_id || ':' || seat_code || '=' || status, ' ' ORDER BY showtime_id, seat_code)
  FROM seats WHERE status <> 'AVAILABLE'`).Scan(&states); err != nil {
		t.Fatal(err)
	}
	if want := "1:A2=HELD 1:A4=HELD 2:B1=BOOKED 4:A3=BOOKED"; states != want {
		t.Fatalf("seats after = %q; want %q", states, want)
	}
	var places string
	if err := pool.QueryRow(ctx, `
SELECT string_agg(showtime_id || ':' || places || '=' || status, ' ' ORDER BY showtime_id, status, places)
  FROM ga_places`).Scan(&places); err != nil {
		t.Fatal(err)
	}
	if want := "1:10=HELD 1:3=RELEASED 2:2=BOOKED 3:1=RELEASED 4:4=BOOKED"; places != want {
		t.Fatalf("places after = %q; want %q", places, want)
	}
}

// TestHoldPrunes: every statement of a hold, and those of a release, a
// confirmation and the seat map, scans exactly one partition of each
// partitioned table, the showtime's, under custom plans and under the
// generic plans a cached prepared statement ends up with (pruned at executor
// start). EXPLAIN (FORMAT JSON) on the real database.
func TestHoldPrunes(t *testing.T) {
	ctx := context.Background()
	pool, _ := testenv.Pool(t, "booking", Open, Migrate)
	store := New(pool)
	if _, err := store.Seed(ctx, showtimes(1, 2, 3, 4, 5, 6, 7, 8)); err != nil {
		t.Fatal(err)
	}
	// Real holds, so that the plans meet real rows and statistics.
	for st := int64(1); st <= 8; st++ {
		if _, err := store.Hold(ctx, holdReq(st, fmt.Sprintf("c%d", st), []string{"A1", "B2"}, map[string]int{"FLOOR": 2})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	suffixes := map[string]bool{}
	for _, st := range []int64{1, 2, 3} {
		var part string
		if err := conn.QueryRow(ctx, `SELECT tableoid::regclass::text FROM seats WHERE showtime_id = $1 LIMIT 1`, st).Scan(&part); err != nil {
			t.Fatal(err)
		}
		suffix := partitionName.FindStringSubmatch(part)[2]
		suffixes[suffix] = true
		hold := booking.NewID()
		cases := []struct {
			name  string
			sql   string
			args  string // SQL literals
			scans []string
		}{
			{"lock customer", sqlLockCustomer, `'live', 'zed'`, nil},
			{"lock blocks", sqlLockBlocks, fmt.Sprintf(`%d, '{FLOOR}'`, st), []string{"ga_blocks"}},
			{"hold", sqlHold, fmt.Sprintf(`'live', 'zed', %d, '{A2,C3}', '%s', '{"FLOOR": 1}', 3, 300, 600000000, '{FLOOR}', '{1}', 5, 8, 600000000, 20, 'zed-ticket'`, st, hold),
				[]string{"seats", "ga_blocks", "ga_places"}},
			{"hold of seats", sqlHoldSeats, fmt.Sprintf(`'live', 'zed', %d, '{A2,C3}', '%s', 'null', 2, 200, 600000000, 5, 8, 600000000, 20, 'zed-ticket'`, st, hold),
				[]string{"seats"}},
			{"seat map", sqlSeatMap, fmt.Sprint(st), []string{"seats"}},
			{"block map", sqlBlockMap, fmt.Sprint(st), []string{"ga_blocks", "ga_places"}},
			{"lock seats", sqlLockSeats, fmt.Sprintf(`%d, '{A2,C3}'`, st), []string{"seats"}},
			{"release seats", sqlReleaseSeats, fmt.Sprintf(`%d, '{A2,C3}', '%s'`, st, hold), []string{"seats"}},
			{"release places", sqlReleaseGA, fmt.Sprintf(`%d, '%s'`, st, hold), []string{"ga_places"}},
			{"confirm seats", sqlConfirmSeats, fmt.Sprintf(`%d, '{A2,C3}', '%s', '%s'`, st, hold, booking.NewID()), []string{"seats"}},
			{"confirm places", sqlConfirmGA, fmt.Sprintf(`%d, '%s', '%s'`, st, hold, booking.NewID()), []string{"ga_places"}},
		}
		for i, c := range cases {
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				t.Run(fmt.Sprintf("showtime %d/%s/%s", st, c.name, mode), func(t *testing.T) {
					name := fmt.Sprintf("p_%d_%d_%s", st, i, mode[6:12])
					if _, err := conn.Conn().PgConn().Exec(ctx,
						"SET plan_cache_mode = "+mode+"; PREPARE "+name+" AS "+c.sql).ReadAll(); err != nil {
						t.Fatal(err)
					}
					var raw string
					if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE "+name+"("+c.args+")").Scan(&raw); err != nil {
						t.Fatal(err)
					}
					var plan any
					if err := json.Unmarshal([]byte(raw), &plan); err != nil {
						t.Fatal(err)
					}
					scanned, targets := map[string]map[string]bool{}, map[string]map[string]bool{}
					walkPlan(plan, scanned, targets)
					for _, table := range partitioned {
						want := slicesContains(c.scans, table)
						got := keys(scanned[table])
						switch {
						case want && (len(got) != 1 || got[0] != table+"_p"+suffix):
							t.Errorf("%s: scans partitions %v; want only %s_p%s\n%s", table, got, table, suffix, raw)
						case !want && len(got) > 0:
							t.Errorf("%s: scans %v; want none", table, got)
						}
						// Written rows go to one partition whatever the plan (the
						// statements set or match showtime_id); a custom plan also
						// names only that one as a target. A generic UPDATE plan
						// lists every partition as a possible target (PostgreSQL
						// 15), though it scans, hence writes, only the one above.
						if tg := keys(targets[table]); mode == "force_custom_plan" && len(tg) > 1 {
							t.Errorf("%s: custom plan targets %v; want one partition", table, tg)
						}
					}
				})
			}
		}
	}
	if len(suffixes) < 2 {
		t.Fatalf("showtimes 1-3 all in partition %v: the test proves nothing", suffixes)
	}

	// The rows a hold writes land in its showtime's partition.
	h, err := store.Hold(ctx, holdReq(5, "yan", []string{"C1", "C2"}, map[string]int{"FLOOR": 1}))
	if err != nil {
		t.Fatal(err)
	}
	var where string
	if err := pool.QueryRow(ctx, `
SELECT string_agg(DISTINCT p, ' ') FROM (
  SELECT tableoid::regclass::text AS p FROM seats WHERE hold_id = $1
  UNION ALL SELECT tableoid::regclass::text FROM ga_places WHERE hold_id = $1
  UNION ALL SELECT tableoid::regclass::text FROM seats WHERE showtime_id = 5 AND seat_code = 'A1') x`, h.ID).Scan(&where); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^ga_places_p(\d\d) seats_p(\d\d)$`).FindStringSubmatch(where)
	if m == nil || m[1] != m[2] {
		t.Fatalf("hold of showtime 5 wrote to %q; want ga_places_pNN seats_pNN, the showtime's", where)
	}
}

// walkPlan collects, per partitioned table, the partitions that plan nodes
// scan and those a ModifyTable names as targets.
func walkPlan(node any, scanned, targets map[string]map[string]bool) {
	add := func(m map[string]map[string]bool, rel string) {
		if p := partitionName.FindStringSubmatch(rel); p != nil {
			if m[p[1]] == nil {
				m[p[1]] = map[string]bool{}
			}
			m[p[1]][rel] = true
		}
	}
	switch n := node.(type) {
	case []any:
		for _, x := range n {
			walkPlan(x, scanned, targets)
		}
	case map[string]any:
		if rel, ok := n["Relation Name"].(string); ok {
			if n["Node Type"] == "ModifyTable" {
				add(targets, rel)
			} else {
				add(scanned, rel)
			}
		}
		if tt, ok := n["Target Tables"].([]any); ok {
			for _, x := range tt {
				if rel, ok := x.(map[string]any)["Relation Name"].(string); ok {
					add(targets, rel)
				}
			}
		}
		for k, v := range n {
			if k != "Target Tables" {
				walkPlan(v, scanned, targets)
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestPipelineIsOneTransaction: Hold sends its statements as one pipeline
// without BEGIN and relies on PostgreSQL running them as one implicit
// transaction: locks taken by the first statement are held by the last, and
// an error anywhere undoes everything.
func TestPipelineIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	pool, _ := testenv.Pool(t, "booking", Open, Migrate)
	var x1, x2, x3 string
	b := &pgx.Batch{}
	b.Queue(sqlLockCustomer, "live", "ann")
	b.Queue(`SELECT pg_current_xact_id()::text`).QueryRow(func(r pgx.Row) error { return r.Scan(&x1) })
	b.Queue(`SELECT pg_sleep(0.01), pg_current_xact_id()::text`).QueryRow(func(r pgx.Row) error { var v any; return r.Scan(&v, &x2) })
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&x3); err != nil {
		t.Fatal(err)
	}
	if x1 != x2 || x1 == x3 {
		t.Fatalf("transaction ids %s, %s in the pipeline and %s after; want the first two equal", x1, x2, x3)
	}
	b = &pgx.Batch{}
	b.Queue(`INSERT INTO customers (event_id, customer_id) VALUES ('live', 'bob')`)
	b.Queue(`SELECT 1 / 0`)
	if err := pool.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("division by zero went through")
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM customers WHERE customer_id = 'bob'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("customer row of a failed pipeline: %d, %v; want rolled back", n, err)
	}
}

// Open gives every connection generic plans and 32 connections, unless the
// URL chose.
func TestOpen(t *testing.T) {
	url := testenv.Database(t, "booking", Migrate)
	for _, c := range []struct {
		url, want string
		conns     int32
	}{
		{url, "force_generic_plan", 32},
		{url + "&plan_cache_mode=auto&pool_max_conns=5", "auto", 5},
	} {
		pool, err := Open(context.Background(), c.url)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = pool.QueryRow(context.Background(), `SHOW plan_cache_mode`).Scan(&got)
		conns := pool.Config().MaxConns
		pool.Close()
		if err != nil || got != c.want || conns != c.conns {
			t.Errorf("%s: plan_cache_mode = %q, %v, %d connections; want %q, %d", c.url, got, err, conns, c.want, c.conns)
		}
	}
}
