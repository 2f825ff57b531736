package e2e_test

// TestCheating: a small sale through the real binaries where honest fans
// (poll as told, hold once, pay) share the line with a cheater of every kind
// DESIGN.md's "Fair play" closes a hole for: a rejoiner (one address, a dead
// ticket sent back again and again), a hold cycler (release and take again,
// holds chained to keep the place), a hammerer (hold requests on a seat
// someone else holds) and a resumer (admitted while its tab slept, back
// through join). docs/RELIABILITY.md, "Cheating", has its figures.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

const (
	fairEvent    = "fair"
	fairShowtime = 9
	fairAccess   = 8 * time.Second
	fairHold     = 5 * time.Second
	fairCeiling  = fairAccess + fairHold
	fairJoinsMin = 5  // joins_per_ip_per_minute
	fairAttempts = 10 // hold_attempts_per_minute
	fairHonest   = 12
)

// player is one client of the gateway, speaking for the fan at ip (the
// stack's gateway trusts 127.0.0.1 as its load balancer).
type player struct {
	t     *testing.T
	s     *stack.Stack
	hc    *http.Client
	tally *tally
	ip    string
	token string
}

func (p *player) call(ctx context.Context, step, method, path string, hdr map[string]string, body any) (int, http.Header, map[string]any) {
	h := map[string]string{"X-Forwarded-For": p.ip}
	for k, v := range hdr {
		h[k] = v
	}
	code, rh, raw, err := sendJSON(ctx, p.hc, p.s.Gateway, method, path, p.token, h, body)
	if err != nil {
		if ctx.Err() == nil {
			p.tally.add(step, 0, nil, nil, err)
		}
		return 0, nil, nil
	}
	p.tally.add(step, code, rh, raw, nil)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return code, rh, out
}

// join joins (sending ticket back when given) and returns the answer.
func (p *player) join(ctx context.Context, ticket string) (int, map[string]any) {
	hdr := map[string]string{}
	if ticket != "" {
		hdr["X-Waitroom-Ticket"] = ticket
	}
	code, _, body := p.call(ctx, "join", http.MethodPost, "/api/v1/events/"+fairEvent+"/tickets", hdr, nil)
	return code, body
}

// waitAdmitted polls as told until the ticket is admitted; it keeps the pass
// and returns when it was first seen admitted, or the end state.
func (p *player) waitAdmitted(ctx context.Context, ticket string) (string, time.Time) {
	for {
		code, hdr, body := p.call(ctx, "status", http.MethodGet, "/api/v1/events/"+fairEvent+"/tickets/"+ticket, nil, nil)
		switch {
		case code == 200 && body["status"] == "admitted":
			p.token, _ = body["accessToken"].(string)
			return "admitted", time.Now()
		case code == 200:
			wait := time.Duration(num(body["pollAfterMs"])) * time.Millisecond
			if !pause(ctx, hdr, min(wait, time.Second)) {
				return "timed-out", time.Time{}
			}
		case code == 410:
			return fmt.Sprint(body["status"]), time.Time{}
		default:
			if !pause(ctx, hdr, 200*time.Millisecond) {
				return "timed-out", time.Time{}
			}
		}
	}
}

func num(v any) float64 { f, _ := v.(float64); return f }

// freeSeats lists the seats the map shows AVAILABLE (and the status of the
// answer: 401 once the fan's place is gone).
func (p *player) freeSeats(ctx context.Context) ([]string, int) {
	code, _, body := p.call(ctx, "seats", http.MethodGet, fmt.Sprintf("/api/v1/booking/showtimes/%d/seats", fairShowtime), nil, nil)
	if code != 200 {
		return nil, code
	}
	var free []string
	seats, _ := body["seats"].([]any)
	for _, s := range seats {
		m, _ := s.(map[string]any)
		if m["status"] == "AVAILABLE" {
			free = append(free, m["code"].(string))
		}
	}
	return free, code
}

func (p *player) hold(ctx context.Context, seats ...string) (int, http.Header, map[string]any) {
	return p.call(ctx, "hold", http.MethodPost, fmt.Sprintf("/api/v1/booking/showtimes/%d/holds", fairShowtime), nil, map[string]any{"seats": seats})
}

func (p *player) release(ctx context.Context, holdID string) int {
	code, _, _ := p.call(ctx, "release", http.MethodDelete, "/api/v1/booking/holds/"+holdID, nil, nil)
	return code
}

// lineWatcher records when each ticket id first left the wait ZSET, sampled
// every 20 ms (ticks are 200 ms apart): the admission order, seen from
// Redis itself.
type lineWatcher struct {
	mu   sync.Mutex
	left map[string]time.Time
	stop context.CancelFunc
	done chan struct{}
}

func watchLine(s *stack.Stack) *lineWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &lineWatcher{left: map[string]time.Time{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		seen := map[string]bool{}
		for ctx.Err() == nil {
			ids, err := s.RDB.ZRange(ctx, rdb.KeysOf(fairEvent).Wait, 0, -1).Result()
			if err == nil {
				now := time.Now()
				in := map[string]bool{}
				for _, id := range ids {
					in[id], seen[id] = true, true
				}
				w.mu.Lock()
				for id := range seen {
					if _, ok := w.left[id]; !ok && !in[id] {
						w.left[id] = now
					}
				}
				w.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

func (w *lineWatcher) close() { w.stop(); <-w.done }

func (w *lineWatcher) leftAt(id string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.left[id]
	return at, ok
}

func TestCheating(t *testing.T) {
	t.Parallel()
	s := stack.Start(t, stack.Options{
		Events: fmt.Sprintf(`  - id: %q
    name: "Fair play"
    admission: {admit_per_second: 4, max_active: 6, access_ttl: %q, abandon_after: "4s"}
    showtimes:
      - {id: %d, title: "Fair 19:00", starts_at: "2026-12-01T19:00:00Z", rows: 3, seats_per_row: 10, price_cents: 1000}
`, fairEvent, fairAccess.String(), fairShowtime) + drawEventYAML + guessEventYAML + insiderEventYAML,
		Booking: fmt.Sprintf(`  hold_ttl: %q
  max_seats_per_hold: 2
  holds_per_minute: 20
  hold_attempts_per_minute: %d
  rehold_cooldown: "1m"
  payment: {secret: "stack-payment-secret-0123456789abcdef", session_ttl: "4s", simulator: {enabled: true, outcome: "succeed", delay: "300ms"}}`,
			fairHold.String(), fairAttempts),
		JoinsPerIP:     fairJoinsMin,
		TrustedProxies: []string{"127.0.0.1/32"},
	})
	hc := &http.Client{Timeout: 10 * time.Second}
	tl := newTally()
	newPlayer := func(ip string) *player { return &player{t: t, s: s, hc: hc, tally: tl, ip: ip} }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	watch := watchLine(s)
	defer watch.close()

	// The cheaters come first, so that they are admitted among the first.
	type cycled struct {
		claimed   time.Time
		reholds   []int     // answers to taking released seats again
		passUntil time.Time // the latest pass the gate handed it
		// By when each request was sent, not answered: the gate judges the
		// window as the request comes in, which a loaded machine can delay
		// but never bring forward. served is the last request served (2xx,
		// or 409: the booking core judged its seats, so its place was
		// active), refused the one the gate refused (401).
		served, refused time.Time
	}
	var (
		wg       sync.WaitGroup
		cyc      cycled
		rejoins  = map[int]int{}
		hammered = map[int]int{}
		resumed  time.Duration
	)
	cycler := newPlayer("198.51.100.2")
	_, j := cycler.join(ctx, "")
	cycTicket, _ := j["ticket"].(string)
	wg.Add(1)
	go func() { // the hold cycler
		defer wg.Done()
		st, at := cycler.waitAdmitted(ctx, cycTicket)
		if st != "admitted" {
			t.Errorf("cycler: %s", st)
			return
		}
		cyc.claimed = at
		// sent notes the answer to a request sent at began; true when the
		// gate refused it.
		sent := func(began time.Time, code int) bool {
			switch {
			case code == http.StatusUnauthorized:
				cyc.refused = began
				return true
			case code/100 == 2 || code == http.StatusConflict:
				cyc.served = began
			}
			return false
		}
		released := map[string]bool{}
		for ctx.Err() == nil {
			began := time.Now()
			all, code := cycler.freeSeats(ctx)
			if sent(began, code) {
				return
			}
			var free []string
			for _, c := range all {
				if !released[c] {
					free = append(free, c)
				}
			}
			if len(free) < 2 {
				pause(ctx, nil, 300*time.Millisecond)
				continue
			}
			began = time.Now()
			code, hdr, h := cycler.hold(ctx, free[:2]...)
			if sent(began, code) {
				return
			}
			if code == http.StatusCreated {
				if tok := hdr.Get("X-Waitroom-Access-Token"); tok != "" {
					cycler.token = tok
					until, _ := time.Parse(time.RFC3339, hdr.Get("X-Waitroom-Access-Expires"))
					if until.After(cyc.passUntil) {
						cyc.passUntil = until
					}
				}
				began = time.Now()
				if sent(began, cycler.release(ctx, h["holdId"].(string))) {
					return
				}
				released[free[0]], released[free[1]] = true, true
				if len(cyc.reholds) < 2 {
					// Take them again at once: the loophole of the reference design.
					began = time.Now()
					c, _, _ := cycler.hold(ctx, free[:2]...)
					cyc.reholds = append(cyc.reholds, c)
					if sent(began, c) {
						return
					}
				}
			}
			// Hold again every couple of seconds: each 201 asks to stretch
			// the window by a hold_ttl.
			pause(ctx, nil, 2*time.Second)
		}
	}()
	hammerer := newPlayer("198.51.100.3")
	_, j = hammerer.join(ctx, "")
	hamTicket, _ := j["ticket"].(string)
	wg.Add(1)
	go func() { // the hammerer: 30 hold requests on a seat it cannot have
		defer wg.Done()
		if st, _ := hammerer.waitAdmitted(ctx, hamTicket); st != "admitted" {
			t.Errorf("hammerer: %s", st)
			return
		}
		target := "C10"
		if code, _, h := hammerer.hold(ctx, target); code == http.StatusCreated {
			hammerer.release(ctx, h["holdId"].(string)) // now it cools down for the hammerer
		}
		for range 30 {
			code, _, _ := hammerer.hold(ctx, target)
			hammered[code]++
		}
	}()
	resumer := newPlayer("198.51.100.4")
	_, j = resumer.join(ctx, "")
	resTicket, _ := j["ticket"].(string)
	wg.Add(1)
	go func() { // the resumer: its tab sleeps just before its turn
		defer wg.Done()
		for ctx.Err() == nil {
			code, _, body := resumer.call(ctx, "status", http.MethodGet, "/api/v1/events/"+fairEvent+"/tickets/"+resTicket, nil, nil)
			if code != 200 || body["status"] == "admitted" || num(body["position"]) <= 6 {
				break
			}
			pause(ctx, nil, time.Duration(num(body["pollAfterMs"]))*time.Millisecond)
		}
		for ctx.Err() == nil {
			pause(ctx, nil, 1500*time.Millisecond) // asleep; then the page reloads and joins
			// From when the join was sent: its window starts as the
			// gateway takes it in, however late a loaded machine answers.
			began := time.Now()
			code, body := resumer.join(ctx, resTicket)
			if code == 200 && body["status"] == "admitted" {
				exp, _ := time.Parse(time.RFC3339, fmt.Sprint(body["expiresAt"]))
				resumed = exp.Sub(began)
				return
			}
			if code != 200 {
				t.Errorf("resume: %d %v; want 200 and the same place", code, body)
				return
			}
		}
	}()
	rejoiner := newPlayer("198.51.100.1")
	wg.Add(1)
	go func() { // the rejoiner: 20 new places asked for from one address
		defer wg.Done()
		ticket := ""
		for range 20 {
			code, body := rejoiner.join(ctx, ticket)
			rejoins[code]++
			if code == http.StatusCreated {
				ticket, _ = body["ticket"].(string)
				rejoiner.call(ctx, "leave", http.MethodDelete, "/api/v1/events/"+fairEvent+"/tickets/"+ticket, nil, nil)
			}
		}
	}()

	// The honest fans join in a known order, each from an address of its own.
	type honestFan struct {
		ticket, id string
		outcome    string
		booking    string
	}
	fans := make([]*honestFan, fairHonest)
	for i := range fans {
		p := newPlayer(fmt.Sprintf("203.0.113.%d", i+1))
		code, body := p.join(ctx, "")
		if code != http.StatusCreated {
			t.Fatalf("honest fan %d join: %d %v", i, code, body)
		}
		f := &honestFan{ticket: body["ticket"].(string)}
		f.id = ticketID(t, s, f.ticket)
		fans[i] = f
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.outcome, f.booking = honestJourney(ctx, p, f.ticket)
		}()
		time.Sleep(30 * time.Millisecond)
	}
	wg.Wait()

	// Every honest fan was admitted, in the order they joined.
	var order []time.Time
	for i, f := range fans {
		at, ok := watch.leftAt(f.id)
		if !ok {
			t.Fatalf("honest fan %d never left the line", i)
		}
		order = append(order, at)
	}
	if !sort.SliceIsSorted(order, func(a, b int) bool { return order[a].Before(order[b]) }) {
		t.Errorf("honest fans left the line out of join order: %v", order)
	}
	outcomes := map[string]int{}
	for i, f := range fans {
		outcomes[f.outcome]++
		if f.outcome != outConfirmed && f.outcome != "told-taken" {
			t.Errorf("honest fan %d: %s; want confirmed, or told the seats were taken", i, f.outcome)
		}
	}

	// The rejoiner got no more places than its address may have.
	if rejoins[http.StatusCreated] > 2*fairJoinsMin || rejoins[http.StatusTooManyRequests] == 0 {
		t.Errorf("rejoiner: %v; want at most %d new places a minute, then 429", rejoins, fairJoinsMin)
	}
	// The hammerer's refusals were limited; every answer past the limit is 429.
	if hammered[http.StatusTooManyRequests] < 30-fairAttempts || hammered[http.StatusCreated] > 0 {
		t.Errorf("hammerer: %v; want at most %d refusals, then 429", hammered, fairAttempts)
	}
	// The cycler never took its released seats back, and lost its place by
	// the ceiling; its holds lapsed on their own clock.
	for _, c := range cyc.reholds {
		if c == http.StatusCreated {
			t.Errorf("cycler took its released seats back: %v", cyc.reholds)
		}
	}
	// The window itself and every pass it was handed end by the ceiling;
	// the gate served nothing it sent after the ceiling, and refused it at
	// its next request (it acts every 2 s). Measured by when the requests
	// were sent (claimed is after the claim the window counts from), so a
	// loaded machine's slow answers move nothing.
	line := queuetest.Of(t, s.RDB, fairEvent)
	ceiling := cyc.claimed.Add(fairCeiling)
	if window := line.Window(ticketID(t, s, cycTicket)); window.After(ceiling) || cyc.passUntil.After(ceiling) {
		t.Errorf("cycler's window ends %v, its last pass %v after its claim; want by access_ttl + hold_ttl = %v",
			window.Sub(cyc.claimed), cyc.passUntil.Sub(cyc.claimed), fairCeiling)
	}
	if cyc.refused.IsZero() || cyc.served.After(ceiling) {
		t.Errorf("cycler served a request sent %v after its claim, refused one sent %v after (zero: never); want nothing served past the ceiling (%v), then refused",
			cyc.served.Sub(cyc.claimed), cyc.refused.Sub(cyc.claimed), fairCeiling)
	}
	if resumed < fairAccess-time.Second {
		t.Errorf("resumer's place lasts %v from its coming back; want the full access_ttl (%v)", resumed, fairAccess)
	}

	// The stores agree: the queue's books balance, cheaters held no more than
	// their share and nothing past their ceiling, and the money balances.
	db := s.DB(context.Background())
	if b := line.Books(); b.Admitted+b.Waiting+b.Left+b.Abandoned != b.Joined {
		t.Errorf("books: admitted %d + waiting %d + left %d + abandoned %d != joined %d", b.Admitted, b.Waiting, b.Left, b.Abandoned, b.Joined)
	}
	cycID := ticketID(t, s, cycTicket)
	var lateHeld, overShare int
	if err := db.QueryRow(context.Background(), `
SELECT count(*) FILTER (WHERE expires_at > $2::timestamptz), count(*) FILTER (WHERE places > 2)
  FROM holds WHERE customer_id = $1`, cycID, cyc.claimed.Add(fairCeiling+time.Second+fairHold)).Scan(&lateHeld, &overShare); err != nil {
		t.Fatal(err)
	}
	if lateHeld != 0 || overShare != 0 {
		t.Errorf("cycler: %d holds lasting past its ceiling + hold_ttl, %d holds over its share", lateHeld, overShare)
	}
	var unbalanced int
	if err := db.QueryRow(context.Background(), `
SELECT count(*) FROM payments p JOIN bookings b ON b.id = p.booking_id
 WHERE p.status = 'SUCCEEDED' AND b.status <> 'CONFIRMED'
   AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = p.payment_id)`).Scan(&unbalanced); err != nil {
		t.Fatal(err)
	}
	if unbalanced != 0 {
		t.Errorf("%d payments succeeded with neither a confirmed booking nor a refund", unbalanced)
	}
	var doubleSold int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT seat_code FROM seats WHERE status = 'BOOKED' GROUP BY showtime_id, seat_code HAVING count(*) > 1) x`).Scan(&doubleSold); err != nil {
		t.Fatal(err)
	}
	if doubleSold != 0 {
		t.Errorf("%d seats sold twice", doubleSold)
	}
	for i, f := range fans {
		if f.outcome != outConfirmed {
			continue
		}
		var booked int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM seats WHERE booking_id = $1 AND status = 'BOOKED'`, f.booking).Scan(&booked); err != nil || booked != 1 {
			t.Errorf("honest fan %d: booking %s has %d seats booked (%v); want 1", i, f.booking, booked, err)
		}
	}
	tl.checkClean(t)
	if n := tl.status5xx(); n > 0 {
		t.Errorf("%d answers were 5xx", n)
	}
	t.Logf("honest fans: %v, admitted in join order; rejoiner: %v; hammerer: %v; cycler: re-holds %v, last pass until %v after its claim (ceiling %v), last served a request sent %v after, refused at the gate one sent %v after; resumer's window after resuming: %v",
		outcomes, rejoins, hammered, cyc.reholds, cyc.passUntil.Sub(cyc.claimed).Round(100*time.Millisecond), fairCeiling,
		cyc.served.Sub(cyc.claimed).Round(100*time.Millisecond), cyc.refused.Sub(cyc.claimed).Round(100*time.Millisecond), resumed.Round(100*time.Millisecond))
	t.Logf("answers: %s", tl.summary())

	t.Run("second round", func(t *testing.T) { secondRound(t, s, hc) })
	t.Run("third round: code guessing", func(t *testing.T) { codeGuessing(t, s, hc) })               // cheating_codes_test.go
	t.Run("third round: an insider reads Redis", func(t *testing.T) { insiderReadsRedis(t, s, hc) }) // cheating_draw_test.go
}

// honestJourney waits as told, holds one free seat (trying up to three),
// pays, and follows the booking until it settles.
func honestJourney(ctx context.Context, p *player, ticket string) (outcome, bookingID string) {
	if st, _ := p.waitAdmitted(ctx, ticket); st != "admitted" {
		return st, ""
	}
	for try := 0; try < 3; try++ {
		free, _ := p.freeSeats(ctx)
		if len(free) == 0 {
			return "told-taken", ""
		}
		seat := free[mrand.IntN(len(free))]
		code, hdr, h := p.hold(ctx, seat)
		if code == http.StatusConflict {
			continue
		}
		if code == http.StatusTooManyRequests {
			pause(ctx, hdr, time.Second)
			continue
		}
		if code != http.StatusCreated {
			return fmt.Sprintf("hold %d", code), ""
		}
		if tok := hdr.Get("X-Waitroom-Access-Token"); tok != "" {
			p.token = tok
		}
		code, _, co := p.call(ctx, "checkout", http.MethodPost, "/api/v1/booking/holds/"+h["holdId"].(string)+"/checkout",
			map[string]string{"Idempotency-Key": "k-" + ticket[:16]}, nil)
		if code != http.StatusCreated {
			return fmt.Sprintf("checkout %d", code), ""
		}
		bookingID = co["bookingId"].(string)
		// On the provider's page: Pay.
		if paymentURL, _ := co["paymentUrl"].(string); !p.pressPay(ctx, paymentURL) {
			return "pay at the provider failed", bookingID
		}
		for ctx.Err() == nil {
			code, _, b := p.call(ctx, "booking", http.MethodGet, "/api/v1/booking/bookings/"+bookingID, nil, nil)
			if code == 200 && b["status"] == "CONFIRMED" {
				return outConfirmed, bookingID
			}
			if code == 200 && b["status"] != "PENDING" {
				return fmt.Sprint(b["status"]), bookingID
			}
			pause(ctx, nil, 100*time.Millisecond)
		}
		return outPending, bookingID
	}
	return "told-taken", ""
}

// pressPay presses Pay on the provider's hosted page; true once the
// provider sent the player back (303).
func (p *player) pressPay(ctx context.Context, paymentURL string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, paymentURL, strings.NewReader("action=pay"))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusSeeOther
}

// ticketID is the id (the Redis member, the pass's sub) of a ticket.
func ticketID(t *testing.T, s *stack.Stack, ticket string) string {
	t.Helper()
	id, err := stack.TicketID(fairEvent, ticket)
	if err != nil {
		t.Fatalf("ticket id: %v", err)
	}
	return id
}

// The second round of TestCheating (DESIGN.md, "Fair play, second round"
// and the lottery bullets of "Transparency"), on the same stack: a sale
// with a pre-queue where an insider who knows the seed during the
// pre-queue grinds tickets, and a bot that leaves and rejoins after an
// operator postpones opens_at past the draw. docs/RELIABILITY.md, section
// 7, has the rows.

const drawEvent = "draw"

// drawEventYAML is the second round's sale: a pre-queue open since long
// ago, an opening far off (the test brings it forward), paused so that the
// line stands still until the test lets it in; a place for every fan.
var drawEventYAML = fmt.Sprintf(`  - id: %q
    name: "A drawn sale"
    mode: "paused"
    prequeue_opens_at: "2026-01-01T00:00:00Z"
    opens_at: "2031-01-01T00:00:00Z"
    admission: {admit_per_second: 500, max_active: 2000, abandon_after: "2m"}
    showtimes:
      - {id: 19, title: "Drawn 19:00", starts_at: "2026-12-01T19:00:00Z", rows: 10, seats_per_row: 30, price_cents: 1000}
`, drawEvent)

func secondRound(t *testing.T, s *stack.Stack, hc *http.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tl := newTally()
	fan := func(ip string) *player { return &player{t: t, s: s, hc: hc, tally: tl, ip: ip} }
	idOf := func(ticket string) string {
		id, err := stack.TicketID(drawEvent, ticket)
		if err != nil {
			t.Fatalf("ticket id: %v", err)
		}
		return id
	}
	joinAll := func(prefix string, n int) []string {
		out := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := fan(fmt.Sprintf("%s.%d.%d", prefix, i/250, i%250+1))
				code, _, body := p.call(ctx, "join", http.MethodPost, "/api/v1/events/"+drawEvent+"/tickets", nil, nil)
				if code != http.StatusCreated {
					t.Errorf("pre-queue join: %d %v", code, body)
					return
				}
				out[i], _ = body["ticket"].(string)
			}()
		}
		wg.Wait()
		return out
	}

	honest := joinAll("10.20", 150)
	// The insider knows the seed while the pre-queue runs (since the third
	// round that takes more than reading Redis: the nonce there and the
	// draw secret of the config), joins 300 times, keeps the 30 tickets
	// whose HMAC under the seed is lowest (the draw of the first round) and
	// lets the rest go.
	seed, err := draw.Secret(stack.DrawSecret).Seed(drawEvent, draw.Lottery, queuetest.Of(t, s.RDB, drawEvent).Nonce())
	if err != nil || len(seed) != 32 {
		t.Fatalf("the insider derives the seed: %x, %v", seed, err)
	}
	ground := joinAll("10.30", 300)
	hm := func(key []byte, id string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id))
		return m.Sum(nil)
	}
	sort.Slice(ground, func(a, b int) bool {
		return bytes.Compare(hm(seed, idOf(ground[a])), hm(seed, idOf(ground[b]))) < 0
	})
	kept := ground[:30]
	for _, tk := range ground[30:] {
		if code, _, _ := fan("10.30.9.9").call(ctx, "leave", http.MethodDelete, "/api/v1/events/"+drawEvent+"/tickets/"+tk, nil, nil); code != http.StatusNoContent {
			t.Errorf("insider's leave: %d", code)
		}
	}

	// The operator brings the opening forward: the entries freeze, the
	// draw is made and published.
	opens := time.Now().Add(2 * time.Second).UTC()
	setOpening(t, s, "2031-01-01T00:00:00Z", opens.Format(time.RFC3339Nano))
	var lot map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, _, lot = fan("10.40.0.1").call(ctx, "lottery", http.MethodGet, "/api/v1/events/"+drawEvent+"/lottery", nil, nil)
		if lot["seed"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lottery is not drawn 30 s after its opening: %v", lot)
		}
	}
	entries := num(lot["entries"])
	rankOf := func(tk string) float64 {
		code, _, d := fan("10.40.0.2").call(ctx, "draw", http.MethodGet, "/api/v1/events/"+drawEvent+"/lottery/"+tk, nil, nil)
		if code != http.StatusOK {
			t.Fatalf("a fan's draw: %d %v", code, d)
		}
		return num(d["rank"]) / entries
	}
	mean := func(tks []string) float64 {
		var sum float64
		for _, tk := range tks {
			sum += rankOf(tk)
		}
		return sum / float64(len(tks))
	}
	insider, fair := mean(kept), mean(honest)
	// Uniform ranks have a mean of 0.5; the mean of 30 has a standard
	// deviation of 0.053, so 0.3 is almost four of them away. With the
	// seed alone as the key, the kept tickets sit near 0.05.
	if insider < 0.3 {
		t.Errorf("the insider's kept tickets: mean rank %.3f of the entries; want about 0.5 (honest fans: %.3f)", insider, fair)
	}

	// The operator postpones the opening after the draw: ignored. A bot
	// leaves and rejoins, hoping for a lottery place it can compute: every
	// rejoin is FIFO behind every entry, in no lottery.
	setOpening(t, s, opens.Format(time.RFC3339Nano), "2032-01-01T00:00:00Z")
	mustWait(t, "the reload", 15*time.Second, func() bool {
		return strings.Count(s.Log("admitter"), "draw times changed") >= 2
	})
	time.Sleep(time.Second) // a tick after the reload
	waiting := len(honest) + len(kept)
	bot := fan("10.50.0.1")
	var ticket string
	for i := range 4 {
		if ticket != "" {
			bot.call(ctx, "leave", http.MethodDelete, "/api/v1/events/"+drawEvent+"/tickets/"+ticket, nil, nil)
		}
		code, _, body := bot.call(ctx, "join", http.MethodPost, "/api/v1/events/"+drawEvent+"/tickets", nil, nil)
		if code != http.StatusCreated {
			t.Fatalf("bot's rejoin %d: %d %v", i, code, body)
		}
		ticket, _ = body["ticket"].(string)
		if pos := num(body["position"]); int(pos) != waiting+1 {
			t.Errorf("bot's rejoin %d after the draw at place %v; want %d, behind the %d entries", i, pos, waiting+1, waiting)
		}
		if code, _, d := bot.call(ctx, "draw", http.MethodGet, "/api/v1/events/"+drawEvent+"/lottery/"+ticket, nil, nil); code != http.StatusNotFound || d["error"] != "not_in_lottery" {
			t.Errorf("bot's rejoin %d: its draw %d %v; want 404 not_in_lottery", i, code, d)
		}
	}
	_, _, ev := bot.call(ctx, "event", http.MethodGet, "/api/v1/events/"+drawEvent, nil, nil)
	if at, _ := time.Parse(time.RFC3339, fmt.Sprint(ev["opensAt"])); at.Unix() != opens.Unix() {
		t.Errorf("opensAt %v after the postponement; want the frozen %v", ev["opensAt"], opens)
	}

	// Let the line in: the entries in the drawn order, then the bot.
	s.EditConfig(t, func(c string) string {
		return strings.Replace(c, "name: \"A drawn sale\"\n    mode: \"paused\"", "name: \"A drawn sale\"\n    mode: \"queue\"", 1)
	})
	mustWait(t, "the line let in", 30*time.Second, func() bool {
		return queuetest.Of(t, s.RDB, drawEvent).WaitingCount() == 0
	})
	code, _, rep := bot.call(ctx, "report", http.MethodGet, "/api/v1/events/"+drawEvent+"/report", nil, nil)
	if code != http.StatusOK || num(rep["fifoInversions"]) != 0 || int(num(rep["admitted"])) != waiting+1 {
		t.Errorf("report: %d fifoInversions %v admitted %v; want 0 and %d", code, rep["fifoInversions"], rep["admitted"], waiting+1)
	}
	if n := tl.status5xx(); n > 0 {
		t.Errorf("%d answers were 5xx", n)
	}
	t.Logf("second round: the insider's kept tickets rank at %.3f of the entries on average, honest fans at %.3f; the bot rejoined 4 times, each FIFO", insider, fair)
}

// setOpening moves the draw event's opens_at in the stack's config.
func setOpening(t *testing.T, s *stack.Stack, from, to string) {
	t.Helper()
	s.EditConfig(t, func(c string) string {
		out := strings.Replace(c, fmt.Sprintf("opens_at: %q", from), fmt.Sprintf("opens_at: %q", to), 1)
		if out == c {
			t.Fatalf("the config has no opens_at %q", from)
		}
		return out
	})
}

// mustWait waits for ok, or fails the test.
func mustWait(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	if _, done := waitFor(within, ok); !done {
		t.Fatalf("timed out waiting for %s", what)
	}
}
