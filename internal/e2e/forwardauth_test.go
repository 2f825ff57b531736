package e2e_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// dropEvents: "drop" guards shop.example's /drop paths (a site behind the
// room, with no showtime of its own) and lets fans in at once.
const dropEvents = `  - id: "drop"
    name: "Sneaker drop"
    admission: {admit_per_second: 20, max_active: 50, access_ttl: "5m"}
    protect: [{host: "shop.example", path_prefix: "/drop"}]
`

// TestBrowserThroughTheRoomToASite is a fan's whole trip in headless
// Chromium, as a site behind the room sees it: the real binaries, the
// docs' nginx configuration in front of a small origin; the fan opens a
// guarded page of the shop, is sent to the room (another host), which
// joins it (the page's script, carrying the way back), admits it and sends
// it back; the shop's page opens on the original URL, the origin told the
// event and the ticket, with the pass an HttpOnly cookie of the shop's own
// host (never the room's); the next guarded page opens straight away.
func TestBrowserThroughTheRoomToASite(t *testing.T) {
	s := stack.Start(t, stack.Options{Events: dropEvents, Tick: "200ms", TrustedProxies: []string{"127.0.0.1/32"},
		GatewayKeys: `, public_url: "http://{gateway}"`})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Shop</title><h1 id="shop">The shop: %s</h1><p id="who">%s %s</p>`,
			html.EscapeString(r.URL.Path), html.EscapeString(r.Header.Get("X-Waitroom-Event")), html.EscapeString(r.Header.Get("X-Waitroom-Ticket-Id")))
	}))
	t.Cleanup(origin.Close)
	port, err := localsvc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(testenv.Repo(t), "docs", "forward-auth", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	site, err := localsvc.Readdress(string(conf), [2]string{"127.0.0.1:8080", strings.TrimPrefix(s.Gateway, "http://")},
		[2]string{"127.0.0.1:3000", strings.TrimPrefix(origin.URL, "http://")}, [2]string{"listen 80;", "listen " + addr + ";"})
	if err != nil {
		t.Fatal(err)
	}
	px, err := localsvc.StartNginx(context.Background(), localsvc.ProxyOptions{Dir: t.TempDir(), Site: site, Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Stop)

	// shop.example is this machine, for this browser only.
	actx := browserWith(t, chromedp.Flag("host-resolver-rules", "MAP shop.example 127.0.0.1"))
	ctx := tab(t, actx)
	shop := fmt.Sprintf("http://shop.example:%d", port)
	page := shop + "/drop/sneakers?size=42"
	run(t, ctx, 10*time.Second, "open the guarded page", chromedp.Navigate(page))
	// Where the redirect led: the page's own address as it arrived (its
	// script then takes the query off the address bar).
	var at string
	run(t, ctx, 5*time.Second, "where the fan is", chromedp.Evaluate(`performance.getEntriesByType('navigation')[0].name`, &at))
	if !strings.HasPrefix(at, s.Gateway+"/e/drop?return=") {
		t.Fatalf("the guarded page led to %s; want the room, %s/e/drop?return=…", at, s.Gateway)
	}
	// The room joins the fan, admits it, and sends it back: the shop's page.
	run(t, ctx, 30*time.Second, "back at the shop", chromedp.WaitVisible("#shop", chromedp.ByQuery))
	run(t, ctx, 5*time.Second, "where the fan is", chromedp.Location(&at))
	u, err := url.Parse(at)
	if err != nil || u.Host != strings.TrimPrefix(shop, "http://") || u.Path != "/drop/sneakers" || u.Query().Get("size") != "42" || u.Query().Get("wr_token") == "" {
		t.Errorf("back at %s; want %s with a wr_token", at, page)
	}
	who := text(t, ctx, "#who")
	if f := strings.Fields(who); len(f) != 2 || f[0] != "drop" {
		t.Errorf("the origin was told %q; want the event drop and a ticket id", who)
	}
	// The pass: an HttpOnly cookie of the shop's host, and of no other.
	var shopCookies, roomCookies []*network.Cookie
	run(t, ctx, 5*time.Second, "the cookies", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		if shopCookies, err = network.GetCookies().WithURLs([]string{shop + "/"}).Do(ctx); err != nil {
			return err
		}
		roomCookies, err = network.GetCookies().WithURLs([]string{s.Gateway + "/"}).Do(ctx)
		return err
	}))
	var pass *network.Cookie
	for _, c := range shopCookies {
		if c.Name == "wr_fa_drop" {
			pass = c
		}
	}
	if pass == nil || !pass.HTTPOnly || pass.Domain != "shop.example" || pass.Path != "/" || pass.SameSite != network.CookieSameSiteLax {
		t.Errorf("the shop's cookies %+v; want wr_fa_drop, HttpOnly, SameSite=Lax, on shop.example, path /", shopCookies)
	}
	for _, c := range roomCookies {
		if c.Name == "wr_fa_drop" {
			t.Errorf("the room's host has the shop's pass: %+v", c)
		}
	}
	// The next guarded page opens at once, on the shop.
	run(t, ctx, 10*time.Second, "the next guarded page", chromedp.Navigate(shop+"/drop/checkout"), chromedp.WaitVisible("#shop", chromedp.ByQuery))
	run(t, ctx, 5*time.Second, "where the fan is", chromedp.Location(&at))
	if at != shop+"/drop/checkout" {
		t.Errorf("the next guarded page is %s; want %s/drop/checkout", at, shop)
	}
	if errs := consoleOf(ctx).list(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
