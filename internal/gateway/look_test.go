package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// pagesCSP is the fans' pages' Content-Security-Policy: a site's own look
// changes none of it (DESIGN.md, "The site's own look").
const pagesCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// lookYAML: the demo's own look on "shop"; a site's look (the presale's
// folder) on a line, on events in every state the config can put a line
// in, and on a presale with its register page.
// Its arguments: the origin's key file, the booking URL, the demo's page
// folder, the presale's, and the presale's times (opens_at, registration
// from and to).
const lookYAML = `
auth: {ticket_secret: "gateway-test-secret-0123456789abcdef", draw_secret: "gateway-draw-secret-0123456789abcdef", account_keys_file: %[1]q, admin_token: "admin-token-0123456789abcdef"}
gateway: {booking_url: %[2]q, joins_per_ip_per_minute: 0}
booking: {payment: {secret: "gateway-test-payment-secret-0123456789"}}
events:
  - id: "shop"
    name: "Sneaker drop"
    admission: {admit_per_second: 100, max_active: 100}
    page: {dir: %[3]q}
    showtimes: [{id: 42, title: "Drop 10:00", starts_at: "2036-12-01T10:00:00+09:00", rows: 2, seats_per_row: 2, price_cents: 1500}]
  - id: "line"
    admission: {admit_per_second: 100, max_active: 100}
    page: {dir: %[4]q}
    showtimes: [{id: 48, title: "Line", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "later"
    prequeue_opens_at: "2020-01-01T09:00:00Z"
    opens_at: "2099-01-01T10:00:00Z"
    page: {dir: %[4]q}
    showtimes: [{id: 43, title: "Later", starts_at: "2099-01-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "still"
    mode: "paused"
    page: {dir: %[4]q}
    showtimes: [{id: 44, title: "Still", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "shut"
    mode: "closed"
    page: {dir: %[4]q}
    showtimes: [{id: 45, title: "Shut", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "plain"
    showtimes: [{id: 46, title: "Plain", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "tour"
    opens_at: %[5]q
    admission: {admit_per_second: 100, max_active: 100}
    presale: {registration_opens_at: %[6]q, registration_closes_at: %[7]q, selected: 2, group_size: 1, window: "1m"}
    page: {dir: %[4]q}
    showtimes: [{id: 47, title: "Tour", starts_at: "2036-12-31T19:00:00Z", rows: 2, seats_per_row: 2}]
`

// tourRoom and tourRegister are the presale's site's pages: each says
// its state where a test can read it.
const (
	tourRoom = `<!doctype html>
<html lang="{{.Lang}}">
<head><meta charset="utf-8"><title>{{.Title}}</title>{{template "waitroom-head" .}}</head>
<body>
<header class="tour"><p id="tour-state">{{.State}}</p><p>{{t "tour.hello"}}</p></header>
{{template "waitroom-live" .}}
</body>
</html>
`
	tourRegister = `<!doctype html>
<html lang="{{.Lang}}">
<head><meta charset="utf-8"><title>{{.Title}}</title>{{template "waitroom-head" .}}</head>
<body>
<header class="tour"><p id="tour-state">{{.State}}</p><p>{{t "tour.hello"}}</p>{{with .Presale}}<p id="tour-status">{{.Status}}</p>{{end}}</header>
{{template "waitroom-live" .}}
</body>
</html>
`
)

type lookEnv struct {
	*accountEnv
	path string             // the config file
	tour string             // the presale's page folder
	logs *testenv.LogBuffer // the gateway's log
	src  string             // the config as written
}

// shopDir is the demo's page folder (configs/pages/shop).
func shopDir(t testing.TB) string { return filepath.Join(testenv.Repo(t), "configs", "pages", "shop") }

// writeFiles writes files (name → content) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// lookConfig is lookYAML with tour as the presale's folder, registration
// open now and closing in an hour.
func lookConfig(t testing.TB, keys, booking, tour string) string {
	now := time.Now().UTC().Truncate(time.Second)
	return fmt.Sprintf(lookYAML, keys, booking, shopDir(t), tour,
		now.Add(2*time.Hour).Format(time.RFC3339), now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
}

// setupLook is a gateway over lookYAML, the presale's folder holding
// files, its config in a file (for reloads) and its log kept. It fails
// the test when the gateway does not start.
func setupLook(t *testing.T, files map[string]string) *lookEnv {
	t.Helper()
	e, err := startLook(t, files)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// startLook is setupLook that returns the gateway's refusal to start.
func startLook(t *testing.T, files map[string]string) (*lookEnv, error) {
	t.Helper()
	site, keys := testenv.OriginSite(t)
	rs, rc := testenv.Redis(t)
	up := newUpstream(t)
	tour := t.TempDir()
	writeFiles(t, tour, files)
	src := lookConfig(t, keys, up.URL, tour)
	path, cfg := configFile(t, src)
	ks, err := account.LoadKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.LogBuffer{}
	priv := testenv.Ed25519Key(t)
	line := queue.NewStore(rc, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret))
	ops := operators.New(rdb.New(rc))
	srv, err := gateway.New(gateway.Options{Config: cfg, ConfigPath: path, Line: line, Operators: ops, Signer: pass.NewSigner(priv),
		Accounts: account.NewVerifier(ks), Log: slog.New(slog.NewTextHandler(logs, nil)),
		Presale: presale.New(rdb.New(rc), line, []byte(cfg.Auth.TicketSecret), "gateway-test").WithDrawSecret([]byte(cfg.Auth.DrawSecret))})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	ae := &accountEnv{env: &env{t: t, redis: rs, srv: srv, line: line, ops: ops, rdb: rc, cfg: cfg, priv: priv, upstream: up}, site: site}
	return &lookEnv{accountEnv: ae, path: path, tour: tour, logs: logs, src: src}, nil
}

// page gets path as a fan speaking lang, with more cookies.
func (e *lookEnv) page(path, lang string, cookies ...string) resp {
	e.t.Helper()
	return e.do(http.MethodGet, path, nil, "Cookie", strings.Join(append([]string{"wr_lang=" + lang}, cookies...), "; "))
}

// shopPage checks r is the demo shop's room in state, status and lang:
// its own header and stylesheet, its own words, the room's blocks, the CSP.
func shopPage(t *testing.T, r resp, state, status, lang string) {
	t.Helper()
	body := string(r.raw)
	if r.code != http.StatusOK {
		t.Fatalf("%s %s: %d\n%s", state, lang, r.code, body)
	}
	loc, err := web.LoadLook(shopDir(t))
	if err != nil {
		t.Fatal(err)
	}
	words := loc.Locale(lang)
	for _, want := range []string{
		`<html lang="` + lang + `">`, `class="site shop-header"`, `/assets/shop.css"`, htmlText(words.T("shop.tagline")),
		`id="status" class="status" data-status="` + status + `"`, htmlText(words.T("room.status." + status)),
		`<link rel="stylesheet" href="/static/app.css">`, `id="live"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("%s %s: the page lacks %s", state, lang, want)
		}
	}
	if got := r.hdr.Get("Content-Security-Policy"); got != pagesCSP {
		t.Errorf("%s %s: CSP %q; want %q", state, lang, got, pagesCSP)
	}
	if i := strings.Index(body, "⟦"); i >= 0 {
		t.Errorf("%s %s: a word missing: %s", state, lang, body[i:min(len(body), i+40)])
	}
}

// htmlText is s as html/template writes it in text.
func htmlText(s string) string {
	return strings.NewReplacer("'", "&#39;", `"`, "&#34;", "&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

var stateOf = regexp.MustCompile(`<p id="tour-state">([a-z_]+)</p>`)

// TestSiteLookInEveryState: a site's pages in every state of the model
// and every language, through the operators' previews and through real
// joins, registrations and the line's own answers: the site's page with
// the site's words, the room's blocks, the same CSP.
func TestSiteLookInEveryState(t *testing.T) {
	e := setupLook(t, map[string]string{
		"room.html": tourRoom, "register.html": tourRegister,
		"messages.en.yaml": "tour.hello: \"Welcome to the tour\"\n", "messages.ja.yaml": "tour.hello: \"ツアーへようこそ\"\n",
	})
	admin := []string{"Authorization", "Bearer admin-token-0123456789abcdef"}

	t.Run("previews", func(t *testing.T) {
		want := map[string]string{"prequeue": "waiting", "waiting": "waiting", "next": "next", "paused": "waiting", "admitted": "admitted", "soldout": "soldout", "closed": "closed"}
		for _, st := range gateway.PreviewStates {
			for _, lang := range web.Languages {
				r := e.do(http.MethodGet, previewPath("shop", st, lang.Code), nil, admin...)
				shopPage(t, r, st, want[st], lang.Code)
				if strings.Contains(string(r.raw), "<script") || strings.Contains(string(r.raw), "http-equiv") {
					t.Errorf("preview %s %s: not inert", st, lang.Code)
				}
			}
		}
		for _, st := range append(gateway.PreviewStates, gateway.PresalePreviewStates...) {
			for _, lang := range web.Languages {
				r := e.do(http.MethodGet, previewPath("tour", st, lang.Code), nil, admin...)
				m := stateOf.FindStringSubmatch(string(r.raw))
				if r.code != 200 || m == nil || m[1] != st || r.hdr.Get("Content-Security-Policy") != pagesCSP {
					t.Errorf("tour preview %s %s: %d, the site's state %v; want the site's page in state %s:\n%s", st, lang.Code, r.code, m, st, r.raw)
				}
				hello := map[string]string{"en": "Welcome to the tour", "ja": "ツアーへようこそ", "ko": "Welcome to the tour"}[lang.Code]
				if !strings.Contains(string(r.raw), hello) {
					t.Errorf("tour preview %s %s: lacks %q", st, lang.Code, hello)
				}
			}
		}
	})

	t.Run("real joins", func(t *testing.T) {
		ctx := context.Background()
		// The demo's look, as fans of its line see it.
		first, second := e.join("shop").body["ticket"].(string), e.join("shop").body["ticket"].(string)
		for _, lang := range web.Languages {
			shopPage(t, e.page("/e/shop", lang.Code), "open", "none", lang.Code)
			shopPage(t, e.page("/e/shop", lang.Code, "wr_t_shop="+first), "next", "next", lang.Code)
			shopPage(t, e.page("/e/shop", lang.Code, "wr_t_shop="+second), "waiting", "waiting", lang.Code)
		}
		r := e.page("/e/shop", "ja", "wr_t_shop="+second)
		for _, want := range []string{`<dd id="position">2</dd>`, `http-equiv="refresh"`, `<script type="module" src="/static/room.js"></script>`, `name="waitroom-messages"`} {
			if !strings.Contains(string(r.raw), want) {
				t.Errorf("the waiting fan's page lacks %s", want)
			}
		}

		// A site's look in every state a line puts a fan in.
		tourState := func(path, lang, want string, cookies ...string) string {
			t.Helper()
			r := e.page(path, lang, cookies...)
			m := stateOf.FindStringSubmatch(string(r.raw))
			if r.code != 200 || m == nil || m[1] != want || r.hdr.Get("Content-Security-Policy") != pagesCSP || !strings.Contains(string(r.raw), `<main id="main"`) {
				t.Errorf("%s (%s): %d, the site's state %v; want %s in the site's page:\n%s", path, lang, r.code, m, want, r.raw)
			}
			if i := strings.Index(string(r.raw), "⟦"); i >= 0 {
				t.Errorf("%s (%s): a word missing: %s", path, lang, r.raw[i:min(len(r.raw), i+40)])
			}
			return string(r.raw)
		}
		every := func(path, want string, cookies ...string) {
			t.Helper()
			for _, lang := range web.Languages {
				tourState(path, lang.Code, want, cookies...)
			}
		}
		every("/e/line", "open")
		a, b := e.join("line").body["ticket"].(string), e.join("line").body["ticket"].(string)
		every("/e/line", "next", "wr_t_line="+a)
		every("/e/line", "waiting", "wr_t_line="+b)
		every("/e/later", "prequeue", "wr_t_later="+e.join("later").body["ticket"].(string))
		every("/e/still", "paused", "wr_t_still="+e.join("still").body["ticket"].(string))
		every("/e/shut", "closed")
		set := line.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := e.line.Tick(ctx, "line", set); err != nil {
				t.Fatal(err)
			}
			if st := e.do(http.MethodGet, "/api/v1/events/line/tickets/"+a, nil); st.body["status"] == "admitted" || time.Now().After(deadline) {
				break
			}
		}
		every("/e/line", "admitted", "wr_t_line="+a)
		if r := e.do(http.MethodPost, "/e/line/leave", nil, "Cookie", "wr_t_line="+b, "Sec-Fetch-Site", "same-origin"); r.code != http.StatusSeeOther {
			t.Fatalf("leave: %d", r.code)
		}
		every("/e/line?left=1", "left")
		c := e.join("line").body["ticket"].(string)
		mark, _ := e.line.SyncMark(ctx)
		if err := e.line.SyncInventory(ctx, "line", mark, line.Snapshot{Free: 0}); err != nil {
			t.Fatal(err)
		}
		every("/e/line", "soldout", "wr_t_line="+c)

		// The presale: its register page and its room, each the site's.
		u := "wr_u=" + e.token("alice")
		for _, lang := range web.Languages {
			tourState("/e/tour/register", lang.Code, "registration")
			tourState("/e/tour/register", lang.Code, "registration", u)
		}
		if r := e.do(http.MethodPost, "/e/tour/register", strings.NewReader("action=register"), "Cookie", u, "Sec-Fetch-Site", "same-origin",
			"Content-Type", "application/x-www-form-urlencoded"); r.code != http.StatusSeeOther {
			t.Fatalf("register: %d %s", r.code, r.raw)
		}
		for _, lang := range web.Languages {
			if page := tourState("/e/tour/register?n=registered", lang.Code, "registered", u); !strings.Contains(page, `<p id="tour-status">registered</p>`) {
				t.Errorf("%s: the registration's status is not the site's to show", lang.Code)
			}
		}
		r = e.do(http.MethodPost, "/e/tour/join", nil, "Cookie", "wr_u="+e.token("bob"), "Sec-Fetch-Site", "same-origin")
		if r.code != http.StatusSeeOther {
			t.Fatalf("a join without an invitation: %d", r.code)
		}
		for _, lang := range web.Languages {
			tourState("/e/tour", lang.Code, "prequeue") // before opens_at
			tourState(r.hdr.Get("Location"), lang.Code, "not_invited")
		}

		// The line gone: the room says so in the site's look, and asks
		// again by itself.
		e.redis.Kill()
		every("/e/line", "error", "wr_t_line="+c)
		shopPage(t, e.page("/e/shop", "ko", "wr_t_shop="+second), "error", "error", "ko")
	})
}

// TestSiteAssets: /e/{event}/assets/… serves the event's site's files for
// five minutes in any cache, and nothing else: no folder, no way out of
// assets/ (.., encoded or not, a symbolic link pointing out), nothing for
// an event without a folder or an unknown one.
func TestSiteAssets(t *testing.T) {
	e := setupLook(t, map[string]string{"room.html": tourRoom, "assets/tour.css": "body{}", "assets/img/logo.svg": "<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
		"secret.yaml": "no"})
	if err := os.Symlink(filepath.Join(e.tour, "secret.yaml"), filepath.Join(e.tour, "assets", "out.css")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(e.tour, "assets", "etc")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, ctype, body string
	}{
		{"/e/tour/assets/tour.css", "text/css; charset=utf-8", "body{}"},
		{"/e/tour/assets/img/logo.svg", "image/svg+xml", "<svg"},
		{"/e/line/assets/tour.css", "text/css; charset=utf-8", "body{}"}, // another event of the same folder
		{"/e/shop/assets/shop.css", "text/css; charset=utf-8", "--accent"},
	} {
		r := e.do(http.MethodGet, tt.path, nil)
		if r.code != 200 || r.hdr.Get("Content-Type") != tt.ctype || !strings.Contains(string(r.raw), tt.body) {
			t.Errorf("%s: %d %q %q; want 200 %s", tt.path, r.code, r.hdr.Get("Content-Type"), r.raw, tt.ctype)
		}
		if cc := r.hdr.Get("Cache-Control"); cc != "public, max-age=300" {
			t.Errorf("%s: Cache-Control %q; want public, max-age=300", tt.path, cc)
		}
	}
	for _, p := range []string{
		"/e/tour/assets/", "/e/tour/assets/img", "/e/tour/assets/img/", "/e/tour/assets/nope.css",
		"/e/tour/assets/../room.html", "/e/tour/assets/%2e%2e/room.html", "/e/tour/assets/%2E%2E%2Froom.html", "/e/tour/assets/img/..%2f..%2froom.html",
		"/e/tour/assets/..%5croom.html", "/e/tour/assets/%2fetc%2fpasswd", "/e/tour/assets/out.css", "/e/tour/assets/etc/passwd", "/e/tour/assets/tour.css%00",
		"/e/plain/assets/tour.css", "/e/nope/assets/tour.css",
	} {
		if r := e.do(http.MethodGet, p, nil); r.code != http.StatusNotFound || strings.Contains(string(r.raw), "no") && strings.Contains(string(r.raw), "root:") {
			t.Errorf("%s: %d %.80q; want 404", p, r.code, r.raw)
		}
	}
}

// badTemplates are the three kinds of template a gateway refuses, each
// with what its refusal must name: the file and its line.
var badTemplates = []struct {
	name, room, want string
}{
	{"does not parse", strings.Replace(tourRoom, "{{.State}}", "{{.State", 1), `room.html:5: `},
	{"lacks a block", strings.Replace(tourRoom, `{{template "waitroom-live" .}}`, "", 1), `room.html: lacks {{template "waitroom-live" .}}`},
	{"a field the model lacks", strings.Replace(tourRoom, "{{.State}}", "{{.Stage}}", 1), `room.html:5:`},
	// One only executing it finds: a variable's field.
	{"a field the model lacks, executed", strings.Replace(tourRoom, "{{.State}}", "{{with $e := .Event}}{{$e.Capacity}}{{end}}", 1), `room.html:5:`},
}

// TestBadTemplatesRefusedAtStart: a gateway whose page folder holds a bad
// template does not start, and says which file and line.
func TestBadTemplatesRefusedAtStart(t *testing.T) {
	for _, tt := range badTemplates {
		t.Run(tt.name, func(t *testing.T) {
			_, err := startLook(t, map[string]string{"room.html": tt.room})
			if err == nil {
				t.Fatal("the gateway started")
			}
			if !strings.Contains(err.Error(), "page.dir") || !strings.Contains(err.Error(), string(filepath.Separator)+tt.want) {
				t.Errorf("refused with %q; want the key and %q", err, tt.want)
			}
		})
	}
}

// TestBadTemplatesRefusedAtReload: a reload that brings a bad template is
// refused with a log line naming the file and line, and the event's
// pages stay the ones in force; a good one after it is put in force.
func TestBadTemplatesRefusedAtReload(t *testing.T) {
	e := setupLook(t, map[string]string{"room.html": tourRoom})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal, 1)
	go e.srv.Watch(ctx, hup)
	shows := func(want string) bool {
		r := e.page("/e/line", "en")
		return r.code == 200 && strings.Contains(string(r.raw), want)
	}
	for i, tt := range badTemplates {
		t.Run(tt.name, func(t *testing.T) {
			writeFiles(t, e.tour, map[string]string{"room.html": tt.room})
			before := strings.Count(e.logs.String(), "page folder refused")
			hup <- os.Interrupt
			for deadline := time.Now().Add(5 * time.Second); strings.Count(e.logs.String(), "page folder refused") == before; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no refusal logged:\n%s", e.logs.String())
				}
			}
			logs := e.logs.String()
			line := logs[strings.LastIndex(logs[:strings.LastIndex(logs, "page folder refused")+1], "\n")+1:]
			line = strings.ReplaceAll(line[:strings.Index(line, "\n")], `\"`, `"`)
			if !strings.Contains(line, filepath.Join(e.tour, "room.html")) || !strings.Contains(line, tt.want) {
				t.Errorf("the log line %q; want it to name %s and %q", line, filepath.Join(e.tour, "room.html"), tt.want)
			}
			if !shows(`<p id="tour-state">open</p>`) {
				t.Errorf("the page in force is not the previous one")
			}
			// A good page after it is put in force.
			writeFiles(t, e.tour, map[string]string{"room.html": strings.Replace(tourRoom, "<header", fmt.Sprintf(`<p id="version">%d</p><header`, i), 1)})
			hup <- os.Interrupt
			for deadline := time.Now().Add(5 * time.Second); !shows(fmt.Sprintf(`<p id="version">%d</p>`, i)); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the good page was not put in force")
				}
			}
		})
	}
	// Messages that are not a flat map are refused the same way.
	writeFiles(t, e.tour, map[string]string{"messages.ko.yaml": "tour:\n  hello: 1\n"})
	hup <- os.Interrupt
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(e.logs.String(), "messages.ko.yaml: line 2"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("bad messages: no refusal logged:\n%s", e.logs.String())
		}
	}
}

// TestSitePageNeverA500: a site's template that fails on a request the
// load's states did not foresee draws the built-in page (200), and the
// failure is logged with its file.
func TestSitePageNeverA500(t *testing.T) {
	e := setupLook(t, map[string]string{"room.html": strings.Replace(tourRoom, "<header", `{{if eq .Notice "rate_limited"}}{{index .Langs 7}}{{end}}<header`, 1)})
	r := e.page("/e/line?e=rate_limited", "ja")
	if r.code != 200 || strings.Contains(string(r.raw), `id="tour-state"`) || !strings.Contains(string(r.raw), `class="brand"`) || r.hdr.Get("Content-Security-Policy") != pagesCSP {
		t.Fatalf("%d; want 200 and the built-in page:\n%s", r.code, r.raw)
	}
	if l := e.logs.String(); !strings.Contains(l, "page template failed") || !strings.Contains(l, filepath.Join(e.tour, "room.html")) {
		t.Errorf("the failure is not logged with its file:\n%s", l)
	}
	if r := e.page("/e/line", "ja"); !strings.Contains(string(r.raw), `id="tour-state"`) {
		t.Error("the site's page is not drawn where it works")
	}
}
