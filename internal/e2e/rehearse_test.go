package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// rehearsalEvents: a sale at 100 fans a second with room for everyone the
// rehearsal's buyers take (600 seats and a 300-place floor).
const rehearsalEvents = `  - id: "premiere"
    name: "Premiere night"
    venue: "Shinjuku Hall 3"
    admission: {admit_per_second: 100, max_active: 500, access_ttl: "5m", abandon_after: "60s"}
    showtimes:
      - {id: 42, title: "Premiere 19:00", starts_at: "2036-12-01T19:00:00+09:00", rows: 20, seats_per_row: 30, price_cents: 1500,
         general_admission: [{code: "FLOOR", capacity: 300, price_cents: 900}]}
  - id: "tour"
    name: "Tour presale"
    opens_at: "2036-11-01T10:00:00+09:00"
    admission: {admit_per_second: 100, max_active: 500, access_ttl: "5m", abandon_after: "60s"}
    presale: {registration_opens_at: "2026-01-01T00:00:00Z", registration_closes_at: "2036-10-01T00:00:00Z", selected: 200, group_size: 100, window: "1h"}
    showtimes:
      - {id: 62, title: "Tour 19:00", starts_at: "2036-12-02T19:00:00+09:00", rows: 5, seats_per_row: 10, price_cents: 2500}
  - id: "always"
    name: "Always on"
    mode: auto
    admission: {admit_per_second: 10, max_active: 100, access_ttl: "5m", abandon_after: "60s"}
    showtimes:
      - {id: 72, title: "Always 19:00", starts_at: "2036-12-03T19:00:00+09:00", rows: 5, seats_per_row: 10, price_cents: 1000}
`

// The auto rehearsal: 400 fans on a ramp over 30 s (-duration 60s), whose
// arrivals pass the event's 10 a second after 11 s or so (the ramp ends
// at 27 a second): the first go straight through, then a line forms, and
// is let in at the rate until it dissolves, some 45 s in.
const (
	autoFans = 400
	autoRate = 10
)

const rehearsalFans = 2000

// TestRehearsal is issue 36 on one stack: cmd/rehearse drives 2,000 fans
// through the real binaries on loopback and its summary agrees with the
// room's own report; then, with the admitter and the booking core stopped
// (nothing else writes to Redis), every preview in every language is
// rendered in Chromium, accessible, and leaves every key of the line as it
// was, byte for byte, as does the operators' page showing them side by side.
func TestRehearsal(t *testing.T) {
	axeSource(t)
	// tour's presale is by account: the stack knows an origin site's keys.
	s := stack.Start(t, stack.Options{Events: rehearsalEvents, AdminToken: opsToken, AccountKeysFile: newPresaleSite(t).file})
	t.Run("rehearse agrees with the room's report", func(t *testing.T) { rehearseAgrees(t, s) })
	t.Run("rehearse an auto event", func(t *testing.T) { rehearseAuto(t, s) })
	t.Run("the README's operators' block, pasted as it is", func(t *testing.T) { operatorsBlock(t, s) })
	t.Run("previews touch nothing", func(t *testing.T) { previewsTouchNothing(t, s) })
}

// operatorsBlock runs the README's operators' block (Operating it) as a
// reader pastes it, against this stack: its one placeholder of old, a
// ticket id, is now worked out by the block itself.
func operatorsBlock(t *testing.T, s *stack.Stack) {
	out := runReadmeBlock(t, "T=$WAITROOM_ADMIN_TOKEN API=localhost:8080/api/v1",
		"T="+opsToken+" API="+strings.TrimPrefix(s.Gateway, "http://")+"/api/v1", "bash", "curl", "jq")
	// The revocation answers 204, and the revoked pass 401 at the gate.
	if !strings.Contains(out, "204\n401\n") || !strings.Contains(out, `"mode":"paused"`) {
		t.Fatalf("the README's block printed:\n%s\nwant the pause, then 204 and 401 for the revoked fan", out)
	}
}

// runReadmeBlock runs the README's sh block that starts with the line
// first, as a reader pastes it (bash -euo pipefail), that line replaced by
// vars, the stack's own; it returns what the block printed. The test fails
// when a tool the block needs is missing, when there is no such block or it
// has a placeholder (<…>) left, and when it fails.
func runReadmeBlock(t *testing.T, first, vars string, tools ...string) string {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's block starting %q needs %s: %v", first, tool, err)
		}
	}
	block := readmeBlock(t, "sh", first)
	_, block, _ = strings.Cut(block, "\n") // the rest of the first line: a comment, or nothing
	if strings.Contains(block, "<") {
		t.Fatalf("README.md's sh block starting %q has a placeholder", first)
	}
	out, err := exec.Command("bash", "-euo", "pipefail", "-c", vars+"\n"+block).CombinedOutput()
	if err != nil {
		t.Fatalf("the README's block starting %q: %v\n%s", first, err, out)
	}
	return string(out)
}

// readmeBlock is the README's block of that language (```lang) whose first
// line starts with first, from that line on, as a reader copies it; the test
// fails when there is none.
func readmeBlock(t *testing.T, lang, first string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Repo(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```"+lang+"\n"+first)
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatalf("README.md has no %s block starting %q", lang, first)
	}
	return first + block
}

func rehearseAgrees(t *testing.T, s *stack.Stack) {
	dir := t.TempDir()
	out, svg := filepath.Join(dir, "summary.json"), filepath.Join(dir, "plot.svg")
	cmd := exec.Command(filepath.Join(stack.Binaries(t), "rehearse"), "-url", s.Gateway, "-event", "premiere",
		"-fans", fmt.Sprint(rehearsalFans), "-arrival", "burst", "-duration", "2m", "-buy", "0.1", "-out", out, "-plot", svg)
	cmd.Env = append(os.Environ(), "WAITROOM_ADMIN_TOKEN=") // the public API alone
	start := time.Now()
	output, err := cmd.CombinedOutput()
	took := time.Since(start)
	t.Logf("rehearse took %v:\n%s", took.Round(100*time.Millisecond), output)
	if err != nil {
		t.Fatalf("rehearse: %v; want exit 0", err)
	}
	var sum struct {
		Ended             string `json:"ended"`
		AdmittedPerSecond struct {
			Waited     bool    `json:"waited"`
			Mean       float64 `json:"mean"`
			Configured float64 `json:"configured"`
		} `json:"admittedPerSecond"`
		Seen struct {
			Joined, Admitted, Bought int
		} `json:"seen"`
		FIFO struct {
			Compared, Inversions int
		} `json:"fifo"`
		Answers struct {
			Status5xx int64 `json:"5xx"`
		} `json:"answers"`
		Room struct {
			Admitted int64 `json:"admitted"`
		} `json:"room"`
		OK bool `json:"ok"`
	}
	readSummary(t, out, &sum)
	_, rep := reportOf(t, s.Gateway, "premiere")
	rate := rep["admittedPerSecond"].(map[string]any)
	roomAdmitted, roomMean, roomConfigured := int(rep["admitted"].(float64)), rate["mean"].(float64), rate["configured"].(float64)
	t.Logf("rehearse: %d admitted, %.2f/s (configured %.2f), %d FIFO inversions among %d fans; the room's report: %d admitted, %.2f/s (configured %.2f), %v inversions",
		sum.Seen.Admitted, sum.AdmittedPerSecond.Mean, sum.AdmittedPerSecond.Configured, sum.FIFO.Inversions, sum.FIFO.Compared,
		roomAdmitted, roomMean, roomConfigured, rep["fifoInversions"])

	if sum.Ended != "every fan was done" || sum.Seen.Joined != rehearsalFans || !sum.OK || sum.Answers.Status5xx != 0 {
		t.Errorf("ended %q, %d joined, ok %v, %d 5xx; want every one of %d fans done, no problem", sum.Ended, sum.Seen.Joined, sum.OK, sum.Answers.Status5xx, rehearsalFans)
	}
	// Admitted: every fan polls until let in, so the fans saw exactly what
	// the room counted.
	if sum.Seen.Admitted != roomAdmitted || sum.Room.Admitted != int64(roomAdmitted) || roomAdmitted != rehearsalFans {
		t.Errorf("admitted: the fans saw %d, the summary's report %d, the room's report %d; want all %d", sum.Seen.Admitted, sum.Room.Admitted, roomAdmitted, rehearsalFans)
	}
	// The rate: the same definition (admitted while fans waited, over that
	// time), measured from outside with samples every 500 ms against the
	// admitter's own ticks (200 ms): within one tick's admissions at each
	// end of a line of 20 s, 5 %.
	if !sum.AdmittedPerSecond.Waited || math.Abs(sum.AdmittedPerSecond.Mean-roomMean) > 0.05*roomMean {
		t.Errorf("admitted per second: rehearse %.2f, the room %.2f; want within 5%%", sum.AdmittedPerSecond.Mean, roomMean)
	}
	if sum.AdmittedPerSecond.Configured != roomConfigured || roomConfigured != 100 {
		t.Errorf("configured: rehearse %.2f, the room %.2f; want 100 both", sum.AdmittedPerSecond.Configured, roomConfigured)
	}
	// FIFO: none seen by the fans, none in the room's own books, and the
	// fans' check covered most of them (those seen waiting once).
	if sum.FIFO.Inversions != 0 || rep["fifoInversions"] != 0.0 || sum.FIFO.Compared < rehearsalFans/2 {
		t.Errorf("FIFO: fans saw %d among %d checked, the room %v; want 0 among at least %d", sum.FIFO.Inversions, sum.FIFO.Compared, rep["fifoInversions"], rehearsalFans/2)
	}
	if sum.Seen.Bought < rehearsalFans/20 {
		t.Errorf("%d fans bought; want about a tenth of %d (-buy 0.1)", sum.Seen.Bought, rehearsalFans)
	}
	if plot, err := os.ReadFile(svg); err != nil || !strings.Contains(string(plot), "<polyline") {
		t.Errorf("plot: %v; want an SVG with lines", err)
	}
}

// rehearseAuto is DESIGN.md's "Always on" rehearsed: cmd/rehearse drives
// the auto event with a ramp that crosses its rate, and its summary and
// plot show the joins let straight through, then the line forming and
// dissolving; and the room never let fans in faster than its rate allows,
// by its own accounts: the line's admitted count and its bucket read
// together in one MULTI every 50 ms while the fans go, each reading
// stamped with the bucket's Redis time (every admission, straight through
// or by a tick, writes it in the same script), so that over any interval
// between two readings the admissions are at most the rate × its length
// and the bucket's second's worth and one token, and no more than the
// bucket gave out; no timing of this machine comes into it.
func rehearseAuto(t *testing.T, s *stack.Stack) {
	dir := t.TempDir()
	out, svg := filepath.Join(dir, "summary.json"), filepath.Join(dir, "plot.svg")
	cmd := exec.Command(filepath.Join(stack.Binaries(t), "rehearse"), "-url", s.Gateway, "-event", "always",
		"-fans", fmt.Sprint(autoFans), "-arrival", "ramp", "-duration", "60s", "-buy", "0", "-out", out, "-plot", svg)
	cmd.Env = append(os.Environ(), "WAITROOM_ADMIN_TOKEN=")
	var output strings.Builder
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	line := queuetest.Of(t, s.RDB, "always")
	var readings []queuetest.Admissions
	var err error
	for running := true; running; {
		if a := line.Admissions(); !a.At.IsZero() && a.At.UnixMilli() > 0 {
			readings = append(readings, a)
		}
		select {
		case err = <-done:
			running = false
		case <-time.After(50 * time.Millisecond):
		}
	}
	readings = append(readings, line.Admissions())
	t.Logf("rehearse:\n%s", output.String())
	if err != nil {
		t.Fatalf("rehearse: %v; want exit 0", err)
	}
	// Never above the rate, by the room's own accounts.
	worst := math.Inf(-1)
	for i := range readings {
		for j := i + 1; j < len(readings); j++ {
			a, b := readings[i], readings[j]
			span := b.At.Sub(a.At).Seconds()
			over := float64(b.Admitted-a.Admitted) - autoRate*span
			worst = max(worst, over)
			if over > autoRate+1 {
				t.Fatalf("%d admitted over %.3f s (by Redis's clock); want at most %d/s and the bucket's %d", b.Admitted-a.Admitted, span, autoRate, autoRate+1)
			}
			if err := queuetest.RateError(a, b, autoRate, math.Inf(1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d readings of the line's accounts: at most %.2f admitted beyond %d/s over any interval between two (the bucket allows %d)", len(readings), worst, autoRate, autoRate+1)
	var sum struct {
		Ended string `json:"ended"`
		Seen  struct {
			Joined, Admitted, StraightThrough, Queued int
		} `json:"seen"`
		FIFO struct{ Compared, Inversions int } `json:"fifo"`
		Room struct {
			Admitted, StraightThrough int64
		} `json:"room"`
		Samples []struct {
			At              float64 `json:"at"`
			Waiting         int64   `json:"waiting"`
			StraightThrough int64   `json:"straightThrough"`
		} `json:"samples"`
		OK bool `json:"ok"`
	}
	readSummary(t, out, &sum)
	if sum.Ended != "every fan was done" || !sum.OK || sum.Seen.Joined != autoFans || sum.Seen.Admitted != autoFans {
		t.Errorf("ended %q, ok %v, %d joined, %d admitted; want every one of %d fans joined, let in and done, no problem",
			sum.Ended, sum.OK, sum.Seen.Joined, sum.Seen.Admitted, autoFans)
	}
	// Both kinds of join, the fans' count and the room's agreeing.
	if sum.Seen.StraightThrough == 0 || sum.Seen.Queued == 0 || sum.Seen.StraightThrough+sum.Seen.Queued != autoFans ||
		sum.Room.StraightThrough != int64(sum.Seen.StraightThrough) || sum.Room.Admitted != autoFans {
		t.Errorf("fans: %d straight through, %d queued; the room: %d straight through of %d admitted; want both kinds, adding up to %d, the room agreeing",
			sum.Seen.StraightThrough, sum.Seen.Queued, sum.Room.StraightThrough, sum.Room.Admitted, autoFans)
	}
	if sum.FIFO.Inversions != 0 {
		t.Errorf("%d FIFO inversions among %d fans; want 0", sum.FIFO.Inversions, sum.FIFO.Compared)
	}
	// The samples the plot draws: straight-through joins before anyone
	// waited, then a line, then none (dissolved) at the end.
	formed, dissolved := -1, -1
	for i, smp := range sum.Samples {
		if smp.Waiting > 0 && formed < 0 {
			formed = i
		}
		if formed >= 0 && smp.Waiting == 0 && dissolved < 0 {
			dissolved = i
		}
	}
	switch {
	case formed < 0:
		t.Errorf("no sample found anyone waiting; want the line formed (%d samples)", len(sum.Samples))
	case sum.Samples[formed].StraightThrough == 0:
		t.Errorf("the line formed at %.1f s, before any join went straight through", sum.Samples[formed].At)
	case dissolved < 0 || sum.Samples[len(sum.Samples)-1].Waiting != 0:
		t.Errorf("the line never dissolved (formed at %.1f s)", sum.Samples[formed].At)
	default:
		t.Logf("%d straight through, then the line formed at %.1f s and dissolved at %.1f s", sum.Samples[formed].StraightThrough,
			sum.Samples[formed].At, sum.Samples[dissolved].At)
	}
	plot, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(plot), "<title>of them straight through</title>") || !strings.Contains(string(plot), "<title>waiting</title>") {
		t.Errorf("plot: %v; want an SVG with the straight-through and waiting lines", err)
	}
}

// reportOf reads the sale's report.
func reportOf(t *testing.T, gateway, event string) (int, map[string]any) {
	t.Helper()
	code, _, raw, err := sendJSON(context.Background(), http.DefaultClient, gateway, http.MethodGet, "/api/v1/events/"+event+"/report", "", nil, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("report: %d %v", code, err)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return code, out
}

func previewsTouchNothing(t *testing.T, s *stack.Stack) {
	// Nothing else may write: the admitter ticks and the booking core
	// publishes the inventory. Fans in line, so the line has its keys.
	s.Stop("admitter")
	s.Stop("booking")
	for range 5 {
		joinPlain(t, s.Gateway, "premiere")
	}
	line := queuetest.Of(t, s.RDB, "premiere")
	before := line.Dump()
	if _, ok := before[line.Keys().Wait]; !ok || len(before) < 5 {
		t.Fatalf("the line's keys %v; want the wait set and the rest", slices.Sorted(maps.Keys(before)))
	}

	ctx := tab(t, browser(t))
	run(t, ctx, 10*time.Second, "the operators' token on every request of this tab",
		network.Enable(), network.SetExtraHTTPHeaders(network.Headers{"Authorization": "Bearer " + opsToken}))
	startsAt := time.Date(2036, 12, 1, 19, 0, 0, 0, time.FixedZone("", 9*3600))
	for _, state := range gateway.PreviewStates {
		for _, lang := range web.Languages {
			what := "preview " + state + " in " + lang.Code
			run(t, ctx, 20*time.Second, what, chromedp.Navigate(s.Gateway+"/api/v1/admin/events/premiere/preview?state="+state+"&lang="+lang.Code))
			var page struct {
				Lang, Text, Status string
				Loaded             []string
			}
			run(t, ctx, 10*time.Second, what, chromedp.Evaluate(`({
				lang: document.documentElement.lang,
				text: document.body.innerText,
				status: document.querySelector('#status').dataset.status,
				loaded: performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname),
			})`, &page))
			l := web.LocaleFor(lang.Code)
			for _, want := range []string{"Premiere night", "Shinjuku Hall 3", l.When(startsAt), l.Price("USD", 900)} {
				if !strings.Contains(page.Text, want) {
					t.Errorf("%s: the page does not say %q", what, want)
				}
			}
			if page.Lang != lang.Code {
				t.Errorf("%s: <html lang=%q>", what, page.Lang)
			}
			// Inert: it loaded its style sheet and icon, and nothing else.
			for _, p := range page.Loaded {
				if !strings.HasPrefix(p, "/static/") {
					t.Errorf("%s: the page asked for %s; want nothing but /static/", what, p)
				}
			}
			checkA11y(t, ctx, what)
		}
	}
	var cookies []*network.Cookie
	run(t, ctx, 5*time.Second, "cookies", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{s.Gateway}).Do(ctx)
		return err
	}))
	if len(cookies) > 0 {
		t.Errorf("the previews set %d cookies (%s …); want none", len(cookies), cookies[0].Name)
	}

	// The operators' page shows them side by side: every state in every
	// language, each in a frame that runs no script. (The same tab, the
	// token no longer added: the page sends it itself.)
	page := ctx
	run(t, page, 20*time.Second, "open /admin",
		network.SetExtraHTTPHeaders(network.Headers{}),
		chromedp.EmulateViewport(1400, 1000),
		chromedp.Navigate(s.Gateway+"/admin"),
		chromedp.WaitVisible(`#token`, chromedp.ByQuery),
		chromedp.SendKeys(`#token`, opsToken, chromedp.ByQuery),
		chromedp.Click(`#sign-in`, chromedp.ByQuery),
	)
	waitEval(t, page, 10*time.Second, "the console", `!document.querySelector('#console').hidden && document.querySelector('#event').value === 'premiere'`)
	// Every state of the chosen event: a presale's only for an event with
	// one (premiere has none, tour has).
	shown := func(event string, states []string) {
		t.Helper()
		n := len(states) * len(web.Languages)
		run(t, page, 5*time.Second, "show the previews of "+event,
			chromedp.SetValue(`#event`, event, chromedp.ByQuery), chromedp.Click(`#show-previews`, chromedp.ByQuery))
		visible := `[...document.querySelectorAll('#previews section:not([hidden]) iframe.preview')]`
		waitEval(t, page, 30*time.Second, "every preview of "+event+" in its frame", fmt.Sprintf(`document.querySelector('#previews').dataset.event === %q &&
			%s.filter((f) => f.dataset.status === '200' && f.contentDocument &&
				f.contentDocument.querySelector('main') && f.contentDocument.styleSheets.length > 0).length === %d`, event, visible, n))
		var frames []struct{ State, Lang, Sandbox, HTMLLang string }
		run(t, page, 5*time.Second, "the frames of "+event, chromedp.Evaluate(visible+`.map((f) => ({
			state: f.dataset.state, lang: f.dataset.lang, sandbox: f.getAttribute('sandbox'), htmlLang: f.contentDocument.documentElement.lang }))`, &frames))
		var got []string
		for _, f := range frames {
			if f.Sandbox != "allow-same-origin" || f.HTMLLang != f.Lang {
				t.Errorf("%s frame %s/%s: sandbox %q, lang %q; want scripts off, its language", event, f.State, f.Lang, f.Sandbox, f.HTMLLang)
			}
			if f.Lang == web.Languages[0].Code {
				got = append(got, f.State)
			}
		}
		if !slices.Equal(got, states) || len(frames) != n {
			t.Errorf("%s: %d frames, states %v; want %d, %v", event, len(frames), got, n, states)
		}
	}
	shown("premiere", gateway.PreviewStates)
	shown("tour", append(slices.Clone(gateway.PreviewStates), gateway.PresalePreviewStates...))
	n := (2*len(gateway.PreviewStates) + len(gateway.PresalePreviewStates)) * len(web.Languages)
	run(t, page, 5*time.Second, "back to premiere", chromedp.SetValue(`#event`, "premiere", chromedp.ByQuery))
	if dir := os.Getenv("WAITROOM_SCREENSHOTS"); dir != "" {
		(&shooter{t: t, dir: dir}).shot(page, "admin-previews")
	}
	checkA11y(t, page, "the operators' page with its previews")

	after := line.Dump()
	for k, v := range before {
		if w, ok := after[k]; !ok {
			t.Errorf("%s is gone", k)
		} else if w != v {
			t.Errorf("%s changed", k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared", k)
		}
	}
	t.Logf("%d keys of the line unchanged, byte for byte, across %d previews and the operators' page", len(before), n)
}

// readSummary decodes the summary rehearse wrote to out into sum.
func readSummary(t *testing.T, out string, sum any) {
	t.Helper()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, sum); err != nil {
		t.Fatalf("summary: %v", err)
	}
}
