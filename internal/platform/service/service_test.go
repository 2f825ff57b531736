package service_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/platform/service"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A process serves until its context ends; then a request in flight
// finishes, the servers stop, and only then the jobs stop and are waited
// for.
func TestRunStopsServersThenJobs(t *testing.T) {
	addr := testenv.FreeAddr(t)
	inFlight := make(chan struct{})
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inFlight)
		time.Sleep(200 * time.Millisecond)
		note("request done")
		w.WriteHeader(http.StatusNoContent)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.Run(ctx, quiet(), []service.Listener{{Addr: addr, Server: service.HTTP(h)}}, func(ctx context.Context) {
			<-ctx.Done()
			note("job stopped")
		})
	}()
	got := make(chan int, 1)
	go func() {
		for {
			res, err := http.Get("http://" + addr)
			if err == nil {
				res.Body.Close()
				got <- res.StatusCode
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	<-inFlight
	cancel()
	if code := <-got; code != http.StatusNoContent {
		t.Errorf("the request in flight: %d; want 204", code)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v; want a clean stop", err)
	}
	if strings.Join(order, ", ") != "request done, job stopped" {
		t.Errorf("order %v; want the request finished before the job stopped", order)
	}
}

// An address already taken fails the process at once, before any job
// runs (periodic jobs: platform/periodic's own test).
func TestRunFailsOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var ran atomic.Bool
	err = service.Run(context.Background(), quiet(), []service.Listener{{Addr: ln.Addr().String(), Server: service.HTTP(http.NotFoundHandler())}},
		func(context.Context) { ran.Store(true) })
	if err == nil || !strings.Contains(err.Error(), "listen") || ran.Load() {
		t.Errorf("Run on a taken port: %v, job ran %v; want a listen error and no job", err, ran.Load())
	}
}
