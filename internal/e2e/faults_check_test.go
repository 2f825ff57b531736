package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/queue/queuetest"
)

// The invariants every fault ends with, read in the stores themselves.
const (
	// Seats sold twice: one seat in two CONFIRMED bookings.
	sqlSoldTwice = `
SELECT count(*) FROM (
  SELECT h.showtime_id, c
  FROM bookings b JOIN holds h ON h.id = b.hold_id, unnest(h.seats) AS c
  WHERE b.status = 'CONFIRMED'
  GROUP BY 1, 2 HAVING count(*) > 1) x`
	// BOOKED seats that are not a seat of the CONFIRMED booking they name.
	sqlBookedOrphans = `
SELECT count(*) FROM seats st
WHERE st.status = 'BOOKED' AND NOT EXISTS (
  SELECT 1 FROM bookings b JOIN holds h ON h.id = b.hold_id
  WHERE b.id = st.booking_id AND b.status = 'CONFIRMED'
    AND h.showtime_id = st.showtime_id AND st.seat_code = ANY (h.seats))`
	// Seats of CONFIRMED bookings that are not BOOKED by that booking.
	sqlConfirmedNotBooked = `
SELECT count(*) FROM bookings b JOIN holds h ON h.id = b.hold_id, unnest(h.seats) AS c
WHERE b.status = 'CONFIRMED' AND NOT EXISTS (
  SELECT 1 FROM seats st
  WHERE st.showtime_id = h.showtime_id AND st.seat_code = c COLLATE "C"
    AND st.status = 'BOOKED' AND st.booking_id = b.id)`
	// Money taken that bought nothing and is not being given back.
	sqlPaidNothing = `
SELECT count(*) FROM payments p JOIN bookings b ON b.id = p.booking_id
WHERE p.status = 'SUCCEEDED' AND b.status <> 'CONFIRMED'
  AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = p.payment_id)`
	sqlConfirmedIDs = `SELECT id::text FROM bookings WHERE status = 'CONFIRMED'`
	sqlCounts       = `
SELECT (SELECT count(*) FROM bookings WHERE status = 'CONFIRMED'),
       (SELECT count(*) FROM bookings WHERE status IN ('FAILED', 'REFUNDED')),
       (SELECT count(*) FROM bookings WHERE status = 'PENDING'),
       (SELECT count(*) FROM seats WHERE status = 'BOOKED'),
       (SELECT count(*) FROM refunds)`
)

// figures are what the invariants read, for the logs and RELIABILITY.md.
type figures struct {
	joined, admitted, waiting, left, abandoned  int64
	maxActive, samples                          int64
	confirmed, failed, pending, booked, refunds int64
	streamLag                                   time.Duration
}

func (f figures) String() string {
	return fmt.Sprintf("joined=%d admitted=%d waiting=%d left=%d abandoned=%d; max active sampled=%d (%d samples); bookings confirmed=%d failed/refunded=%d pending=%d, seats booked=%d, refunds=%d; stream caught up in %s",
		f.joined, f.admitted, f.waiting, f.left, f.abandoned, f.maxActive, f.samples,
		f.confirmed, f.failed, f.pending, f.booked, f.refunds, f.streamLag.Round(10*time.Millisecond))
}

// checkInvariants checks, after the sale: the queue's books balance, the
// active set never went over the cap, no seat was sold twice, every seat
// BOOKED belongs to a CONFIRMED booking and the reverse, every SUCCEEDED
// payment bought a booking or is being refunded, and every CONFIRMED booking
// reached the booking-events stream.
func (d *drill) checkInvariants(ctx context.Context) figures {
	t := d.t
	t.Helper()
	var f figures

	// The queue: joined = admitted + waiting + left + abandoned.
	st := queuetest.Of(t, d.s.RDB, drillEvent).Books()
	f.joined, f.admitted, f.waiting, f.left, f.abandoned = st.Joined, st.Admitted, st.Waiting, st.Left, st.Abandoned
	if st.Joined != st.Admitted+st.Waiting+st.Left+st.Abandoned {
		t.Errorf("queue books: joined %d ≠ admitted %d + waiting %d + left %d + abandoned %d",
			st.Joined, st.Admitted, st.Waiting, st.Left, st.Abandoned)
	}
	if st.Joined == 0 || st.Admitted == 0 {
		t.Errorf("queue stats joined=%d admitted=%d: the sale did not run", st.Joined, st.Admitted)
	}

	// The cap, at every sampled instant.
	f.maxActive, f.samples = d.active.max.Load(), d.active.samples.Load()
	if f.maxActive > int64(d.cap) {
		t.Errorf("active reached %d; cap is %d", f.maxActive, d.cap)
	}
	if f.samples < 10 {
		t.Errorf("only %d samples of the active set", f.samples)
	}

	// PostgreSQL.
	db, err := pgx.Connect(ctx, d.s.DBURL)
	if err != nil {
		t.Fatalf("connect to the booking database: %v", err)
	}
	defer db.Close(context.Background())
	d.checkSales(ctx, db)
	if err := db.QueryRow(ctx, sqlCounts).Scan(&f.confirmed, &f.failed, &f.pending, &f.booked, &f.refunds); err != nil {
		t.Fatalf("counts: %v", err)
	}
	rows, err := db.Query(ctx, sqlConfirmedIDs)
	if err != nil {
		t.Fatalf("confirmed bookings: %v", err)
	}
	confirmed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("confirmed bookings: %v", err)
	}

	// Every CONFIRMED booking reaches the stream (the relay runs every 250 ms,
	// a pass on a connection a fault left dead ends at its 10 s bound, and a
	// loaded machine is slow: TestNetworkFaults found 191 of 476 still
	// missing after 10 s at load average 20-27, and all of them there
	// 10.16 s in). Waited for, up to a minute: a relay that is stuck never
	// gets there.
	const streamWithin = time.Minute
	began := time.Now()
	var missing []string
	for {
		missing = d.missingFromStream(ctx, confirmed)
		if len(missing) == 0 || time.Since(began) > streamWithin {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.streamLag = time.Since(began)
	if len(missing) > 0 {
		t.Errorf("%d of %d CONFIRMED bookings not in stream booking-events after %v (e.g. %s)", len(missing), len(confirmed), f.streamLag.Round(time.Millisecond), missing[0])
	}
	return f
}

// checkSales checks the sales in PostgreSQL: no seat sold twice, every
// seat BOOKED belongs to a CONFIRMED booking and the reverse, every
// SUCCEEDED payment bought a booking or is being refunded.
func (d *drill) checkSales(ctx context.Context, db *pgx.Conn) {
	d.t.Helper()
	for _, c := range []struct{ what, sql string }{
		{"seats in two CONFIRMED bookings", sqlSoldTwice},
		{"BOOKED seats not of their CONFIRMED booking", sqlBookedOrphans},
		{"seats of CONFIRMED bookings not BOOKED by them", sqlConfirmedNotBooked},
		{"SUCCEEDED payments neither CONFIRMED nor refunded", sqlPaidNothing},
	} {
		var n int64
		if err := db.QueryRow(ctx, c.sql).Scan(&n); err != nil {
			d.t.Fatalf("%s: %v", c.what, err)
		}
		if n != 0 {
			d.t.Errorf("%s: %d; want 0", c.what, n)
		}
	}
}

func (d *drill) missingFromStream(ctx context.Context, ids []string) []string {
	msgs, err := d.s.RDB.XRange(ctx, "booking-events", "-", "+").Result()
	if err != nil {
		return ids
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		if id, ok := m.Values["bookingId"].(string); ok {
			seen[id] = true
		}
	}
	var missing []string
	for _, id := range ids {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

// alive checks that every service still answers /healthz: no fault may
// crash a process that was not the one faulted.
func (d *drill) alive(names ...string) {
	d.t.Helper()
	for _, n := range names {
		p := d.s.Proc(n)
		if p == nil {
			d.t.Errorf("no process %s", n)
			continue
		}
		res, err := http.Get("http://" + p.Addr + "/healthz")
		if err != nil {
			d.t.Errorf("%s /healthz: %v (crashed?)\n%s", n, err, d.s.Log(n))
			continue
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			d.t.Errorf("%s /healthz = %d", n, res.StatusCode)
		}
	}
}

// metric reads one sample of a Prometheus text exposition, by its name and
// labels as printed (e.g. `booking_confirmations_total{result="duplicate"}`).
func metric(t testing.TB, url, series string) float64 {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return 0
}
