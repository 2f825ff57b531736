package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/proof"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// The bare server is this test binary re-executed with bareAddrEnv set: a
// fiber app in its own process, like the gateway, answering the join and
// status routes with a JSON body of the same size as the gateway's and
// doing nothing else. The gateway's share of the bare handler's throughput
// is the edge's headline figure.
const (
	bareAddrEnv   = "WAITROOM_LOADTEST_BARE_ADDR"
	bareJoinEnv   = "WAITROOM_LOADTEST_BARE_JOIN_BYTES"
	bareStatusEnv = "WAITROOM_LOADTEST_BARE_STATUS_BYTES"
)

// bareJSON is shaped like the gateway's waiting answer; Pad brings the body
// to the gateway's size.
type bareJSON struct {
	Status      string `json:"status"`
	Position    int64  `json:"position"`
	Ahead       int64  `json:"ahead"`
	ETASeconds  *int64 `json:"etaSeconds"`
	PollAfterMs int64  `json:"pollAfterMs"`
	Pad         string `json:"pad"`
}

func bareBody(size int) bareJSON {
	v := bareJSON{Status: "waiting", Position: 4242, Ahead: 4241, PollAfterMs: 10604}
	b, _ := json.Marshal(v)
	if size > len(b) {
		v.Pad = strings.Repeat("x", size-len(b))
	}
	return v
}

// serveBare runs the bare server until SIGTERM; it returns the exit code.
func serveBare(addr string) int {
	joinSize, _ := strconv.Atoi(os.Getenv(bareJoinEnv))
	statusSize, _ := strconv.Atoi(os.Getenv(bareStatusEnv))
	join, status := bareBody(joinSize), bareBody(statusSize)
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ReadBufferSize: 16 << 10})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Post("/api/v1/events/:event/tickets", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.Status(fiber.StatusCreated).JSON(join)
	})
	app.Get("/api/v1/events/:event/tickets/:ticket", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.JSON(status)
	})
	// Forward auth's answer to a proxy, bare: 200 and nothing else.
	app.Get("/api/v1/forward-auth", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		_ = app.ShutdownWithTimeout(5 * time.Second)
	}()
	if err := app.Listen(addr); err != nil {
		fmt.Fprintln(os.Stderr, "bare:", err)
		return 1
	}
	return 0
}

// startBare re-executes the test binary as the bare server and returns its
// base URL once it answers.
func startBare(tb testing.TB, joinSize, statusSize int) string {
	tb.Helper()
	url, _ := startBareProc(tb, joinSize, statusSize)
	return url
}

// startBareProc is startBare, also returning the server's process id.
func startBareProc(tb testing.TB, joinSize, statusSize int) (string, int) {
	tb.Helper()
	port, err := localsvc.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), bareAddrEnv+"="+addr,
		bareJoinEnv+"="+strconv.Itoa(joinSize), bareStatusEnv+"="+strconv.Itoa(statusSize))
	logf, err := os.Create(filepath.Join(tb.TempDir(), "bare.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("bare server: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	url := "http://" + addr
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-done:
			tb.Fatalf("bare server exited at start (log %s)", logf.Name())
		default:
		}
		if res, err := http.Get(url + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return url, cmd.Process.Pid
			}
		}
	}
	tb.Fatal("bare server not ready after 15s")
	return "", 0
}

// load is one measured point.
type load struct {
	RPS    float64
	Lat    latency
	Errors int // transport errors and unexpected status codes
}

// loadSpec describes a run of hammer.
type loadSpec struct {
	Addr    string        // host:port
	Conns   int           // connections = workers
	Warm    time.Duration // not measured
	Measure time.Duration
	// Rate paces the workers to this many requests per second in total;
	// 0 sends back to back (closed loop).
	Rate float64
	Want int // expected status code
	// Prepare sets method and URI of request i of worker w.
	Prepare func(w, i int, req *fasthttp.Request)
}

// hammer drives load with fasthttp: one keep-alive connection per worker
// (MaxConns = Conns). Requests started during the warm-up are not counted.
func hammer(spec loadSpec) load {
	c := &fasthttp.HostClient{
		Addr: spec.Addr, MaxConns: spec.Conns, MaxConnWaitTimeout: 30 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		MaxIdleConnDuration: time.Minute,
	}
	defer c.CloseIdleConnections()
	start := time.Now()
	from, end := start.Add(spec.Warm), start.Add(spec.Warm+spec.Measure)
	var interval time.Duration
	if spec.Rate > 0 {
		interval = time.Duration(float64(spec.Conns) / spec.Rate * float64(time.Second))
	}
	per := make([][]time.Duration, spec.Conns)
	errs := make([]int, spec.Conns)
	var wg sync.WaitGroup
	for w := range spec.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(res)
			next := start.Add(interval * time.Duration(w) / time.Duration(spec.Conns))
			for i := 0; ; i++ {
				if interval > 0 {
					time.Sleep(time.Until(next))
					next = next.Add(interval)
				}
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				spec.Prepare(w, i, req)
				err := c.Do(req, res)
				d := time.Since(t0)
				if t0.Before(from) {
					continue
				}
				if err != nil || res.StatusCode() != spec.Want {
					errs[w]++
					if err != nil {
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				per[w] = append(per[w], d)
			}
		}()
	}
	wg.Wait()
	var all []time.Duration
	out := load{}
	for w := range per {
		all = append(all, per[w]...)
		out.Errors += errs[w]
	}
	out.Lat = summarize(all)
	out.RPS = float64(len(all)) / spec.Measure.Seconds()
	return out
}

// edgeEvents: "edge" asks no proof of work; "edge-proof" is the same sale
// asking one. Its 8 bits keep the load generator's solving cheap: what the
// gateway does with a proof (one HMAC, one SHA-256, one SADD in the join's
// script) does not depend on the bits.
var edgeEvents = standingLine("edge", "Edge benchmark", 1, "Edge 20:00", "2027-01-01T20:00:00Z", "") +
	standingLine("edge-proof", "Edge benchmark, proof of work", 2, "Edge 21:00", "2027-01-01T21:00:00Z",
		fmt.Sprintf(", join_proof_bits: %d", edgeProofBits))

// standingLine is the config of a sale whose line stands still (mode
// "paused": every status answer "waiting", nobody admitted) and never
// sells out (its showtime has a floor of a million places), for the
// benchmarks that fill a line: the event id, its name, its showtime's id,
// title and start, and admission settings to add ("" for none).
func standingLine(id, name string, showtime int, title, startsAt, admission string) string {
	return fmt.Sprintf(`  - id: %q
    name: %q
    mode: "paused"
    admission: {admit_per_second: 100, max_active: 500, access_ttl: "10m", abandon_after: "1h"%s}
    showtimes:
      - {id: %d, title: %q, starts_at: %q, rows: 1, seats_per_row: 10, price_cents: 1000,
         general_admission: [{code: "FLOOR", capacity: 1000000, price_cents: 1000}]}
`, id, name, admission, showtime, title, startsAt)
}

const edgeProofBits = 8

// solvedProofs mints n challenges of edge-proof with the gateway's key (the
// stack's ticket secret), as its 428 answers would hand them out, and solves
// them on every core: X-Waitroom-Proof values, each good for one join for
// two minutes. Made before a point starts, so the point measures the
// gateway, not the solving.
func solvedProofs(tb testing.TB, n int) []string {
	tb.Helper()
	k := proof.NewKeeper([]byte(stack.TicketSecret))
	out := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	now := time.Now()
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				ch, err := k.Issue("edge-proof", edgeProofBits, now)
				if err != nil {
					tb.Error(err)
					return
				}
				out[i] = ch.Token + ":" + proof.Solve(ch.Token, edgeProofBits)
			}
		}()
	}
	wg.Wait()
	return out
}

// proofRound is one interleaved round of joins with the proof of work off
// and on, at one number of connections.
type proofRound struct {
	conns       int
	onFirst     bool // the round measured "on" before "off"
	off, on     load
	asked       load // joins of edge-proof with no proof: the 428 answer
	proofsReady time.Duration
}

// BenchmarkEdge measures join and status through the real gateway, next to
// a bare fiber handler on the same machine in the same run.
func BenchmarkEdge(b *testing.B) {
	pointDur := envDuration(b, "WAITROOM_LOADTEST_POINT", 5*time.Second)
	lineLen := envInt(b, "WAITROOM_LOADTEST_EDGE_LINE", 100_000)
	warm := min(time.Second, pointDur/2)
	ctx := context.Background()

	s := stack.Start(b, stack.Options{Events: edgeEvents})
	gw := strings.TrimPrefix(s.Gateway, "http://")
	// A long line, joined straight through the store; status polls cycle
	// over tickets spread along all of it.
	every := int64(max(1, lineLen/10_000))
	placed, _ := fillLine(ctx, b, s, "edge", lineLen, func(pos int64) bool { return pos%every == 0 })
	tickets := make([]string, len(placed))
	for i, p := range placed {
		tickets[i] = p.Ticket
	}

	joinURL := s.Gateway + "/api/v1/events/edge/tickets"
	statusURL := s.Gateway + "/api/v1/events/edge/tickets/"
	joinSize := bodySize(b, http.MethodPost, joinURL, http.StatusCreated)
	statusSize := bodySize(b, http.MethodGet, statusURL+tickets[len(tickets)/2], http.StatusOK)
	bare := startBare(b, joinSize, statusSize)
	bareAddr := strings.TrimPrefix(bare, "http://")

	type row struct {
		route    string
		conns    int
		gw, bare load
		target   float64
	}
	var rows []row
	for _, route := range []string{"status", "join"} {
		for _, conns := range []int{100, 1000} {
			prepare := func(base string) func(w, i int, req *fasthttp.Request) {
				if route == "join" {
					u := base + "/api/v1/events/edge/tickets"
					return func(_, _ int, req *fasthttp.Request) {
						req.Header.SetMethod(fasthttp.MethodPost)
						req.SetRequestURI(u)
					}
				}
				u := base + "/api/v1/events/edge/tickets/"
				return func(w, i int, req *fasthttp.Request) {
					req.Header.SetMethod(fasthttp.MethodGet)
					req.SetRequestURI(u + tickets[(w*7919+i)%len(tickets)])
				}
			}
			want := http.StatusOK
			target := 0.50
			if route == "join" {
				want, target = http.StatusCreated, 0.35
			}
			r := row{route: route, conns: conns, target: target}
			r.gw = hammer(loadSpec{Addr: gw, Conns: conns, Warm: warm, Measure: pointDur, Want: want, Prepare: prepare(s.Gateway)})
			r.bare = hammer(loadSpec{Addr: bareAddr, Conns: conns, Warm: warm, Measure: pointDur, Want: want, Prepare: prepare(bare)})
			b.Logf("%s × %d: gateway %.0f/s p50 %v p99 %v (%d errors); bare %.0f/s p50 %v p99 %v",
				route, conns, r.gw.RPS, r.gw.Lat.P50, r.gw.Lat.P99, r.gw.Errors, r.bare.RPS, r.bare.Lat.P50, r.bare.Lat.P99)
			b.ReportMetric(r.gw.RPS, route+fmt.Sprint(conns)+"-req/s")
			b.ReportMetric(r.gw.RPS/r.bare.RPS, route+fmt.Sprint(conns)+"-ratio")
			rows = append(rows, r)
		}
	}
	loadMain := loadAverage()

	// Joins with the proof of work off and on, side by side: rounds
	// interleaved (off, on, off, on…) so that whatever else the shared
	// machine does falls on both alike.
	fillLine(ctx, b, s, "edge-proof", lineLen, func(int64) bool { return false })
	joinOn := func(u string, proofs []string) func(w, i int, req *fasthttp.Request) {
		var next atomic.Int64
		return func(_, _ int, req *fasthttp.Request) {
			req.Header.SetMethod(fasthttp.MethodPost)
			req.SetRequestURI(u)
			if proofs != nil {
				// Past the pool's end a proof is spent again: a 428, counted
				// as an unexpected answer.
				req.Header.Set("X-Waitroom-Proof", proofs[int(next.Add(1)-1)%len(proofs)])
			}
		}
	}
	rounds := envInt(b, "WAITROOM_LOADTEST_PROOF_ROUNDS", 3)
	var proofRows []proofRound
	for _, conns := range []int{100, 1000} {
		expect := 0.0 // joins/s seen so far at this many connections
		for _, r := range rows {
			if r.route == "join" && r.conns == conns {
				expect = r.gw.RPS
			}
		}
		for round := range rounds {
			r := proofRound{conns: conns, onFirst: round%2 == 1}
			// Solved before the round, for twice as many joins as the fastest
			// point so far, so neither point runs after the solving.
			t0 := time.Now()
			proofs := solvedProofs(b, max(50_000, int(2*expect*(warm+pointDur).Seconds())))
			r.proofsReady = time.Since(t0)
			off := func() {
				r.off = hammer(loadSpec{Addr: gw, Conns: conns, Warm: warm, Measure: pointDur, Want: http.StatusCreated,
					Prepare: joinOn(s.Gateway+"/api/v1/events/edge/tickets", nil)})
			}
			on := func() {
				r.on = hammer(loadSpec{Addr: gw, Conns: conns, Warm: warm, Measure: pointDur, Want: http.StatusCreated,
					Prepare: joinOn(s.Gateway+"/api/v1/events/edge-proof/tickets", proofs)})
			}
			// off, on; then on, off; …: a drift of the machine's load over a
			// round falls on both alike.
			if r.onFirst {
				on()
				off()
			} else {
				off()
				on()
			}
			expect = max(expect, r.off.RPS, r.on.RPS)
			b.Logf("join × %d round %d, proof off %.0f/s p50 %v p99 %v (%d errors); on %.0f/s p50 %v p99 %v (%d errors; %d proofs solved in %v)",
				conns, round+1, r.off.RPS, r.off.Lat.P50, r.off.Lat.P99, r.off.Errors, r.on.RPS, r.on.Lat.P50, r.on.Lat.P99, r.on.Errors, len(proofs), r.proofsReady)
			proofRows = append(proofRows, r)
		}
		// What a join without a proof costs where one is asked: the 428.
		last := &proofRows[len(proofRows)-1]
		last.asked = hammer(loadSpec{Addr: gw, Conns: conns, Warm: warm, Measure: pointDur, Want: http.StatusPreconditionRequired,
			Prepare: joinOn(s.Gateway+"/api/v1/events/edge-proof/tickets", nil)})
		b.Logf("join × %d without a proof where one is asked: %.0f/s 428 p50 %v p99 %v (%d errors)",
			conns, last.asked.RPS, last.asked.Lat.P50, last.asked.Lat.P99, last.asked.Errors)
	}
	proofMedians := map[int][2]float64{} // conns → median off, on req/s
	for _, conns := range []int{100, 1000} {
		var off, on []float64
		for _, r := range proofRows {
			if r.conns == conns {
				off, on = append(off, r.off.RPS), append(on, r.on.RPS)
			}
		}
		m := [2]float64{median(off), median(on)}
		proofMedians[conns] = m
		b.ReportMetric(m[1]/m[0], "join"+fmt.Sprint(conns)+"-proof-ratio")
	}

	line := queuetest.Of(b, s.RDB, "edge").WaitingCount()

	var md strings.Builder
	fmt.Fprintf(&md, `## Edge: join and status through the gateway, next to a bare handler

Measured %s. Each point: *N* connections (fasthttp client, MaxConns = *N*, *N* workers
sending back to back), %v of warm-up then %v measured, first against the real gateway
(event in mode "paused" so every status answer is "waiting", %s fans already in
line, no per-IP join limit), then against a **bare fiber handler** in its own process
(this test binary re-executed) that returns a JSON body of the same size (join %d B,
status %d B) and does nothing else. Status polls cycle over tickets spread along the
whole line; every join is a new fan (the line ended at %s).

| route | connections | gateway req/s | gateway p50 / p99 | bare req/s | bare p50 / p99 | gateway ÷ bare | target |
|---|---:|---:|---:|---:|---:|---:|---|
`, time.Now().UTC().Format("2006-01-02 15:04 UTC"), warm, pointDur, thousands(int64(lineLen)), joinSize, statusSize, thousands(line))
	for _, r := range rows {
		ratio := r.gw.RPS / r.bare.RPS
		mark := "met"
		if ratio < r.target {
			mark = "**missed**"
		}
		fmt.Fprintf(&md, "| %s | %s | %s | %s / %s | %s | %s / %s | **%.0f%%** | ≥ %.0f%% %s |\n",
			r.route, thousands(int64(r.conns)), thousands(int64(r.gw.RPS)), ms(r.gw.Lat.P50), ms(r.gw.Lat.P99),
			thousands(int64(r.bare.RPS)), ms(r.bare.Lat.P50), ms(r.bare.Lat.P99), 100*ratio, 100*r.target, mark)
	}
	fmt.Fprintf(&md, "\nLoad average (1 min) when the last point ended: %s.\n", loadMain)
	var errNotes []string
	for _, r := range rows {
		if r.gw.Errors+r.bare.Errors > 0 {
			errNotes = append(errNotes, fmt.Sprintf("%s × %d: gateway %d, bare %d", r.route, r.conns, r.gw.Errors, r.bare.Errors))
		}
	}
	md.WriteString(failures(errNotes, noneFailed, "Failed or unexpected answers (not counted in req/s or latency)"))
	md.WriteString(`
Both servers run on the same two cores as the load generator, Redis and PostgreSQL, so
each point is bounded by CPU, not by the network; with 1,000 connections the latency is
mostly queueing behind the other 999. The gateway's extra work per request is what the
ratio shows: it verifies the ticket's HMAC, runs its part of a Lua script in Redis (the
concurrent polls, or joins, of one pipeline share one script call; per poll a ZRANK and
its share of one BITFIELD write of the abandon deadlines; per join after opening a ZADD and
its share of that write: docs/EDGE.md), records Prometheus metrics, and sets cookies.
`)
	fmt.Fprintf(&md, `
### Join with the proof of work off and on

The same sale twice, with %s fans in line each: "edge" asks no proof, "edge-proof" asks
%d bits (the gateway's work for a proof does not depend on the bits: one HMAC and one
SHA-256 before Redis, one SADD in the join's script). Rounds interleaved (off then on, then
on then off, …), %v of warm-up then %v measured each; every join of "on" carries its own proof, minted with
the gateway's key as a 428 would hand it out and solved by the load generator before the
round starts. After the rounds, the medians, and the 428 itself: a join of "edge-proof"
with no proof (a fresh challenge, no Redis).

| connections | round | proof off req/s | off p50 / p99 | proof on req/s | on p50 / p99 | on ÷ off |
|---:|---:|---:|---:|---:|---:|---:|
`, thousands(int64(lineLen)), edgeProofBits, warm, pointDur)
	for i, r := range proofRows {
		round := 1
		for j := i - 1; j >= 0 && proofRows[j].conns == r.conns; j-- {
			round++
		}
		order := "off, on"
		if r.onFirst {
			order = "on, off"
		}
		fmt.Fprintf(&md, "| %s | %d (%s) | %s | %s / %s | %s | %s / %s | %.0f%% |\n", thousands(int64(r.conns)), round, order,
			thousands(int64(r.off.RPS)), ms(r.off.Lat.P50), ms(r.off.Lat.P99), thousands(int64(r.on.RPS)), ms(r.on.Lat.P50), ms(r.on.Lat.P99),
			100*r.on.RPS/r.off.RPS)
		if r.asked.RPS > 0 {
			m := proofMedians[r.conns]
			fmt.Fprintf(&md, "| %s | **median** | **%s** | | **%s** | | **%.0f%%** |\n", thousands(int64(r.conns)),
				thousands(int64(m[0])), thousands(int64(m[1])), 100*m[1]/m[0])
			fmt.Fprintf(&md, "| %s | no proof: 428 | | | %s | %s / %s | |\n", thousands(int64(r.conns)),
				thousands(int64(r.asked.RPS)), ms(r.asked.Lat.P50), ms(r.asked.Lat.P99))
		}
	}
	var proofErrs []string
	for _, r := range proofRows {
		if n := r.off.Errors + r.on.Errors + r.asked.Errors; n > 0 {
			proofErrs = append(proofErrs, fmt.Sprintf("× %d: off %d, on %d, 428 %d", r.conns, r.off.Errors, r.on.Errors, r.asked.Errors))
		}
	}
	md.WriteString(failures(proofErrs, "Every join got its 201 (and every proof-less one its 428).", "Failed or unexpected answers (not counted)"))
	fmt.Fprintf(&md, "\nLoad average (1 min) when the last round ended: %s.\n", loadAverage())
	writeReport(b, "edge", md.String())
}

// bodySize makes one request and returns the length of its body.
func bodySize(tb testing.TB, method, url string, want int) int {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if res.StatusCode != want {
		tb.Fatalf("%s %s = %d %s; want %d", method, url, res.StatusCode, body, want)
	}
	return len(body)
}
