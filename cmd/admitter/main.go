// Command admitter promotes waiting tickets to active ones, per event, once
// per tick, at the configured or computed rate and never above max_active.
// It has no API: it serves /metrics, /healthz and /readyz on admitter.addr.
// Any number of replicas may run; the config file is followed live (file
// changes and SIGHUP).
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/waitroom/waitroom/internal/admission"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/platform/health"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/platform/service"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/queue"
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
	line := queue.New(redis, []byte(cfg.Auth.TicketSecret))
	pre := presale.New(redis, line, []byte(cfg.Auth.TicketSecret), "")
	o := admission.Options{Line: line, Operators: operators.New(redis), Presale: pre, Config: cfg, ConfigPath: p.ConfigPath, Log: p.Log}
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
		sender := notify.NewSender(outbox, notify.SenderOptions{Mailer: mailer, Render: renderer(adm.Config, mails),
			From: cfg.Notify.From, Events: eventIDs(adm.Config), Lease: handover, Inflight: handover, Log: p.Log})
		for _, ev := range cfg.Events {
			notify.Export(ev.ID, notify.KindYourTurn, notify.KindPresaleSelected)
		}
		jobs = append(jobs, sender.Run)
		p.Log.Info("email to away fans", "smtp", mailer.Addr(), "from", cfg.Notify.From, "sender", sender.Owner())
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler())
	health.Routes(mux, health.Check{Name: "redis", Ping: line.Ping})
	p.Log.Info("admitter started", "config", p.ConfigPath, "events", len(cfg.Events), "tick", cfg.Admitter.Tick.String())
	jobs = append(jobs, func(ctx context.Context) { adm.Watch(ctx, p.Hup) }, adm.Run)
	return service.Run(ctx, p.Log, []service.Listener{{Addr: cfg.Admitter.Addr, Server: service.HTTP(mux)}}, jobs...)
}
