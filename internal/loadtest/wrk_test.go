package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// wrkScript is the Lua of a wrk run: status polls cycle over the tickets
// in the file WRK_TICKETS, one per line, spread along the whole line;
// joins are a POST each (both answer 2xx: wrk counts the others). wrk's own request loop is C: a lighter client
// than our fasthttp one, so the server's side shows more clearly.
const wrkScript = `
local tickets = {}
local route = os.getenv("WRK_ROUTE")
local base = os.getenv("WRK_BASE")
if route == "status" then
  for line in io.lines(os.getenv("WRK_TICKETS")) do tickets[#tickets + 1] = line end
end
local i = 0
request = function()
  if route == "join" then
    return wrk.format("POST", base)
  end
  i = i + 1
  return wrk.format("GET", base .. tickets[(i * 7919) % #tickets + 1])
end
`

// wrkResult is one wrk run.
type wrkResult struct {
	RPS      float64
	P50, P99 time.Duration
	Errors   int             // non-2xx answers and socket errors
	CPU      []time.Duration // per request, of each process asked
	PerRead  float64         // requests answered per read Redis made of its sockets (the pipelines' batch size)
}

var (
	wrkRPS     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkPct     = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.0+)?%\s+([0-9.]+)(us|ms|s)\b`)
	wrkNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSockets = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// parseWrk reads wrk's --latency report.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := wrkRPS.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk's output:\n%s", out)
	}
	r.RPS, _ = strconv.ParseFloat(m[1], 64)
	for _, p := range wrkPct.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(p[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[p[3]]
		d := time.Duration(v * float64(unit))
		if p[1] == "50" {
			r.P50 = d
		} else {
			r.P99 = d
		}
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.Atoi(m[1])
		r.Errors += n
	}
	if m := wrkSockets.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.Atoi(s)
			r.Errors += n
		}
	}
	return r, nil
}

func TestParseWrk(t *testing.T) {
	out := `Running 5s test @ http://127.0.0.1:1/
  1 threads and 100 connections
  Latency Distribution
     50%  812.00us
     75%    1.20ms
     90%    5.00ms
     99%   12.50ms
  150000 requests in 5.00s, 30.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  30012.34
`
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.RPS != 30012.34 || r.P50 != 812*time.Microsecond || r.P99 != 12500*time.Microsecond || r.Errors != 7 {
		t.Errorf("parseWrk = %+v; want 30012.34 req/s, p50 812µs, p99 12.5ms, 7 errors", r)
	}
	if _, err := parseWrk("garbage"); err == nil {
		t.Error("parseWrk(garbage): no error")
	}
}

// cpuTime is the CPU a process has used so far (user + system, from
// /proc: clock ticks of 10 ms).
func cpuTime(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command's name, which ends with the last ')'.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// runWrk runs wrk -t1 against base for d; pids are the processes whose
// CPU per request it reports (CPU[i] for pids[i]).
// rdb, if not nil, is the gateway's Redis: PerRead is measured on it.
func runWrk(tb testing.TB, rdb *redis.Client, wrk, script, route, base, tickets string, conns int, d time.Duration, pids ...int) wrkResult {
	tb.Helper()
	var reads0 int64
	if rdb != nil {
		reads0 = redisReads(tb, rdb)
	}
	cpu0 := make([]time.Duration, len(pids))
	for i, pid := range pids {
		cpu0[i] = cpuTime(tb, pid)
	}
	cmd := exec.Command(wrk, "-t1", "-c"+strconv.Itoa(conns), "-d"+strconv.Itoa(int(d.Seconds()))+"s",
		"--latency", "-s", script, base)
	cmd.Env = append(os.Environ(), "WRK_ROUTE="+route, "WRK_BASE="+base, "WRK_TICKETS="+tickets)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("wrk: %v\n%s", err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		tb.Fatal(err)
	}
	n := r.RPS * d.Seconds()
	for i, pid := range pids {
		r.CPU = append(r.CPU, time.Duration(float64(cpuTime(tb, pid)-cpu0[i])/n))
	}
	if rdb != nil {
		r.PerRead = n / float64(max(1, redisReads(tb, rdb)-reads0))
	}
	return r
}

// redisReads is how many reads of its clients' sockets a Redis has made.
func redisReads(tb testing.TB, rdb *redis.Client) int64 {
	tb.Helper()
	return testenv.RedisInfoInt(tb, rdb, "stats", "total_reads_processed")
}

// wrkRig is what a wrk benchmark measures with: wrk, how long a point runs
// and in how many interleaved rounds, the stack's gateway and its Redis
// (their CPU per request, the requests per Redis read), the bare server
// beside them, and a folder for wrk's scripts.
type wrkRig struct {
	wrk             string
	point           time.Duration
	rounds          int
	gateway         string
	gwPid, redisPid int
	rdb             *redis.Client
	bare            string
	barePid         int
	dir             string
}

// newWrkRig finds wrk and reads the point's length and the rounds, before
// the benchmark starts its stack.
func newWrkRig(b *testing.B) *wrkRig {
	b.Helper()
	wrk, err := localsvc.Ensure("wrk", "wrk")
	if err != nil {
		b.Fatal(err)
	}
	return &wrkRig{
		wrk:    wrk,
		point:  envDuration(b, "WAITROOM_LOADTEST_POINT", 5*time.Second),
		rounds: envInt(b, "WAITROOM_LOADTEST_WRK_ROUNDS", 3),
		dir:    b.TempDir(),
	}
}

// aimAt points the rig at s's gateway and its Redis, and starts the bare
// server beside them, answering bodies of joinSize and statusSize bytes.
func (r *wrkRig) aimAt(b *testing.B, s *stack.Stack, joinSize, statusSize int) {
	b.Helper()
	r.gateway, r.gwPid, r.redisPid = s.Gateway, s.Proc("gateway").Pid(), s.Redis.Pid()
	r.rdb = redis.NewClient(&redis.Options{Addr: s.Redis.Addr})
	b.Cleanup(func() { r.rdb.Close() })
	r.bare, r.barePid = startBareProc(b, joinSize, statusSize)
}

// script writes a wrk script into the rig's folder and returns its path.
func (r *wrkRig) script(b *testing.B, name, lua string) string {
	b.Helper()
	p := filepath.Join(r.dir, name+".lua")
	if err := os.WriteFile(p, []byte(lua), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// onGateway runs one point against the gateway's path: CPU[0] is the
// gateway's per request, CPU[1] its Redis's.
func (r *wrkRig) onGateway(b *testing.B, script, route, path, tickets string, conns int) wrkResult {
	return runWrk(b, r.rdb, r.wrk, script, route, r.gateway+path, tickets, conns, r.point, r.gwPid, r.redisPid)
}

// onBare runs the same point against the bare server: CPU[0] is its own.
func (r *wrkRig) onBare(b *testing.B, script, route, path, tickets string, conns int) wrkResult {
	return runWrk(b, nil, r.wrk, script, route, r.bare+path, tickets, conns, r.point, r.barePid)
}

// interleave runs one round of runs, starting one further along each
// round (a, b; then b, a; …), so that a drift of the machine's load over
// the rounds falls on every run alike.
func interleave(round int, runs ...func()) {
	for i := range runs {
		runs[(i+round)%len(runs)]()
	}
}

// BenchmarkEdgeWrk is the edge's headline figure with wrk as the client:
// join and status through the real gateway and through a bare fiber
// handler answering bodies of the same size, interleaved rounds (gateway
// then bare, then bare then gateway, …), at 100 and 1,000 connections.
func BenchmarkEdgeWrk(b *testing.B) {
	rig := newWrkRig(b)
	lineLen := envInt(b, "WAITROOM_LOADTEST_EDGE_LINE", 100_000)
	ctx := context.Background()

	s := stack.Start(b, stack.Options{Events: edgeEvents})
	every := int64(max(1, lineLen/10_000))
	placed, _ := fillLine(ctx, b, s, "edge", lineLen, func(pos int64) bool { return pos%every == 0 })
	tickets := filepath.Join(rig.dir, "tickets")
	var list strings.Builder
	for _, p := range placed {
		list.WriteString(p.Ticket + "\n")
	}
	if err := os.WriteFile(tickets, []byte(list.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	joinPath := "/api/v1/events/edge/tickets"
	statusPath := joinPath + "/"
	joinSize := bodySize(b, http.MethodPost, s.Gateway+joinPath, http.StatusCreated)
	statusSize := bodySize(b, http.MethodGet, s.Gateway+statusPath+placed[len(placed)/2].Ticket, http.StatusOK)
	rig.aimAt(b, s, joinSize, statusSize)
	script := rig.script(b, "edge", wrkScript) // the route comes from WRK_ROUTE

	type point struct {
		route    string
		conns    int
		gw, bare []wrkResult
		target   float64
	}
	var points []point
	routes := strings.Split(os.Getenv("WAITROOM_LOADTEST_WRK_ROUTES"), ",") // default both
	if routes[0] == "" {
		routes = []string{"status", "join"}
	}
	for _, route := range routes {
		path := statusPath
		target := 0.50
		if route == "join" {
			path, target = joinPath, 0.40
		}
		for _, conns := range []int{100, 1000} {
			p := point{route: route, conns: conns, target: target}
			for round := range rig.rounds {
				interleave(round, func() {
					p.gw = append(p.gw, rig.onGateway(b, script, route, path, tickets, conns))
				}, func() {
					p.bare = append(p.bare, rig.onBare(b, script, route, path, tickets, conns))
				})
				g, r := p.gw[round], p.bare[round]
				b.Logf("wrk %s × %d round %d: gateway %.0f/s p50 %v p99 %v (%d errors; CPU/req gateway %v, Redis %v; %.1f requests per Redis read); bare %.0f/s p50 %v p99 %v (%d errors; CPU/req %v)",
					route, conns, round+1, g.RPS, g.P50, g.P99, g.Errors, g.CPU[0], g.CPU[1], g.PerRead, r.RPS, r.P50, r.P99, r.Errors, r.CPU[0])
			}
			points = append(points, p)
			b.ReportMetric(medianRPS(p.gw)/medianRPS(p.bare), route+fmt.Sprint(conns)+"-wrk-ratio")
		}
	}

	var md strings.Builder
	fmt.Fprintf(&md, `## Edge with wrk: join and status through the gateway, next to a bare handler

Measured %s with `+"`wrk -t1 -c<N> -d%ds --latency`"+` (Debian's wrk: one client
thread in C, lighter than the fasthttp generator above, so the server's side shows more
clearly). Event "edge" paused, %s fans in line, status polls cycling over tickets spread
along the whole line, every join a new fan. The **bare** server is a fiber handler in its
own process answering bodies of the same size (join %d B, status %d B) and doing nothing
else. %d interleaved rounds per point (gateway then bare, then bare then gateway, …); the
ratio is of the medians; latency and CPU are the median round's. CPU per request is the
process's user + system time over the run (from /proc, 10 ms ticks) divided by the
requests answered. Requests per Redis read: the requests answered per read Redis made of its
clients' sockets (INFO), that is, how many the gateway's pipelines carried per batch.

| route | connections | gateway req/s (rounds) | gateway p50 / p99 | CPU per request: gateway, its Redis | requests per Redis read | bare req/s (rounds) | bare CPU per request | gateway ÷ bare | goal |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---|
`, time.Now().UTC().Format("2006-01-02 15:04 UTC"), int(rig.point.Seconds()), thousands(int64(lineLen)), joinSize, statusSize, rig.rounds)
	var errNotes []string
	for _, p := range points {
		ratio := medianRPS(p.gw) / medianRPS(p.bare)
		mark := "met"
		if ratio < p.target {
			mark = "**missed**"
		}
		mid, bmid := medianRound(p.gw), medianRound(p.bare)
		fmt.Fprintf(&md, "| %s | %s | %s | %s / %s | %s, %s | %.1f | %s | %s | **%.0f%%** | ≥ %.0f%% %s |\n", p.route, thousands(int64(p.conns)),
			rpsList(p.gw), ms(mid.P50), ms(mid.P99), us(mid.CPU[0]), us(mid.CPU[1]), mid.PerRead, rpsList(p.bare), us(bmid.CPU[0]), 100*ratio, 100*p.target, mark)
		for i := range p.gw {
			if n := p.gw[i].Errors + p.bare[i].Errors; n > 0 {
				errNotes = append(errNotes, fmt.Sprintf("%s × %d round %d: gateway %d, bare %d", p.route, p.conns, i+1, p.gw[i].Errors, p.bare[i].Errors))
			}
		}
	}
	md.WriteString(wrkFailures(errNotes))
	fmt.Fprintf(&md, "\nLoad average (1 min) when the last point ended: %s.\n", loadAverage())
	writeReport(b, "wrk", md.String())
}

// wrkFailures is the report's sentence on a wrk benchmark's failed or
// unexpected answers.
func wrkFailures(notes []string) string {
	return failures(notes, noneFailed, "Failed or unexpected answers (wrk counts them in req/s)")
}

func medianRPS(rs []wrkResult) float64 { return medianRound(rs).RPS }

// medianRound is the round of median throughput.
func medianRound(rs []wrkResult) wrkResult {
	s := append([]wrkResult(nil), rs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j].RPS < s[i].RPS {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }

func rpsList(rs []wrkResult) string {
	var out []string
	for _, r := range rs {
		out = append(out, thousands(int64(r.RPS)))
	}
	return strings.Join(out, ", ")
}
