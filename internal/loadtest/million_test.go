package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

var millionEvents = standingLine("million", "A million fans", 2, "Million 20:00", "2027-01-01T20:00:00Z", "")

// statusRate is the paced load of the latency points: a fixed rate, not a
// saturating one, so that p99 shows what the line's length costs rather
// than how long requests queue behind each other on two cores.
const (
	statusRate  = 2000
	statusConns = 50
)

// BenchmarkMillionWaiting puts a million fans in one line and reports what
// that costs: Redis memory per waiting fan, status latency at 1,000 and at
// 1,000,000 waiting, and the poll load the pollAfterMs answers imply.
func BenchmarkMillionWaiting(b *testing.B) {
	n := envInt(b, "WAITROOM_LOADTEST_WAITING", 1_000_000)
	pointDur := envDuration(b, "WAITROOM_LOADTEST_POINT", 5*time.Second)
	const small = 1000
	if n < 2*small {
		b.Fatalf("WAITROOM_LOADTEST_WAITING=%d: want at least %d", n, 2*small)
	}
	ctx := context.Background()
	s := stack.Start(b, stack.Options{Events: millionEvents})
	gw := strings.TrimPrefix(s.Gateway, "http://")
	statusURL := s.Gateway + "/api/v1/events/million/tickets/"

	mem0 := testenv.RedisInfoInt(b, s.RDB, "memory", "used_memory")
	// The first 1,000 fans; every one of them is kept.
	head, _ := fillLine(ctx, b, s, "million", small, func(int64) bool { return true })
	status := func(tickets []placed) load {
		return hammer(loadSpec{
			Addr: gw, Conns: statusConns, Rate: statusRate, Warm: time.Second, Measure: pointDur, Want: http.StatusOK,
			Prepare: func(w, i int, req *fasthttp.Request) {
				req.Header.SetMethod(fasthttp.MethodGet)
				req.SetRequestURI(statusURL + tickets[(w*7919+i)%len(tickets)].Ticket)
			},
		})
	}
	atSmall := status(head)

	// The rest of the line; one ticket per 1,000 places is kept to sample
	// positions along all of it.
	const stride = 1000
	rest, took := fillLine(ctx, b, s, "million", n-small, func(pos int64) bool { return pos%stride == 0 && pos > small })
	waiting := queuetest.Of(b, s.RDB, "million").WaitingCount()
	if waiting != int64(n) {
		b.Fatalf("%d waiting; want %d", waiting, n)
	}
	mem1 := testenv.RedisInfoInt(b, s.RDB, "memory", "used_memory")
	perFan := float64(mem1-mem0) / float64(n)
	atLarge := status(rest)

	// The poll load: every fan polls once per pollAfter, so the line sends
	// Σ 1/pollAfter requests per second. The first 1,000 places are each
	// asked; beyond, the ticket at every 1,000th place stands for the 1,000
	// places up to it. The answers carry the jitter, so this is what fans
	// are really told, not the formula.
	type sample struct {
		pos    int64
		weight float64
		poll   time.Duration
	}
	var samples []sample
	ask := func(p placed, weight float64) {
		var body struct {
			Status      string `json:"status"`
			Position    int64  `json:"position"`
			PollAfterMs int64  `json:"pollAfterMs"`
		}
		askJSON(b, http.MethodGet, statusURL+p.Ticket, "", http.StatusOK, &body)
		if body.Status != "waiting" || body.PollAfterMs <= 0 {
			b.Fatalf("status of place %d: %+v; want waiting, told when to poll", p.Pos, body)
		}
		samples = append(samples, sample{body.Position, weight, time.Duration(body.PollAfterMs) * time.Millisecond})
	}
	for _, p := range head {
		ask(p, 1)
	}
	for _, p := range rest {
		ask(p, stride)
	}
	var load float64
	for _, sm := range samples {
		load += sm.weight / sm.poll.Seconds()
	}
	// The poll load of the front of the line (first 1,000, first 10,000, ...).
	type band struct {
		upTo int64
		load float64
	}
	var bands []band
	for _, upTo := range []int64{1_000, 10_000, 100_000, int64(n)} {
		if upTo > int64(n) {
			continue
		}
		var l float64
		for _, sm := range samples {
			if sm.pos <= upTo {
				l += sm.weight / sm.poll.Seconds()
			}
		}
		bands = append(bands, band{upTo, l})
	}
	pollAt := func(pos int64) time.Duration { // median of the samples near pos
		var near []time.Duration
		for _, sm := range samples {
			if sm.pos >= pos && sm.pos < pos+pos/10+10 {
				near = append(near, sm.poll)
			}
		}
		return summarize(near).P50
	}

	b.ReportMetric(perFan, "B/waiting-fan")
	b.ReportMetric(float64(atSmall.Lat.P99)/1e6, "status-p99-ms@1k")
	b.ReportMetric(float64(atLarge.Lat.P99)/1e6, "status-p99-ms@1M")
	b.ReportMetric(load, "polls/s")
	b.Logf("joined %d in %v; %.0f B per fan; status p99 %v at %d vs %v at %d; poll load %.0f/s",
		n, took, perFan, atSmall.Lat.P99, small, atLarge.Lat.P99, n, load)

	var md strings.Builder
	fmt.Fprintf(&md, `## %s fans waiting

Measured %s. One event in mode "paused" (configured rate 100/s, so the answers'
pollAfterMs are those of a line moving at 100 fans/s). %s fans joined straight through
`+"`queue.Store.Join`"+` (the gateway's own script, without HTTP) from 64 goroutines in %v
(%s joins/s).

| figure | value |
|---|---:|
| Redis memory per waiting fan (INFO used_memory delta ÷ fans) | **%.0f B** (%s MiB for the whole line) |
| status p50 / p99 with %s waiting (paced %s req/s, %d connections, %v) | %s / **%s** |
| status p50 / p99 with %s waiting (same load, tickets spread along the line) | %s / **%s** |
| failed or unexpected status answers (first / second point) | %d / %d |
| poll load the pollAfterMs answers imply, Σ 1 / pollAfter over the whole line | **%s req/s** |
`, thousands(int64(n)), time.Now().UTC().Format("2006-01-02 15:04 UTC"), thousands(int64(n)), took.Round(time.Second),
		thousands(int64(float64(n)/took.Seconds())),
		perFan, trimFloat(float64(mem1-mem0)/(1<<20), 0),
		thousands(small), thousands(statusRate), statusConns, pointDur, ms(atSmall.Lat.P50), ms(atSmall.Lat.P99),
		thousands(int64(n)), ms(atLarge.Lat.P50), ms(atLarge.Lat.P99), atSmall.Errors, atLarge.Errors,
		thousands(int64(load)))
	fmt.Fprintf(&md, "\nLoad average (1 min) at the end: %s.\n", loadAverage())
	md.WriteString("\nWhere the poll load comes from (pollAfter told at a place: median of the answers near it):\n\n| places | polls/s from these places | pollAfter near the last of them |\n|---|---:|---:|\n")
	for _, bd := range bands {
		fmt.Fprintf(&md, "| 1 – %s | %s | %s |\n", thousands(bd.upTo), thousands(int64(bd.load)), pollAt(bd.upTo-bd.upTo/20).Round(100*time.Millisecond))
	}
	fmt.Fprintf(&md, `
The poll load is sampled from real answers: each of the first 1,000 places is asked
once, and beyond that the ticket at every 1,000th place stands for the 1,000 places up
to it, so the figure includes the jitter the fans are told. pollAfter grows with the
distance to the front and is capped, so the load grows by about one request per second
for every %s fans added to the back of the line, whatever its length: the whole line
above polls at about %s req/s.
`, thousands(int64(pollAt(int64(n)-int64(n)/20).Seconds())), thousands(int64(load)))
	writeReport(b, "million", md.String())
}
