package e2e_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
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
// room, with no showtime of its own) and lets fans in at once; "restock",
// always on (mode auto), guards its /restock paths but for the assets and
// the CORS preflights (its bypass); "encore", always on with room for one
// visitor, guards /encore (the journey through a full site: alwaysOnFull).
const dropEvents = `  - id: "drop"
    name: "Sneaker drop"
    admission: {admit_per_second: 20, max_active: 50, access_ttl: "5m"}
    protect: [{host: "shop.example", path_prefix: "/drop"}]
  - id: "restock"
    name: "Restock"
    mode: "auto"
    admission: {admit_per_second: 20, max_active: 50, access_ttl: "5m"}
    protect: [{host: "shop.example", path_prefix: "/restock"}]
    bypass: {path_prefixes: ["/restock/assets"], methods: ["OPTIONS"]}
  - id: "encore"
    name: "Encore"
    mode: "auto"
    admission: {admit_per_second: 20, max_active: 1, access_ttl: "5m"}
    protect: [{host: "shop.example", path_prefix: "/encore"}]
`

// startDocsNginx runs nginx with one of docs/' files (its site
// configuration) as it is but for its addresses: each pair from → to, {addr}
// in to standing for a free loopback host:port, which it returns ({port}
// for its port alone). It stops with the test.
func startDocsNginx(t *testing.T, file string, pairs ...[2]string) string {
	t.Helper()
	return startDocsProxy(t, localsvc.StartNginx, file, pairs...)
}

// startDocsProxy is startDocsNginx for the proxy start starts (nginx or
// Caddy).
func startDocsProxy(t *testing.T, start func(context.Context, localsvc.ProxyOptions) (*localsvc.Proxy, error), file string, pairs ...[2]string) string {
	t.Helper()
	port, err := localsvc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(testenv.Repo(t), "docs", file))
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := range pairs {
		pairs[i][1] = strings.ReplaceAll(pairs[i][1], "{addr}", addr)
		pairs[i][1] = strings.ReplaceAll(pairs[i][1], "{port}", fmt.Sprint(port))
	}
	site, err := localsvc.Readdress(string(conf), pairs...)
	if err != nil {
		t.Fatal(err)
	}
	px, err := start(context.Background(), localsvc.ProxyOptions{Dir: t.TempDir(), Site: site, Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Stop)
	return addr
}

// TestBrowserThroughTheRoomToASite is a fan's whole trip in headless
// Chromium, as a site behind the room sees it: the real binaries, the
// docs' nginx configuration in front of a small origin; the fan opens a
// guarded page of the shop, is sent to the room (another host), which
// joins it (the page's script, carrying the way back), admits it and sends
// it back; the shop's page opens on the original URL, the origin told the
// event and the ticket, with the pass an HttpOnly cookie of the shop's own
// host (never the room's); the next guarded page opens straight away.
func TestBrowserThroughTheRoomToASite(t *testing.T) {
	t.Parallel()
	s := stack.Start(t, stack.Options{Events: dropEvents, Tick: "200ms", TrustedProxies: []string{"127.0.0.1/32"},
		GatewayKeys: `, public_url: "http://{gateway}"`, AdminToken: opsToken})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Shop</title><h1 id="shop">The shop: %s</h1><p id="who">%s %s</p>`,
			html.EscapeString(r.URL.Path), html.EscapeString(r.Header.Get("X-Waitroom-Event")), html.EscapeString(r.Header.Get("X-Waitroom-Ticket-Id")))
	}))
	t.Cleanup(origin.Close)
	addr := startDocsNginx(t, filepath.Join("forward-auth", "nginx.conf"),
		[2]string{"127.0.0.1:8080", strings.TrimPrefix(s.Gateway, "http://")}, [2]string{"127.0.0.1:3000", strings.TrimPrefix(origin.URL, "http://")},
		[2]string{"listen 80;", "listen {addr};"}, [2]string{"listen 80 default_server;", "listen {addr} default_server;"})
	_, port, _ := strings.Cut(addr, ":")

	// shop.example is this machine, for this browser only.
	actx := browserWith(t, chromedp.Flag("host-resolver-rules", "MAP shop.example 127.0.0.1"))
	ctx := tab(t, actx)
	shop := "http://shop.example:" + port
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
	// Always on (DESIGN.md): restock's visitor goes straight to its page,
	// the room never seen, its place made by forward auth itself.
	run(t, ctx, 10*time.Second, "an always-on page", chromedp.Navigate(shop+"/restock/jacket"), chromedp.WaitVisible("#shop", chromedp.ByQuery))
	run(t, ctx, 5*time.Second, "where the fan is", chromedp.Location(&at))
	if who := text(t, ctx, "#who"); at != shop+"/restock/jacket" || !strings.HasPrefix(who, "restock ") {
		t.Errorf("an always-on page: at %s, the origin told %q; want %s/restock/jacket straight away, told restock and a ticket", at, who, shop)
	}
	if errs := consoleOf(ctx).list(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
	t.Run("always on, the site full", func(t *testing.T) { alwaysOnFull(t, s, ctx, shop) })
	// The same through Caddy and the docs' Caddyfile, and both proxies'
	// bypass.
	caddy := startDocsProxy(t, localsvc.StartCaddy, filepath.Join("forward-auth", "Caddyfile"),
		[2]string{"127.0.0.1:8080", strings.TrimPrefix(s.Gateway, "http://")}, [2]string{"127.0.0.1:3000", strings.TrimPrefix(origin.URL, "http://")},
		[2]string{"http://shop.example {", "http://shop.example:{port} {"})
	for name, addr := range map[string]string{"nginx": addr, "caddy": caddy} {
		t.Run(name, func(t *testing.T) { alwaysOnThrough(t, addr) })
	}
}

// alwaysOnFull is DESIGN.md's "Always on" journey in Chromium through the
// docs' nginx, two visitors of encore (room for one), each with cookies of
// its own (the first a tab of this browser, the second a browser of its
// own): the first goes straight to the
// page, the room never seen; with the cap full, the second lands in the
// room and waits; the origin ends the first's session after its checkout
// (the operators' route, DELETE …/tickets/{ticketId}), and the second is
// let in and comes back to the page it asked for, on a ticket of its own;
// the first's pass stops working: its next page is the room's.
func alwaysOnFull(t *testing.T, s *stack.Stack, first context.Context, shop string) {
	page := shop + "/encore/jacket"
	second := tab(t, browserWith(t, chromedp.Flag("host-resolver-rules", "MAP shop.example 127.0.0.1")))
	var at string
	run(t, first, 10*time.Second, "the first visitor", chromedp.Navigate(page), chromedp.WaitVisible("#shop", chromedp.ByQuery), chromedp.Location(&at))
	firstWho := strings.Fields(text(t, first, "#who"))
	if at != page || len(firstWho) != 2 || firstWho[0] != "encore" {
		t.Fatalf("the first visitor: at %s, the origin told %q; want %s straight away, told encore and a ticket", at, firstWho, page)
	}

	run(t, second, 10*time.Second, "the second visitor", chromedp.Navigate(page))
	run(t, second, 5*time.Second, "where it landed", chromedp.Evaluate(`performance.getEntriesByType('navigation')[0].name`, &at))
	if !strings.HasPrefix(at, s.Gateway+"/e/encore?return=") {
		t.Fatalf("the second visitor, the site full, landed on %s; want the room, %s/e/encore?return=…", at, s.Gateway)
	}
	waitEval(t, second, 20*time.Second, "the second visitor waiting in the room",
		`document.querySelector('#status') && ['waiting', 'next'].includes(document.querySelector('#status').dataset.status)`)

	// The origin ends the first visitor's session after its checkout.
	req, _ := http.NewRequest(http.MethodDelete, s.Gateway+"/api/v1/admin/events/encore/tickets/"+firstWho[1], nil)
	req.Header.Set("Authorization", "Bearer "+opsToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("the origin ends the first session: %d; want 204", res.StatusCode)
	}

	run(t, second, 30*time.Second, "the second visitor back at the shop", chromedp.WaitVisible("#shop", chromedp.ByQuery), chromedp.Location(&at))
	secondWho := strings.Fields(text(t, second, "#who"))
	if u, err := url.Parse(at); err != nil || shop+u.Path != page || len(secondWho) != 2 || secondWho[0] != "encore" || secondWho[1] == firstWho[1] {
		t.Errorf("the second visitor came back to %s, the origin told %q; want %s, encore and a ticket of its own", at, secondWho, page)
	}

	run(t, first, 10*time.Second, "the first visitor's next page", chromedp.Navigate(shop+"/encore/checkout"))
	run(t, first, 5*time.Second, "where it landed", chromedp.Evaluate(`performance.getEntriesByType('navigation')[0].name`, &at))
	if !strings.HasPrefix(at, s.Gateway+"/e/encore?return=") {
		t.Errorf("the first visitor's next page, its session ended and the site full: %s; want the room", at)
	}
	for name, c := range map[string]context.Context{"first": first, "second": second} {
		if errs := consoleOf(c).list(); len(errs) > 0 {
			t.Errorf("the %s visitor's console errors: %v", name, errs)
		}
	}
}

// whoRE is what the test's origin was told: the event and the ticket.
var whoRE = regexp.MustCompile(`<p id="who">([^<]*)</p>`)

// alwaysOnThrough checks restock (mode auto, with a bypass) through the
// site's proxy at addr, as visitors with no pass meet it: one goes
// straight to the guarded page, its pass set as the shop's cookie and
// good for the next page (no new place); an asset and a CORS preflight
// pass with nothing told to the origin and no cookie; a way out of the
// assets (..;) is guarded all the same.
func alwaysOnThrough(t *testing.T, addr string) {
	_, port, _ := strings.Cut(addr, ":")
	shop := "http://shop.example:" + port
	visitor := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		var d net.Dialer
		return &http.Client{Jar: jar, Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			}}}
	}
	ask := func(c *http.Client, method, path string) (code int, who, cookie string) {
		t.Helper()
		req, _ := http.NewRequest(method, shop+path, nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		m := whoRE.FindSubmatch(b)
		if m == nil {
			return res.StatusCode, "(not the origin's page)", res.Header.Get("Set-Cookie")
		}
		return res.StatusCode, html.UnescapeString(string(m[1])), res.Header.Get("Set-Cookie")
	}
	fan := visitor()
	code, who, cookie := ask(fan, http.MethodGet, "/restock/jacket")
	f := strings.Fields(who)
	if code != http.StatusOK || len(f) != 2 || f[0] != "restock" || !strings.HasPrefix(cookie, "wr_fa_restock=") || !strings.Contains(cookie, "HttpOnly") {
		t.Fatalf("a visitor with no pass: %d, the origin told %q, Set-Cookie %q; want 200 from the origin, restock and a ticket, the pass's cookie", code, who, cookie)
	}
	if code, again, cookie := ask(fan, http.MethodGet, "/restock/checkout"); code != http.StatusOK || again != who || cookie != "" {
		t.Errorf("its next page: %d, the origin told %q, Set-Cookie %q; want 200, %q, no new cookie", code, again, cookie, who)
	}
	for _, tt := range []struct{ method, path string }{{http.MethodGet, "/restock/assets/app.css"}, {http.MethodOptions, "/restock/jacket"}} {
		if code, who, cookie := ask(visitor(), tt.method, tt.path); code != http.StatusOK || strings.TrimSpace(who) != "" || cookie != "" {
			t.Errorf("%s %s (bypass): %d, the origin told %q, Set-Cookie %q; want 200 from the origin, nothing told, no cookie", tt.method, tt.path, code, who, cookie)
		}
	}
	if code, who, _ := ask(visitor(), http.MethodGet, "/restock/assets/..;/jacket"); code != http.StatusOK || !strings.HasPrefix(who, "restock ") {
		t.Errorf("out of the assets with ..;: %d, the origin told %q; want guarded (let straight through: restock and a ticket)", code, who)
	}
}
