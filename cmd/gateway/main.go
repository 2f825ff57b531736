// Command gateway is waitroom's edge: the fan's pages, the queue API, the
// JWKS of the access pass, and the gate in front of the booking API.
//
//	gateway [-config PATH]             serve
//	gateway [-config PATH] pages DIR   write the built-in pages into DIR, a site's page folder's start
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/service"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/webhook"
)

func main() { service.Main("gateway", run) }

// run serves, or runs the command the arguments name.
func run(ctx context.Context, p service.Process) error {
	switch {
	case len(p.Args) == 0:
		return serve(ctx, p)
	case len(p.Args) == 2 && p.Args[0] == "pages":
		if err := writePages(p.Args[1]); err != nil {
			return err
		}
		p.Log.Info("the built-in pages written: edit them, then name the folder in events[].page.dir (docs/PAGES.md)", "dir", p.Args[1])
		return nil
	}
	return fmt.Errorf("unexpected arguments %q (usage: gateway [-config PATH] [pages DIR])", p.Args)
}

// writePages writes the built-in room.html and register.html into dir
// (made if need be), and a messages.en.yaml that says what goes in it: a
// site's page folder to start from (DESIGN.md, "The site's own look"). It
// overwrites nothing.
func writePages(dir string) error {
	files := map[string][]byte{"messages.en.yaml": []byte(messagesStart)}
	for _, page := range web.LookPages {
		b, err := web.BuiltinTemplate(page)
		if err != nil {
			return err
		}
		files[page+".html"] = b
	}
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		return err
	}
	for name := range files {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pages: %s is there already; nothing written", filepath.Join(dir, name))
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// messagesStart is a page folder's first messages file.
const messagesStart = `# The site's own words in English (docs/PAGES.md): a flat map of dotted keys
# to strings, laid over the room's own words; messages.ja.yaml and
# messages.ko.yaml do the same in Japanese and Korean, and a key or a file
# missing there is the English one. The room's keys are in the gateway's
# catalog (internal/gateway/web/static/i18n/en.json); {name} is filled in.
#
# site.tagline: "Tickets for the best shows in town"
# room.status.waiting: "You're in the queue"
`

func serve(ctx context.Context, p service.Process) error {
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
		accounts = account.NewVerifier(keys)
	}
	redis, err := p.Redis()
	if err != nil {
		return err
	}
	defer redis.Close()

	// A pre-queue join or a registration that finds no commitment makes
	// one: the gateway derives it from auth.draw_secret, as the admitter.
	line := queue.New(redis, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret))
	srv, err := gateway.New(gateway.Options{
		Config:     cfg,
		ConfigPath: p.ConfigPath,
		Line:       line,
		Operators:  operators.New(redis),
		Webhooks:   webhook.NewStore(redis),
		Presale:    presale.New(redis, line, []byte(cfg.Auth.TicketSecret), "").WithDrawSecret([]byte(cfg.Auth.DrawSecret)),
		Signer:     pass.NewSigner(key),
		Accounts:   accounts,
		Log:        p.Log,
	})
	if err != nil {
		return err
	}
	prometheus.MustRegister(srv.NewCollector())
	webhook.Export() // the gateway queues settings.changed
	p.Log.Info("gateway started", "events", len(cfg.Events))
	// Events added to or removed from the file are served without a restart.
	return service.Run(ctx, p.Log, []service.Listener{{Addr: cfg.Gateway.Addr, Server: srv}},
		func(ctx context.Context) { srv.Watch(ctx, p.Hup) })
}
