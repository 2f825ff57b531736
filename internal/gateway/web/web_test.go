package web

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"
)

// svgNamespace is the one http:// string the pages may carry: an XML
// namespace name, compared as a string and never fetched.
const svgNamespace = "http://www.w3.org/2000/svg"

// readAll returns every embedded file: the static ones by their name under
// /static/, the SDK's as "sdk/<name>", the page templates as
// "templates/<name>.html".
func readAll(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, root := range []struct {
		fsys   fs.FS
		prefix string
	}{{FS(), ""}, {SDK(), "sdk/"}, {templateFiles, ""}} {
		err := fs.WalkDir(root.fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if root.fsys == fs.FS(templateFiles) && !strings.HasPrefix(p, "templates/") {
				return nil
			}
			b, err := fs.ReadFile(root.fsys, p)
			if err != nil {
				return err
			}
			out[root.prefix+p] = string(b)
			return nil
		})
		if err != nil {
			t.Fatalf("walk embedded files: %v", err)
		}
	}
	return out
}

// Page templates by file.
const (
	indexTmpl = "templates/index.html"
	roomTmpl  = "templates/blocks-room.html" // the room page's blocks: its markup
	bookTmpl  = "templates/book.html"
	moveTmpl  = "templates/move.html"
)

func TestFilesExist(t *testing.T) {
	files := readAll(t)
	for _, name := range []string{
		indexTmpl, roomTmpl, bookTmpl, moveTmpl, "templates/base.html", "templates/page.html", "templates/blocks.html", "templates/blocks-register.html", "templates/leave.html", "templates/notfound.html",
		"i18n/en.json", "i18n/ja.json", "i18n/ko.json", "i18n.js", "eta.js",
		"app.css", "api.js", "ui.js", "index.js", "room.js", "book.js", "favicon.svg",
		"places.js", "pass.js", "seatmap.js", "checkout.js", "roomview.js", "sdk/waitroom.js", "sdk/waitroom.d.ts",
	} {
		t.Run(name, func(t *testing.T) {
			body, ok := files[name]
			if !ok {
				t.Fatalf("%s is not embedded; have %v", name, keys(files))
			}
			if strings.TrimSpace(body) == "" {
				t.Fatalf("%s is empty", name)
			}
		})
	}
}

// TestHooks pins the ids and data attributes an end-to-end test drives the
// pages by (listed at the top of each JS file): renaming one breaks that
// test, so it must break this one first.
func TestHooks(t *testing.T) {
	files := readAll(t)
	tests := []struct {
		file  string
		hooks []string
	}{
		{indexTmpl, []string{`id="events"`, `id="message"`, `data-event="{{.ID}}"`, `class="state badge"`, `class="waiting"`, `class="button join"`}},
		{roomTmpl, []string{
			`id="event-name"`, `id="state"`, `id="status"`, `id="position"`, `id="ahead"`, `id="eta"`,
			`id="progress"`, `id="progress-from"`, `id="updated"`, `id="message"`, `id="leave"`, `id="rejoin"`, `id="live"`,
			`aria-live="polite"`, `id="leave-dialog"`, `id="leave-yes"`, `id="leave-no"`, `id="share-link"`, `id="share-qr"`,
			`id="to-booking"`, `id="notify"`, `id="hint"`, `data-moved="true"`,
		}},
		{moveTmpl, []string{`id="move-question"`, `id="move-yes"`, `id="move-no"`, `action="/e/{{$ev.ID}}/move"`}},
		{bookTmpl, []string{
			`id="showtime"`, `id="message"`, `id="hold"`, `id="clear"`, `id="countdown"`, `id="pay"`,
			`id="release"`, `id="booking-id"`, `id="booking-status"`, `id="selected-count"`, `id="again"`,
			`id="access-left"`, `id="back-to-line"`, `id="showtime-line"`, `id="seat-price"`, `id="selection-total"`,
			`id="held-total"`, `id="receipt"`, `data-currency=`, `id="pay-link"`,
		}},
		{"templates/admin.html", []string{`id="show-previews"`, `id="previews"`, `class="preview"`, `data-state="{{$.State}}"`, `data-lang="{{.Code}}"`, `data-presale-events=`, `data-presale hidden`,
			// The previews run nothing: frames without scripts (no allow-scripts).
			`sandbox="allow-same-origin"`}},
		{"admin.js", []string{`f.srcdoc = `, `f.dataset.status`, `previews.dataset.event = ev`, `previews.dataset.presaleEvents`}},
		{"seatmap.js", []string{`id: 'seatmap'`, `dataset: { seat: code }`, `dataset: { ga: b.code }`, `gaInc: b.code`, `gaDec: b.code`}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			for _, h := range tt.hooks {
				if !strings.Contains(files[tt.file], h) {
					t.Errorf("%s lacks %s", tt.file, h)
				}
			}
		})
	}
}

// TestCSP checks every page against the gateway's Content-Security-Policy
// (default-src 'self'; style-src 'self'; script-src 'self'; …): what it would
// block must not be there, since a blocked script is a dead page.
func TestCSP(t *testing.T) {
	for name, body := range readAll(t) {
		t.Run(name, func(t *testing.T) {
			var problems []string
			switch {
			case strings.HasPrefix(name, "templates/mail/"):
				// An email, read in a mail client, never under the CSP:
				// inline styles are how emails are styled; but it runs
				// nothing and loads nothing.
				for _, bad := range []string{"<script", "src=", "<link", "javascript:"} {
					if strings.Contains(body, bad) {
						problems = append(problems, "an email with "+bad)
					}
				}
			case path.Ext(name) == ".html":
				problems = htmlProblems(body)
			case path.Ext(name) == ".css":
				problems = cssProblems(body)
			case path.Ext(name) == ".js", path.Ext(name) == ".svg", path.Ext(name) == ".ts":
				problems = scriptProblems(body)
			case path.Ext(name) == ".json":
				problems = scriptProblems(body) // words only: no URL, no markup
			default:
				problems = []string{"unexpected file type; teach this test about it"}
			}
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}

// TestReferencesResolve checks that every file a page or module loads is
// embedded, so no page 404s on its own assets.
func TestReferencesResolve(t *testing.T) {
	files := readAll(t)
	for name, body := range files {
		for _, ref := range references(name, body) {
			t.Run(name+"→"+ref, func(t *testing.T) {
				if _, ok := files[ref]; !ok {
					t.Errorf("%s loads %q, which is not embedded", name, ref)
				}
			})
		}
	}
}

// TestCheckers feeds the checks pages they must refuse, so that a check that
// silently stopped matching cannot pass the real pages by accident.
func TestCheckers(t *testing.T) {
	tests := []struct {
		name  string
		check func(string) []string
		in    string
		bad   bool
	}{
		{"html ok", htmlProblems, `<script type="module" src="/static/a.js"></script><p>see https://example.com</p>`, false},
		{"inline script", htmlProblems, `<script>alert(1)</script>`, true},
		{"inline module", htmlProblems, "<script type=\"module\">\nimport './a.js'\n</script>", true},
		{"script src and body", htmlProblems, `<script src="/static/a.js">x()</script>`, true},
		{"style element", htmlProblems, `<style>p{}</style>`, true},
		{"style attribute", htmlProblems, `<p style="color:red">x</p>`, true},
		{"style attribute single quotes", htmlProblems, `<div class=x style='a:b'></div>`, true},
		{"event handler", htmlProblems, `<button onclick="go()">x</button>`, true},
		{"external script", htmlProblems, `<script src="https://cdn.example.com/x.js"></script>`, true},
		{"external stylesheet", htmlProblems, `<link rel="stylesheet" href="http://cdn.example.com/x.css">`, true},
		{"protocol-relative", htmlProblems, `<img src="//cdn.example.com/x.png">`, true},
		{"javascript url", htmlProblems, `<a href="javascript:void(0)">x</a>`, true},
		{"css ok", cssProblems, `a{background:url(/static/x.png)} b{fill:url(#p)}`, false},
		{"css import", cssProblems, `@import "/static/x.css";`, true},
		{"css external url", cssProblems, `a{background:url("https://x.example/a.png")}`, true},
		{"css protocol-relative url", cssProblems, `a{background:url(//x.example/a.png)}`, true},
		{"js ok", scriptProblems, `document.createElementNS('` + svgNamespace + `', 'svg'); fetch('/api/v1/events')`, false},
		{"js external fetch", scriptProblems, `fetch('https://api.example.com/x')`, true},
		{"js protocol-relative", scriptProblems, "fetch(`//api.example.com/x`)", true},
		{"js eval", scriptProblems, `eval("1")`, true},
		{"js new Function", scriptProblems, `new Function("return 1")`, true},
		{"js innerHTML", scriptProblems, `el.innerHTML = name`, true},
		{"js style attribute", scriptProblems, `el.setAttribute('style', 'color:red')`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.check(tt.in)
			if (len(got) > 0) != tt.bad {
				t.Errorf("check(%q) = %q; want bad=%v", tt.in, got, tt.bad)
			}
		})
	}
}

var (
	reComment      = regexp.MustCompile(`(?s)<!--.*?-->`)
	reScript       = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script\s*>`)
	reTag          = regexp.MustCompile(`(?s)<[a-zA-Z][^>]*>`)
	reStyleElem    = regexp.MustCompile(`(?i)<style\b`)
	reStyleAttr    = regexp.MustCompile(`(?i)\sstyle\s*=`)
	reHandlerAttr  = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	reAttrURL      = regexp.MustCompile(`(?i)\s([a-z][a-z0-9-]*)\s*=\s*["']?\s*(https?:|//|javascript:)`)
	reSrcAttr      = regexp.MustCompile(`(?i)\ssrc\s*=`)
	reCSSImport    = regexp.MustCompile(`(?i)@import`)
	reCSSURL       = regexp.MustCompile(`(?i)url\(\s*["']?\s*(https?:|//)`)
	reAnyURL       = regexp.MustCompile(`(?i)https?://[^\s"'` + "`" + `)<>]*`)
	reProtoRelJS   = regexp.MustCompile("[\"'`]//[a-zA-Z0-9]")
	reDynamicCode  = regexp.MustCompile(`\beval\s*\(|\bnew\s+Function\s*\(|\bsetTimeout\s*\(\s*["'` + "`" + `]`)
	reInnerHTML    = regexp.MustCompile(`\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write`)
	reStyleSetAttr = regexp.MustCompile(`setAttribute\(\s*["']style["']`)
	reStaticRef    = regexp.MustCompile(`["'(]/static/([^"')?#]+)`)
	reSDKRef       = regexp.MustCompile(`["'(]/sdk/([^"')?#\s,]+)`)
	reImport       = regexp.MustCompile(`(?m)(?:^|\s)(?:import|from)\s+["']\./([^"']+)["']`)
)

// htmlProblems lists what the CSP would block in an HTML page, or what would
// load from another origin. URLs in text are fine; in tags they are not.
func htmlProblems(body string) []string {
	var out []string
	body = reComment.ReplaceAllString(body, "")
	for _, m := range reScript.FindAllStringSubmatch(body, -1) {
		if strings.TrimSpace(m[2]) != "" {
			out = append(out, "inline <script> body: "+abbrev(m[2]))
		}
		if !reSrcAttr.MatchString(" " + m[1]) {
			out = append(out, "<script> without src: "+abbrev(m[0]))
		}
	}
	if reStyleElem.MatchString(body) {
		out = append(out, "<style> element (style-src 'self' blocks it)")
	}
	for _, tag := range reTag.FindAllString(body, -1) {
		if reStyleAttr.MatchString(tag) {
			out = append(out, "style attribute: "+abbrev(tag))
		}
		if reHandlerAttr.MatchString(tag) {
			out = append(out, "inline event handler: "+abbrev(tag))
		}
		for _, m := range reAttrURL.FindAllStringSubmatch(tag, -1) {
			// A form's value or a data- attribute is data (a way back to a
			// site the room guards), never loaded or run.
			if name := strings.ToLower(m[1]); name != "value" && !strings.HasPrefix(name, "data-") {
				out = append(out, "external or script URL: "+abbrev(tag))
			}
		}
	}
	return out
}

func cssProblems(body string) []string {
	var out []string
	if reCSSImport.MatchString(body) {
		out = append(out, "@import in CSS")
	}
	if m := reCSSURL.FindString(body); m != "" {
		out = append(out, "external url() in CSS: "+m)
	}
	return out
}

// scriptProblems covers JavaScript (and SVG, which could carry script): no
// other origin, and nothing the CSP would block at run time.
func scriptProblems(body string) []string {
	var out []string
	for _, u := range reAnyURL.FindAllString(body, -1) {
		if u != svgNamespace {
			out = append(out, "external URL: "+u)
		}
	}
	if m := reProtoRelJS.FindString(body); m != "" {
		out = append(out, "protocol-relative URL: "+m)
	}
	if m := reDynamicCode.FindString(body); m != "" {
		out = append(out, "code from a string (script-src blocks it): "+m)
	}
	if m := reInnerHTML.FindString(body); m != "" {
		out = append(out, "HTML from a string (use textContent / DOM nodes): "+m)
	}
	if m := reStyleSetAttr.FindString(body); m != "" {
		out = append(out, "style attribute set from script (style-src blocks it): "+m)
	}
	return out
}

// references lists the embedded files a file loads: /static/x and /sdk/x
// from pages and scripts, ./x.js from module imports.
func references(name string, body string) []string {
	var out []string
	switch path.Ext(name) {
	case ".html", ".js", ".css":
		for _, m := range reStaticRef.FindAllStringSubmatch(body, -1) {
			if !strings.Contains(m[1], "{{") { // a template's own reference is checked by rendering it
				out = append(out, m[1])
			}
		}
		for _, m := range reSDKRef.FindAllStringSubmatch(body, -1) {
			out = append(out, "sdk/"+m[1])
		}
	}
	if path.Ext(name) == ".js" {
		for _, m := range reImport.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

func abbrev(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
