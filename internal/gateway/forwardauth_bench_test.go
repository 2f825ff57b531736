package gateway_test

import (
	"context"
	"crypto/ed25519"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/pass"
)

// BenchmarkForwardAuth is what a proxy's question costs the gateway, in
// process, on real Redis, from 64 goroutines: a path no rule guards (no
// Redis), a guarded path with a live pass (one signature check, one Redis
// call), the signature check alone, and a bare fiber handler answering 200
// for scale. cpu-µs/op is the process's CPU per question, redis-µs/op the
// Redis server's. docs/EDGE.md, "Forward auth", has the figures.
func BenchmarkForwardAuth(b *testing.B) {
	g := setupGuarded(b)
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
