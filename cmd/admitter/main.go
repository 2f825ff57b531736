// Command admitter promotes waiting tickets to active ones, per event, once
// per tick, at the configured or computed rate and never above max_active.
// It has no API: it serves /metrics, /healthz and /readyz on admitter.addr.
// Any number of replicas may run; the config file is followed live (file
// changes and SIGHUP).
package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"time"

	"github.com/waitroom/waitroom/internal/admission"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/platform/health"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/platform/service"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/webhook"
)

func main() { service.Main("admitter", run) }

// run ticks until ctx ends, then stops gracefully: the tick in flight
// finishes (a script runs whole or not at all).
func run(ctx context.Context, p service.Process) error {
	cfg := p.Config
	redis, err := p.Redis()
	if err != nil {
		return err
	}
	defer redis.Close()
	// The admitter commits, freezes and draws the lottery and the
	// selection: it derives their seeds from auth.draw_secret.
	line := queue.New(redis, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret))
	pre := presale.New(redis, line, []byte(cfg.Auth.TicketSecret), "").WithDrawSecret([]byte(cfg.Auth.DrawSecret))
	hooks := webhook.NewStore(redis)
	o := admission.Options{Line: line, Operators: operators.New(redis), Presale: pre, Webhooks: hooks, Config: cfg, ConfigPath: p.ConfigPath, Log: p.Log}
	jobs := []service.Job{}
	// With notify.smtp_url, the away fans let in are emailed: every
	// replica queues their emails (relayAway), and one at a time sends
	// them (notify.Sender, under a lease).
	var (
		mailer *notify.SMTP
		outbox *notify.Outbox
	)
	if cfg.Notify.SMTPURL != "" {
		if mailer, err = notify.NewSMTP(cfg.Notify.SMTPURL); err != nil {
			return err
		}
		mailer.Timeout = cfg.Notify.Timeout.D()
		// The server's certificate is verified against the system's
		// roots, and notify.ca_file's when set (a private relay's CA).
		roots, err := notify.RootsWith(cfg.Notify.CAFile)
		if err != nil {
			return err
		}
		if roots != nil {
			mailer.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		}
		outbox = notify.NewOutbox(redis)
		o.Outbox = outbox
		pre.MailInvitations(outbox)
	}
	adm := admission.New(o)
	if mailer != nil {
		mails, err := web.NewMails()
		if err != nil {
			return err
		}
		// A sender that dies mid-send hands its lease and its emails over
		// after two time-outs and a margin.
		handover := 2*mailer.Timeout + 5*time.Second
		sender := notify.NewSender(outbox, notify.SenderOptions{Mailer: mailer, Render: renderer(adm.Config, mails, line),
			From: cfg.Notify.From, Events: eventIDs(adm.Config), Lease: handover, Inflight: handover, Log: p.Log})
		jobs = append(jobs, sender.Run)
		p.Log.Info("email to away fans", "smtp", mailer.Addr(), "from", cfg.Notify.From, "sender", sender.Owner())
	}

	// Every replica notices moments at its ticks (admission's announce)
	// and sends (each delivery claimed by one at a time), to the
	// receivers of the config in force: a reload's webhooks act at the
	// next round.
	webhook.Export()
	sender := webhook.NewSender(hooks, webhook.SenderOptions{
		Endpoints: func() []webhook.Endpoint { return policy.Endpoints(adm.Config()) },
		Events:    eventIDs(adm.Config), Log: p.Log})
	jobs = append(jobs, sender.Run)

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler())
	health.Routes(mux, health.Check{Name: "redis", Ping: line.Ping})
	p.Log.Info("admitter started", "config", p.ConfigPath, "events", len(cfg.Events), "tick", cfg.Admitter.Tick.String())
	jobs = append(jobs, func(ctx context.Context) { adm.Watch(ctx, p.Hup) }, adm.Run)
	return service.Run(ctx, p.Log, []service.Listener{{Addr: cfg.Admitter.Addr, Server: service.HTTP(mux)}}, jobs...)
}
