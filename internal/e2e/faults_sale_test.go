package e2e_test

// The fault drill's moving parts: simulated fans that go through the gateway
// as a browser would (join, poll as told, hold, checkout with an
// Idempotency-Key, poll the booking), a tally of every answer they got, a
// sampler of the active set, and the invariants every fault ends with.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
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

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

const (
	drillEvent    = "drill"
	drillShowtime = 7
	drillRows     = 20 // A..T
	drillPerRow   = 25
)

// drillEvents is the events list of a drill: one event, one showtime of 500
// seats, the given admission rate and cap.
func drillEvents(rate, maxActive int) string {
	return drillEventsOf(rate, maxActive, drillRows, drillPerRow)
}

// drillEventsOf is drillEvents with a showtime of rows × perRow seats.
func drillEventsOf(rate, maxActive, rows, perRow int) string {
	return fmt.Sprintf(`  - id: %q
    name: "Fault drill"
    admission: {admit_per_second: %d, max_active: %d, access_ttl: "3m", abandon_after: "60s"}
    showtimes:
      - {id: %d, title: "Drill 19:00", starts_at: "2026-12-01T19:00:00Z", rows: %d, seats_per_row: %d, price_cents: 1000}
`, drillEvent, rate, maxActive, drillShowtime, rows, perRow)
}

// allowed is the set of statuses the contract lets each step answer while a
// fault is on. 503 and 429 must carry Retry-After; 500 is never allowed.
var allowed = map[string][]int{
	"join":     {200, 201, 429, 503},
	"status":   {200, 410, 503},
	"seats":    {200, 401, 503, 504},
	"hold":     {201, 401, 409, 429, 503, 504},
	"checkout": {201, 401, 409, 503, 504},
	"booking":  {200, 401, 503, 504},
	"leave":    {204, 503},
	"release":  {204, 401, 503, 504},
}

// tally counts every answer fans got, by step and status, and keeps the
// answers the contract does not allow.
type tally struct {
	mu     sync.Mutex
	counts map[string]int
	bad    []string
	nbad   int
	// okAfter: the first 2xx seen after mark (for recovery times).
	mark    time.Time
	okAfter map[string]time.Time
	// lastOK: the last 2xx of each step.
	lastOK map[string]time.Time
	// slowest is the longest a drill's request waited for its answer (or
	// its error), and which step it was.
	slowest     time.Duration
	slowestStep string
}

func newTally() *tally {
	return &tally{counts: map[string]int{}, okAfter: map[string]time.Time{}, lastOK: map[string]time.Time{}}
}

func (t *tally) add(step string, code int, hdr http.Header, body []byte, err error) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	key := step + " " + strconv.Itoa(code)
	if err != nil {
		key = step + " transport-error"
	}
	t.counts[key]++
	problem := ""
	switch {
	case err != nil:
		problem = err.Error()
	case !slices.Contains(allowed[step], code):
		problem = "status not in the contract for this step"
	case (code == 503 || code == 429) && hdr.Get("Retry-After") == "":
		problem = "no Retry-After"
	}
	if problem != "" {
		t.nbad++
		if len(t.bad) < 20 {
			b := string(body)
			if len(b) > 200 {
				b = b[:200]
			}
			t.bad = append(t.bad, fmt.Sprintf("%s → %d: %s %s", step, code, problem, b))
		}
	}
	if err == nil && code < 300 {
		t.lastOK[step] = now
	}
	if err == nil && code < 300 && !t.mark.IsZero() && now.After(t.mark) {
		if _, ok := t.okAfter[step]; !ok {
			t.okAfter[step] = now
		}
	}
}

// took notes how long a request of step waited for its answer.
func (t *tally) took(step string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d > t.slowest {
		t.slowest, t.slowestStep = d, step
	}
}

// markNow starts a recovery clock: okAfter then holds, per step, the first
// good answer after this instant.
func (t *tally) markNow() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mark, t.okAfter = time.Now(), map[string]time.Time{}
	return t.mark
}

func (t *tally) firstOK(step string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.okAfter[step]
	return at, ok
}

func (t *tally) count(keys ...string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, k := range keys {
		n += t.counts[k]
	}
	return n
}

// status5xx counts the answers that were 500 (or any 5xx but 503/504).
func (t *tally) status5xx() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, v := range t.counts {
		if i := strings.LastIndexByte(k, ' '); i > 0 {
			if c, err := strconv.Atoi(k[i+1:]); err == nil && c >= 500 && c != 503 && c != 504 {
				n += v
			}
		}
	}
	return n
}

// summary is "step code×n, …" sorted, for the logs.
func (t *tally) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(t.counts)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, t.counts[k]))
	}
	return strings.Join(parts, ", ")
}

// checkClean fails the test for every answer outside the contract.
func (t *tally) checkClean(tb testing.TB) {
	tb.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.nbad > 0 {
		tb.Errorf("%d answers outside the contract (first %d):\n  %s", t.nbad, len(t.bad), strings.Join(t.bad, "\n  "))
	}
}

// drill is one running stack with its fans' tally and the active sampler.
type drill struct {
	t    *testing.T
	s    *stack.Stack
	cap  int
	rate int
	hc   *http.Client
	// provider is the fans' client of the provider's page: it shows the
	// redirect back to the gateway rather than following it.
	provider *http.Client
	tally    *tally
	active   *sampler
	line     *queue.Store
	// hist, when set, records every hold, release, checkout and
	// confirmation of the fans (linearize_test.go).
	hist *history
	// churn: a quarter of the fans release their first hold and take
	// other seats (so that releases are in the history too).
	churn bool
	// anySeat is the share of the picks that take any seat of the
	// showtime, not only those the seat map shows free (a fan a moment
	// late, or a bot: only the hold's WHERE keeps two fans apart then).
	anySeat float64
}

func startDrill(t *testing.T, o stack.Options, rate, maxActive int) *drill {
	t.Helper()
	if o.Events == "" {
		o.Events = drillEvents(rate, maxActive)
	}
	began := time.Now()
	s := stack.Start(t, o)
	t.Logf("stack up in %s", time.Since(began).Round(time.Millisecond))
	d := &drill{
		t: t, s: s, cap: maxActive, rate: rate, tally: newTally(),
		hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second,
		}},
		provider: &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		line: queue.NewStore(s.RDB, nil),
	}
	d.active = startSampler(100*time.Millisecond, liveActive(s.RDB, drillEvent, 300*time.Millisecond), nil)
	t.Cleanup(d.active.close)
	t.Cleanup(func() {
		// On failure, what the services logged as errors (before the stack's
		// folder and logs are removed).
		if !t.Failed() {
			return
		}
		for _, n := range []string{"gateway", "booking", "admitter"} {
			var errs []string
			b, _ := os.ReadFile(filepath.Join(s.Dir, n+".log"))
			for _, line := range strings.Split(string(b), "\n") {
				// The failed requests (answered 500) first: background jobs
				// log every failed pass during an outage, which is expected.
				if strings.Contains(line, `"level":"ERROR"`) && strings.Contains(line, "request failed") && len(errs) < 5 {
					errs = append(errs, line)
				}
			}
			if len(errs) > 0 {
				t.Logf("%s errors:\n%s", n, strings.Join(errs, "\n"))
			}
		}
	})
	t.Cleanup(d.hc.CloseIdleConnections)
	return d
}

// call makes one request to the gateway and records its answer under step.
func (d *drill) call(ctx context.Context, step, method, path, token string, hdr map[string]string, body any) (int, http.Header, []byte) {
	began := time.Now()
	code, rh, b, err := sendJSON(ctx, d.hc, d.s.Gateway, method, path, token, hdr, body)
	d.tally.took(step, time.Since(began))
	if err != nil {
		if ctx.Err() == nil {
			d.tally.add(step, 0, nil, nil, err)
		}
		return 0, nil, nil
	}
	d.tally.add(step, code, rh, b, nil)
	return code, rh, b
}

// pause sleeps for the answer's Retry-After (or def), or until ctx ends.
func pause(ctx context.Context, hdr http.Header, def time.Duration) bool {
	wait := def
	if hdr != nil {
		if s, err := strconv.Atoi(hdr.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(wait):
		return true
	}
}

// Outcomes of one fan.
const (
	outConfirmed = "confirmed"
	outFailed    = "failed"    // booking FAILED or REFUNDED
	outGaveUp    = "gave-up"   // no seats after a few tries
	outPending   = "pending"   // booking still PENDING when the sale ended
	outTimedOut  = "timed-out" // never got through before the sale ended
)

// saleRun is a sale in progress.
type saleRun struct {
	d         *drill
	wg        sync.WaitGroup
	mu        sync.Mutex
	outcomes  map[string]int
	bookings  map[string]string  // booking id → last status seen
	lostJoins []time.Time        // acks of joins whose ticket later vanished unadmitted
	lostPlace int                // admitted fans refused admission later (place lost)
	paying    map[string]payment // booking id → its payment, while the fan follows it
	admitted  int
	cancel    context.CancelFunc
	began     time.Time
	// payRetries counts presses of Pay on a provider page that did not
	// answer (the booking core down, or its database): pressed again.
	payRetries atomic.Int64
}

// sale starts n fans arriving evenly over spread; each does the whole
// journey, giving up when the sale's deadline passes.
func (d *drill) sale(n int, spread, deadline time.Duration) *saleRun {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	r := &saleRun{d: d, outcomes: map[string]int{}, bookings: map[string]string{}, paying: map[string]payment{}, cancel: cancel, began: time.Now()}
	for i := range n {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if spread > 0 {
				select {
				case <-ctx.Done():
					r.out(outTimedOut)
					return
				case <-time.After(spread * time.Duration(i) / time.Duration(n)):
				}
			}
			r.out(r.fan(ctx, i))
		}()
	}
	return r
}

// wait waits for every fan and returns the outcomes.
func (r *saleRun) wait() map[string]int {
	r.wg.Wait()
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes
}

func (r *saleRun) out(o string) {
	r.mu.Lock()
	r.outcomes[o]++
	r.mu.Unlock()
}

func (r *saleRun) confirmedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, st := range r.bookings {
		if st == "CONFIRMED" {
			ids = append(ids, id)
		}
	}
	return ids
}

// payment is a checkout whose payment a fan made (for the history).
type payment struct {
	client int
	hold   string
	seats  []string
	at     time.Time // Pay pressed
}

type ticketAnswer struct {
	Ticket      string `json:"ticket"`
	Status      string `json:"status"`
	PollAfterMs int64  `json:"pollAfterMs"`
	AccessToken string `json:"accessToken"`
}

// fan is one fan's journey; a fan whose place vanishes (Redis lost it, or
// the access window closed) joins again, at most twice.
func (r *saleRun) fan(ctx context.Context, id int) string {
	d := r.d
	for rejoin := 0; rejoin < 3; rejoin++ {
		ticket, ackedAt, ok := r.join(ctx)
		if !ok {
			return outTimedOut
		}
		token, st := r.waitAdmitted(ctx, ticket)
		switch st {
		case "expired":
			r.mu.Lock()
			r.lostJoins = append(r.lostJoins, ackedAt)
			r.mu.Unlock()
			continue
		case "ctx":
			return outTimedOut
		}
		r.mu.Lock()
		r.admitted++
		r.mu.Unlock()
		out := r.book(ctx, id, token)
		if out == "readmit" {
			r.mu.Lock()
			r.lostPlace++
			r.mu.Unlock()
			continue
		}
		if out != outConfirmed && ctx.Err() == nil {
			// Give the place back at once, as the page's "leave" does.
			lctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			d.call(lctx, "leave", http.MethodDelete, "/api/v1/events/"+drillEvent+"/tickets/"+ticket, "", nil, nil)
			cancel()
		}
		return out
	}
	return outTimedOut
}

func (r *saleRun) join(ctx context.Context) (string, time.Time, bool) {
	for ctx.Err() == nil {
		code, hdr, body := r.d.call(ctx, "join", http.MethodPost, "/api/v1/events/"+drillEvent+"/tickets", "", nil, nil)
		if code == 201 || code == 200 {
			var a ticketAnswer
			if err := json.Unmarshal(body, &a); err == nil && a.Ticket != "" {
				return a.Ticket, time.Now(), true
			}
		}
		if !pause(ctx, hdr, time.Second) {
			break
		}
	}
	return "", time.Time{}, false
}

// waitAdmitted polls as told until admitted ("admitted" and the pass),
// expired, or the sale ends ("ctx").
func (r *saleRun) waitAdmitted(ctx context.Context, ticket string) (string, string) {
	for ctx.Err() == nil {
		code, hdr, body := r.d.call(ctx, "status", http.MethodGet, "/api/v1/events/"+drillEvent+"/tickets/"+ticket, "", nil, nil)
		var a ticketAnswer
		_ = json.Unmarshal(body, &a)
		switch {
		case code == 200 && a.Status == "admitted" && a.AccessToken != "":
			return a.AccessToken, "admitted"
		case code == 410:
			return "", "expired"
		case code == 200 && a.PollAfterMs > 0:
			if !pause(ctx, nil, time.Duration(a.PollAfterMs)*time.Millisecond) {
				return "", "ctx"
			}
		default:
			if !pause(ctx, hdr, time.Second) {
				return "", "ctx"
			}
		}
	}
	return "", "ctx"
}

type seatMap struct {
	Seats []struct {
		Code   string `json:"code"`
		Row    string `json:"row"`
		Number int    `json:"number"`
		Status string `json:"status"`
	} `json:"seats"`
}

// pickSeats chooses one available seat at random (any seat, for a share
// anySeat of the picks), and its right-hand neighbour too for about half
// the fans (when that one is free as well).
func pickSeats(m seatMap, anySeat float64) []string {
	free := map[string]bool{}
	var codes []string
	blind := mrand.Float64() < anySeat
	for _, s := range m.Seats {
		if s.Status == "AVAILABLE" || blind {
			free[s.Code] = true
			codes = append(codes, s.Code)
		}
	}
	if len(codes) == 0 {
		return nil
	}
	c := codes[mrand.IntN(len(codes))]
	out := []string{c}
	if mrand.IntN(2) == 0 {
		row := strings.TrimRight(c, "0123456789")
		n, _ := strconv.Atoi(strings.TrimPrefix(c, row))
		if next := row + strconv.Itoa(n+1); free[next] {
			out = append(out, next)
		}
	}
	return out
}

// book holds seats (a few tries when someone else was faster), checks out
// with one Idempotency-Key retried as is, and polls the booking to its end.
// "readmit" means the gate no longer admits this fan.
func (r *saleRun) book(ctx context.Context, id int, token string) string {
	d := r.d
	base := "/api/v1/booking"
	churned := !d.churn || mrand.IntN(4) != 0
	for try := 0; try < 4 && ctx.Err() == nil; try++ {
		code, hdr, body := d.call(ctx, "seats", http.MethodGet, fmt.Sprintf("%s/showtimes/%d/seats", base, drillShowtime), token, nil, nil)
		switch code {
		case 200:
		case 401:
			return "readmit"
		default:
			pause(ctx, hdr, time.Second)
			continue
		}
		var m seatMap
		_ = json.Unmarshal(body, &m)
		seats := pickSeats(m, d.anySeat)
		if seats == nil {
			return outGaveUp
		}
		began := time.Now()
		code, hdr, body = d.call(ctx, "hold", http.MethodPost, fmt.Sprintf("%s/showtimes/%d/holds", base, drillShowtime), token, nil, map[string]any{"seats": seats})
		var hold struct {
			HoldID    string    `json:"holdId"`
			Seats     []string  `json:"seats"`
			ExpiresAt time.Time `json:"expiresAt"`
		}
		_ = json.Unmarshal(body, &hold)
		d.hist.record(id, seatOp{Kind: "hold", Seats: seats, Hold: hold.HoldID, Expires: hold.ExpiresAt}, code, began)
		switch code {
		case 201:
		case 401:
			return "readmit"
		case 409:
			continue
		default:
			pause(ctx, hdr, time.Second)
			continue
		}
		if t := hdr.Get("X-Waitroom-Access-Token"); t != "" {
			token = t
		}
		if !churned {
			// This fan changes its mind: gives the seats back, takes others.
			churned = true
			began := time.Now()
			code, _, _ := d.call(ctx, "release", http.MethodDelete, base+"/holds/"+hold.HoldID, token, nil, nil)
			d.hist.record(id, seatOp{Kind: "release", Seats: hold.Seats, Hold: hold.HoldID}, code, began)
			if code == 204 {
				continue
			}
		}
		bookingID, st := r.checkout(ctx, id, token, hold.HoldID, hold.Seats)
		switch st {
		case "again":
			continue
		case "readmit", outTimedOut:
			return st
		}
		return r.follow(ctx, token, bookingID)
	}
	if ctx.Err() != nil {
		return outTimedOut
	}
	return outGaveUp
}

func (r *saleRun) checkout(ctx context.Context, id int, token, holdID string, seats []string) (string, string) {
	key := randomKey()
	for ctx.Err() == nil {
		began := time.Now()
		code, hdr, body := r.d.call(ctx, "checkout", http.MethodPost, "/api/v1/booking/holds/"+holdID+"/checkout", token,
			map[string]string{"Idempotency-Key": key}, nil)
		r.d.hist.record(id, seatOp{Kind: "checkout", Seats: seats, Hold: holdID}, code, began)
		switch code {
		case 201:
			var c struct {
				BookingID  string `json:"bookingId"`
				PaymentURL string `json:"paymentUrl"`
			}
			_ = json.Unmarshal(body, &c)
			paid := time.Now()
			r.pay(ctx, c.PaymentURL)
			r.mu.Lock()
			r.paying[c.BookingID] = payment{client: id, hold: holdID, seats: seats, at: paid}
			r.mu.Unlock()
			return c.BookingID, "ok"
		case 401:
			return "", "readmit"
		case 409:
			return "", "again" // the hold lapsed: hold again
		}
		if !pause(ctx, hdr, time.Second) {
			break
		}
	}
	return "", outTimedOut
}

// pay is the fan on the provider's hosted page (paymentUrl: the simulator,
// on the booking core's own listener): it presses Pay, with the outcome the
// provider offers first (the configured one). A page that does not answer
// (the booking core or its database down) is pressed again, as a fan would
// reload it.
func (r *saleRun) pay(ctx context.Context, paymentURL string) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, paymentURL, strings.NewReader("action=pay"))
		if err != nil {
			r.d.t.Errorf("paymentUrl %q: %v", paymentURL, err)
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := r.d.provider.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusSeeOther {
				return
			}
			if res.StatusCode != http.StatusServiceUnavailable {
				r.d.t.Errorf("Pay on the provider's page: %d", res.StatusCode)
				return
			}
		}
		r.payRetries.Add(1)
		if !pause(ctx, nil, 500*time.Millisecond) {
			return
		}
	}
}

// follow polls the booking (as the page does) until it is settled.
func (r *saleRun) follow(ctx context.Context, token, id string) string {
	last := "PENDING"
	defer func() {
		r.mu.Lock()
		r.bookings[id] = last
		p := r.paying[id]
		r.mu.Unlock()
		// The confirmation, from Pay to the fan seeing how it ended.
		code, at := 0, time.Time{}
		switch last {
		case "CONFIRMED":
			code, at = 200, time.Now()
		case "FAILED", "REFUNDED":
			code, at = 409, time.Now()
		}
		r.d.hist.recordAt(p.client, seatOp{Kind: "confirm", Seats: p.seats, Hold: p.hold}, code, p.at, at)
	}()
	for {
		code, hdr, body := r.d.call(ctx, "booking", http.MethodGet, "/api/v1/booking/bookings/"+id, token, nil, nil)
		if code == 200 {
			var b struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(body, &b)
			last = b.Status
			switch b.Status {
			case "CONFIRMED":
				return outConfirmed
			case "FAILED", "REFUNDED":
				return outFailed
			}
		}
		def := 300 * time.Millisecond
		if code != 200 {
			def = time.Second
		} else {
			hdr = nil
		}
		if !pause(ctx, hdr, def) {
			return outPending
		}
	}
}

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
