package opscheck

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// exportedNames is every series name a dashboard or an alert may select:
// what the three real binaries expose on /metrics, scraped from a running
// stack after a little traffic, plus the series Prometheus makes itself.
// It is scraped once per test binary.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	scrapeOnce.Do(func() { scraped, scrapeErr = scrapeStack(t) })
	if scrapeErr != nil {
		t.Fatalf("scrape the running binaries: %v", scrapeErr)
	}
	names := seriesNames(scraped)
	for _, n := range prometheusSeries {
		names[n] = true
	}
	return names
}

var (
	scrapeOnce sync.Once
	scraped    map[string]string
	scrapeErr  error
)

// scrapeStack starts the real gateway, admitter and booking, joins a fan and
// reads every process's /metrics. Email is on (an SMTP address nobody is
// sent to: no fan steps away), so the admitter exports its email series.
func scrapeStack(t *testing.T) (map[string]string, error) {
	s := stack.Start(t, stack.Options{Notify: `{smtp_url: "smtp://127.0.0.1:2525"}`, Events: `  - id: "premiere"
    admission: {admit_per_second: 10, max_active: 10}
    showtimes:
      - {id: 42, title: "T", starts_at: "2026-12-01T19:00:00Z", rows: 2, seats_per_row: 5, price_cents: 1500}
`})
	res, err := http.Post(s.Gateway+"/api/v1/events/premiere/tickets", "application/json", nil)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	// The series that need something to have happened: the booking core's
	// inventory published to the line (the gateway's places gauges), and
	// the fan admitted by a tick (the admitter's counters).
	need := map[string]string{s.Gateway: "waitroom_places_available", s.Admitter: "waitroom_admitted_total"}
	var families map[string]string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		families = map[string]string{}
		missing := ""
		for _, base := range []string{s.Gateway, s.Booking, s.Admitter} {
			fams, err := scrape(base)
			if err != nil {
				return nil, err
			}
			if n := need[base]; n != "" && fams[n] == "" {
				missing = n
			}
			for k, v := range fams {
				families[k] = v
			}
		}
		if missing == "" {
			return families, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no %s after 30s", missing)
		}
	}
}

// scrape reads base's /metrics: its metric families.
func scrape(base string) (map[string]string, error) {
	res, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	fams, err := parseExposition(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s/metrics: %w", base, err)
	}
	return fams, nil
}

// TestAgreedMetricsAreExported: every metric the docs and the team agreed on
// is really on a /metrics page of a running binary.
func TestAgreedMetricsAreExported(t *testing.T) {
	names := exportedNames(t)
	for _, n := range sortedKeys(seriesNames(agreedMetrics)) {
		if !names[n] {
			t.Errorf("%s is agreed but no running binary exports it", n)
		}
	}
}

// repoRoot is the folder holding go.mod, found from the test's working
// directory (the package folder) upwards.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's working directory")
		}
		dir = parent
	}
}

// readRepoFile reads a file by its path relative to the repository root.
func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// promtool finds promtool, installing Debian's prometheus package if needed.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := localsvc.Ensure("promtool", "prometheus")
	if err != nil {
		t.Fatalf("promtool: %v", err)
	}
	return p
}

// run runs a command in dir and returns its combined output.
func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// unknownNames returns the names in used that are not in known.
func unknownNames(used []string, known map[string]bool) []string {
	var bad []string
	for _, n := range used {
		if !known[n] {
			bad = append(bad, n)
		}
	}
	return bad
}

// exportedMetrics is the metrics expr selects, what's expression (a
// panel's, an alert's). The test fails when expr does not parse, selects no
// metric, or selects one that is not in known.
func exportedMetrics(t *testing.T, what, expr string, known map[string]bool) []string {
	t.Helper()
	names, err := metricNames(expr)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return nil
	}
	if len(names) == 0 {
		t.Errorf("%s: expression selects no metric: %q", what, expr)
	}
	if bad := unknownNames(names, known); len(bad) > 0 {
		t.Errorf("%s: not exported: %q", what, bad)
	}
	return names
}

// markdownAnchors returns the anchors GitHub gives the headings of a Markdown
// document: lower case, punctuation but - and _ dropped, spaces as -, and a
// -1, -2 … suffix on repeats.
func markdownAnchors(doc string) map[string]bool {
	drop := regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
	anchors, count := map[string]bool{}, map[string]int{}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := count[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		count[slug]++
	}
	return anchors
}
