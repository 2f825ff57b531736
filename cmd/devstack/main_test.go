package main

import (
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
)

// shipped is configs/waitroom.yaml as the processes read it with nothing
// in the environment.
func shipped(t *testing.T) *config.Config {
	t.Helper()
	b, err := os.ReadFile("../../configs/waitroom.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(b, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Fans' browsers never need the booking core's API port: the shipped config
// binds it and the admitter to loopback, and gives the simulator's hosted
// page (where paymentUrl sends fans) a listener of its own,
// 127.0.0.1:8083; make run binds both to loopback whatever config it runs.
func TestTheBookingCoreListensOnLoopback(t *testing.T) {
	cfg := shipped(t)
	for name, addr := range map[string]string{"booking.addr": cfg.Booking.Addr, "admitter.addr": cfg.Admitter.Addr} {
		if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
			t.Errorf("the shipped %s is %q; want 127.0.0.1:port", name, addr)
		}
	}
	sim := cfg.Booking.Payment.Simulator
	if sim.Addr != "127.0.0.1:8083" || sim.PageURL != "http://127.0.0.1:8083" {
		t.Errorf("the shipped simulator page listens on %q, fans sent to %q; want 127.0.0.1:8083 and http://127.0.0.1:8083", sim.Addr, sim.PageURL)
	}
	if env := loopback(cfg, func(string) string { return "" }); len(env) != 0 {
		t.Errorf("make run with the shipped config overrides %q; want nothing (loopback already)", env)
	}

	none := func(string) string { return "" }
	for _, tc := range []struct {
		name           string
		booking, admit string
		getenv         func(string) string
		want           []string
	}{
		{"no host", ":8081", ":8082", none, []string{"WAITROOM_BOOKING_ADDR=127.0.0.1:8081", "WAITROOM_ADMITTER_ADDR=127.0.0.1:8082"}},
		{"every interface", "0.0.0.0:9081", "[::]:9082", none, []string{"WAITROOM_BOOKING_ADDR=127.0.0.1:9081", "WAITROOM_ADMITTER_ADDR=127.0.0.1:9082"}},
		{"loopback already", "localhost:8081", "[::1]:8082", none, nil},
		{"set in the environment", ":8081", ":8082", func(k string) string {
			if k == "WAITROOM_BOOKING_ADDR" {
				return ":7000"
			}
			return ""
		}, []string{"WAITROOM_ADMITTER_ADDR=127.0.0.1:8082"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *cfg
			c.Booking.Addr, c.Admitter.Addr = tc.booking, tc.admit
			if got := loopback(&c, tc.getenv); !slices.Equal(got, tc.want) {
				t.Errorf("loopback(%s, %s) = %q; want %q", tc.booking, tc.admit, got, tc.want)
			}
		})
	}
}

// The demo inboxes page shows each demo account's emails, as the sink
// received them: the subject, and the HTML in a sandboxed frame.
func TestMailPageShowsTheInboxes(t *testing.T) {
	sink, err := mailsink.Start(mailsink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	msg := "Subject: =?UTF-8?q?It's_your_turn:_Premiere?=\r\nContent-Type: text/html; charset=UTF-8\r\n\r\n<p>Come back</p>\r\n"
	if err := smtp.SendMail(sink.Addr, nil, "noreply@example.com", []string{demoEmail("alice")}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	originHandler(nil, "http://localhost:8080", sink).ServeHTTP(rec, httptest.NewRequest("GET", "/mail", nil))
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, "It&#39;s your turn: Premiere") || !strings.Contains(body, `id="inbox-alice"`) || !strings.Contains(body, "sandbox=") {
		t.Fatalf("/mail: %d\n%s", rec.Code, body)
	}
}

// make run makes a draw secret once and keeps it in .data, as the signing
// key: the next run draws what the last one committed with the same one.
func TestDrawSecretMadeOnceAndKept(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".data", "draw-secret")
	first, made, err := ensureDrawSecret(file)
	if err != nil || !made || len(first) < config.MinSecretBytes {
		t.Fatalf("first run: %q made %v, %v; want a new secret of at least %d bytes", first, made, err, config.MinSecretBytes)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept in %s: %v, %v; want it readable by its owner only", file, fi.Mode(), err)
	}
	again, made, err := ensureDrawSecret(file)
	if err != nil || made || again != first {
		t.Fatalf("next run: %q made %v, %v; want the kept %q", again, made, err, first)
	}
	if err := os.WriteFile(file, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ensureDrawSecret(file); err == nil {
		t.Fatal("a kept secret shorter than the floor was used")
	}
}

// The demo shop and its queue wear one look: the event guarding the
// shop's /drop names the page folder (configs/pages/shop), which loads as
// a site's look, and the shop's own pages load its stylesheet and logo,
// the very files the room serves from that folder, over the room's own
// stylesheet.
func TestTheShopAndItsQueueShareALook(t *testing.T) {
	dir := shopLook(shipped(t))
	if dir != "configs/pages/shop" {
		t.Fatalf("the shop's event has page.dir %q; want configs/pages/shop", dir)
	}
	dir = filepath.Join("..", "..", dir) // make run's folder is the repository's
	if _, err := web.LoadLook(dir); err != nil {
		t.Fatalf("the demo's page folder: %v", err)
	}
	shop := httptest.NewServer(shopOrigin(dir, nil))
	defer shop.Close()
	get := func(path string) (string, string) {
		t.Helper()
		res, err := http.Get(shop.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.Header.Get("Content-Type"), string(b)
	}
	if _, page := get("/drop/"); !strings.Contains(page, `href="/shop.css"`) || !strings.Contains(page, `href="/app.css"`) || !strings.Contains(page, `class="site shop-header"`) {
		t.Errorf("the shop's page does not wear its look:\n%s", page)
	}
	for path, file := range map[string]string{"/shop.css": "shop.css", "/logo.svg": "logo.svg"} {
		want, _ := web.ReadAsset(dir, file)
		if ctype, got := get(path); got != string(want) || ctype == "" || strings.HasPrefix(ctype, "text/html") {
			t.Errorf("%s: %q %.60q; want the page folder's %s", path, ctype, got, file)
		}
	}
	want, _ := fs.ReadFile(web.FS(), "app.css")
	if ctype, got := get("/app.css"); got != string(want) || !strings.HasPrefix(ctype, "text/css") {
		t.Errorf("/app.css: %q; want the room's stylesheet", ctype)
	}
}

// make run's shop has an always-on page (DESIGN.md, "Always on"): an event
// in mode auto guards the shop's /restock on the address the shop is
// reached by, in the shop's look; the shop's front page links to it; its
// checkout ends the visitor's session with the operators' route (the
// origin ending a session: DELETE …/tickets/{ticketId} with the token),
// and only there, only for the ticket the room told.
func TestTheShopHasAnAlwaysOnPage(t *testing.T) {
	cfg := shipped(t)
	var auto *config.Event
	for i, ev := range cfg.Events {
		for _, p := range ev.Protect {
			if p.PathPrefix == "/restock" && shopAddr == p.Host+":8088" {
				auto = &cfg.Events[i]
			}
		}
	}
	if auto == nil || auto.Mode != config.ModeAuto || auto.Page.Dir != "configs/pages/shop" {
		t.Fatalf("the shipped config's event guarding the shop's /restock: %+v; want one in mode auto, in the shop's look", auto)
	}

	var mu sync.Mutex
	var asked []string
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer gw.Close()
	shop := httptest.NewServer(shopOrigin("", endSession(gw.URL, "dev-token")))
	defer shop.Close()
	get := func(path, event, ticket string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, shop.URL+path, nil)
		if event != "" {
			req.Header.Set("X-Waitroom-Event", event)
			req.Header.Set("X-Waitroom-Ticket-Id", ticket)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	if page := get("/", "", ""); !strings.Contains(page, `href="/restock/"`) {
		t.Errorf("the shop's front page does not link to the restock:\n%s", page)
	}
	if page := get("/restock/jacket", "restock", "t-1"); !strings.Contains(page, `href="/restock/checkout"`) || strings.Contains(page, `id="ended"`) {
		t.Errorf("a restock page: want a checkout link, the visit going on:\n%s", page)
	}
	if page := get("/drop/checkout", "drop", "t-2"); strings.Contains(page, `id="ended"`) {
		t.Error("the drop's checkout ended a session; want only the restock's")
	}
	if page := get("/restock/checkout", "restock", "t-3"); !strings.Contains(page, `id="ended"`) || !strings.Contains(page, "t-3") {
		t.Errorf("the restock's checkout: want the visit ended:\n%s", page)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"DELETE /api/v1/admin/events/restock/tickets/t-3 Bearer dev-token"}; !slices.Equal(asked, want) {
		t.Errorf("the shop asked the room %q; want %q", asked, want)
	}
}
