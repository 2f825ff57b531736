package web

import (
	"encoding/json"
	"html"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sample is a made-up fan of a made-up event in state, in lang: what the
// gateway draws the pages with is gateway's to test (its previews); here,
// only enough for every branch of the templates.
func sample(page, state, lang string) *Model {
	at := time.Date(2036, 12, 1, 19, 0, 0, 0, time.FixedZone("", 9*3600))
	ev := &Event{ID: "premiere", Name: "Premiere night", Venue: "Shinjuku Hall 3", State: "open",
		Showtimes: []Showtime{{ID: 42, Title: "Premiere 19:00", StartsAt: at, PriceCents: 1500, Blocks: []int64{900}}}}
	m := &Model{Lang: lang, Title: "Premiere night", State: state, Event: ev, Currency: "USD", Status: "none", Hint: "none", Available: -1,
		Langs: []LangLink{{Code: lang, Name: lang, Href: "/e/premiere?lang=" + lang, Current: true}}, Links: LinksOf("premiere", 0, true)}
	if page == RegisterPage {
		o, c := at.Add(-time.Hour), at
		m.Presale = &Presale{Status: "none", Open: true, OpensAt: at.Add(-48 * time.Hour), ClosesAt: at.Add(-24 * time.Hour)}
		switch state {
		case "registered", "waitlisted", "not_selected":
			m.Presale.Status, m.Presale.ID, m.Presale.Rank = state, "1.x", 3
		case "selected":
			m.Presale.Status, m.Presale.ID, m.Presale.Rank, m.Presale.WindowOpensAt, m.Presale.WindowClosesAt = state, "1.x", 1, &o, &c
		case "registration_closed":
			m.Presale.Status, m.Presale.Open = "signed-out", false
		}
		return m
	}
	switch state {
	case "prequeue", "paused", "closed", "soldout":
		m.Event.State = state
	}
	switch state {
	case "waiting", "next", "prequeue", "paused":
		m.Status, m.Hint, m.Position, m.Ahead, m.ETASeconds, m.From, m.Refresh, m.Available = "waiting", "waiting", 40, 39, 400, 60, 2, 12
		if state == "next" {
			m.Status, m.Position, m.Ahead = "next", 1, 0
		}
		m.Away = &Away{Email: "fan@example.com", Within: 10 * time.Minute}
		m.Links.Share, m.Links.QR = "/e/premiere?t=x", "/e/premiere/qr.svg"
	case "admitted", "soldout", "closed", "left", "expired", "away", "error":
		m.Status, m.Hint = state, state
		switch state {
		case "closed", "expired":
			m.Hint = "ended"
		case "error":
			m.Hint, m.Notice, m.Refresh = "none", "error", 5
		}
		if state == "away" {
			m.Away = &Away{Email: "fan@example.com", Within: 10 * time.Minute}
		}
	case "not_invited":
		m.Notice = "not_invited"
	}
	return m
}

// siteFolder writes a page folder with files (name → content) and returns
// it.
func siteFolder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A site's page: whole documents around the two blocks.
const (
	siteRoom = `<!doctype html>
<html lang="{{.Lang}}">
<head>
  <meta charset="utf-8">
  <title>{{.Title}}</title>
  {{template "waitroom-head" .}}
  <link rel="stylesheet" href="{{.Links.Assets}}site.css">
</head>
<body>
  <header class="site-own"><p>{{t "site.welcome"}}</p><p id="site-state">{{.State}} {{.Position}} {{.Ahead}} {{.ETASeconds}} {{.Event.ID}} {{.Event.Name}} {{.Event.Venue}}</p></header>
  {{template "waitroom-live" .}}
</body>
</html>
`
	siteRegister = `<!doctype html>
<html lang="{{.Lang}}">
<head><meta charset="utf-8"><title>{{.Title}}</title>{{template "waitroom-head" .}}</head>
<body><header class="site-own"><p id="site-state">{{.State}} {{.Presale.Status}}</p></header>{{template "waitroom-live" .}}</body>
</html>
`
)

// TestLooksDrawEveryState: the built-in look and a site's, each page in
// every state of the model and every language: no word missing, <html
// lang> the fan's, nothing the CSP would block; the site's page is the
// site's, its words in the fan's language over the built-in ones.
func TestLooksDrawEveryState(t *testing.T) {
	builtin, err := BuiltinLook()
	if err != nil {
		t.Fatal(err)
	}
	dir := siteFolder(t, map[string]string{
		"room.html": siteRoom, "register.html": siteRegister,
		"messages.en.yaml": "site.welcome: \"Welcome to the shop\"\nroom.status.waiting: \"In the shop's queue\"\n",
		"messages.ja.yaml": "site.welcome: \"ようこそ\"\n",
	})
	site, err := LoadLook(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, look := range []*Look{builtin, site} {
		for _, lang := range Languages {
			for _, page := range LookPages {
				states := States
				if page == RegisterPage {
					states = RegisterStates
				}
				for _, st := range states {
					name := look.Dir() + " " + page + " " + st + " " + lang.Code
					out, err := look.renderString(page, sample(page, st, lang.Code))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if i := strings.Index(out, "⟦"); i >= 0 {
						t.Errorf("%s: missing word %s", name, out[i:min(len(out), i+40)])
					}
					if !strings.Contains(out, `<html lang="`+lang.Code+`">`) {
						t.Errorf("%s: no <html lang=%q>", name, lang.Code)
					}
					if p := htmlProblems(out); len(p) > 0 {
						t.Errorf("%s: %v", name, p)
					}
					if look == site && !strings.Contains(out, `<p id="site-state">`+st) {
						t.Errorf("%s: not the site's page, or not its state:\n%s", name, out)
					}
				}
			}
		}
	}
	// Words: the site's in the fan's language, else the built-in ones, else
	// the site's English (ko has no file; ja lacks room.status.waiting).
	for _, tt := range []struct{ lang, want, not string }{
		{"en", "Welcome to the shop", ""},
		{"en", "In the shop&#39;s queue", "You&#39;re in line"},
		{"ja", "ようこそ", "Welcome"},
		{"ja", "列に並んでいます", "In the shop"},
		{"ko", "Welcome to the shop", ""},
		{"ko", "대기 중입니다", "In the shop"},
	} {
		out, err := site.renderString(RoomPage, sample(RoomPage, "waiting", tt.lang))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, tt.want) || (tt.not != "" && strings.Contains(out, tt.not)) {
			t.Errorf("%s: the page lacks %q or has %q", tt.lang, tt.want, tt.not)
		}
	}
	// The room's script gets the site's words (and only those), as the
	// page has them in its language.
	out, _ := site.renderString(RoomPage, sample(RoomPage, "waiting", "ja"))
	m := regexp.MustCompile(`<meta name="waitroom-messages" content="([^"]*)">`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no words for the script in the head:\n%s", out)
	}
	var words map[string]string
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &words); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"site.welcome": "ようこそ", "room.status.waiting": "列に並んでいます"}; len(words) != 2 || words["site.welcome"] != want["site.welcome"] || words["room.status.waiting"] != want["room.status.waiting"] {
		t.Errorf("the script's words %v; want %v", words, want)
	}
	if out, _ := builtin.renderString(RoomPage, sample(RoomPage, "waiting", "en")); strings.Contains(out, "waitroom-messages") {
		t.Error("the built-in look carries words for the script; the script has them")
	}
	// The room's head and live region, whatever the page around them.
	out, _ = site.renderString(RoomPage, sample(RoomPage, "waiting", "en"))
	for _, want := range []string{`<script type="module" src="/static/room.js"></script>`, `<link rel="stylesheet" href="/static/app.css">`,
		`<meta http-equiv="refresh" content="2; url=/e/premiere">`, `id="live"`, `id="position"`, `href="/e/premiere/assets/site.css"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the site's page lacks %s", want)
		}
	}
	// A preview is inert in any look.
	p := sample(RoomPage, "waiting", "en")
	p.Preview = true
	if out, _ := site.renderString(RoomPage, p); strings.Contains(out, "<script") || strings.Contains(out, "http-equiv") {
		t.Error("a preview of the site's page loads a script or refreshes itself")
	}
}

// TestLoadLookRefuses: what a site's folder may not bring, each refused
// with the file (and its line where there is one).
func TestLoadLookRefuses(t *testing.T) {
	room := func(old, new string) map[string]string {
		if !strings.Contains(siteRoom, old) {
			t.Fatalf("bad row: %q not in the site's page", old)
		}
		return map[string]string{"room.html": strings.Replace(siteRoom, old, new, 1)}
	}
	tests := []struct {
		name  string
		files map[string]string
		want  string // in the error, after the folder
	}{
		{"does not parse", room("{{.Title}}", "{{.Title"), "room.html:5: bad character"},
		{"unknown function", room("{{.Title}}", "{{shout .Title}}"), `room.html:5: function "shout" not defined`},
		{"lacks the head", room(`{{template "waitroom-head" .}}`, ""), `room.html: lacks {{template "waitroom-head" .}}`},
		{"lacks the live region", room(`{{template "waitroom-live" .}}`, "<main id=\"main\"></main>"), `room.html: lacks {{template "waitroom-live" .}}`},
		{"calls it twice", room(`{{template "waitroom-live" .}}`, `{{template "waitroom-live" .}}{{template "waitroom-live" .}}`), `calls {{template "waitroom-live" .}} 2 times`},
		{"redefines the live region", room("</html>", `</html>{{define "waitroom-live"}}<main></main>{{end}}`), `room.html: defines "waitroom-live", the room's own block`},
		{"defines a room's name", room("</html>", `</html>{{define "waitroom-extra"}}x{{end}}`), `room.html: defines "waitroom-extra"`},
		{"a field the model lacks", room("{{.Position}}", "{{.Place}}"), "room.html:10:"},
		{"a field the model lacks in a branch", room("</body>", `{{if eq .State "soldout"}}{{.Event.Capacity}}{{end}}</body>`), "room.html:12:"},
		{"a field the model lacks in range", room("</body>", `{{range .Event.Showtimes}}{{.Seats}}{{end}}</body>`), "room.html:12:"},
		{"a field the model lacks on $", room("</body>", `{{range .Langs}}{{$.Queue}}{{end}}</body>`), "room.html:12:"},
		{"a field the model lacks in its own template", room("</html>", `</html>{{define "mine"}}{{.Nope}}{{end}}`+"{{template \"mine\" .}}"), "room.html:13:"},
		{"inline script", room("</body>", "<script>alert(1)</script>\n</body>"), "room.html:12: a <script> element"},
		{"script from its assets", room("</body>", "\n<script src=\"/e/premiere/assets/x.js\"></script></body>"), "room.html:13: a <script> element"},
		{"event handler", room("<body>", `<body onload="go()">`), "room.html:9: an inline event handler"},
		{"javascript url", room("</body>", `<a href="javascript:go()">x</a></body>`), "room.html:12: a javascript: URL"},
		{"style element", room("</head>", "<style>p{color:red}</style></head>"), "room.html:8: a <style> element"},
		{"style attribute", room(`<header class="site-own">`, `<header class="site-own" style="color:red">`), "room.html:10: a style attribute"},
		{"image of another origin", room("</body>", `<img src="https://cdn.example/x.png" alt=""></body>`), "room.html:12: a file from another origin"},
		{"stylesheet of another origin", room("</head>", `<link rel="stylesheet" href="//cdn.example/x.css"></head>`), "room.html:8: a file from another origin"},
		{"register page lacks the head", map[string]string{"register.html": strings.Replace(siteRegister, `{{template "waitroom-head" .}}`, "", 1)}, `register.html: lacks {{template "waitroom-head" .}}`},
		{"messages not yaml", map[string]string{"messages.ja.yaml": "a: [\n"}, "messages.ja.yaml:"},
		{"messages not flat", map[string]string{"messages.en.yaml": "site:\n  welcome: \"hi\"\n"}, "messages.en.yaml: line 2: cannot unmarshal"},
		{"messages twice a key", map[string]string{"messages.en.yaml": "a: \"1\"\na: \"2\"\n"}, "messages.en.yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := siteFolder(t, tt.files)
			_, err := LoadLook(dir)
			if err == nil {
				t.Fatalf("LoadLook accepted it; want an error with %q", tt.want)
			}
			if !strings.Contains(err.Error(), dir+string(filepath.Separator)) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want it to name the file and say %q", err, tt.want)
			}
		})
	}
	// What is fine: a comment naming what the page may not carry, a link to
	// another site, a folder with no page of its own (the built-in ones).
	for name, files := range map[string]map[string]string{
		"comments":      room("</body>", "<!-- no <script> here -->{{/* nor <style> */}}</body>"),
		"a link out":    room("</body>", `<a href="https://shop.example/">Back to the shop</a></body>`),
		"words only":    {"messages.en.yaml": "room.status.waiting: \"Queued\"\n"},
		"an empty file": {"messages.ko.yaml": ""},
	} {
		if _, err := LoadLook(siteFolder(t, files)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LoadLook(filepath.Join(t.TempDir(), "nowhere")); err == nil {
		t.Error("a folder that is not there was loaded")
	}
}

// TestBuiltinTemplatesAreTheSitesStart: the built-in pages, as a site
// copies them (BuiltinTemplate), load as a site's own and draw the same
// page.
func TestBuiltinTemplatesAreTheSitesStart(t *testing.T) {
	files := map[string]string{}
	for _, page := range LookPages {
		b, err := BuiltinTemplate(page)
		if err != nil {
			t.Fatal(err)
		}
		files[page+".html"] = string(b)
	}
	site, err := LoadLook(siteFolder(t, files))
	if err != nil {
		t.Fatalf("the built-in pages as a site's: %v", err)
	}
	builtin, _ := BuiltinLook()
	for _, page := range LookPages {
		a, _ := builtin.renderString(page, sample(page, "selected", "ko"))
		b, err := site.renderString(page, sample(page, "selected", "ko"))
		if err != nil || a != b {
			t.Errorf("%s: the copy draws another page (%v)", page, err)
		}
	}
}

// TestReadAsset: a site's files, and nothing outside its assets/.
func TestReadAsset(t *testing.T) {
	dir := siteFolder(t, map[string]string{"assets/site.css": "p{}", "assets/img/logo.svg": "<svg/>", "room.html": siteRoom, "secret.txt": "no"})
	if err := os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(dir, "assets", "out.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("site.css", filepath.Join(dir, "assets", "alias.css")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, want string
	}{
		{"site.css", "p{}"}, {"img/logo.svg", "<svg/>"}, {"alias.css", "p{}"},
		{"img", ""}, {".", ""}, {"", ""}, {"../secret.txt", ""}, {"img/../../secret.txt", ""}, {"/etc/passwd", ""},
		{"out.txt", ""}, {"../room.html", ""}, {"nope.css", ""}, {"site.css/", ""},
	} {
		b, err := ReadAsset(dir, tt.name)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ReadAsset(%q) = %q; want nothing", tt.name, b)
			}
			continue
		}
		if err != nil || string(b) != tt.want {
			t.Errorf("ReadAsset(%q) = %q, %v; want %q", tt.name, b, err, tt.want)
		}
	}
	if _, err := ReadAsset(dir, "../secret.txt"); err == nil || !errorsIsNotExist(err) {
		t.Errorf("a name out of assets/: %v; want fs.ErrNotExist", err)
	}
}

func errorsIsNotExist(err error) bool {
	return err != nil && (os.IsNotExist(err) || err == fs.ErrNotExist)
}
