package loadtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
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
  - id: "glide"
    name: "Forward auth benchmark, sliding sessions"
    mode: "passthrough"
    admission: {admit_per_second: 100, max_active: 100000, access_ttl: "30s", session: "sliding"}
    protect: [{host: "shop.example", path_prefix: "/glide"}]
    showtimes:
      - {id: 2, title: "Glide", starts_at: "2027-01-01T20:00:00Z", rows: 1, seats_per_row: 10, price_cents: 1000}
`

// glideFans is how many fans of glide (sliding sessions) wrk asks for in
// turn; each one's place is written at most every 3 s (access_ttl 30 s:
// short, so that a run of 5 s holds renewals, and long enough for the
// places to last from one sliding run to the next), its pass issued again
// once it is 15 s old.
const glideFans = 100

// slidingScript is forwardAuthScript for glide's fans in turn, each with
// its latest pass: a pass issued again (Set-Cookie on the 200) replaces
// the fan's, found by X-Waitroom-Ticket-Id, as a browser takes its new
// cookie. %s are the fans' Cookie headers and their ticket ids (Lua
// lists).
const slidingScript = `wrk.method = "GET"
wrk.headers["X-Forwarded-Method"] = "GET"
wrk.headers["X-Forwarded-Proto"] = "https"
wrk.headers["X-Forwarded-Host"] = "shop.example"
wrk.headers["X-Forwarded-For"] = "203.0.113.9"
wrk.headers["X-Forwarded-Uri"] = "/glide/shoes/42?size=9"
local cookies = {%s}
local ids = {%s}
local of = {}
for k, id in ipairs(ids) do of[id] = k end
local i = 0
request = function()
  i = i %% #cookies + 1
  wrk.headers["Cookie"] = cookies[i]
  return wrk.format()
end
response = function(status, headers, body)
  local c = headers["Set-Cookie"]
  local k = of[headers["X-Waitroom-Ticket-Id"] or ""]
  if c and k then cookies[k] = c:match("^[^;]+") end
end
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
// no rule guards (no Redis), for a guarded path with a live pass (one
// signature check, one Redis call), and for one of an event of sliding
// sessions (the same, renewing its fans' places and issuing their passes
// again as they go), next to a bare fiber handler answering 200 in its own
// process; interleaved rounds at 100 and 1,000 connections. It writes the
// section "forwardauth" of docs/PERFORMANCE.md.
func BenchmarkForwardAuthWrk(b *testing.B) {
	rig := newWrkRig(b)
	s := stack.Start(b, stack.Options{Events: forwardAuthEvents, TrustedProxies: []string{"127.0.0.1/32"},
		GatewayKeys: `, public_url: "https://tickets.example"`})
	cookie := sitePass(b, s.Gateway, "drop")
	cookies, ids := make([]string, glideFans), make([]string, glideFans)
	for i := range glideFans {
		cookies[i], ids[i] = sitePassOf(b, s.Gateway, "glide")
	}
	const path = "/api/v1/forward-auth"
	rig.aimAt(b, s, 0, 0)
	unguarded := rig.script(b, "unguarded", fmt.Sprintf(forwardAuthScript, "/shoes/42?size=9", ""))
	guarded := rig.script(b, "pass", fmt.Sprintf(forwardAuthScript, "/drop/shoes/42?size=9", cookie))
	// Each wrk run starts from the script's passes: they are the fans'
	// latest (each asked once, taking a pass issued again), as a browser
	// keeps its newest cookie from one page to the next.
	sliding := func() string {
		for i := range cookies {
			cookies[i] = glideAgain(b, s.Gateway, cookies[i])
		}
		return rig.script(b, "sliding", fmt.Sprintf(slidingScript, luaList(cookies), luaList(ids)))
	}

	type point struct {
		conns                        int
		bare, open, passing, sliding []wrkResult
		renewals, reissued           []float64 // per second, of each sliding run
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
			}, func() {
				script := sliding()
				zadds, passes := rig.zadds(b), sitePassesIssued(b, s.Gateway+"/metrics")
				p.sliding = append(p.sliding, rig.onGateway(b, script, "", path, "", conns))
				p.renewals = append(p.renewals, float64(rig.zadds(b)-zadds)/rig.point.Seconds())
				p.reissued = append(p.reissued, (sitePassesIssued(b, s.Gateway+"/metrics")-passes)/rig.point.Seconds())
			})
			r, o, g, sl := p.bare[round], p.open[round], p.passing[round], p.sliding[round]
			b.Logf("forward auth × %d round %d: bare %.0f/s (CPU/req %v); unguarded %.0f/s p99 %v (CPU/req %v, Redis %v); pass %.0f/s p99 %v (CPU/req %v, Redis %v); sliding %.0f/s p99 %v (CPU/req %v, Redis %v; %.0f renewals/s, %.0f passes issued again/s); errors %d %d %d %d",
				conns, round+1, r.RPS, r.CPU[0], o.RPS, o.P99, o.CPU[0], o.CPU[1], g.RPS, g.P99, g.CPU[0], g.CPU[1],
				sl.RPS, sl.P99, sl.CPU[0], sl.CPU[1], p.renewals[round], p.reissued[round], r.Errors, o.Errors, g.Errors, sl.Errors)
		}
		points = append(points, p)
		b.ReportMetric(medianRPS(p.passing)/medianRPS(p.bare), fmt.Sprintf("pass%d-ratio", conns))
		b.ReportMetric(medianRPS(p.sliding)/medianRPS(p.bare), fmt.Sprintf("sliding%d-ratio", conns))
	}

	var md strings.Builder
	fmt.Fprintf(&md, `## Forward auth with wrk: a site's proxy asking the gateway, next to a bare handler

Measured %s with `+"`wrk -t1 -c<N> -d%ds --latency`"+`, asking `+"`GET /api/v1/forward-auth`"+`
as a site's proxy does (X-Forwarded-Method, -Proto, -Host, -Uri, -For): **unguarded**, a
path no protect rule names (the gateway answers 200 from its rules alone, no Redis);
**pass**, a guarded path with the fan's live pass (cookie wr_fa_drop, the same one every
time, as a fan's requests bring it: its Ed25519 signature checked the first time and
remembered after, and one Redis call, the active check's script, every time); **sliding**,
the same for an event of sliding sessions (admission.session: sliding, access_ttl 30 s):
%d fans in turn, each request renewing its fan's place in that same call (written at most
once per access_ttl/10 per place) and a pass with less than half of access_ttl left issued
again as the 200's Set-Cookie, which the wrk script takes as a browser would (its Lua
reads every answer's headers: wrk works more per request there than for the others; and
before each run every fan is asked once, so that the run starts from its newest pass). The
**bare** server is a fiber handler in its own process answering 200 with no body. %d
interleaved rounds per point; the ratios are of the medians, latency and CPU the median
round's (CPU per request: the process's user + system time over the run, from /proc,
divided by the requests answered; for the gateway's routes, the gateway's and its Redis's).

| connections | route | req/s (rounds) | p50 / p99 | CPU per request | ÷ bare |
|---:|---|---:|---:|---:|---:|
`, time.Now().UTC().Format("2006-01-02 15:04 UTC"), int(rig.point.Seconds()), glideFans, rig.rounds)
	var errNotes []string
	for _, p := range points {
		br := medianRound(p.bare)
		fmt.Fprintf(&md, "| %s | bare | %s | %s / %s | %s | |\n", thousands(int64(p.conns)), rpsList(p.bare), ms(br.P50), ms(br.P99), us(br.CPU[0]))
		for _, r := range []struct {
			name string
			runs []wrkResult
		}{{"unguarded", p.open}, {"pass", p.passing}, {"sliding", p.sliding}} {
			m := medianRound(r.runs)
			cpu := us(m.CPU[0])
			if r.name != "unguarded" {
				cpu += ", " + us(m.CPU[1])
			}
			fmt.Fprintf(&md, "| %s | %s | %s | %s / %s | %s | **%.0f%%** |\n", thousands(int64(p.conns)), r.name, rpsList(r.runs),
				ms(m.P50), ms(m.P99), cpu, 100*m.RPS/br.RPS)
		}
		for i := range p.bare {
			if n := p.bare[i].Errors + p.open[i].Errors + p.passing[i].Errors + p.sliding[i].Errors; n > 0 {
				errNotes = append(errNotes, fmt.Sprintf("× %d round %d: %d", p.conns, i+1, n))
			}
		}
	}
	md.WriteString("\nThe sliding runs' renewals (writes of a place's expiry: ZADDs, from Redis's INFO commandstats) and passes issued again, per second, by round:")
	for _, p := range points {
		fmt.Fprintf(&md, " × %s: %s and %s;", thousands(int64(p.conns)), perSecond(p.renewals), perSecond(p.reissued))
	}
	md.WriteString(" the bound is one write per place per 3 s (about 33/s for 100 fans in steady use), a pass issued again writing its place too. The asks before each run issue again the passes past half of access_ttl, so few are left to issue inside a run; BenchmarkForwardAuth/sliding (docs/EDGE.md, Forward auth) counts both inside its runs.\n")
	md.WriteString(wrkFailures(errNotes))
	fmt.Fprintf(&md, "\nLoad average (1 min) when the last point ended: %s.\n", loadAverage())
	writeReport(b, "forwardauth", md.String())
}

// luaList is a Lua list of the strings ss.
func luaList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// glideAgain asks forward auth about a page of glide for the fan whose
// Cookie header is cookie, as a proxy does: the fan's cookie afterwards
// (a pass issued again, or the one it had).
func glideAgain(b *testing.B, gateway, cookie string) string {
	b.Helper()
	code, again, _ := askForwardAuth(b, gateway, "/glide/shoes/42", cookie, "wr_fa_glide")
	switch {
	case code != http.StatusOK:
		b.Fatalf("a fan of glide lost its place: forward auth %d", code)
	case again != "":
		return again
	}
	return cookie
}

// askForwardAuth asks the gateway's forward auth about the fan's target on
// shop.example, with its Cookie header (may be ""): the answer's status,
// the cookie name it sets as a Cookie header ("" = none) and the ticket it
// names.
func askForwardAuth(tb testing.TB, gateway, target, cookie, name string) (code int, set, ticket string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, gateway+"/api/v1/forward-auth", nil)
	req.Header.Set("X-Forwarded-Host", "shop.example")
	req.Header.Set("X-Forwarded-Uri", target)
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == name {
			set = c.Name + "=" + c.Value
		}
	}
	return res.StatusCode, set, res.Header.Get("X-Waitroom-Ticket-Id")
}

// perSecond writes a run's rates: "12, 15, 17/s".
func perSecond(rs []float64) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%.0f", r)
	}
	return strings.Join(out, ", ") + "/s"
}

// zadds is how many ZADDs the rig's Redis has run (INFO commandstats):
// during a sliding run, its renewals (the admitter's ticks write none
// while nobody waits).
func (r *wrkRig) zadds(b *testing.B) int64 {
	b.Helper()
	return testenv.RedisCalls(b, r.rdb, "zadd")
}

// sitePassesIssued is how many passes forward auth has answered with on
// glide, its fans' passes issued again as the sliding runs go (the
// gateway's waitroom_passes_reissued_total, at the metrics URL).
func sitePassesIssued(b *testing.B, metrics string) float64 {
	b.Helper()
	n, _, err := scrape(metrics, "waitroom_passes_reissued_total", `event="glide"`, `pass="site"`)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// sitePass takes a fan through event (admitted at once, with the way
// back to shop.example's /<event>) and trades the return token as a proxy
// would: it returns the Cookie header of the fan's pass.
func sitePass(tb testing.TB, gateway, event string) string {
	tb.Helper()
	c, _ := sitePassOf(tb, gateway, event)
	return c
}

// sitePassOf is sitePass, with the fan's ticket id (X-Waitroom-Ticket-Id).
func sitePassOf(tb testing.TB, gateway, event string) (cookie, id string) {
	tb.Helper()
	var j struct{ Status, ReturnURL string }
	askJSON(tb, http.MethodPost, gateway+"/api/v1/events/"+event+"/tickets", `{"return":"https://shop.example/`+event+`/shoes/42"}`, http.StatusCreated, &j)
	if j.ReturnURL == "" {
		tb.Fatalf("join of %s: %+v; want admitted with a returnUrl", event, j)
	}
	code, cookie, id := askForwardAuth(tb, gateway, strings.TrimPrefix(j.ReturnURL, "https://shop.example"), "", "wr_fa_"+event)
	if cookie == "" {
		tb.Fatalf("trade: %d, no pass", code)
	}
	return cookie, id
}
