// Command admitter promotes waiting tickets to active ones, per event, once
// per tick, at the configured or computed rate and never above max_active.
// It has no API: it serves /metrics, /healthz and /readyz on admitter.addr.
// Any number of replicas may run; the config file is followed live (file
// changes and SIGHUP).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/waitroom/waitroom/internal/admission"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/platform/health"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
)

func main() {
	cfgFlag := flag.String("config", "", "config file (default $WAITROOM_CONFIG or "+config.DefaultPath+")")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "admitter")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, config.Path(*cfgFlag), log); err != nil {
		log.Error("admitter stopped", "err", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then stops gracefully.
func run(ctx context.Context, cfgPath string, log *slog.Logger) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	redis, err := rdb.Open(cfg.Redis.URL, "admitter")
	if err != nil {
		return err
	}
	redis.WaitReplicas(cfg.Redis.WaitReplicas)
	defer redis.Close()
	store := queue.New(redis, []byte(cfg.Auth.TicketSecret))
	adm := admission.New(store, operators.New(redis), cfg, cfgPath, log)

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler())
	health.Routes(mux, health.Check{Name: "redis", Ping: store.Ping})
	ln, err := net.Listen("tcp", cfg.Admitter.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Admitter.Addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("admitter started", "addr", ln.Addr().String(), "config", cfgPath,
		"events", len(cfg.Events), "tick", cfg.Admitter.Tick.String())

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{}, 2)
	go func() { adm.Watch(wctx, hup); done <- struct{}{} }()
	go func() { adm.Run(wctx); done <- struct{}{} }()

	select {
	case err := <-serveErr:
		cancel()
		<-done
		<-done
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	cancel()
	<-done // the tick in flight finishes: a script runs whole or not at all
	<-done
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
