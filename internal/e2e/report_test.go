package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// reportEvents: a sale whose pre-queue is open and which opens shortly
// after the stack is up (opens_at is written when the test starts).
const reportEvents = `  - id: "draw"
    name: "Premiere night"
    venue: "Shinjuku Hall 3"
    prequeue_opens_at: "%s"
    opens_at: "%s"
    admission: {admit_per_second: 2, max_active: 50, abandon_after: "60s"}
    showtimes:
      - {id: 61, title: "Premiere 19:00", starts_at: "2036-12-01T19:00:00+09:00", rows: 5, seats_per_row: 10, price_cents: 1500}
`

// The report page, on a phone: the waiting room links to it; before
// opening it shows the lottery's commitment and keeps the seed; after
// opening it shows the seed, the fan's own draw and rank, and the charts;
// in English and in Japanese, with no missing word and no accessibility
// violation.
func TestBrowserReportPage(t *testing.T) {
	// Half of it is waiting for its sale to open: it waits beside the other
	// parallel tests (TestCheating) rather than alone.
	t.Parallel()
	axeSource(t)
	const later = "2099-01-01T10:00:00Z"
	events := fmt.Sprintf(reportEvents, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), later)
	s := stack.Start(t, stack.Options{Events: events, Tick: "200ms"})
	// The stack's start takes its time: the sale opens a set time after
	// it is up, by an operator's edit of the config. 30 s: the browser's
	// start, its join and the report before opening took more than 15 s on
	// a loaded machine, and the seed was out by then.
	opens := time.Now().Add(30 * time.Second).UTC().Truncate(time.Second)
	s.EditConfig(t, func(c string) string { return strings.Replace(c, later, opens.Format(time.RFC3339), 1) })
	waitEvent(t, s.Gateway, "draw", 10*time.Second, func(e eventInfo) bool {
		return e.State == "prequeue" && e.OpensAt == opens.Format(time.RFC3339)
	})
	for range 4 { // fans in the draw besides ours
		res, err := http.Post(s.Gateway+"/api/v1/events/draw/tickets", "application/json", nil)
		if err != nil || res.StatusCode != http.StatusCreated {
			t.Fatalf("pre-queue join: %v %v", err, res)
		}
		res.Body.Close()
	}
	shots := &shooter{t: t, dir: screenshotDir(t)}
	fan := fanTab(t)
	run(t, fan, 30*time.Second, "open the waiting room", phone(), chromedp.Navigate(s.Gateway+"/e/draw"))
	waitEval(t, fan, 30*time.Second, "join the pre-queue",
		`document.querySelector('#status') && ['waiting', 'next'].includes(document.querySelector('#status').dataset.status)`)
	var href string
	run(t, fan, 5*time.Second, "find the report link", chromedp.Evaluate(`document.querySelector('#report-link') ? document.querySelector('#report-link').getAttribute('href') : ''`, &href))
	if href != "/e/draw/report" {
		t.Fatalf("the waiting room links to %q; want /e/draw/report", href)
	}
	run(t, fan, 20*time.Second, "open the report before opening",
		chromedp.Click(`#report-link`, chromedp.ByQuery),
		chromedp.WaitVisible(`#lottery-commitment`, chromedp.ByQuery),
	)
	if c := text(t, fan, "#lottery-commitment"); len(c) != 64 {
		t.Errorf("commitment shown %q; want 64 hex digits", c)
	}
	var seeds int
	run(t, fan, 5*time.Second, "look for the seed", chromedp.Evaluate(`document.querySelectorAll('#lottery-seed').length`, &seeds))
	if seeds != 0 {
		t.Errorf("the seed is shown before opening")
	}
	commitment := text(t, fan, "#lottery-commitment")
	wordsOK(t, fan, "en", "the report before opening")
	fitsScreen(t, fan, "the report on a phone")
	checkA11y(t, fan, "the report before opening")

	time.Sleep(time.Until(opens.Add(2 * time.Second)))
	waitEval(t, fan, 30*time.Second, "the seed, the fan's draw and the charts after opening", `(() => {
		if (!document.querySelector('#lottery-rank') || !document.querySelector('#chart-rate')) {
			location.reload();
			return false;
		}
		return true;
	})()`)
	if c := text(t, fan, "#lottery-commitment"); c != commitment {
		t.Errorf("commitment %q after opening; %q before", c, commitment)
	}
	if seed := text(t, fan, "#lottery-seed"); len(seed) != 64 {
		t.Errorf("seed shown %q; want 64 hex digits", seed)
	}
	if rank := text(t, fan, "#lottery-rank"); rank < "1" || rank > "5" || len(rank) != 1 {
		t.Errorf("the fan's rank %q; want 1 to 5", rank)
	}
	if joined := text(t, fan, "#report-joined"); joined != "5" {
		t.Errorf("joined %q; want 5", joined)
	}
	shots.shot(fan, "report")
	wordsOK(t, fan, "en", "the report after opening")
	fitsScreen(t, fan, "the report with its charts on a phone")
	checkA11y(t, fan, "the report after opening")

	run(t, fan, 20*time.Second, "the report in Japanese",
		chromedp.Navigate(s.Gateway+"/e/draw/report?lang=ja"),
		chromedp.WaitVisible(`#lottery-rank`, chromedp.ByQuery),
	)
	wordsOK(t, fan, "ja", "the report in Japanese")
	if h := text(t, fan, "h1"); !strings.Contains(h, "販売レポート") {
		t.Errorf("Japanese title %q", h)
	}
	checkA11y(t, fan, "the report in Japanese")
	shots.shot(fan, "report-ja")
}
