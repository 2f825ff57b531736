package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/queue"
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

// outcome is how a fan's visit ended.
type outcome int

const (
	bought      outcome = iota // booking CONFIRMED
	soldOut                    // admitted, found no seat left, left
	gaveUp                     // admitted, lost every hold race, left
	leftLine                   // chose to leave (DELETE)
	abandoned                  // chose to stop polling
	expired                    // told 410, or the pass stopped working
	failed                     // an answer the fan could not use
	unfinished                 // still going when the run's time ran out
	toldSoldOut                // told sold out while waiting (or at join)
	outcomes
)

var outcomeNames = [outcomes]string{"bought", "admitted, found no seat left", "lost every hold race, left", "left the line", "stopped polling", "expired", "failed", "unfinished", "told sold out while waiting"}

// fan is what one fan saw.
type fan struct {
	outcome  outcome
	joined   bool // got its 201
	admitted bool
	wait     time.Duration  // join answer → first admitted answer
	eta      *time.Duration // etaSeconds told at join
	seats    int
	note     string    // why a fan failed
	joinedAt time.Time // its 201
	doneAt   time.Time // the end of its wait: admitted, or told sold out
}

// saleClient is the fans' HTTP client: one fasthttp pool to the gateway,
// counting what the gateway answered.
type saleClient struct {
	c        *fasthttp.HostClient
	base     string
	requests atomic.Int64
	fiveXX   atomic.Int64
	netErrs  atomic.Int64
	start    time.Time
	perSec   []atomic.Int64 // requests sent in each second since start
}

// loadBetween is the fans' mean requests per second in [from, to) (seconds
// since start).
func (sc *saleClient) loadBetween(from, to time.Duration) float64 {
	a, b := max(0, int(from/time.Second)), min(len(sc.perSec), int(to/time.Second))
	if b <= a {
		return 0
	}
	var n int64
	for i := a; i < b; i++ {
		n += sc.perSec[i].Load()
	}
	return float64(n) / float64(b-a)
}

type answer struct {
	status     int
	body       []byte
	retryAfter time.Duration
}

func (sc *saleClient) do(ctx context.Context, method, path, token, idem string, body any) (answer, error) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.Header.SetMethod(method)
	req.SetRequestURI(sc.base + path)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{}, err
		}
		req.Header.SetContentType("application/json")
		req.SetBody(b)
	}
	sc.requests.Add(1)
	if i := int(time.Since(sc.start) / time.Second); i >= 0 && i < len(sc.perSec) {
		sc.perSec[i].Add(1)
	}
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := sc.c.DoDeadline(req, res, deadline); err != nil {
		sc.netErrs.Add(1)
		return answer{}, err
	}
	a := answer{status: res.StatusCode(), body: append([]byte(nil), res.Body()...)}
	if a.status >= 500 {
		sc.fiveXX.Add(1)
	}
	if s, err := strconv.Atoi(string(res.Header.Peek("Retry-After"))); err == nil {
		a.retryAfter = time.Duration(s) * time.Second
	}
	return a, nil
}

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

type ticketAnswer struct {
	Ticket      string `json:"ticket"`
	Status      string `json:"status"`
	ETASeconds  *int64 `json:"etaSeconds"`
	PollAfterMs int64  `json:"pollAfterMs"`
	AccessToken string `json:"accessToken"`
}

// visit is one fan's whole visit: join, wait as told, then book.
func (sc *saleClient) visit(ctx context.Context, rng *mrand.Rand, arrive time.Time) fan {
	if !sleepUntil(ctx, arrive) {
		return fan{outcome: unfinished}
	}
	const tickets = "/api/v1/events/" + saleEvent + "/tickets"
	var join ticketAnswer
	for {
		a, err := sc.do(ctx, http.MethodPost, tickets, "", "", nil)
		if ctx.Err() != nil {
			return fan{outcome: unfinished}
		}
		if err == nil && a.status == http.StatusCreated {
			if err := json.Unmarshal(a.body, &join); err != nil || join.Ticket == "" {
				return fan{outcome: failed, note: "join answer: " + string(a.body)}
			}
			break
		}
		if err == nil && a.status == http.StatusConflict && bytes.Contains(a.body, []byte(`"sold_out"`)) {
			now := time.Now()
			return fan{outcome: toldSoldOut, joinedAt: now, doneAt: now}
		}
		if err == nil && a.status < 500 && a.status != http.StatusTooManyRequests {
			return fan{outcome: failed, note: fmt.Sprintf("join: %d %s", a.status, a.body)}
		}
		sleepUntil(ctx, time.Now().Add(max(time.Second, a.retryAfter)))
	}
	joined := time.Now()
	f := fan{joined: true, joinedAt: joined}
	if join.ETASeconds != nil {
		eta := time.Duration(*join.ETASeconds) * time.Second
		f.eta = &eta
	}
	// The fan's fate: a few stop polling or leave within 30 s of joining.
	var abandonAt, leaveAt time.Time
	switch x := rng.Float64(); {
	case x < abandonRate:
		abandonAt = joined.Add(time.Duration(2+rng.IntN(28)) * time.Second)
	case x < abandonRate+leaveRate:
		leaveAt = joined.Add(time.Duration(2+rng.IntN(28)) * time.Second)
	}
	me := tickets + "/" + join.Ticket
	leave := func() { _, _ = sc.do(ctx, http.MethodDelete, me, "", "", nil) }

	poll := time.Duration(join.PollAfterMs) * time.Millisecond
	token := join.AccessToken // set in passthrough mode only
	for token == "" {
		next := time.Now().Add(poll)
		switch {
		case !abandonAt.IsZero() && next.After(abandonAt):
			sleepUntil(ctx, abandonAt)
			f.outcome = abandoned
			return f
		case !leaveAt.IsZero() && next.After(leaveAt):
			if sleepUntil(ctx, leaveAt) {
				leave()
			}
			f.outcome = leftLine
			return f
		}
		if !sleepUntil(ctx, next) {
			f.outcome = unfinished
			return f
		}
		a, err := sc.do(ctx, http.MethodGet, me, "", "", nil)
		switch {
		case ctx.Err() != nil:
			f.outcome = unfinished
			return f
		case err != nil || a.status >= 500:
			poll = time.Second
		case a.status == http.StatusGone:
			f.outcome = expired
			return f
		case a.status == http.StatusOK:
			var st ticketAnswer
			if err := json.Unmarshal(a.body, &st); err != nil {
				f.outcome, f.note = failed, "status answer: "+string(a.body)
				return f
			}
			switch st.Status {
			case "admitted":
				token = st.AccessToken
			case "soldout":
				// The wait is over: nothing is left to wait for.
				f.outcome, f.doneAt = toldSoldOut, time.Now()
				return f
			default:
				poll = time.Duration(st.PollAfterMs) * time.Millisecond
			}
		default:
			f.outcome, f.note = failed, fmt.Sprintf("status: %d %s", a.status, a.body)
			return f
		}
	}
	f.admitted, f.wait, f.doneAt = true, time.Since(joined), time.Now()
	switch {
	case !abandonAt.IsZero(): // admitted before they gave up: gone all the same
		f.outcome = abandoned
		return f
	case !leaveAt.IsZero():
		leave()
		f.outcome = leftLine
		return f
	}
	f.outcome, f.seats, f.note = sc.book(ctx, rng, token)
	if f.outcome == soldOut || f.outcome == gaveUp {
		leave()
	}
	return f
}

// book is an admitted fan's part: read the seat map, hold 1–2 available
// seats (a few tries when someone was faster), check out, and poll the
// booking until the payment simulator settled it.
func (sc *saleClient) book(ctx context.Context, rng *mrand.Rand, token string) (outcome, int, string) {
	show := fmt.Sprintf("/api/v1/booking/showtimes/%d", saleShowtime)
	var hold struct {
		HoldID string   `json:"holdId"`
		Seats  []string `json:"seats"`
	}
	for attempt := 0; attempt < 4 && hold.HoldID == ""; attempt++ {
		a, err := sc.do(ctx, http.MethodGet, show+"/seats", token, "", nil)
		switch {
		case ctx.Err() != nil:
			return unfinished, 0, ""
		case err != nil || a.status >= 500:
			sleepUntil(ctx, time.Now().Add(500*time.Millisecond))
			continue
		case a.status == http.StatusUnauthorized:
			return expired, 0, "seat map: 401"
		case a.status != http.StatusOK:
			return failed, 0, fmt.Sprintf("seat map: %d %s", a.status, a.body)
		}
		var seatMap struct {
			Seats []struct {
				Code   string `json:"code"`
				Row    string `json:"row"`
				Number int    `json:"number"`
				Status string `json:"status"`
			} `json:"seats"`
		}
		if err := json.Unmarshal(a.body, &seatMap); err != nil {
			return failed, 0, "seat map: " + err.Error()
		}
		free := map[string]bool{}
		var codes []string
		for _, s := range seatMap.Seats {
			if s.Status == "AVAILABLE" {
				free[s.Code] = true
				codes = append(codes, s.Code)
			}
		}
		if len(codes) == 0 {
			return soldOut, 0, ""
		}
		// One seat, or two side by side when the neighbour is free.
		first := codes[rng.IntN(len(codes))]
		want := []string{first}
		if rng.IntN(2) == 1 {
			row, num := first[:1], first[1:]
			n, _ := strconv.Atoi(num)
			if next := row + strconv.Itoa(n+1); free[next] {
				want = append(want, next)
			}
		}
		a, err = sc.do(ctx, http.MethodPost, show+"/holds", token, "", map[string]any{"seats": want})
		switch {
		case ctx.Err() != nil:
			return unfinished, 0, ""
		case err != nil || a.status >= 500:
			continue
		case a.status == http.StatusCreated:
			if err := json.Unmarshal(a.body, &hold); err != nil || hold.HoldID == "" {
				return failed, 0, "hold answer: " + string(a.body)
			}
		case a.status == http.StatusConflict:
			// someone was faster: read the map again
		case a.status == http.StatusTooManyRequests:
			sleepUntil(ctx, time.Now().Add(max(time.Second, a.retryAfter)))
		case a.status == http.StatusUnauthorized:
			return expired, 0, "hold: 401"
		default:
			return failed, 0, fmt.Sprintf("hold: %d %s", a.status, a.body)
		}
	}
	if hold.HoldID == "" {
		return gaveUp, 0, ""
	}

	idem := randomKey()
	var co struct {
		BookingID string `json:"bookingId"`
	}
	for attempt := 0; attempt < 3 && co.BookingID == ""; attempt++ {
		a, err := sc.do(ctx, http.MethodPost, "/api/v1/booking/holds/"+hold.HoldID+"/checkout", token, idem, nil)
		switch {
		case ctx.Err() != nil:
			return unfinished, 0, ""
		case err != nil || a.status >= 500:
			sleepUntil(ctx, time.Now().Add(500*time.Millisecond))
		case a.status == http.StatusCreated:
			if err := json.Unmarshal(a.body, &co); err != nil || co.BookingID == "" {
				return failed, 0, "checkout answer: " + string(a.body)
			}
		default:
			return failed, 0, fmt.Sprintf("checkout: %d %s", a.status, a.body)
		}
	}
	if co.BookingID == "" {
		return failed, 0, "checkout: no answer"
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		if !sleepUntil(ctx, time.Now().Add(500*time.Millisecond)) {
			return unfinished, 0, ""
		}
		a, err := sc.do(ctx, http.MethodGet, "/api/v1/booking/bookings/"+co.BookingID, token, "", nil)
		if err != nil || a.status >= 500 {
			continue
		}
		if a.status != http.StatusOK {
			return failed, 0, fmt.Sprintf("booking: %d %s", a.status, a.body)
		}
		var bk struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(a.body, &bk); err != nil {
			return failed, 0, "booking answer: " + string(a.body)
		}
		switch bk.Status {
		case "CONFIRMED":
			return bought, len(hold.Seats), ""
		case "FAILED", "REFUNDED":
			return failed, 0, "booking " + bk.Status
		}
	}
	return failed, 0, "booking never settled"
}

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// saleSample is the line's state at one instant of the run.
type saleSample struct {
	at       time.Duration // since the sale started
	admitted int64         // the stats hash's lifetime count
	waiting  int64
	active   int64 // ZCOUNT active (now +inf
}

// sampleLine reads the line once a second until ctx ends. The admitted
// count is read in one MULTI with Redis TIME, so each sample carries the
// instant it was really read: on a crowded machine the sampler itself can
// be late, and a late timestamp would turn into a false spike of the rate.
func sampleLine(ctx context.Context, rdb *redis.Client, st *queue.Store, start time.Time) []saleSample {
	var out []saleSample
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	bg := context.Background()
	for {
		var now *redis.TimeCmd
		var adm *redis.SliceCmd
		_, err1 := rdb.TxPipelined(bg, func(p redis.Pipeliner) error {
			now = p.Time(bg)
			adm = p.HMGet(bg, "wr:{"+saleEvent+"}:stats", "admitted")
			return nil
		})
		counts, err2 := st.Counts(bg, saleEvent)
		if err1 == nil && err2 == nil {
			str, _ := adm.Val()[0].(string)
			n, _ := strconv.ParseInt(str, 10, 64)
			out = append(out, saleSample{now.Val().Sub(start), n, counts.Waiting, counts.Active})
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
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
	sc := &saleClient{
		base: s.Gateway,
		c: &fasthttp.HostClient{
			Addr: strings.TrimPrefix(s.Gateway, "http://"), MaxConns: 1024,
			MaxConnWaitTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		},
	}
	defer sc.c.CloseIdleConnections()

	start := time.Now()
	sc.start, sc.perSec = start, make([]atomic.Int64, int((saleTimeout+3*time.Minute)/time.Second))
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	samplesCh := make(chan []saleSample, 1)
	go func() { samplesCh <- sampleLine(sampleCtx, rdb, st, start) }()

	ctx, cancel := context.WithTimeout(context.Background(), saleTimeout)
	defer cancel()
	fans := make([]fan, nFans)
	var wg sync.WaitGroup
	seed := uint64(time.Now().UnixNano())
	for i := range nFans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(seed, uint64(i)))
			arrive := start.Add(time.Duration(rng.Int64N(int64(arrivalWindow))))
			fans[i] = sc.visit(ctx, rng, arrive)
		}()
	}
	wg.Wait()
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

	// Conservation, read in one MULTI so that no tick falls in between. The
	// stats hash is the queue's (internal/queue keys.go).
	k := "wr:{" + saleEvent + "}:"
	var h *redis.SliceCmd
	var w *redis.IntCmd
	if _, err := rdb.TxPipelined(bg, func(p redis.Pipeliner) error {
		h = p.HMGet(bg, k+"stats", "joined", "admitted", "left", "abandoned")
		w = p.ZCard(bg, k+"wait")
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	var line [4]int64 // joined, admitted, left, abandoned
	for i, v := range h.Val() {
		str, _ := v.(string)
		line[i], _ = strconv.ParseInt(str, 10, 64)
	}
	joinedN, admittedN, leftN, abandonedN, waitingN := line[0], line[1], line[2], line[3], w.Val()
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
	var (
		byOutcome    [outcomes]int
		waits        []time.Duration
		etaErrs      []float64
		joinedByFans int64
		seatsBought  int64
		notes        = map[string]int{}
	)
	for _, f := range fans {
		byOutcome[f.outcome]++
		if f.joined {
			joinedByFans++
		}
		if f.admitted {
			waits = append(waits, f.wait)
			if f.eta != nil {
				etaErrs = append(etaErrs, (f.wait - *f.eta).Seconds())
			}
		}
		seatsBought += int64(f.seats)
		if f.note != "" {
			notes[f.note]++
		}
	}
	if joinedByFans != joinedN {
		b.Errorf("fans got %d tickets, the stats hash counts %d joined; want equal", joinedByFans, joinedN)
	}
	if seatsBought != sold {
		b.Errorf("fans saw %d seats confirmed, PostgreSQL has %d BOOKED; want equal", seatsBought, sold)
	}
	slices.Sort(waits)
	slices.Sort(etaErrs)

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
			nothing := f.outcome == toldSoldOut || f.outcome == soldOut || f.outcome == gaveUp
			if !nothing || f.doneAt.IsZero() || !f.doneAt.After(*lastSoldAbs) {
				continue
			}
			if f.joinedAt.Before(*lastSoldAbs) {
				toldAfter = append(toldAfter, f.doneAt.Sub(*lastSoldAbs))
				wasted += f.doneAt.Sub(*lastSoldAbs)
				continue
			}
			lateWaits = append(lateWaits, f.doneAt.Sub(f.joinedAt))
			wasted += f.doneAt.Sub(f.joinedAt)
			if f.doneAt.Equal(f.joinedAt) {
				lateAtJoin++
			}
		}
	}
	slices.Sort(toldAfter)
	slices.Sort(lateWaits)
	loadBefore := sc.loadBetween(lastSold-30*time.Second, lastSold)
	loadAfter := sc.loadBetween(lastSold+10*time.Second, lastSold+40*time.Second)
	if byOutcome[unfinished] > 0 {
		b.Errorf("%d fans were still going after %v", byOutcome[unfinished], saleTimeout)
	}

	// Admission as it happened, one sample a second.
	var (
		rates    []point
		perSec   []float64
		sumAdm   int64
		sumDT    time.Duration
		peak     int64
		atCap    int
		lastLine time.Duration
	)
	for i, smp := range samples {
		peak = max(peak, smp.active)
		if smp.active >= saleCap {
			atCap++
		}
		if i == 0 {
			continue
		}
		prev := samples[i-1]
		dt := smp.at - prev.at
		r := float64(smp.admitted-prev.admitted) / dt.Seconds()
		rates = append(rates, point{X: smp.at.Seconds(), Y: r})
		if prev.waiting > 0 && smp.waiting > 0 {
			perSec = append(perSec, r)
			sumAdm += smp.admitted - prev.admitted
			sumDT += dt
			lastLine = smp.at
		}
	}
	if peak > saleCap {
		b.Errorf("peak active %d; want ≤ cap %d", peak, saleCap)
	}
	slices.Sort(perSec)
	var meanRate float64
	if sumDT > 0 {
		meanRate = float64(sumAdm) / sumDT.Seconds()
	}

	xEnd := 0.0
	if len(rates) > 0 {
		xEnd = rates[len(rates)-1].X
	}
	var png bytes.Buffer
	if err := plotPNG(&png, 800, 360,
		series{Points: []point{{X: 0, Y: saleRate}, {X: xEnd, Y: saleRate}}, Color: plotRed, Dashed: true},
		series{Points: rates, Color: plotBlue},
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
	if sc.fiveXX.Load() > 0 || gw5xx > 0 {
		b.Errorf("gateway answered 5xx: fans saw %d, gateway counted %.0f; want 0", sc.fiveXX.Load(), gw5xx)
	}
	admMetric, admFound, _ := scrape(s.Admitter+"/metrics", "waitroom_admitted_total", `event="`+saleEvent+`"`)

	// Admitted tickets no fan ever saw admitted: their fans had stopped
	// polling, yet their abandon deadline had not passed when their turn came.
	unclaimed := admittedN - int64(len(waits))

	b.ReportMetric(meanRate, "admitted/s")
	b.ReportMetric(float64(peak), "peak-active")
	b.ReportMetric(percentile(waits, 95).Seconds(), "wait-p95-s")
	b.ReportMetric(float64(sold), "seats-sold")
	b.ReportMetric(float64(doubles), "double-sales")
	b.ReportMetric(float64(byOutcome[soldOut]), "admitted-to-nothing")
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
		trimFloat(meanRate, 1), trimFloat(percentile(perSec, 50), 0), saleRate,
		thousands(peak), saleCap, atCap,
		thousands(int64(len(waits))), secs(percentile(waits, 50).Seconds()), secs(percentile(waits, 95).Seconds()),
		secs(percentile(etaErrs, 50)), secs(percentile(etaErrs, 95)),
		sold, saleRows*saleSeatsRow,
		confirmed, confirmedSeats, seatsBought,
		doubles,
		thousands(sc.fiveXX.Load()), gw5xxText,
		thousands(joinedN), thousands(admittedN), thousands(waitingN), thousands(leftN), thousands(abandonedN), holds(conserved),
		thousands(joinedByFans),
		thousands(sc.requests.Load()), fansDone.Round(time.Second), thousands(int64(float64(sc.requests.Load())/fansDone.Seconds())), sc.netErrs.Load(),
		thousands(unclaimed),
		thousands(int64(byOutcome[soldOut])),
		lastSold.Round(time.Second), thousands(int64(len(toldAfter))),
		secs(percentile(toldAfter, 50).Seconds()), secs(percentile(toldAfter, 99).Seconds()),
		thousands(int64(lateAtJoin)), thousands(int64(len(lateWaits)-lateAtJoin)),
		secs(percentile(lateWaits, 50).Seconds()), secs(percentile(lateWaits, 99).Seconds()),
		thousands(int64(wasted.Minutes())),
		thousands(int64(loadBefore)), thousands(int64(loadAfter)),
	)
	if admFound {
		fmt.Fprintf(&md, "| admitted, by the admitter's waitroom_admitted_total | %s |\n", thousands(int64(admMetric)))
	}
	fmt.Fprintf(&md, "\nLoad average (1 min) at the end: %s.\n", loadAverage())
	md.WriteString("\n| how the fans' visits ended | fans |\n|---|---:|\n")
	for o := range outcomes {
		if byOutcome[o] > 0 || o <= abandoned {
			fmt.Fprintf(&md, "| %s | %s |\n", outcomeNames[o], thousands(int64(byOutcome[o])))
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
	if err := writeSection(filepath.Join(dir, "PERFORMANCE.md"), "sale", md.String()); err != nil {
		b.Fatal(err)
	}
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
