package loadtest

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/plot"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/rehearsal"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// The sale: fans arrive within arrivalWindow for one 15 × 20 showtime,
// admitted at saleRate per second with at most saleCap active.
const (
	saleEvent     = "sale"
	saleShowtime  = 900
	saleRows      = 15
	saleSeatsRow  = 20
	saleRate      = 100
	saleCap       = 500
	arrivalWindow = 10 * time.Second
	// saleTimeout bounds the fans' part of the run; with 20,000 fans at
	// 100/s the line drains in about 200 s.
	saleTimeout = 5 * time.Minute
	abandonRate = 0.05 // fans who stop polling
	leaveRate   = 0.03 // fans who leave the line (DELETE)
)

var saleEvents = fmt.Sprintf(`  - id: %q
    name: "Load-test sale"
    admission: {admit_per_second: %d, max_active: %d, access_ttl: "3m", abandon_after: "15s"}
    showtimes:
      - {id: %d, title: "Sale 20:00", starts_at: "2027-01-01T20:00:00Z", rows: %d, seats_per_row: %d, price_cents: 2000}
`, saleEvent, saleRate, saleCap, saleShowtime, saleRows, saleSeatsRow)

// The fans of a load test do not visit the provider's page: the simulator
// pays each session by itself (auto_pay), a second after it opens.
const saleBooking = `  payment: {secret: "stack-payment-secret-0123456789abcdef", simulator: {enabled: true, outcome: "succeed", delay: "1s", auto_pay: true}}`

// lineSampler reads the line straight from Redis, more closely than the
// fans' public API could: the admitted count is read in one MULTI with
// Redis TIME, so each sample carries the instant it was really read (on a
// crowded machine the sampler itself can be late, and a late timestamp
// would turn into a false spike of the rate).
type lineSampler struct {
	rdb *redis.Client
	st  *queue.Store
}

func (l lineSampler) Sample(ctx context.Context, start time.Time) (rehearsal.Sample, error) {
	var now *redis.TimeCmd
	var adm *redis.SliceCmd
	if _, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		adm = p.HMGet(ctx, rdb.KeysOf(saleEvent).Stats, "admitted")
		return nil
	}); err != nil {
		return rehearsal.Sample{}, err
	}
	counts, err := l.st.Counts(ctx, saleEvent)
	if err != nil {
		return rehearsal.Sample{}, err
	}
	str, _ := adm.Val()[0].(string)
	n, _ := strconv.ParseInt(str, 10, 64)
	return rehearsal.Sample{At: now.Val().Sub(start), Admitted: n, Waiting: counts.Waiting, Active: counts.Active, Configured: saleRate}, nil
}

// BenchmarkSale is a whole sale: fans arrive within ten seconds for 300
// seats and behave as fans do; the run reports whether admission kept to
// its rate and cap, how long fans waited and how right their ETA was, and
// proves that no seat was sold twice and that no ticket got lost.
func BenchmarkSale(b *testing.B) {
	nFans := envInt(b, "WAITROOM_LOADTEST_FANS", 20_000)
	s := stack.Start(b, stack.Options{Events: saleEvents, Booking: saleBooking})
	st, rdb := lineStore(b, s)
	settings(context.Background(), b, st, saleEvent)
	sc, err := rehearsal.NewClient(s.Gateway, rehearsal.ClientOptions{Fans: nFans, Span: saleTimeout + 3*time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()

	start := sc.Started()
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	samplesCh := make(chan []rehearsal.Sample, 1)
	go func() { samplesCh <- rehearsal.Watch(sampleCtx, lineSampler{rdb, st}, time.Second, start) }()

	ctx, cancel := context.WithTimeout(context.Background(), saleTimeout)
	defer cancel()
	// Fans arrive at random within the window; each polls as told, a few
	// stop polling or leave, and every fan admitted tries to book.
	seed := uint64(time.Now().UnixNano())
	rng := mrand.New(mrand.NewPCG(seed, 0))
	arrivals := make([]time.Duration, nFans)
	for i := range arrivals {
		arrivals[i] = time.Duration(rng.Int64N(int64(arrivalWindow)))
	}
	fans := rehearsal.Run(ctx, sc, rehearsal.Plan{
		Event: saleEvent, Arrivals: arrivals, Seed: seed,
		Behaviour: rehearsal.Behaviour{Buy: 1, Abandon: abandonRate, Leave: leaveRate, Showtimes: []int64{saleShowtime}},
	}, start)
	fansDone := time.Since(start)
	// The fans who stopped polling are still in line until the admitter
	// reaches them and drops them (or admits them, if their time is not up).
	// Once sold out, nobody is admitted and the fans still in line were told
	// so: their tickets stay waiting until they lapse.
	drained := false
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		c, err := st.Counts(context.Background(), saleEvent)
		if err == nil && (c.Waiting == 0 || c.SoldOut()) {
			drained = true
			break
		}
	}
	time.Sleep(1500 * time.Millisecond) // one more sample of the empty line
	stopSampling()
	samples := <-samplesCh
	elapsed := time.Since(start)

	bg := context.Background()

	// Conservation, read in one MULTI so that no tick falls in between.
	books := queuetest.Of(b, rdb, saleEvent).Books()
	joinedN, admittedN, leftN, abandonedN, waitingN := books.Joined, books.Admitted, books.Left, books.Abandoned, books.Waiting
	conserved := joinedN == admittedN+waitingN+leftN+abandonedN
	if !conserved {
		b.Errorf("conservation: joined %d ≠ admitted %d + waiting %d + left %d + abandoned %d",
			joinedN, admittedN, waitingN, leftN, abandonedN)
	}

	// The seats, from PostgreSQL, the source of truth.
	db := s.DB(bg)
	var sold, confirmed, confirmedSeats, doubles int64
	for _, q := range []struct {
		sql string
		dst *int64
	}{{soldSeatsSQL, &sold}, {confirmedSQL, &confirmed}, {confirmedSeatsSQL, &confirmedSeats}, {doubleSalesSQL, &doubles}} {
		if err := db.QueryRow(bg, q.sql, saleShowtime).Scan(q.dst); err != nil {
			b.Fatalf("%s: %v", q.sql, err)
		}
	}
	if doubles != 0 {
		b.Errorf("%d seats are in more than one CONFIRMED booking; want 0", doubles)
	}
	if confirmedSeats != sold {
		b.Errorf("%d seats in CONFIRMED bookings but %d seats BOOKED; want equal", confirmedSeats, sold)
	}

	// The last seat sold, by the database's record of the last confirmation.
	var lastSoldAbs *time.Time
	if err := db.QueryRow(bg, lastSoldSQL, saleShowtime).Scan(&lastSoldAbs); err != nil {
		b.Fatalf("%s: %v", lastSoldSQL, err)
	}

	// What the fans saw.
	seen := rehearsal.FansSeen(fans)
	byOutcome, waits, etaErrs, notes := seen.Outcomes, seen.Waits, seen.ETAErrors, seen.Notes
	joinedByFans, seatsBought := int64(seen.Joined), int64(seen.Seats)
	if joinedByFans != joinedN {
		b.Errorf("fans got %d tickets, the stats hash counts %d joined; want equal", joinedByFans, joinedN)
	}
	if seen.FIFO.Inversions > 0 {
		b.Errorf("the fans saw %d FIFO inversions; want 0", seen.FIFO.Inversions)
	}
	if seatsBought != sold {
		b.Errorf("fans saw %d seats confirmed, PostgreSQL has %d BOOKED; want equal", seatsBought, sold)
	}

	// The fans who got nothing and were still waiting when the last seat was
	// sold: how long after it their wait ended (told sold out, or admitted to
	// a sold-out map), how much waiting that wasted, and the poll load after.
	var (
		toldAfter  []time.Duration // fans waiting at sell-out: how long after it they learnt
		lateWaits  []time.Duration // fans who joined after it: how long they waited
		lateAtJoin int             // … of whom, told at join
		wasted     time.Duration   // every fan who got nothing: waiting after the last seat was sold
		lastSold   time.Duration
	)
	if lastSoldAbs != nil {
		lastSold = lastSoldAbs.Sub(start)
		for _, f := range fans {
			nothing := f.Outcome == rehearsal.ToldSoldOut || f.Outcome == rehearsal.SoldOut || f.Outcome == rehearsal.GaveUp
			if !nothing || f.DoneAt.IsZero() || !f.DoneAt.After(*lastSoldAbs) {
				continue
			}
			if f.JoinedAt.Before(*lastSoldAbs) {
				toldAfter = append(toldAfter, f.DoneAt.Sub(*lastSoldAbs))
				wasted += f.DoneAt.Sub(*lastSoldAbs)
				continue
			}
			lateWaits = append(lateWaits, f.DoneAt.Sub(f.JoinedAt))
			wasted += f.DoneAt.Sub(f.JoinedAt)
			if f.DoneAt.Equal(f.JoinedAt) {
				lateAtJoin++
			}
		}
	}
	slices.Sort(toldAfter)
	slices.Sort(lateWaits)
	loadBefore := sc.RequestsBetween(lastSold-30*time.Second, lastSold)
	loadAfter := sc.RequestsBetween(lastSold+10*time.Second, lastSold+40*time.Second)
	if byOutcome[rehearsal.Unfinished] > 0 {
		b.Errorf("%d fans were still going after %v", byOutcome[rehearsal.Unfinished], saleTimeout)
	}

	// Admission as it happened, one sample a second.
	adm := rehearsal.AdmissionOf(samples)
	meanRate, perSec, lastLine := adm.Mean, adm.BusyRates, adm.LastBusy
	var (
		peak  int64
		atCap int
	)
	for _, smp := range samples {
		peak = max(peak, smp.Active)
		if smp.Active >= saleCap {
			atCap++
		}
	}
	if peak > saleCap {
		b.Errorf("peak active %d; want ≤ cap %d", peak, saleCap)
	}

	var rates []plot.Point
	for _, r := range adm.Rates {
		rates = append(rates, plot.Point{X: r.At.Seconds(), Y: r.PerSecond})
	}
	xEnd := 0.0
	if len(rates) > 0 {
		xEnd = rates[len(rates)-1].X
	}
	var png bytes.Buffer
	if err := plot.PNG(&png, 800, 360,
		plot.Series{Points: []plot.Point{{X: 0, Y: saleRate}, {X: xEnd, Y: saleRate}}, Color: plot.Red, Dashed: true},
		plot.Series{Points: rates, Color: plot.Blue},
	); err != nil {
		b.Fatal(err)
	}
	dir := docsDir(b)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sale.png"), png.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}

	gw5xx, _, err := scrape(s.Gateway+"/metrics", "waitroom_http_requests_total", `service="gateway"`, `code="5`)
	if err != nil {
		b.Fatal(err)
	}
	gw5xxText := thousands(int64(gw5xx))
	if _, any, _ := scrape(s.Gateway+"/metrics", "waitroom_http_requests_total", `service="gateway"`); !any {
		gw5xxText = "not exported"
	}
	answers := sc.Counts()
	if answers.Class(5) > 0 || gw5xx > 0 {
		b.Errorf("gateway answered 5xx: fans saw %d, gateway counted %.0f; want 0", answers.Class(5), gw5xx)
	}
	admMetric, admFound, _ := scrape(s.Admitter+"/metrics", "waitroom_admitted_total", `event="`+saleEvent+`"`)

	// Admitted tickets no fan ever saw admitted: their fans had stopped
	// polling, yet their abandon deadline had not passed when their turn came.
	unclaimed := admittedN - int64(len(waits))

	b.ReportMetric(meanRate, "admitted/s")
	b.ReportMetric(float64(peak), "peak-active")
	b.ReportMetric(rehearsal.Percentile(waits, 95).Seconds(), "wait-p95-s")
	b.ReportMetric(float64(sold), "seats-sold")
	b.ReportMetric(float64(doubles), "double-sales")
	b.ReportMetric(float64(byOutcome[rehearsal.SoldOut]), "admitted-to-nothing")
	b.Logf("fans done after %v (line drained: %v); outcomes %v; notes %v", fansDone.Round(time.Second), drained, byOutcome, notes)

	var md strings.Builder
	fmt.Fprintf(&md, `## Sale: %s fans for %d seats

Measured %s. %s fans arrive at random within %v for one showtime of %d × %d = %d seats;
admission %d/s, at most %d active, access window 3 min, a fan who stops polling is
dropped 15 s after their next poll was due; the payment simulator settles each checkout
after 1 s. Every fan polls as told (pollAfterMs); once admitted it reads the seat map,
holds 1–2 available seats (up to 4 tries when someone was faster), checks out with an
Idempotency-Key and polls the booking until it is confirmed. %.0f%% of fans stop polling
and %.0f%% leave the line (DELETE) within 30 s of joining; once no seat is left, admitted
fans leave. All traffic goes through the gateway on 127.0.0.1; the run took %v.

![Admitted per second, sampled every second (blue), against the configured %d/s (red, dashed); x: seconds since the sale opened](sale.png)

*Admitted per second (blue, from the queue's stats hash in Redis, sampled every second)
against the configured %d/s (red, dashed); x axis: seconds since the sale opened.*

| figure | value |
|---|---:|
| admitted per second while the line was non-empty: mean (p50 of 1-s samples) | **%s** (%s) vs %d configured |
| peak active (ZCOUNT active now +inf, every second) | **%s** (cap %d; %d s at the cap) |
| wait, join → admitted answer: p50 / p95 (%s fans admitted) | %s / **%s** |
| ETA error, actual wait − etaSeconds told at join: p50 / p95 | %s / **%s** |
| seats sold (PostgreSQL: seats BOOKED) | **%d / %d** |
| confirmed bookings (seats in them; seats fans saw confirmed) | %d (%d; %d) |
| double sales (seats in more than one CONFIRMED booking) | **%d** |
| FIFO inversions seen by the fans (fans checked; package rehearsal's definition) | **%d** (%s) |
| gateway 5xx: seen by fans / the gateway's own counter | **%s** / %s |
| conservation: joined = admitted + waiting + left + abandoned | %s = %s + %s + %s + %s: **%s** |
| joins answered 201 to fans | %s |
| requests sent by fans (transport errors) | %s in %v, %s/s (%d) |
| admitted but never claimed (the fan had stopped polling) | %s |
| fans admitted who found no seat left | **%s** |
| fans still waiting when the last seat was sold (%v after opening) | %s |
| … how long after it their wait ended (told sold out, or admitted to nothing): p50 / p99 | %s / **%s** |
| fans who joined after the last seat was sold: refused at join / waited for nothing | %s / %s |
| … their wait: p50 / p99 | %s / %s |
| waiting for nothing after the last seat was sold, all fans together | **%s fan-minutes** |
| fans' requests per second: the 30 s before the last seat was sold / 10–40 s after | %s / **%s** |
`,
		thousands(int64(nFans)), saleRows*saleSeatsRow,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), thousands(int64(nFans)), arrivalWindow, saleRows, saleSeatsRow, saleRows*saleSeatsRow,
		saleRate, saleCap, 100*abandonRate, 100*leaveRate, elapsed.Round(time.Second),
		saleRate, saleRate,
		trimFloat(meanRate, 1), trimFloat(rehearsal.Percentile(perSec, 50), 0), saleRate,
		thousands(peak), saleCap, atCap,
		thousands(int64(len(waits))), secs(rehearsal.Percentile(waits, 50).Seconds()), secs(rehearsal.Percentile(waits, 95).Seconds()),
		secs(rehearsal.Percentile(etaErrs, 50)), secs(rehearsal.Percentile(etaErrs, 95)),
		sold, saleRows*saleSeatsRow,
		confirmed, confirmedSeats, seatsBought,
		doubles,
		seen.FIFO.Inversions, thousands(int64(seen.FIFO.Compared)),
		thousands(answers.Class(5)), gw5xxText,
		thousands(joinedN), thousands(admittedN), thousands(waitingN), thousands(leftN), thousands(abandonedN), holds(conserved),
		thousands(joinedByFans),
		thousands(answers.Requests), fansDone.Round(time.Second), thousands(int64(float64(answers.Requests)/fansDone.Seconds())), answers.TransportErrors,
		thousands(unclaimed),
		thousands(int64(byOutcome[rehearsal.SoldOut])),
		lastSold.Round(time.Second), thousands(int64(len(toldAfter))),
		secs(rehearsal.Percentile(toldAfter, 50).Seconds()), secs(rehearsal.Percentile(toldAfter, 99).Seconds()),
		thousands(int64(lateAtJoin)), thousands(int64(len(lateWaits)-lateAtJoin)),
		secs(rehearsal.Percentile(lateWaits, 50).Seconds()), secs(rehearsal.Percentile(lateWaits, 99).Seconds()),
		thousands(int64(wasted.Minutes())),
		thousands(int64(loadBefore)), thousands(int64(loadAfter)),
	)
	if admFound {
		fmt.Fprintf(&md, "| admitted, by the admitter's waitroom_admitted_total | %s |\n", thousands(int64(admMetric)))
	}
	fmt.Fprintf(&md, "\nLoad average (1 min) at the end: %s.\n", loadAverage())
	md.WriteString("\n| how the fans' visits ended | fans |\n|---|---:|\n")
	for o := range rehearsal.Outcomes {
		if byOutcome[o] > 0 || o <= rehearsal.Abandoned {
			fmt.Fprintf(&md, "| %s | %s |\n", o, thousands(int64(byOutcome[o])))
		}
	}
	if len(notes) > 0 {
		md.WriteString("\nWhy fans failed (first kinds):\n\n")
		keys := make([]string, 0, len(notes))
		for n := range notes {
			keys = append(keys, n)
		}
		slices.Sort(keys)
		for _, n := range keys[:min(len(keys), 8)] {
			fmt.Fprintf(&md, "- %d × `%s`\n", notes[n], strings.TrimSpace(n))
		}
	}
	if atCap > 0 {
		fmt.Fprintf(&md, `
Where the measured line dips well below the configured rate, active had reached the
cap. A place is held by a fan choosing seats, holding and paying, by a fan who was
admitted but has not polled since, and by a fan who stopped polling but was admitted
before their abandon deadline passed (%s here): nobody comes for those, and each keeps
its place until its 3-minute access window ends. Admission then waits for places to be
freed (a confirmed booking, a fan who leaves, an access window that ends) instead of
overloading the booking core; when they free up, the token bucket, which saves up to
one second of admissions (plus one fan), lets that second in at once: the spike that
follows a dip.
`, thousands(unclaimed))
	}
	fmt.Fprintf(&md, `
The line drained %v after the sale opened; from then on nothing is admitted, which is
where the measured line drops to zero. The ETA is computed from the admitter's measured
rate at join; a positive error means the fan waited longer than told. The wait is
measured by the fan, so it includes the time until its next poll after admission.
`, lastLine.Round(time.Second))
	writeReport(b, "sale", md.String())
}

// The seat checks, on the booking core's tables (internal/booking/postgres/
// migrations). A double sale is one seat in two CONFIRMED bookings: the
// seats table could not show it (one row per seat), the holds behind the
// bookings can.
const (
	soldSeatsSQL      = `SELECT count(*) FROM seats WHERE showtime_id = $1 AND status = 'BOOKED'`
	lastSoldSQL       = `SELECT max(updated_at) FROM bookings WHERE showtime_id = $1 AND status = 'CONFIRMED'`
	confirmedSQL      = `SELECT count(*) FROM bookings WHERE showtime_id = $1 AND status = 'CONFIRMED'`
	confirmedSeatsSQL = `
SELECT coalesce(sum(cardinality(h.seats)), 0)
FROM bookings b JOIN holds h ON h.id = b.hold_id
WHERE b.showtime_id = $1 AND b.status = 'CONFIRMED'`
	doubleSalesSQL = `
SELECT count(*) FROM (
  SELECT seat FROM bookings b JOIN holds h ON h.id = b.hold_id, unnest(h.seats) AS seat
  WHERE b.showtime_id = $1 AND b.status = 'CONFIRMED'
  GROUP BY seat HAVING count(*) > 1
) d`
)

// secs formats seconds with a sign when negative.
func secs(v float64) string { return trimFloat(v, 1) + " s" }

func holds(ok bool) string {
	if ok {
		return "holds"
	}
	return "BROKEN"
}
