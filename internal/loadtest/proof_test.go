package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/proof"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// proofBits are the difficulties measured, each an event of its own.
var proofBits = []int{16, 18, 20}

func proofEvents() string {
	var b strings.Builder
	for i, bits := range proofBits {
		fmt.Fprintf(&b, `  - id: "bits%d"
    admission: {admit_per_second: 100, max_active: 1000, abandon_after: "1h", join_proof_bits: %d}
    showtimes:
      - {id: %d, title: "Proof %d", starts_at: "2027-01-01T20:00:00Z", rows: 1, seats_per_row: 10, price_cents: 1000}
`, bits, bits, 10+i, bits)
	}
	return b.String()
}

// headless starts Debian's Chromium without a window, as the e2e tests do,
// and returns a tab.
func headless(tb testing.TB) context.Context {
	tb.Helper()
	bin, err := localsvc.Ensure("chromium", "chromium")
	if err != nil {
		tb.Skipf("no chromium: %v", err)
	}
	dir, err := os.MkdirTemp("", "wr-chromium-")
	if err != nil {
		tb.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(dir),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tb.Cleanup(func() { cancel(); cancelA(); _ = os.RemoveAll(dir) })
	if err := chromedp.Run(ctx); err != nil {
		tb.Fatalf("chromium: %v", err)
	}
	return ctx
}

// challengeOf asks the gateway for a place of event without a proof and
// returns the 428's challenge.
func challengeOf(tb testing.TB, gateway, event string) (string, int) {
	tb.Helper()
	var v struct {
		Challenge string `json:"challenge"`
		Bits      int    `json:"bits"`
	}
	askJSON(tb, http.MethodPost, gateway+"/api/v1/events/"+event+"/tickets", "", http.StatusPreconditionRequired, &v)
	return v.Challenge, v.Bits
}

// joinWith joins event with a solved proof and fails unless it is 201.
func joinWith(tb testing.TB, gateway, event, header string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, gateway+"/api/v1/events/"+event+"/tickets", nil)
	req.Header.Set("X-Waitroom-Proof", header)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		tb.Fatalf("join %s with the page's proof: %d; want 201", event, res.StatusCode)
	}
}

func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

type solveRun struct {
	MS    float64 `json:"ms"`
	Tries float64 `json:"tries"`
}

// pageSolve runs the waiting page's own solver (the SDK's solveProof and
// its workers) in the tab, on a gateway page, so under the gateway's CSP.
func pageSolve(tb testing.TB, tab context.Context, challenge string, bits, workers int) (solveRun, string) {
	tb.Helper()
	var out struct {
		solveRun
		Header string `json:"header"`
	}
	js := fmt.Sprintf(`import('/sdk/waitroom.js').then((m) => m.solveProof(%q, %d, {workers: %d}))`, challenge, bits, workers)
	c, cancel := context.WithTimeout(tab, 5*time.Minute)
	defer cancel()
	if err := chromedp.Run(c, chromedp.Evaluate(js, &out, awaitPromise)); err != nil {
		tb.Fatalf("solve in the page: %v", err)
	}
	return out.solveRun, out.Header
}

// subtleRate is crypto.subtle.digest's rate in the tab, hashes/s: the
// other way a page could hash, awaited in batches of 256 (one promise
// each, as a search must).
func subtleRate(tb testing.TB, tab context.Context, challenge string, n int) float64 {
	tb.Helper()
	var rate float64
	js := fmt.Sprintf(`(async () => {
		const enc = new TextEncoder();
		const t0 = performance.now();
		for (let i = 0; i < %d; i += 256) {
			const batch = [];
			for (let j = i; j < i + 256; j++) batch.push(crypto.subtle.digest('SHA-256', enc.encode(%q + ':' + j)));
			await Promise.all(batch);
		}
		return %d / ((performance.now() - t0) / 1000);
	})()`, n, challenge, n)
	if err := chromedp.Run(tab, chromedp.Evaluate(js, &rate, awaitPromise)); err != nil {
		tb.Fatalf("crypto.subtle in the page: %v", err)
	}
	return rate
}

func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i]
}

func sum(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t
}

// BenchmarkProofSolve measures what a proof of work costs a fan and a bot on
// this machine: for 16, 18 and 20 bits, challenges from the real gateway's
// 428s solved by the waiting page's own code in headless Chromium (each
// proof then joins, so the gateway vouches for every one), the same
// challenges solved by proof.Solve in Go on one core (what a bot's server
// does), and the raw hash rates: the page's solver with one worker,
// crypto.subtle.digest, Go.
func BenchmarkProofSolve(b *testing.B) {
	per := envInt(b, "WAITROOM_LOADTEST_PROOFS", 30)
	s := stack.Start(b, stack.Options{Events: proofEvents()})
	tab := headless(b)
	if err := chromedp.Run(tab, chromedp.Navigate(s.Gateway+"/")); err != nil {
		b.Fatal(err)
	}
	var cores int
	if err := chromedp.Run(tab, chromedp.Evaluate(`navigator.hardwareConcurrency`, &cores)); err != nil {
		b.Fatal(err)
	}
	workers := max(1, min(cores, 4)) // as solveProof picks them

	type row struct {
		bits              int
		page, goMS, tries []float64
		goTries           float64
	}
	var rows []row
	var oneTries, oneMS float64
	for _, bits := range proofBits {
		r := row{bits: bits}
		ev := "bits" + strconv.Itoa(bits)
		for i := range per {
			ch, got := challengeOf(b, s.Gateway, ev)
			if got != bits {
				b.Fatalf("%s asks %d bits; want %d", ev, got, bits)
			}
			run, header := pageSolve(b, tab, ch, bits, workers)
			joinWith(b, s.Gateway, ev, header)
			r.page, r.tries = append(r.page, run.MS), append(r.tries, run.Tries)
			t0 := time.Now()
			n, _ := strconv.ParseUint(proof.Solve(ch, bits), 10, 64)
			r.goMS = append(r.goMS, float64(time.Since(t0).Microseconds())/1000)
			r.goTries += float64(n + 1) // the smallest nonce: every one below it was tried
			if bits == 18 && i < 5 {    // one worker alone: the rate of one core
				one, _ := pageSolve(b, tab, ch, bits, 1)
				oneTries, oneMS = oneTries+one.Tries, oneMS+one.MS
			}
		}
		b.Logf("bits %d: page median %.0f ms p90 %.0f ms; Go median %.1f ms", bits, quantile(r.page, 0.5), quantile(r.page, 0.9), quantile(r.goMS, 0.5))
		rows = append(rows, r)
	}
	ch, _ := challengeOf(b, s.Gateway, "bits16")
	subtle := subtleRate(b, tab, ch, 1<<16)
	// The page's rate: tries over all its workers per second of waiting.
	pageRate := 0.0
	for _, r := range rows {
		pageRate += sum(r.tries) / (sum(r.page) / 1000)
	}
	pageRate /= float64(len(rows))
	oneRate := oneTries / (oneMS / 1000)
	var goTries, goMS float64
	for _, r := range rows {
		goTries, goMS = goTries+r.goTries, goMS+sum(r.goMS)
	}
	goRate := goTries / (goMS / 1000)

	var md strings.Builder
	fmt.Fprintf(&md, `## Proof of work: what a place costs a fan's browser and a bot

Measured %s. For each difficulty, %d challenges from the real gateway's 428 answers, each
solved by the waiting page's own code (the SDK's `+"`solveProof`"+` and its workers, %d here:
one per core, at most four) in headless Chromium on a gateway page, under its CSP; each
proof then joined (201: the gateway checked every one). The same challenges solved by
`+"`proof.Solve`"+` in Go on one core stand for a bot's server. Times are per place.

| bits | hashes a place (2^bits) | tries, mean | page: median | page: p90 | page: slowest | Go, one core: median |
|---:|---:|---:|---:|---:|---:|---:|
`, time.Now().UTC().Format("2006-01-02 15:04 UTC"), per, workers)
	for _, r := range rows {
		fmt.Fprintf(&md, "| %d | %s | %s | **%s** | **%s** | %s | %s |\n", r.bits, thousands(1<<r.bits),
			thousands(int64(sum(r.tries)/float64(len(r.tries)))), msf(quantile(r.page, 0.5)), msf(quantile(r.page, 0.9)),
			msf(slices.Max(r.page)), msf(quantile(r.goMS, 0.5)))
	}
	fmt.Fprintf(&md, `
| hash rate | hashes/s |
|---|---:|
| the page's solver, %d workers | %s |
| the page's solver, one worker (one core) | %s |
| `+"`crypto.subtle.digest`"+` in the page, awaited 256 at a time | %s |
| Go `+"`proof.Solve`"+`, one core (SHA-NI) | %s |

Load average (1 min) at the end: %s.

The number of tries is random (geometric, mean 2^bits): one fan in ten tries 2.3 times
the mean (3.3 times the median) or more, whatever the machine, so the p90 is the figure to
size by. The page's times include starting its workers (tens of milliseconds).
A plain JavaScript SHA-256 over the one block that holds the nonce is %.0f× faster than
`+"`crypto.subtle.digest`"+`, whose promise per hash dominates; the page keeps it.
`, workers, thousands(int64(pageRate)), thousands(int64(oneRate)), thousands(int64(subtle)), thousands(int64(goRate)),
		loadAverage(), oneRate/subtle)
	writeReport(b, "proof", md.String())
}

func msf(ms float64) string {
	switch {
	case ms >= 10_000:
		return fmt.Sprintf("%.0f s", ms/1000)
	case ms >= 1000:
		return fmt.Sprintf("%.1f s", ms/1000)
	case ms >= 10:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f ms", ms)
}

func median(v []float64) float64 { return quantile(v, 0.5) }
