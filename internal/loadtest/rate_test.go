package loadtest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// The concert design's sizing, exactly: no admit_per_second or max_active,
// so both come from the capacity model. abandon_after is long because these
// fans do not poll; access_ttl is the default, longer than the run, so the
// fans admitted stay inside and the cap is reached after one cycle.
const designEvents = `  - id: "concert"
    name: "The concert design's sizing"
    mode: "paused"
    admission:
      capacity: {backend_tps: 1000, calls_per_user: 3, retry_factor: 2, session_seconds: 60}
      access_ttl: "10m"
      abandon_after: "1h"
    showtimes:
      - {id: 3, title: "Concert 20:00", starts_at: "2027-01-01T20:00:00Z", rows: 1, seats_per_row: 10, price_cents: 1000,
         general_admission: [{code: "FLOOR", capacity: 1000000, price_cents: 1000}]}
`

const (
	designEvent  = "concert"
	designRate   = 1000.0 / 6 // backend_tps / (calls_per_user × retry_factor)
	designCap    = 10_000     // backend_tps × session_seconds / (calls_per_user × retry_factor)
	designWindow = 60 * time.Second
	designFans   = 12_000 // more than the cap, so the line never runs dry
)

// bucketSample is the token bucket and the admitted count as one tick left
// them (read in one MULTI, so no tick falls in between).
type bucketSample struct {
	ts       int64 // Redis time of the tick, ms
	tokens   float64
	admitted int64
}

// BenchmarkDesignRate runs the real gateway and admitter with the concert
// design's numbers (1000 TPS, 3 calls per fan, ×2 for retries, 60 s a fan)
// and the admitter's usual one-second tick, puts 12,000 fans in line, opens
// the sale by a config edit, and measures the admitted rate over the first
// 60 s against 1000/6 = 166.67 fans/s, then that the cap, 10,000, holds.
func BenchmarkDesignRate(b *testing.B) {
	ctx := context.Background()
	s := stack.Start(b, stack.Options{Events: designEvents, Tick: "1s"})
	st, rdb := lineStore(b, s)
	set := settings(ctx, b, st, designEvent)
	if set.AdmitPerSecond != designRate || set.MaxActive != designCap {
		b.Fatalf("published rate, cap = %.17g, %d; want 1000/6, %d", set.AdmitPerSecond, set.MaxActive, designCap)
	}
	route := eventRoute(b, s.Gateway+"/api/v1/events/"+designEvent)
	if route.AdmitPerSecond != 166.67 || route.MaxActive != designCap {
		b.Fatalf("event route: admitPerSecond %v, maxActive %d; want 166.67, %d", route.AdmitPerSecond, route.MaxActive, designCap)
	}
	_, took := fillLine(ctx, b, s, designEvent, designFans, func(int64) bool { return false })

	sampleCtx, stopSampling := context.WithCancel(ctx)
	samplesCh := make(chan []bucketSample, 1)
	go func() { samplesCh <- sampleBucket(sampleCtx, b, rdb, designEvent) }()
	time.Sleep(1500 * time.Millisecond) // at least one paused tick sampled
	opened := time.Now()
	s.EditConfig(b, func(c string) string { return strings.Replace(c, `mode: "paused"`, `mode: "queue"`, 1) })

	// One cycle (60 s) fills the cap; a few ticks more show it holds.
	for deadline := opened.Add(designWindow + 30*time.Second); ; time.Sleep(500 * time.Millisecond) {
		c, err := st.Counts(ctx, designEvent)
		if err == nil && c.Active >= designCap && time.Since(opened) > designWindow+5*time.Second {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("after %v: %+v, %v; want %d active", time.Since(opened), c, err, designCap)
		}
	}
	stopSampling()
	samples := <-samplesCh
	counts, err := st.Counts(ctx, designEvent)
	if err != nil {
		b.Fatal(err)
	}

	// The opening: the last tick in mode paused, which left the bucket empty
	// (nothing accrues while admission is stopped); the bucket fills from
	// there at the rate.
	first := -1
	for i, sm := range samples {
		if sm.admitted > 0 {
			first = i
			break
		}
	}
	if first < 1 || samples[first-1].tokens != 0 || samples[first-1].admitted != 0 {
		b.Fatalf("no paused tick before the first admission in %d samples (first at %d)", len(samples), first)
	}
	open := samples[first-1]
	last := first
	for i := first; i < len(samples) && samples[i].ts-open.ts <= designWindow.Milliseconds(); i++ {
		last = i
	}
	end := samples[last]
	elapsed := float64(end.ts-open.ts) / 1000
	rate := float64(end.admitted) / elapsed
	owed := designRate * elapsed
	// The bucket's books: every fan owed is admitted or still a fraction of a
	// token in the bucket.
	if got := float64(end.admitted) + end.tokens; math.Abs(got-owed) > 1e-6 {
		b.Errorf("admitted %d + tokens %.6f = %.6f; want the refill 166.67/s × %.3f s = %.6f", end.admitted, end.tokens, got, elapsed, owed)
	}
	// Within one fan of the refill (the bucket keeps less than one token
	// while fans wait), give or take float error at a whole number.
	if a := float64(end.admitted); a < owed-1-1e-6 || a > owed+1e-6 {
		b.Errorf("admitted %d in %.3f s; want within one fan below %.3f (rate × elapsed)", end.admitted, elapsed, owed)
	}
	final := samples[len(samples)-1]
	if final.admitted != designCap || counts.Active != designCap {
		b.Errorf("after %.0f s: admitted %d, active %d; want both %d (the cap)", float64(final.ts-open.ts)/1000, final.admitted, counts.Active, designCap)
	}
	ticks, per := last-first+1, map[int64]int{}
	for i := first; i <= last; i++ {
		per[samples[i].admitted-samples[i-1].admitted]++
	}
	b.ReportMetric(rate, "admitted/s")
	b.ReportMetric(float64(end.admitted), "admitted-in-window")
	b.Logf("admitted %d in %.3f s = %.3f/s (want 166.667); %d ticks, admitted per tick %v; cap %d active %d",
		end.admitted, elapsed, rate, ticks, per, designCap, counts.Active)

	var md strings.Builder
	fmt.Fprintf(&md, `## The concert design's sizing, admitted for a minute

Measured %s. One event configured exactly as the concert design sizes it:
`+"`capacity: {backend_tps: 1000, calls_per_user: 3, retry_factor: 2, session_seconds: 60}`"+`,
no `+"`admit_per_second`"+` or `+"`max_active`"+`, `+"`admitter.tick: 1s`"+`. The admitter published
rate %.17g/s and cap %s; the event route showed `+"`admitPerSecond: %v, maxActive: %d`"+`.
%s fans joined while the event was paused (%v), then a config edit opened it. After
every tick the bucket (its tokens, and the Redis `+"`TIME`"+` of the tick that left them)
and the admitted count were read in one MULTI.

| figure | value |
|---|---:|
| window: from the last paused tick to the last tick within 60 s (Redis time) | %.3f s, %d ticks |
| admitted in the window | **%s** |
| admitted rate | **%.3f fans/s** (design: 1000 / 6 = 166.667) |
| owed by the rate, 1000/6 × window | %.3f |
| admitted + the fraction left in the bucket | %.6f |
| fans admitted per tick (count of ticks) | %s |
| admitted and active once the cap was reached, %.0f s after opening | %s and %s (cap %s) |

The window ends at the last tick within 60 s: ticks come a little more than a second
apart (the tick plus the tick's own work), and the bucket refills by the time between
them, so every fan owed was admitted but the fraction still in the bucket; that fraction
is all that separates the admitted rate from 166.667. A rate rounded up to 167/s would
have admitted %s in the same window, and a cap of 167 × 60 = 10,020 would have let 20
more fans in than the design's 10,000.

Load average (1 min) at the end: %s.
`, time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		set.AdmitPerSecond, thousands(int64(set.MaxActive)), route.AdmitPerSecond, route.MaxActive,
		thousands(designFans), took.Round(100*time.Millisecond),
		elapsed, ticks, thousands(end.admitted), rate, owed, float64(end.admitted)+end.tokens,
		perTick(per), float64(final.ts-open.ts)/1000, thousands(final.admitted), thousands(counts.Active), thousands(designCap),
		thousands(int64(167*elapsed)), loadAverage())
	writeReport(b, "rate", md.String())
}

// sampleBucket reads event's bucket and admitted count every few
// milliseconds until ctx ends, and returns one sample per tick, in order.
func sampleBucket(ctx context.Context, tb testing.TB, c redis.UniversalClient, event string) []bucketSample {
	k := rdb.KeysOf(event)
	var out []bucketSample
	for ctx.Err() == nil {
		var bk *redis.SliceCmd
		var adm *redis.StringCmd
		_, err := c.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
			bk = p.HMGet(context.Background(), k.Bucket, "tokens", "ts")
			adm = p.HGet(context.Background(), k.Stats, "admitted")
			return nil
		})
		if err != nil && err != redis.Nil {
			tb.Errorf("sample bucket: %v", err)
			return out
		}
		if v := bk.Val(); len(v) == 2 && v[1] != nil {
			var sm bucketSample
			sm.ts, _ = strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
			sm.tokens, _ = strconv.ParseFloat(fmt.Sprint(v[0]), 64)
			sm.admitted, _ = strconv.ParseInt(adm.Val(), 10, 64)
			if len(out) == 0 || out[len(out)-1].ts != sm.ts {
				out = append(out, sm)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return out
}

type eventJSON struct {
	AdmitPerSecond float64 `json:"admitPerSecond"`
	MaxActive      int     `json:"maxActive"`
}

func eventRoute(tb testing.TB, url string) eventJSON {
	tb.Helper()
	var e eventJSON
	askJSON(tb, http.MethodGet, url, "", http.StatusOK, &e)
	return e
}

// perTick is "166 × 40, 167 × 20": how many ticks admitted how many fans.
func perTick(per map[int64]int) string {
	var parts []string
	for n := int64(0); n <= 1000; n++ {
		if c, ok := per[n]; ok {
			parts = append(parts, fmt.Sprintf("%d × %d", n, c))
		}
	}
	return strings.Join(parts, ", ")
}
