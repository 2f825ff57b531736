package loadtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// TestMain doubles as the bare server of BenchmarkEdge: when the benchmark
// re-executes this test binary with bareAddrEnv set, it serves the bare
// fiber handler instead of running tests (edge_test.go).
func TestMain(m *testing.M) {
	if addr := os.Getenv(bareAddrEnv); addr != "" {
		os.Exit(serveBare(addr))
	}
	os.Exit(m.Run())
}

// Knobs for short smoke runs while developing; `make bench` uses the defaults.
//
//	WAITROOM_LOADTEST_DOCS     folder for PERFORMANCE.md and sale.png (default: the repo's docs/)
//	WAITROOM_LOADTEST_POINT    duration of one BenchmarkEdge point (default 5s)
//	WAITROOM_LOADTEST_WAITING  fans in BenchmarkMillionWaiting (default 1000000)
//	WAITROOM_LOADTEST_FANS     fans in BenchmarkSale (default 20000)
func docsDir(tb testing.TB) string {
	if d := os.Getenv("WAITROOM_LOADTEST_DOCS"); d != "" {
		return d
	}
	return filepath.Join(testenv.Repo(tb), "docs")
}

// envInt is the positive integer the environment variable name holds, or
// def when it is unset.
func envInt(tb testing.TB, name string, def int) int {
	return envPositive(tb, name, def, strconv.Atoi, "integer")
}

// envDuration is the positive duration the environment variable name
// holds, or def when it is unset.
func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	return envPositive(tb, name, def, time.ParseDuration, "duration")
}

// envPositive reads the environment variable name with parse: def when it
// is unset, and the benchmark stops when it is not a positive what.
func envPositive[T int | time.Duration](tb testing.TB, name string, def T, parse func(string) (T, error), what string) T {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := parse(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive %s", name, v, what)
	}
	return n
}

// loadAverage is the machine's 1-minute load average (our own processes
// included), printed next to the figures so a reader can tell a quiet run
// from a crowded one.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0] + " on " + strconv.Itoa(runtime.NumCPU()) + " cores"
}

// writeReport writes body as the section name of docs/PERFORMANCE.md
// (WAITROOM_LOADTEST_DOCS/PERFORMANCE.md when that is set).
func writeReport(tb testing.TB, name, body string) {
	tb.Helper()
	if err := writeSection(filepath.Join(docsDir(tb), "PERFORMANCE.md"), name, body); err != nil {
		tb.Fatal(err)
	}
}

// noneFailed is the report's sentence when every answer was the one
// expected.
const noneFailed = "No request failed or got an unexpected status."

// failures is the report's sentence on the answers that failed or were
// not the one expected: none when notes is empty, else lead and the notes.
func failures(notes []string, none, lead string) string {
	if len(notes) == 0 {
		return "\n" + none + "\n"
	}
	return fmt.Sprintf("\n%s: %s.\n", lead, strings.Join(notes, "; "))
}

// askJSON sends method url with body (JSON; "" for none) and decodes the
// answer's JSON body into v. The benchmark stops when the request fails, is
// not answered want, or its body does not decode.
func askJSON(tb testing.TB, method, url, body string, want int, v any) {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil || res.StatusCode != want {
		tb.Fatalf("%s %s: %d %+v %v; want %d", method, url, res.StatusCode, v, err, want)
	}
}

// scrape sums the samples of metric, at the Prometheus text endpoint url,
// whose labels contain every one of labels (e.g. `code="503"`). found is
// false when no sample matched (the metric may not be exported yet).
func scrape(url, metric string, labels ...string) (sum float64, found bool, err error) {
	res, err := http.Get(url)
	if err != nil {
		return 0, false, err
	}
	defer res.Body.Close()
	return sumSamples(res.Body, metric, labels...)
}

func sumSamples(r io.Reader, metric string, labels ...string) (sum float64, found bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
next:
	for sc.Scan() {
		l := sc.Text()
		rest, ok := strings.CutPrefix(l, metric)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		for _, want := range labels {
			if !strings.Contains(rest, want) {
				continue next
			}
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, false, err
		}
		sum, found = sum+v, true
	}
	return sum, found, sc.Err()
}

func TestSummarize(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3}
	l := summarize(d)
	if l.N != 5 || l.P50 != 3 || l.P99 != 5 || l.Max != 5 {
		t.Errorf("summarize = %+v; want N 5, P50 3, P99 5, Max 5", l)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1000000: "1,000,000", -12345: "-12,345"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%d) = %q; want %q", in, got, want)
		}
	}
}

func TestSumSamples(t *testing.T) {
	const text = `# HELP waitroom_http_requests_total x
# TYPE waitroom_http_requests_total counter
waitroom_http_requests_total{code="200",route="/a",service="gateway"} 10
waitroom_http_requests_total{code="503",route="/a",service="gateway"} 2
waitroom_http_requests_total{code="500",route="/b",service="gateway"} 3
waitroom_http_requests_total_extra{code="500"} 100
waitroom_admitted_total{event="sale"} 42
`
	tests := []struct {
		name   string
		metric string
		labels []string
		want   float64
		found  bool
	}{
		{"all codes", "waitroom_http_requests_total", nil, 15, true},
		{"5xx", "waitroom_http_requests_total", []string{`code="5`}, 5, true},
		{"by event", "waitroom_admitted_total", []string{`event="sale"`}, 42, true},
		{"absent", "waitroom_admitted_total", []string{`event="other"`}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found, err := sumSamples(strings.NewReader(text), tt.metric, tt.labels...)
			if err != nil || got != tt.want || found != tt.found {
				t.Errorf("sumSamples = %v, %v, %v; want %v, %v, nil", got, found, err, tt.want, tt.found)
			}
		})
	}
}

func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "PERFORMANCE.md")
	if err := writeSection(path, "sale", "sale figures v1"); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, "edge", "edge figures\n"); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, "sale", "sale figures v2\n"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{reportHeader, "edge figures\n", "sale figures v2\n", "<!-- begin million -->\n" + notMeasured} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "v1") {
		t.Errorf("report kept the replaced section:\n%s", got)
	}
	if e, s := strings.Index(got, "edge figures"), strings.Index(got, "sale figures"); e > s {
		t.Errorf("sections out of order: edge at %d, sale at %d", e, s)
	}
	// What follows the last section is written by hand, and stays.
	if err := os.WriteFile(path, []byte(got+"\n## By hand\n\nkept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(path, "edge", "edge figures v2\n"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if !strings.HasSuffix(string(b), "<!-- end transparency -->\n\n## By hand\n\nkept\n") || !strings.Contains(string(b), "edge figures v2") {
		t.Errorf("a rewrite lost the text after the last section, or kept it elsewhere:\n%s", b)
	}
}
