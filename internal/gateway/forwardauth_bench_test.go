package gateway_test

import (
	"context"
	"crypto/ed25519"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// BenchmarkForwardAuth is what a proxy's question costs the gateway, in
// process, on real Redis, from 64 goroutines per core: a path no rule
// guards (no Redis), a guarded path with a live pass (one signature check,
// one Redis call), the same of a sliding session (sliding: 64 fans' passes,
// each renewing its place and issued again as it goes, the new cookie
// taken as a browser takes it), the signature check alone, and a bare
// fiber handler answering 200 for scale. cpu-µs/op is the process's CPU
// per question, redis-µs/op the Redis server's. With -count=N the rounds
// interleave (bare, unguarded, pass, sliding, signature, bare, …).
// docs/EDGE.md, "Forward auth", and docs/PERFORMANCE.md, "Sliding
// sessions", have the figures.
func BenchmarkForwardAuth(b *testing.B) {
	// Event other's sessions slide, access_ttl 20 s: each fan's place is
	// written at most every 2 s, its pass issued again every 10 s.
	g := setupSession(b, config.SessionSliding, slidingBenchTTL)
	_, st := g.admitWithReturn("https://" + shopHost + "/tour-tokyo")
	trade := g.ask(strings.TrimPrefix(st.body["returnUrl"].(string), "https://"+shopHost))
	sitePass := cookieOf(trade, "wr_fa_premiere")
	if trade.code != http.StatusOK || sitePass == "" {
		b.Fatalf("trade: %d", trade.code)
	}
	bare := fiber.New(fiber.Config{DisableStartupMessage: true})
	bare.Get("/api/v1/forward-auth", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusOK) })
	peer := &net.TCPAddr{IP: net.ParseIP(balancer), Port: 40000}
	ask := func(h fasthttp.RequestHandler, target, cookie string) func(b *testing.B) {
		return func(b *testing.B) {
			benchHandler(b, g.rdb, h, peer, func(req *fasthttp.Request) {
				req.Header.SetMethod(http.MethodGet)
				req.SetRequestURI("/api/v1/forward-auth")
				req.Header.Set("X-Forwarded-Method", "GET")
				req.Header.Set("X-Forwarded-Proto", "https")
				req.Header.Set("X-Forwarded-Host", shopHost)
				req.Header.Set("X-Forwarded-Uri", target)
				req.Header.Set("X-Forwarded-For", "203.0.113.9")
				if cookie != "" {
					req.Header.SetCookie("wr_fa_premiere", cookie)
				}
			})
		}
	}
	b.Run("bare", ask(bare.Handler(), "/tour-tokyo/seats", ""))
	b.Run("unguarded", ask(g.srv.App().Handler(), "/tour-osaka/seats?a=1", ""))
	b.Run("pass", ask(g.srv.App().Handler(), "/tour-tokyo/seats?a=1", sitePass))
	b.Run("sliding", g.slidingAsks(peer))
	v := pass.NewStaticVerifierFor(g.priv.Public().(ed25519.PublicKey), pass.AudienceSite)
	b.Run("signature", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := v.Verify(context.Background(), sitePass); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	})
}

// BenchmarkForwardAuthAuto is what an auto event's asks with no pass cost
// (DESIGN.md, "Always on"), as BenchmarkForwardAuth measures: let straight
// through (the join step and the pass's signing; no join budget), sent to
// the room because a line formed (the join step refused), and a bypassed
// preflight (no Redis).
// docs/EDGE.md, "Forward auth", has the figures.
func BenchmarkForwardAuthAuto(b *testing.B) {
	capped, fast := 1<<30, 1e6
	g := setupAutoGuarded(b, capped, 0, func(o *gateway.Options) {
		o.Config.Events[0].Admission.AdmitPerSecond = &fast
		o.Config.Events[0].Bypass = config.Bypass{Methods: []string{"OPTIONS"}}
		o.Config.Events[1].Mode = config.ModeAuto // event other: a line forms below
		one := 1
		o.Config.Events[1].Admission.MaxActive = &one
	})
	peer := &net.TCPAddr{IP: net.ParseIP(balancer), Port: 40000}
	ask := func(target, method string, want int) func(b *testing.B) {
		return func(b *testing.B) {
			benchHandlerWant(b, g.rdb, g.srv.App().Handler(), peer, want, func(req *fasthttp.Request) {
				req.Header.SetMethod(http.MethodGet)
				req.SetRequestURI("/api/v1/forward-auth")
				req.Header.Set("X-Forwarded-Method", method)
				req.Header.Set("X-Forwarded-Proto", "https")
				req.Header.Set("X-Forwarded-Host", shopHost)
				req.Header.Set("X-Forwarded-Uri", target)
				req.Header.Set("X-Forwarded-For", "203.0.113.9")
			})
		}
	}
	b.Run("through", ask("/tour-tokyo/seats", "GET", http.StatusOK))
	if r := g.ask("/flash"); r.code != http.StatusOK {
		b.Fatalf("other's first visitor: %d", r.code)
	}
	if r := g.join("other"); r.body["status"] != "waiting" {
		b.Fatalf("other's line: %s", r.raw)
	}
	b.Run("line", ask("/flash", "GET", http.StatusUnauthorized))
	b.Run("bypass", ask("/tour-tokyo/seats", "OPTIONS", http.StatusOK))
}

// slidingBenchTTL is the access_ttl of the sliding fans of the benchmark:
// short, so that a run holds many renewals and passes issued again.
const slidingBenchTTL = 20 * time.Second

// slidingAsks is the proxy's question about a page of /flash from 64 fans
// of event other (sliding sessions), each request with one fan's latest
// pass; a pass issued again (Set-Cookie) is used from then on. Between its
// rounds the fans keep their places as fans reading a page would: each is
// used every slidingBenchTTL/4. renewals/s is the writes of the places'
// expiries Redis made (INFO commandstats, ZADD), reissued/s the passes
// issued again.
func (g guarded) slidingAsks(peer net.Addr) func(b *testing.B) {
	const fans = 64
	passes := make([]atomic.Pointer[string], fans)
	index := map[string]int{}
	for i := range passes {
		f := g.admitOther()
		passes[i].Store(&f.site)
		index[f.id] = i
	}
	took := func(cookie []byte) bool {
		var c fasthttp.Cookie
		if c.ParseBytes(cookie) != nil || len(c.Value()) == 0 {
			return false
		}
		tok := string(c.Value())
		sub, _ := passClaims(g.t, tok)
		i, ok := index[sub]
		if ok {
			passes[i].Store(&tok)
		}
		return ok
	}
	stop := testenv.Repeat(func() time.Duration { return slidingBenchTTL / 4 }, func() {
		for i := range passes {
			if code, again := useSite(g, *passes[i].Load()); code == http.StatusOK && again != "" {
				passes[i].Store(&again)
			}
		}
	})
	g.t.Cleanup(stop)
	return func(b *testing.B) {
		var next, reissued atomic.Int64
		zadds := testenv.RedisCalls(b, g.rdb, "zadd")
		start := time.Now()
		benchHandlerSeen(b, g.rdb, g.srv.App().Handler(), peer, http.StatusOK, func(req *fasthttp.Request) {
			req.Header.SetMethod(http.MethodGet)
			req.SetRequestURI("/api/v1/forward-auth")
			req.Header.Set("X-Forwarded-Method", "GET")
			req.Header.Set("X-Forwarded-Proto", "https")
			req.Header.Set("X-Forwarded-Host", shopHost)
			req.Header.Set("X-Forwarded-Uri", "/flash/seats?a=1")
			req.Header.Set("X-Forwarded-For", "203.0.113.9")
			req.Header.SetCookie("wr_fa_other", *passes[int(next.Add(1))%fans].Load())
		}, func(resp *fasthttp.Response) {
			if c := resp.Header.PeekCookie("wr_fa_other"); len(c) > 0 && took(c) {
				reissued.Add(1)
			}
		})
		secs := time.Since(start).Seconds()
		b.ReportMetric(float64(testenv.RedisCalls(b, g.rdb, "zadd")-zadds)/secs, "renewals/s")
		b.ReportMetric(float64(reissued.Load())/secs, "reissued/s")
	}
}
