// Command gateway is waitroom's edge: the fan's pages, the queue API, the
// JWKS of the access pass, and the gate in front of the booking API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
)

func main() {
	cfgFlag := flag.String("config", "", "config file (default $WAITROOM_CONFIG or "+config.DefaultPath+")")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "gateway")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, config.Path(*cfgFlag), log); err != nil {
		log.Error("gateway stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfgPath string, log *slog.Logger) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	key, err := pass.LoadPrivateKey(cfg.Auth.SigningKeyFile)
	if err != nil {
		return err
	}
	var accounts *account.Verifier
	if cfg.Auth.AccountKeysFile != "" {
		keys, err := account.LoadKeys(cfg.Auth.AccountKeysFile)
		if err != nil {
			return err
		}
		accounts = account.NewVerifier(keys, nil)
	}
	redis, err := rdb.Open(cfg.Redis.URL, "gateway")
	if err != nil {
		return err
	}
	redis.WaitReplicas(cfg.Redis.WaitReplicas)
	defer redis.Close()
	line := queue.New(redis, []byte(cfg.Auth.TicketSecret))

	srv, err := gateway.New(gateway.Options{
		Config:     cfg,
		ConfigPath: cfgPath,
		Line:       line,
		Operators:  operators.New(redis),
		Signer:     pass.NewSigner(key),
		Accounts:   accounts,
		Log:        log,
	})
	if err != nil {
		return err
	}
	prometheus.MustRegister(srv.NewCollector())

	// Events added to or removed from the file are served without a restart.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go srv.Watch(ctx, hup)

	serveErr := make(chan error, 1)
	go func() {
		log.Info("listening", "addr", cfg.Gateway.Addr, "events", len(cfg.Events))
		serveErr <- srv.App().Listen(cfg.Gateway.Addr)
	}()
	select {
	case err := <-serveErr:
		return fmt.Errorf("listen %s: %w", cfg.Gateway.Addr, err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
