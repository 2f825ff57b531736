// Command booking is the booking core: seat maps, holds, checkout and payment
// callbacks over PostgreSQL, with the sweeper, payment reconciler and outbox
// relay running beside the API.
//
//	booking [-config PATH] migrate   apply the embedded migrations
//	booking [-config PATH] seed      upsert the config's showtimes, seats and blocks
//	booking [-config PATH] [serve]   run the API and the background jobs
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/booking/postgres"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/platform/service"
	"github.com/waitroom/waitroom/internal/queue"
)

func main() { service.Main("booking", run) }

// run runs one command. Flags may follow the command too (booking migrate
// -config X): an operator's script must never migrate the wrong database
// silently, nor run a command it did not name.
func run(ctx context.Context, p service.Process) error {
	if len(p.Args) > 1 {
		return fmt.Errorf("unexpected arguments %q (usage: booking [-config PATH] [migrate | seed | serve])", p.Args[1:])
	}
	cfg := p.Config
	log := p.Log
	cmd := "serve"
	if len(p.Args) > 0 {
		cmd = p.Args[0]
	}
	switch cmd {
	case "migrate":
		if err := postgres.Migrate(ctx, cfg.Postgres.URL); err != nil {
			return err
		}
		log.Info("migrations applied")
		return nil
	case "seed":
		return seed(ctx, cfg, log)
	case "serve":
		return serve(ctx, p)
	}
	return fmt.Errorf("unknown command %q (migrate, seed or serve)", cmd)
}

func seed(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	pool, err := postgres.Open(ctx, cfg.Postgres.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := postgres.New(pool).Seed(ctx, catalogOf(cfg).Events())
	if err != nil {
		return err
	}
	for _, c := range res.Clamped {
		log.Warn("seed: capacity not lowered below what is sold or held", "detail", c)
	}
	log.Info("seeded", "events", len(cfg.Events))
	return nil
}

func serve(ctx context.Context, p service.Process) error {
	cfg, log := p.Config, p.Log
	pool, err := postgres.Open(ctx, cfg.Postgres.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.New(pool)

	redis, err := p.Redis()
	if err != nil {
		return err
	}
	defer redis.Close()
	line := queue.New(redis, []byte(cfg.Auth.TicketSecret))

	verifier, err := newVerifier(cfg)
	if err != nil {
		return err
	}

	// The simulator is a provider apart: its own connections, so that a
	// checkout holding one of the core's while it opens a session never
	// waits on the core's pool for another.
	simPool, err := postgres.OpenPool(ctx, cfg.Postgres.URL, simulatorConns)
	if err != nil {
		return err
	}
	defer simPool.Close()
	sim := payment.NewSimulator(simulatorOf(cfg), postgres.NewSessions(simPool), nil, log)

	set, cat := settingsOf(cfg), catalogOf(cfg)
	inv := booking.NewInventory(line, store, cat.StockedEventIDs(), log)
	svc := booking.NewService(store, sim, cat, set, log).WithInventory(inv)
	prometheus.MustRegister(booking.NewCollector(store))

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler())
	// The health summary the adaptive admitter reads: the API's own
	// latency and errors, published to Redis every second.
	health := booking.NewHealth(operators.New(redis), log)
	// Every pass is checked against the line too, as the gate checks it: a
	// ticket that left or was revoked takes nothing on this port either.
	api := booking.NewHandler(svc, booking.PassAuth(verifier), line, store.Ping, log)
	if cfg.Auth.OperatorsOn() {
		// A wallet is no event's: only a token of every event credits it.
		api.WithOperators(func(token string) bool {
			g, ok := cfg.Auth.Bearer(token)
			return ok && g.Allows(config.ScopeWalletsWrite) && g.Covers("")
		})
	}
	mux.Handle("/", metrics.HTTP("booking", health.Wrap(api)))
	// The simulator's hosted page: another origin than the gateway's, as a
	// real provider's (the fan's browser is sent there by paymentUrl, and
	// back to the gateway). On this listener, or on a listener of its own
	// that serves nothing else (so that it can be published where the
	// booking API must not be).
	listeners := []service.Listener{{Addr: cfg.Booking.Addr, Server: service.HTTP(mux)}}
	page := metrics.HTTP("booking", sim.Handler())
	if addr := cfg.Booking.Payment.Simulator.Addr; addr != "" {
		own := http.NewServeMux()
		own.Handle("/pay/", page)
		own.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
		listeners = append(listeners, service.Listener{Addr: addr, Server: service.HTTP(own)})
	} else {
		mux.Handle("/pay/", page)
	}
	// The jobs stop after the API: a payment settled during shutdown still
	// gets its event published on the next start (the outbox keeps it).
	reconcile := max(min(cfg.Booking.Payment.ReconcileAfter.D()/4, 30*time.Second), time.Second)
	return service.Run(ctx, log, listeners,
		(&booking.Sweeper{Store: store, Batch: 500, Every: 5 * time.Second, Log: log}).Run,
		inv.Run, health.Run, sim.Run, api.Follow,
		(&booking.Reconciler{Service: svc, Log: log, Every: reconcile}).Run,
		(&booking.Relay{Store: store, Line: line, Batch: 100, Every: 250 * time.Millisecond, Log: log}).Run)
}

// settingsOf is the config's booking rules.
func settingsOf(c *config.Config) booking.Settings {
	b := c.Booking
	return booking.Settings{
		HoldTTL: b.HoldTTL.D(), SessionTTL: b.Payment.SessionTTL.D(), ReconcileAfter: b.Payment.ReconcileAfter.D(),
		MaxSeatsPerHold: b.MaxSeatsPerHold, HoldsPerMinute: b.HoldsPerMinute,
		HoldAttemptsPerMinute: b.HoldAttemptsPerMinute, ReholdCooldown: b.ReholdCooldown.D(),
		Currency: b.Currency, ReturnURL: b.Payment.ReturnBaseURL,
	}
}

// simulatorConns bounds the payment simulator's own pool.
const simulatorConns = 8

// simulatorOf is the config's payment simulator. A "late" callback comes
// once the hold has surely lapsed: a session ends at most hold_ttl −
// session_ttl before its hold does.
func simulatorOf(c *config.Config) payment.SimulatorConfig {
	p := c.Booking.Payment
	sim := p.Simulator
	return payment.SimulatorConfig{
		Outcome: sim.Outcome, Delay: sim.Delay.D(), Duplicate: sim.Duplicate, Drop: sim.Drop,
		Manual: !sim.Enabled, AutoPay: sim.AutoPay,
		LateBy:      c.Booking.HoldTTL.D() - p.SessionTTL.D() + sim.Delay.D() + time.Second,
		CallbackURL: selfURL(c.Booking.Addr) + "/api/v1/booking/payments/callback",
		Secret:      []byte(p.Secret),
		PageURL:     sim.PageURL,
	}
}

// catalogOf is what the config's events sell.
func catalogOf(c *config.Config) *booking.Catalog {
	events := make([]booking.Event, len(c.Events))
	for i, ev := range c.Events {
		events[i] = booking.Event{ID: ev.ID}
		for _, st := range ev.Showtimes {
			bs := booking.Showtime{ID: st.ID, Title: st.Title, StartsAt: st.StartsAt,
				Rows: st.Rows, SeatsPerRow: st.SeatsPerRow, PriceCents: st.PriceCents}
			for _, b := range st.GeneralAdmission {
				bs.Blocks = append(bs.Blocks, booking.GABlock{Code: b.Code, Capacity: b.Capacity, PriceCents: b.PriceCents})
			}
			events[i].Showtimes = append(events[i].Showtimes, bs)
		}
	}
	return booking.NewCatalog(events)
}

func newVerifier(cfg *config.Config) (*pass.Verifier, error) {
	if f := cfg.Booking.PublicKeyFile; f != "" {
		pub, err := pass.LoadPublicKey(f)
		if err != nil {
			return nil, err
		}
		return pass.NewStaticVerifier(pub), nil
	}
	return pass.NewJWKSVerifier(cfg.Booking.JWKSURL, &http.Client{Timeout: 5 * time.Second}), nil
}

// selfURL is how this process reaches its own listener (the simulator posts
// its callbacks there, through the real signed path).
func selfURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + strings.TrimPrefix(addr, "http://")
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
