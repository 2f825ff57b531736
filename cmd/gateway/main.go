// Command gateway is waitroom's edge: the fan's pages, the queue API, the
// JWKS of the access pass, and the gate in front of the booking API.
package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/service"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/queue"
)

func main() { service.Main("gateway", run) }

func run(ctx context.Context, p service.Process) error {
	cfg := p.Config
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
	redis, err := p.Redis()
	if err != nil {
		return err
	}
	defer redis.Close()

	line := queue.New(redis, []byte(cfg.Auth.TicketSecret))
	srv, err := gateway.New(gateway.Options{
		Config:     cfg,
		ConfigPath: p.ConfigPath,
		Line:       line,
		Operators:  operators.New(redis),
		Presale:    presale.New(redis, line, []byte(cfg.Auth.TicketSecret), ""),
		Signer:     pass.NewSigner(key),
		Accounts:   accounts,
		Log:        p.Log,
	})
	if err != nil {
		return err
	}
	prometheus.MustRegister(srv.NewCollector())
	p.Log.Info("gateway started", "events", len(cfg.Events))
	// Events added to or removed from the file are served without a restart.
	return service.Run(ctx, p.Log, []service.Listener{{Addr: cfg.Gateway.Addr, Server: srv}},
		func(ctx context.Context) { srv.Watch(ctx, p.Hup) })
}
