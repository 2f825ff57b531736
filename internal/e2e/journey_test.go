package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/proof"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// journeyEvents: the journey's sale asks a proof of work for every new
// place (16 bits, as the demo's concert), so the whole journey runs with
// the page paying it. It starts paused: TestBrowserJourney sets it moving
// once the fan's page shows its place.
const journeyEvents = `  - id: "premiere"
    name: "Premiere night"
    venue: "Shinjuku Hall 3"
    mode: "paused"
    admission: {admit_per_second: 1, max_active: 10, access_ttl: "5m", abandon_after: "60s", join_proof_bits: 16}
    showtimes:
      - id: 42
        title: "Premiere 19:00"
        starts_at: "2036-12-01T19:00:00+09:00"
        rows: 5
        seats_per_row: 10
        price_cents: 1500
        general_admission: [{code: "FLOOR", capacity: 20, price_cents: 900}]
`

// browser starts a headless Chromium (Debian's) with a fresh profile.
func browser(t *testing.T) context.Context { t.Helper(); return browserWith(t) }

// browserWith is browser with more of Chromium's options.
func browserWith(t *testing.T, more ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	bin, err := localsvc.Ensure("chromium", "chromium")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(profileDir(t)),
		chromedp.WindowSize(420, 900),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(opts, more...)...)
	t.Cleanup(cancel)
	return actx
}

// profileDir is a fresh Chromium profile, removed after the browser is gone
// (Chromium may still be writing to it when the test ends).
func profileDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "wr-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// tab opens the browser's first tab.
func tab(t *testing.T, actx context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancel)
	watchConsole(ctx)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return ctx
}

type shooter struct {
	t   *testing.T
	dir string
	n   int
}

// shot saves a screenshot of the page under the test's output folder. A
// screenshot is for people to look at, not something the test checks: one
// that Chromium never answers (Page.captureScreenshot can hang while the
// page navigates, as a refreshing page without JavaScript does: a whole
// make test waited 15 minutes on one) is tried again, and left out with a
// line in the log after the third try, rather than hanging the test.
func (s *shooter) shot(ctx context.Context, name string) {
	s.t.Helper()
	var png []byte
	if err := again(ctx, 3, 15*time.Second, chromedp.FullScreenshot(&png, 100)); err != nil {
		s.t.Logf("screenshot %s not taken: %v", name, err)
		return
	}
	s.n++
	p := filepath.Join(s.dir, fmt.Sprintf("%02d-%s.png", s.n, name))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func run(t *testing.T, ctx context.Context, timeout time.Duration, what string, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Run(c, actions...); err != nil {
		var body string
		bc, bcancel := context.WithTimeout(ctx, 5*time.Second)
		defer bcancel()
		_ = chromedp.Run(bc, chromedp.Evaluate(`document.querySelector('main') ? document.querySelector('main').innerText : document.body.innerText`, &body))
		t.Fatalf("%s: %v\npage says: %s", what, err, body)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	// The page's script may put a new node in the old one's place between
	// chromedp's finding it and reading it ("No node with given id found",
	// TestBrowserAwayFanComesBackByEmail in a make test of 2026-12-04): it
	// is read again, and only the last try's failure fails the test.
	if again(ctx, 4, 2*time.Second, chromedp.Text(sel, &s, chromedp.ByQuery)) == nil {
		return strings.TrimSpace(s)
	}
	run(t, ctx, 5*time.Second, "read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return strings.TrimSpace(s)
}

// again runs actions in the tab up to n times, each try within per, until
// one succeeds or ctx ends, and returns the last try's error: for a step a
// page changing under it can fail now and then.
func again(ctx context.Context, n int, per time.Duration, actions ...chromedp.Action) error {
	var err error
	for try := 0; try < n; try++ {
		if try > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		c, cancel := context.WithTimeout(ctx, per)
		err = chromedp.Run(c, actions...)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// journeyBooking is the demo's payment simulator: eight seconds from the
// fan's press on the provider's page to its callback, so the page back home
// is seen confirming, its countdown running (which takes the page's return
// and about two seconds more). With two seconds, a loaded machine (three
// scenarios beside the race detector's packages) had the callback confirm
// the booking before the page was back.
const journeyBooking = `  payment: {secret: "stack-payment-secret-0123456789abcdef", simulator: {enabled: true, outcome: "succeed", delay: "8s"}}`

// joinPaying joins event through the API as a JSON client of a sale that
// asks a proof of work does: the 428's challenge, solved, then the join
// again with X-Waitroom-Proof.
func joinPaying(t *testing.T, gateway, event string) {
	t.Helper()
	url := gateway + "/api/v1/events/" + event + "/tickets"
	res, err := http.Post(url, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ch struct {
		Error     string `json:"error"`
		Challenge string `json:"challenge"`
		Bits      int    `json:"bits"`
	}
	err = json.NewDecoder(res.Body).Decode(&ch)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusPreconditionRequired || ch.Error != "proof_required" {
		t.Fatalf("join without a proof: %d %+v %v; want 428 proof_required", res.StatusCode, ch, err)
	}
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set("X-Waitroom-Proof", ch.Challenge+":"+proof.Solve(ch.Challenge, ch.Bits))
	res, err = http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("join with the proof: %v %v; want 201", err, res)
	}
	res.Body.Close()
}

// recordStatuses makes every page the tab opens keep each data-status its
// #status shows in sessionStorage (e2e-statuses), from before the page's
// own script runs: the "checking your browser" state of a fast proof lasts
// too short a time to be polled for.
func recordStatuses(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, 5*time.Second, "record the statuses", chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(`document.addEventListener('DOMContentLoaded', () => {
			const el = document.querySelector('#status');
			if (!el) return;
			const seen = () => {
				const list = JSON.parse(sessionStorage.getItem('e2e-statuses') || '[]');
				if (list[list.length - 1] !== el.dataset.status) list.push(el.dataset.status);
				sessionStorage.setItem('e2e-statuses', JSON.stringify(list));
			};
			seen();
			new MutationObserver(seen).observe(el, {attributes: true, attributeFilter: ['data-status']});
		});`).Do(ctx)
		return err
	}))
}

// TestBrowserJourney is a fan's whole journey in a real browser, on a sale
// that asks a proof of work: join a slow line (the page checks the browser
// first), watch the position fall, get admitted, pick two seats on the map,
// hold, go to the provider's hosted payment page, cancel, come back to the
// hold still there, pay again, come back and see the confirmation; a second
// fan who picked the same seats is told they are taken, holds others, and
// pays after that hold lapsed: back home, told it is refunded. Then the same
// sale in a browser without workers, and without JavaScript: each is told
// why it cannot join.
func TestBrowserJourney(t *testing.T) {
	t.Parallel() // its own stack; see doc.go, "Parallel scenarios"
	s := stack.Start(t, stack.Options{Events: journeyEvents, Tick: "200ms", Booking: journeyBooking})
	shots := &shooter{t: t, dir: screenshotDir(t)}
	t.Logf("screenshots in %s", shots.dir)

	// Fans ahead of ours, by API, so the position has somewhere to fall
	// (the line is paused until the fan's page shows its place: however
	// long the browser takes to get there, the six are still ahead).
	for i := 0; i < 6; i++ {
		joinPaying(t, s.Gateway, "premiere")
	}

	actx := browser(t)
	fan := tab(t, actx)
	recordStatuses(t, fan)
	run(t, fan, 30*time.Second, "open the waiting room", chromedp.Navigate(s.Gateway+"/e/premiere"))
	// Read as waitEval does: a poll the page's own navigation cuts short
	// is made again.
	waitEval(t, fan, 30*time.Second, "waiting, at a place", `document.querySelector('#status') && document.querySelector('#status').dataset.status === 'waiting' && document.querySelector('#position').textContent.trim() !== ''`)
	var statuses string
	run(t, fan, 5*time.Second, "read the statuses", chromedp.Evaluate(`sessionStorage.getItem('e2e-statuses') || '[]'`, &statuses))
	if !strings.Contains(statuses, `"checking","waiting"`) {
		t.Errorf("statuses shown while joining: %s; want checking (the proof of work), then waiting", statuses)
	}
	first, err := strconv.Atoi(strings.ReplaceAll(text(t, fan, "#position"), ",", ""))
	if err != nil || first != 7 {
		t.Fatalf("position at join = %q; want 7 (six fans ahead, the line paused)", text(t, fan, "#position"))
	}
	shots.shot(fan, "waiting")
	fitsScreen(t, fan, "the waiting room on a phone")
	wordsOK(t, fan, "en", "the waiting room")
	checkA11y(t, fan, "the waiting room")
	// Record every position the page shows, in sessionStorage, which
	// survives the page's own move to the booking page.
	run(t, fan, 5*time.Second, "watch the position", chromedp.Evaluate(`(() => {
		const el = document.querySelector('#position');
		const seen = () => {
			const list = JSON.parse(sessionStorage.getItem('e2e-positions') || '[]');
			list.push(el.textContent.trim());
			sessionStorage.setItem('e2e-positions', JSON.stringify(list));
		};
		seen();
		new MutationObserver(seen).observe(el, {childList: true, characterData: true, subtree: true});
		return true;
	})()`, nil))
	// The line moves now, one a second: the page, polling every second or
	// so, sees its place fall for some seven seconds before its turn.
	s.EditConfig(t, func(c string) string { return strings.Replace(c, `mode: "paused"`, `mode: "queue"`, 1) })
	waitBookPage(t, fan, "be admitted and moved on to the booking page")
	var seenJSON string
	run(t, fan, 5*time.Second, "read the positions seen", chromedp.Evaluate(`sessionStorage.getItem('e2e-positions') || '[]'`, &seenJSON))
	var seen []string
	_ = json.Unmarshal([]byte(seenJSON), &seen)
	fell := false
	for _, p := range seen {
		if n, err := strconv.Atoi(strings.ReplaceAll(p, ",", "")); err == nil && n > 0 && n < first {
			fell = true
		}
	}
	if !fell {
		t.Fatalf("positions shown while waiting: %v; want one below %d before admission", seen, first)
	}
	t.Logf("positions shown while waiting: %v", seen)
	shots.shot(fan, "seat-map")
	fitsScreen(t, fan, "the seat map on a phone")
	wordsOK(t, fan, "en", "the seat map")
	checkA11y(t, fan, "the seat map")
	// What is at stake: the showtime and when (in Tokyo), the price of a
	// seat and of a standing place.
	if line, price := text(t, fan, "#showtime-line"), text(t, fan, "#seat-price"); !strings.Contains(line, "Mon, Dec 1, 2036, 19:00") || !strings.Contains(price, "$15.00") {
		t.Errorf("seat map says %q, %q; want the showtime in Tokyo time and $15.00 a seat", line, price)
	}
	if ga := text(t, fan, `[data-ga-block="FLOOR"] .ga-price`); !strings.Contains(ga, "$9.00") {
		t.Errorf("standing price %q; want $9.00", ga)
	}

	// The second fan joins now and is admitted within a few ticks.
	rival := tab(t, browser(t)) // a second browser: its own cookies and storage
	run(t, rival, 10*time.Second, "second fan joins", chromedp.Navigate(s.Gateway+"/e/premiere"))
	waitBookPage(t, rival, "second fan admitted")

	for _, ctx := range []context.Context{fan, rival} {
		run(t, ctx, 10*time.Second, "pick C5 and C6",
			chromedp.Click(`[data-seat="C5"]`, chromedp.ByQuery),
			chromedp.Click(`[data-seat="C6"]`, chromedp.ByQuery),
			chromedp.Poll(`document.querySelector('[data-seat="C5"]').dataset.state === 'mine' && document.querySelector('[data-seat="C6"]').dataset.state === 'mine'`, nil),
		)
	}
	shots.shot(fan, "two-seats-chosen")
	run(t, fan, 10*time.Second, "add one standing place",
		chromedp.Click(`[data-ga-inc="FLOOR"]`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('[data-ga="FLOOR"]').value === '1'`, nil),
	)
	// 2 × $15.00 + $9.00.
	if total := text(t, fan, "#selection-total"); total != "$39.00" {
		t.Errorf("the choice costs %q; want $39.00", total)
	}
	run(t, fan, 10*time.Second, "hold",
		chromedp.Click(`#hold`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('main').dataset.phase === 'held'`, nil),
		chromedp.WaitVisible(`#countdown`, chromedp.ByQuery),
	)
	shots.shot(fan, "held")
	if total, pay := text(t, fan, "#held-total"), text(t, fan, "#pay"); total != "$39.00" || pay != "Pay $39.00" {
		t.Errorf("hold total %q, button %q; want $39.00 and Pay $39.00", total, pay)
	}
	checkA11y(t, fan, "the hold")
	run(t, rival, 10*time.Second, "the rival is told the seats are taken",
		chromedp.Click(`#hold`, chromedp.ByQuery),
		chromedp.Poll(`(() => { const m = document.querySelector('#message'); return m && /took|taken/i.test(m.textContent); })()`, nil),
	)
	shots.shot(rival, "rival-told-taken")

	// Pay: off to the provider's page, on its own origin, which says what
	// is paid for and how much.
	run(t, fan, 10*time.Second, "pay", chromedp.Click(`#pay`, chromedp.ByQuery))
	if amount, what := atProvider(t, fan, s.Booking); amount != "$39.00" || what != "Premiere 19:00: C5, C6, FLOOR × 1" {
		t.Errorf("the provider's page asks %q for %q; want $39.00 for C5, C6 and one standing place", amount, what)
	}
	shots.shot(fan, "provider-page")
	checkA11y(t, fan, "the provider's payment page")
	// Cancel: back home, the hold is still there, its countdown running, and
	// Pay can be pressed again.
	backFromProvider(t, fan, "premiere", "#sim-cancel")
	waitEval(t, fan, 20*time.Second, "the hold again after cancelling", `document.querySelector('main').dataset.phase === 'held' && !document.querySelector('#pay').disabled && /still held/.test(document.querySelector('#message').textContent)`)
	countdownRuns(t, fan, "the hold after cancelling")
	shots.shot(fan, "back-cancelled")
	checkA11y(t, fan, "the hold after cancelling")
	// Pay again: a new payment; back home the page is confirming, the hold's
	// countdown still running, until the provider's callback confirms it.
	run(t, fan, 10*time.Second, "pay again", chromedp.Click(`#pay`, chromedp.ByQuery))
	atProvider(t, fan, s.Booking)
	backFromProvider(t, fan, "premiere", "#sim-pay")
	waitEval(t, fan, 10*time.Second, "confirming", `document.querySelector('#booking-status').dataset.status === 'PENDING' && /Confirming/.test(document.querySelector('#result-title').textContent)`)
	countdownRuns(t, fan, "the page back from the provider, confirming")
	shots.shot(fan, "back-confirming")
	run(t, fan, 30*time.Second, "see the confirmation",
		chromedp.Poll(`(() => { const b = document.querySelector('#booking-status'); return b && /CONFIRMED/.test(b.textContent + ' ' + (b.dataset.status || '')); })()`, nil),
	)
	var bookingID string
	run(t, fan, 5*time.Second, "read the booking id", chromedp.AttributeValue("#booking-id", "data-id", &bookingID, nil, chromedp.ByQuery))
	shots.shot(fan, "confirmed")
	if total, when, ref := text(t, fan, "#receipt-total"), text(t, fan, "#receipt-when"), text(t, fan, "#booking-id"); total != "$39.00" || when != "Mon, Dec 1, 2036, 19:00" || len(ref) != 9 {
		t.Errorf("receipt: total %q, when %q, reference %q; want $39.00, the showtime, XXXX-XXXX", total, when, ref)
	}
	wordsOK(t, fan, "en", "the confirmation")
	checkA11y(t, fan, "the confirmation")
	// The same pages on a desktop screen.
	run(t, rival, 10*time.Second, "desktop size", chromedp.EmulateViewport(1280, 800))
	fitsScreen(t, rival, "the seat map on a desktop")
	shots.shot(rival, "desktop-seat-map")
	checkA11y(t, rival, "the seat map on a desktop, after a conflict")
	if bookingID == "" {
		t.Fatal("no booking id shown")
	}

	// The rival holds two other seats and goes to pay them, but pays only
	// once that hold has lapsed (its expiry moved into the past in
	// PostgreSQL, as the booking tests move time): back home, the rival is
	// told that the payment is refunded, not shown an error.
	ctx := context.Background()
	db := s.DB(ctx)
	run(t, rival, 10*time.Second, "the rival holds E1 and E2",
		chromedp.Click(`[data-seat="E1"]`, chromedp.ByQuery),
		chromedp.Click(`[data-seat="E2"]`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('[data-seat="E2"]').dataset.state === 'mine'`, nil),
		chromedp.Click(`#hold`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('main').dataset.phase === 'held'`, nil),
		chromedp.Click(`#pay`, chromedp.ByQuery),
	)
	atProvider(t, rival, s.Booking)
	var lapsedHold string
	if err := db.QueryRow(ctx, `SELECT hold_id::text FROM seats WHERE showtime_id = 42 AND seat_code = 'E1' AND status = 'HELD'`).Scan(&lapsedHold); err != nil {
		t.Fatalf("the rival's hold: %v", err)
	}
	for _, q := range []string{
		`UPDATE seats SET hold_expires_at = now() - interval '1 second' WHERE showtime_id = 42 AND hold_id = $1 AND status = 'HELD'`,
		`UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`,
	} {
		if _, err := db.Exec(ctx, q, lapsedHold); err != nil {
			t.Fatalf("lapse the rival's hold: %v", err)
		}
	}
	backFromProvider(t, rival, "premiere", "#sim-pay")
	waitEval(t, rival, 30*time.Second, "told it is refunded", `document.querySelector('#booking-status').dataset.status === 'REFUNDED' && /refund/i.test(document.querySelector('#result-title').textContent)`)
	if kind := text(t, rival, "#message"); !strings.Contains(kind, "refunded") {
		t.Errorf("the rival is told %q; want that the payment was refunded", kind)
	}
	var kind string
	run(t, rival, 5*time.Second, "the message's kind", chromedp.AttributeValue("#message", "data-kind", &kind, nil, chromedp.ByQuery))
	if kind == "error" {
		t.Error("a refunded late payment is shown as an error")
	}
	shots.shot(rival, "back-refunded")
	wordsOK(t, rival, "en", "the refund")
	checkA11y(t, rival, "the refund")

	// The database agrees: C5 and C6 are booked, under the booking shown.
	var booked int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM seats WHERE showtime_id = 42 AND seat_code IN ('C5','C6') AND status = 'BOOKED'`).Scan(&booked); err != nil {
		t.Fatalf("read seats: %v", err)
	}
	if booked != 2 {
		t.Fatalf("C5/C6 booked rows = %d; want 2", booked)
	}
	var standing int
	if err := db.QueryRow(ctx, `SELECT coalesce(sum(places), 0) FROM ga_places WHERE showtime_id = 42 AND block_code = 'FLOOR' AND status = 'BOOKED'`).Scan(&standing); err != nil {
		t.Fatalf("read standing places: %v", err)
	}
	if standing != 1 {
		t.Fatalf("FLOOR places booked = %d; want 1", standing)
	}
	var status string
	if err := db.QueryRow(ctx, `SELECT status FROM bookings WHERE id::text = $1`, bookingID).Scan(&status); err != nil || status != "CONFIRMED" {
		t.Fatalf("booking %s in the database: %q, %v; want CONFIRMED", bookingID, status, err)
	}

	// Neither page threw or logged an error along the way.
	for name, c := range map[string]*consoleErrors{"fan": consoleOf(fan), "rival": consoleOf(rival)} {
		if errs := c.list(); len(errs) > 0 {
			t.Errorf("%s's pages reported errors: %q", name, errs)
		}
	}
	// Every place was paid for: the six by API and the two fans' pages, none
	// twice, none refused.
	for result, want := range map[string]float64{"ok": 8, "invalid": 0, "reused": 0} {
		if got := metric(t, s.Gateway, `waitroom_join_proofs_total{event="premiere",result="`+result+`"}`); got != want {
			t.Errorf("waitroom_join_proofs_total %s = %v; want %v", result, got, want)
		}
	}

	t.Run("the README's proof of work example", func(t *testing.T) {
		out := runReadmeBlock(t, "API=localhost:8080/api/v1 EVENT=live",
			"API="+strings.TrimPrefix(s.Gateway, "http://")+"/api/v1 EVENT=premiere", "bash", "curl", "jq", "python3")
		if !strings.Contains(out, `"error": "proof_required"`) || !strings.Contains(out, `"status": "waiting"`) {
			t.Fatalf("the README's example printed:\n%s\nwant the 428, then a place in line", out)
		}
	})

	t.Run("a browser without workers", func(t *testing.T) {
		shots.t = t
		fan := tab(t, browser(t))
		run(t, fan, 5*time.Second, "take workers away", chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(`delete window.Worker;`).Do(ctx)
			return err
		}))
		run(t, fan, 20*time.Second, "open the waiting room",
			chromedp.Navigate(s.Gateway+"/e/premiere"),
			chromedp.Poll(`document.querySelector('#status').dataset.status === 'no-worker'`, nil),
		)
		if msg := text(t, fan, "#message"); !strings.Contains(msg, "Web Worker") || !strings.Contains(msg, "Try another browser") {
			t.Errorf("without workers the page says %q", msg)
		}
		wordsOK(t, fan, "en", "the waiting room without workers")
		checkA11y(t, fan, "the waiting room without workers")
		shots.shot(fan, "proof-no-worker")
	})

	t.Run("without JavaScript", func(t *testing.T) {
		shots.t = t
		fan := tab(t, browser(t))
		run(t, fan, 20*time.Second, "the waiting room without JavaScript",
			emulation.SetScriptExecutionDisabled(true),
			chromedp.Navigate(s.Gateway+"/e/premiere"),
			chromedp.WaitVisible(`#needs-script`, chromedp.ByQuery),
		)
		if msg := text(t, fan, "#needs-script"); !strings.Contains(msg, "needs JavaScript") {
			t.Errorf("without JavaScript the page says %q", msg)
		}
		var forms int
		run(t, fan, 5*time.Second, "count the join forms", chromedp.Evaluate(`document.querySelectorAll('form[action$="/join"]').length`, &forms))
		if forms != 0 {
			t.Errorf("%d join forms offered where no form can pay the proof of work", forms)
		}
		checkA11yNoJS(t, fan, "the waiting room of a sale with proof of work, without JavaScript")
		shots.shot(fan, "proof-nojs")
	})
}

// atProvider waits until the booking page has sent the fan to the
// provider's hosted page (the simulator, on the booking core's listener:
// another origin) and returns what it asks and for what.
func atProvider(t *testing.T, ctx context.Context, origin string) (amount, what string) {
	t.Helper()
	waitEval(t, ctx, 20*time.Second, "the provider's payment page", `location.origin === '`+origin+`' && location.pathname.startsWith('/pay/') && document.querySelector('#sim-pay') !== null`)
	return text(t, ctx, "#pay-amount"), text(t, ctx, "#pay-what")
}

// backFromProvider presses a button of the provider's page (#sim-pay or
// #sim-cancel) and waits until the provider has sent the fan back to the
// event's booking page and the page has picked the booking up.
func backFromProvider(t *testing.T, ctx context.Context, event, button string) {
	t.Helper()
	run(t, ctx, 10*time.Second, "press "+button, chromedp.Click(button, chromedp.ByQuery))
	waitEval(t, ctx, 20*time.Second, "back on the booking page", `location.pathname === '/e/`+event+`/book' && document.readyState === 'complete' && document.querySelector('main').dataset.phase !== 'loading'`)
}

// countdownRuns checks that the hold's countdown is shown and running.
func countdownRuns(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	read := func() int {
		var ms string
		run(t, ctx, 5*time.Second, "read the countdown", chromedp.AttributeValue("#countdown", "data-remaining-ms", &ms, nil, chromedp.ByQuery))
		n, _ := strconv.Atoi(ms)
		return n
	}
	waitEval(t, ctx, 5*time.Second, what+": the countdown shown", `document.querySelector('#countdown').offsetParent !== null && Number(document.querySelector('#countdown').dataset.remainingMs) > 0`)
	first := read()
	time.Sleep(1200 * time.Millisecond)
	if next := read(); next <= 0 || next >= first {
		t.Errorf("%s: the countdown went %d → %d ms; want it running", what, first, next)
	}
}

// consoleErrors collects what a tab's pages throw (uncaught exceptions) or
// log with console.error. Chromium's own "Failed to load resource" lines for
// 4xx answers are not console API calls and are not collected: the pages
// handle those answers on purpose.
type consoleErrors struct {
	mu   sync.Mutex
	errs []string
}

func (c *consoleErrors) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

var consoles sync.Map // context → *consoleErrors

func consoleOf(ctx context.Context) *consoleErrors {
	v, _ := consoles.Load(chromedp.FromContext(ctx))
	return v.(*consoleErrors)
}

func watchConsole(ctx context.Context) {
	c := &consoleErrors{}
	consoles.Store(chromedp.FromContext(ctx), c)
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type != runtime.APITypeError && e.Type != runtime.APITypeAssert {
				return
			}
			msg = "console." + string(e.Type) + ":"
			for _, a := range e.Args {
				msg += " " + string(a.Value) + a.Description
			}
		default:
			return
		}
		c.mu.Lock()
		c.errs = append(c.errs, msg)
		c.mu.Unlock()
	})
}

// fitsScreen fails the test when the page is wider than the screen (a page
// that scrolls sideways on a phone). The seat map may scroll inside its own
// box; the page itself must not.
func fitsScreen(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	var over int
	run(t, ctx, 5*time.Second, "measure "+what, chromedp.Evaluate(
		`document.documentElement.scrollWidth - window.innerWidth`, &over))
	if over > 1 {
		t.Errorf("%s: the page is %d px wider than the screen", what, over)
	}
}

// waitBookPage waits until the waiting room has moved the fan on to the
// booking page by itself and the seat map is drawn. The page navigates under
// our feet, so an evaluation cut short by the navigation is simply retried.
func waitBookPage(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = chromedp.Run(c,
			chromedp.Poll(`location.pathname === '/e/premiere/book' && document.readyState === 'complete'`, nil),
			chromedp.WaitVisible(`[data-seat="C5"]`, chromedp.ByQuery),
		)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

func screenshotDir(t *testing.T) string {
	dir := os.Getenv("WAITROOM_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "waitroom-e2e-"+strconv.Itoa(os.Getpid()))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
