package main

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
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

// The shop's pages and its queue share one look: the shop's stylesheet and
// logo are the assets of the page folder the event "drop" names
// (configs/pages/shop, DESIGN.md "The site's own look"), laid over the
// room's own stylesheet, which the shop serves too.
var shopPage = template.Must(template.New("shop").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>The demo shop</title><link rel="stylesheet" href="/app.css"><link rel="stylesheet" href="/shop.css"></head>
<body class="shop">
<header class="site shop-header"><p class="shop-brand"><img src="/logo.svg" width="32" height="32" alt=""> The demo shop</p>
<p class="shop-tagline">Sneakers, size 42: one pair per fan, while they last.</p></header>
<main class="page">
{{if .Ended}}<p class="shop-in" id="ended">Thank you for your order. Your visit is over (ticket <code>{{.Ticket}}</code>):
the shop told the room, and your place goes to the next visitor.</p>
<p><a href="/">Back to the shop</a></p>
{{else if .Event}}<p class="shop-in" id="admitted">You are in: the waiting room let you through (event <b>{{.Event}}</b>, ticket <code>{{.Ticket}}</code>).
Every page under /{{.Section}}/ is yours until your turn ends.</p>
<h1>{{.Path}}</h1><p>Sneakers, size 42: <a href="/{{.Section}}/checkout">buy</a>.</p>
{{else}}<h1>Welcome</h1><p>Anyone may look around here. The drop itself is behind the waiting room:
<a href="/drop/">go to the drop</a>. The restock is always on: you go straight in while the shop
has room, and wait only once it is full: <a href="/restock/">go to the restock</a>.</p>{{end}}
</main>
<footer class="shop-footer"><p>The demo shop. Its queue is kept by waitroom.</p></footer>
</body></html>
`))

// shopOrigin is the shop's site: its pages, the room's stylesheet
// (app.css) and the files of its look (dir: the page folder of the event
// that guards it, "" for none). Its restock's checkout ends the visitor's
// session (end: the origin ending a session, DESIGN.md "Always on"), so
// that the next visitor takes the place at once.
func shopOrigin(dir string, end func(ctx context.Context, event, ticket string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/app.css":
			b, err := fs.ReadFile(web.FS(), "app.css")
			sendFile(w, "text/css; charset=utf-8", b, err)
			return
		case "/shop.css", "/logo.svg":
			b, err := web.ReadAsset(dir, strings.TrimPrefix(r.URL.Path, "/"))
			sendFile(w, mime.TypeByExtension(path.Ext(r.URL.Path)), b, err)
			return
		}
		event, ticket := r.Header.Get("X-Waitroom-Event"), r.Header.Get("X-Waitroom-Ticket-Id")
		section, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		ended := false
		if r.URL.Path == "/restock/checkout" && event == "restock" && ticket != "" && end != nil {
			if err := end(r.Context(), event, ticket); err != nil {
				http.Error(w, "the checkout could not end your visit: "+err.Error(), http.StatusBadGateway)
				return
			}
			ended = true
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = shopPage.Execute(w, map[string]any{"Path": r.URL.Path, "Section": section, "Ended": ended, "Event": event, "Ticket": ticket})
	})
}

func sendFile(w http.ResponseWriter, ctype string, b []byte, err error) {
	if err != nil {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}

// shopLook is the page folder of the event that guards the shop's /drop
// ("" for none).
func shopLook(cfg *config.Config) string {
	for _, ev := range cfg.Events {
		for _, p := range ev.Protect {
			if strings.HasPrefix(p.PathPrefix, "/drop") {
				return ev.Page.Dir
			}
		}
	}
	return ""
}

// endSession is the shop's end of a visitor's session after checkout:
// the operators' route of the gateway at gw, with a token of scope
// tickets:end (make run's operators' token).
func endSession(gw, token string) func(ctx context.Context, event, ticket string) error {
	return func(ctx context.Context, event, ticket string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, gw+"/api/v1/admin/events/"+url.PathEscape(event)+"/tickets/"+url.PathEscape(ticket), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent && res.StatusCode != http.StatusNotFound {
			return fmt.Errorf("the room answered %s", res.Status)
		}
		return nil
	}
}

// serveShop runs the shop's origin and nginx in front of it until ctx
// ends; it returns at once (nil) when nginx is not installed, after saying
// so. gw and token are the gateway and the operators' token the restock's
// checkout ends a session with.
func serveShop(ctx context.Context, log *slog.Logger, cfg *config.Config, gw, token string) error {
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
		[2]string{"127.0.0.1:8080", "127.0.0.1:" + port}, [2]string{"127.0.0.1:3000", shopOriginAddr}, [2]string{"listen 80;", "listen " + shopAddr + ";"},
		// The shop is reached by its address here: its name, for nginx to
		// answer it (every other name is refused).
		[2]string{"listen 80 default_server;", "listen " + shopAddr + " default_server;"}, [2]string{"server_name shop.example;", "server_name 127.0.0.1;"})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", shopOriginAddr)
	if err != nil {
		return fmt.Errorf("demo shop: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: shopOrigin(shopLook(cfg), endSession(gw, token))}
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
	log.Info("demo shop behind the room", "url", "http://"+shopAddr+"/drop/", "always on", "http://"+shopAddr+"/restock/", "nginx", nginx, "config", shopConfig)
	<-ctx.Done()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
