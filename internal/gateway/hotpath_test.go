package gateway_test

import (
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// BenchmarkStatusHandler is a waiting fan's poll through the gateway's
// handler, in process (no network, no load generator), on real Redis, from
// 128 goroutines (a gateway with many fans' connections: its pipelines
// carry many polls at once, as under wrk), over a line of 10,000 fans of
// which the polls spread. cpu-µs/op is the CPU the process (the gateway's
// side: handler, store, Redis client) spent per poll, redis-µs/op the CPU
// of the Redis server, whatever else the machine runs.
func BenchmarkStatusHandler(b *testing.B) {
	e := setupProof(b, 0, 8)
	const n = 10_000
	tickets := make([]string, n)
	for i := range tickets {
		r := e.join("open")
		if r.code != http.StatusCreated {
			b.Fatalf("join: %d %s", r.code, r.raw)
		}
		tickets[i] = r.body["ticket"].(string)
	}
	var next atomic.Int64
	benchHandler(b, e.rdb, e.srv.App().Handler(), nil, func(req *fasthttp.Request) {
		req.Header.SetMethod(http.MethodGet)
		req.SetRequestURI("/api/v1/events/open/tickets/" + tickets[int(next.Add(1))%n])
	})
}

// benchHandler runs the handler h from 64 goroutines per core, each request
// made by build (on a reset request) and sent from peer (nil: none), and
// reports its allocations, cpu-µs/op (this process's CPU per request) and
// redis-µs/op (the Redis server's, read from rdb). Every answer must be 200.
func benchHandler(b *testing.B, rdb redis.UniversalClient, h fasthttp.RequestHandler, peer net.Addr, build func(*fasthttp.Request)) {
	b.Helper()
	benchHandlerWant(b, rdb, h, peer, http.StatusOK, build)
}

// benchHandlerWant is benchHandler for handlers that answer want.
func benchHandlerWant(b *testing.B, rdb redis.UniversalClient, h fasthttp.RequestHandler, peer net.Addr, want int, build func(*fasthttp.Request)) {
	b.Helper()
	benchHandlerSeen(b, rdb, h, peer, want, build, nil)
}

// benchHandlerSeen is benchHandlerWant handing every answer to seen (nil =
// none), as a client reads what it is given (a cookie set).
func benchHandlerSeen(b *testing.B, rdb redis.UniversalClient, h fasthttp.RequestHandler, peer net.Addr, want int, build func(*fasthttp.Request), seen func(*fasthttp.Response)) {
	b.Helper()
	b.SetParallelism(64)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, rcpu0 := processCPU(), redisCPU(b, rdb)
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		var req fasthttp.Request
		for pb.Next() {
			req.Reset()
			build(&req)
			ctx.Init(&req, peer, nil)
			ctx.ResetUserValues() // as the server does between requests
			ctx.Response.Reset()  // Init leaves the last answer's headers (a Set-Cookie) in place
			h(&ctx)
			if got := ctx.Response.StatusCode(); got != want {
				b.Errorf("status: %d %s", got, ctx.Response.Body())
				return
			}
			if seen != nil {
				seen(&ctx.Response)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(redisCPU(b, rdb)-rcpu0)/float64(time.Microsecond)/float64(b.N), "redis-µs/op")
}

// redisCPU is the CPU time the Redis server has used (user + system, every
// thread).
func redisCPU(b *testing.B, rdb redis.UniversalClient) time.Duration {
	return time.Duration(testenv.RedisCPU(b, rdb, "used_cpu_sys", "used_cpu_user") * float64(time.Second))
}

// processCPU is the CPU time this process has used (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
