package main

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
)

// The demo's shop: a site of its own that the room guards with no code of
// its own (README.md, "A site of your own behind the room"). Its origin is
// a tiny handler on shopOriginAddr; in front of it, nginx on shopAddr runs
// docs/forward-auth/nginx.conf (its addresses changed), which asks the
// gateway about every request; the event "drop" of configs/waitroom.yaml
// guards its /drop paths. Without nginx installed it is not started, and
// make run says so.
const (
	shopAddr       = "127.0.0.1:8088"
	shopOriginAddr = "127.0.0.1:8091"
	shopConfig     = "docs/forward-auth/nginx.conf"
)

var shopPage = template.Must(template.New("shop").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Demo shop</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}.in{background:#e8f5e9;padding:.5rem 1rem}</style></head>
<body><h1>The demo shop</h1>
{{if .Event}}<p class="in" id="admitted">You are in: the waiting room let you through (event <b>{{.Event}}</b>, ticket <code>{{.Ticket}}</code>).
Every page under /drop/ is yours until your turn ends.</p>
<h2>{{.Path}}</h2><p>Sneakers, size 42: <a href="/drop/checkout">buy</a>.</p>
{{else}}<p>Anyone may look around here. The drop itself is behind the waiting room:
<a href="/drop/">go to the drop</a>.</p>{{end}}
</body></html>
`))

// serveShop runs the shop's origin and nginx in front of it until ctx
// ends; it returns at once (nil) when nginx is not installed, after saying
// so.
func serveShop(ctx context.Context, log *slog.Logger, cfg *config.Config) error {
	nginx := localsvc.Find("nginx", "/usr/sbin")
	if nginx == "" {
		log.Warn("demo shop behind the room not started: nginx is not installed (sudo apt-get install -y nginx)")
		return nil
	}
	conf, err := os.ReadFile(shopConfig)
	if err != nil {
		return err
	}
	_, port, err := net.SplitHostPort(cfg.Gateway.Addr)
	if err != nil {
		return err
	}
	site, err := localsvc.Readdress(string(conf),
		[2]string{"127.0.0.1:8080", "127.0.0.1:" + port}, [2]string{"127.0.0.1:3000", shopOriginAddr}, [2]string{"listen 80;", "listen " + shopAddr + ";"})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", shopOriginAddr)
	if err != nil {
		return fmt.Errorf("demo shop: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = shopPage.Execute(w, map[string]string{"Path": r.URL.Path,
			"Event": r.Header.Get("X-Waitroom-Event"), "Ticket": r.Header.Get("X-Waitroom-Ticket-Id")})
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	dir, err := filepath.Abs(filepath.Join(".data", "shop-nginx"))
	if err != nil {
		return err
	}
	px, err := localsvc.StartNginx(ctx, localsvc.ProxyOptions{Dir: dir, Site: site, Addr: shopAddr})
	if err != nil {
		return err
	}
	defer px.Stop()
	log.Info("demo shop behind the room", "url", "http://"+shopAddr+"/drop/", "nginx", nginx, "config", shopConfig)
	<-ctx.Done()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
