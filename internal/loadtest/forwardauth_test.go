package loadtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// forwardAuthEvents: "drop" lets fans in at once and guards
// shop.example's /drop (a site behind the room).
const forwardAuthEvents = `  - id: "drop"
    name: "Forward auth benchmark"
    mode: "passthrough"
    admission: {admit_per_second: 100, max_active: 100000, access_ttl: "1h"}
    protect: [{host: "shop.example", path_prefix: "/drop"}]
    showtimes:
      - {id: 1, title: "Drop", starts_at: "2027-01-01T20:00:00Z", rows: 1, seats_per_row: 10, price_cents: 1000}
`

// forwardAuthScript is a proxy's question, as wrk asks it over and over:
// %q are the fan's target and its Cookie header ("" = none).
const forwardAuthScript = `wrk.method = "GET"
wrk.headers["X-Forwarded-Method"] = "GET"
wrk.headers["X-Forwarded-Proto"] = "https"
wrk.headers["X-Forwarded-Host"] = "shop.example"
wrk.headers["X-Forwarded-For"] = "203.0.113.9"
wrk.headers["X-Forwarded-Uri"] = %q
local cookie = %q
if cookie ~= "" then wrk.headers["Cookie"] = cookie end
`

// BenchmarkForwardAuthWrk is what a site's proxy costs the room: wrk asks
// GET /api/v1/forward-auth of the real gateway as a proxy would, for a path
// no rule guards (no Redis) and for a guarded path with a live pass (one
// signature check, one Redis call), next to a bare fiber handler answering
// 200 in its own process; interleaved rounds at 100 and 1,000 connections.
// It writes the section "forwardauth" of docs/PERFORMANCE.md.
func BenchmarkForwardAuthWrk(b *testing.B) {
	rig := newWrkRig(b)
	s := stack.Start(b, stack.Options{Events: forwardAuthEvents, TrustedProxies: []string{"127.0.0.1/32"},
		GatewayKeys: `, public_url: "https://tickets.example"`})
	cookie := sitePass(b, s.Gateway)
	const path = "/api/v1/forward-auth"
	rig.aimAt(b, s, 0, 0)
	unguarded := rig.script(b, "unguarded", fmt.Sprintf(forwardAuthScript, "/shoes/42?size=9", ""))
	guarded := rig.script(b, "pass", fmt.Sprintf(forwardAuthScript, "/drop/shoes/42?size=9", cookie))

	type point struct {
		conns               int
		bare, open, passing []wrkResult
	}
	var points []point
	for _, conns := range []int{100, 1000} {
		p := point{conns: conns}
		for round := range rig.rounds {
			interleave(round, func() {
				p.bare = append(p.bare, rig.onBare(b, unguarded, "", path, "", conns))
			}, func() {
				p.open = append(p.open, rig.onGateway(b, unguarded, "", path, "", conns))
			}, func() {
				p.passing = append(p.passing, rig.onGateway(b, guarded, "", path, "", conns))
			})
			r, o, g := p.bare[round], p.open[round], p.passing[round]
			b.Logf("forward auth × %d round %d: bare %.0f/s (CPU/req %v); unguarded %.0f/s p99 %v (CPU/req %v, Redis %v); pass %.0f/s p99 %v (CPU/req %v, Redis %v); errors %d %d %d",
				conns, round+1, r.RPS, r.CPU[0], o.RPS, o.P99, o.CPU[0], o.CPU[1], g.RPS, g.P99, g.CPU[0], g.CPU[1], r.Errors, o.Errors, g.Errors)
		}
		points = append(points, p)
		b.ReportMetric(medianRPS(p.passing)/medianRPS(p.bare), fmt.Sprintf("pass%d-ratio", conns))
	}

	var md strings.Builder
	fmt.Fprintf(&md, `## Forward auth with wrk: a site's proxy asking the gateway, next to a bare handler

Measured %s with `+"`wrk -t1 -c<N> -d%ds --latency`"+`, asking `+"`GET /api/v1/forward-auth`"+`
as a site's proxy does (X-Forwarded-Method, -Proto, -Host, -Uri, -For): **unguarded**, a
path no protect rule names (the gateway answers 200 from its rules alone, no Redis);
**pass**, a guarded path with the fan's live pass (cookie wr_fa_drop, the same one every
time, as a fan's requests bring it: its Ed25519 signature checked the first time and
remembered after, and one Redis call, the active set's ZSCORE, every time). The **bare** server is a fiber
handler in its own process answering 200 with no body. %d interleaved rounds per point; the
ratios are of the medians, latency and CPU the median round's (CPU per request: the
process's user + system time over the run, from /proc, divided by the requests answered).

| connections | bare req/s (rounds) | bare CPU per request | unguarded req/s (rounds) | unguarded p50 / p99 | unguarded CPU per request | unguarded ÷ bare | pass req/s (rounds) | pass p50 / p99 | pass CPU per request: gateway, Redis | pass ÷ bare |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
`, time.Now().UTC().Format("2006-01-02 15:04 UTC"), int(rig.point.Seconds()), rig.rounds)
	var errNotes []string
	for _, p := range points {
		br, op, pa := medianRound(p.bare), medianRound(p.open), medianRound(p.passing)
		fmt.Fprintf(&md, "| %s | %s | %s | %s | %s / %s | %s | **%.0f%%** | %s | %s / %s | %s, %s | **%.0f%%** |\n", thousands(int64(p.conns)),
			rpsList(p.bare), us(br.CPU[0]), rpsList(p.open), ms(op.P50), ms(op.P99), us(op.CPU[0]), 100*op.RPS/br.RPS,
			rpsList(p.passing), ms(pa.P50), ms(pa.P99), us(pa.CPU[0]), us(pa.CPU[1]), 100*pa.RPS/br.RPS)
		for i := range p.bare {
			if n := p.bare[i].Errors + p.open[i].Errors + p.passing[i].Errors; n > 0 {
				errNotes = append(errNotes, fmt.Sprintf("× %d round %d: %d", p.conns, i+1, n))
			}
		}
	}
	md.WriteString(wrkFailures(errNotes))
	fmt.Fprintf(&md, "\nLoad average (1 min) when the last point ended: %s.\n", loadAverage())
	writeReport(b, "forwardauth", md.String())
}

// sitePass takes a fan through drop (admitted at once, with the way back
// to shop.example) and trades the return token as a proxy would: it
// returns the Cookie header of the fan's pass.
func sitePass(tb testing.TB, gateway string) string {
	tb.Helper()
	var j struct{ Status, ReturnURL string }
	askJSON(tb, http.MethodPost, gateway+"/api/v1/events/drop/tickets", `{"return":"https://shop.example/drop/shoes/42"}`, http.StatusCreated, &j)
	if j.ReturnURL == "" {
		tb.Fatalf("join of drop: %+v; want admitted with a returnUrl", j)
	}
	req, _ := http.NewRequest(http.MethodGet, gateway+"/api/v1/forward-auth", nil)
	req.Header.Set("X-Forwarded-Host", "shop.example")
	req.Header.Set("X-Forwarded-Uri", strings.TrimPrefix(j.ReturnURL, "https://shop.example"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "wr_fa_drop" {
			return c.Name + "=" + c.Value
		}
	}
	tb.Fatalf("trade: %d, no pass", res.StatusCode)
	return ""
}
