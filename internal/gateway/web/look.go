package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template/parse"

	"gopkg.in/yaml.v3"
)

// The blocks a page of a look must call (DESIGN.md, "The site's own
// look"): what makes the room work, kept by every page whatever its
// markup. Every template name beginning with BlockPrefix is the room's:
// a site's page calls them and never defines one.
const (
	HeadBlock   = "waitroom-head" // the styles, the refresh without JavaScript, the room's script
	LiveBlock   = "waitroom-live" // the <main> the room's script updates
	BlockPrefix = "waitroom-"
)

// LookPages are the pages a look draws, each from a Model: the waiting
// room and a presale's register page.
var LookPages = []string{RoomPage, RegisterPage}

// builtinPage is the built-in template of every page of LookPages: one
// document, drawn over each page's own blocks (templates/blocks-<page>.html,
// with the head block they share, templates/blocks.html).
const builtinPage = "templates/page.html"

// Look is the fans' pages of an event: the built-in look (BuiltinLook),
// or a site's own from its page folder (LoadLook: events[].page.dir), its
// templates drawn over the same blocks and Model, its words added to or
// laid over the built-in ones. A Look is immutable once made; a reload
// makes a new one.
type Look struct {
	dir string // "" = the built-in look
	// pages holds each page's template per language, their helpers bound
	// to that language's words.
	pages   map[string]map[string]*template.Template
	locales map[string]*Locale
	// files names, per page, the file its template came from (for the
	// log of a page that failed at a request).
	files map[string]string
}

// Dir is the page folder the look was read from ("" for the built-in
// look).
func (l *Look) Dir() string { return l.dir }

// File is the file page's template was read from (builtinPage for the
// built-in one).
func (l *Look) File(page string) string { return l.files[page] }

// Locale is the look's words in lang: the built-in catalog with the
// site's messages laid over it (DefaultLanguage for one it does not
// speak).
func (l *Look) Locale(lang string) *Locale {
	if loc, ok := l.locales[lang]; ok {
		return loc
	}
	return l.locales[DefaultLanguage]
}

// Render writes page (RoomPage or RegisterPage) drawn from m, in m.Lang.
// An error means the page's template failed on m (a site's template
// naming what m lacks, say): the caller draws the built-in look instead.
func (l *Look) Render(w io.Writer, page string, m *Model) error {
	byLang, ok := l.pages[page]
	if !ok {
		return fmt.Errorf("web: no page %q", page)
	}
	t, ok := byLang[m.Lang]
	if !ok {
		t = byLang[DefaultLanguage]
	}
	return t.Execute(w, m)
}

// BuiltinLook is the room's own look: builtinPage over each page's
// blocks, in the built-in words.
func BuiltinLook() (*Look, error) {
	l := &Look{pages: map[string]map[string]*template.Template{}, files: map[string]string{}}
	l.locales = locales(nil)
	src, err := fs.ReadFile(templateFiles, builtinPage)
	if err != nil {
		return nil, err
	}
	for _, page := range LookPages {
		if err := l.addPage(page, builtinPage, string(src)); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// LoadLook reads a site's page folder (DESIGN.md, "The site's own look"):
// room.html and register.html (each optional: a page the folder lacks is
// the built-in one), messages.<lang>.yaml (optional). It refuses a
// template that does not parse, does not call both blocks (HeadBlock,
// LiveBlock), defines a name of the room's (BlockPrefix), names a field
// or method the Model lacks where it can tell (CheckFields), or carries
// what the Content-Security-Policy would block (an inline script, an
// inline style, a file of another origin), and a messages file that is
// not a flat map of strings: the error names the file, and the line where
// there is one. The assets/ folder is not read here: it is served as it is
// (ServeAsset). Executing the templates against every state is the
// caller's (it has the event to draw them with).
func LoadLook(dir string) (*Look, error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a folder", dir)
	}
	site, err := readMessages(dir)
	if err != nil {
		return nil, err
	}
	l := &Look{dir: dir, pages: map[string]map[string]*template.Template{}, files: map[string]string{}}
	l.locales = locales(site)
	for _, page := range LookPages {
		file := filepath.Join(dir, page+".html")
		b, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			file = builtinPage
			b, err = fs.ReadFile(templateFiles, file)
		} else if err == nil {
			err = checkSource(file, string(b))
		}
		if err != nil {
			return nil, err
		}
		if err := l.addPage(page, file, string(b)); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// addPage parses page's template (from file, src) over the page's blocks,
// checks it, and keeps a copy per language.
func (l *Look) addPage(page, file, src string) error {
	blocks, err := template.New("blocks-"+page+".html").Funcs(helpers(nil, "")).ParseFS(templateFiles, "templates/blocks.html", "templates/blocks-"+page+".html")
	if err != nil {
		return err
	}
	room := map[string]*parse.Tree{}
	for _, t := range blocks.Templates() {
		room[t.Name()] = t.Tree
	}
	t, err := blocks.New(file).Parse(src)
	if err != nil {
		return err
	}
	trees, own := []*parse.Tree{t.Tree}, map[string]*parse.Tree{}
	for _, x := range blocks.Templates() {
		name := x.Name()
		if name == file {
			continue
		}
		if tree, ok := room[name]; ok {
			if x.Tree != tree {
				return fmt.Errorf("%s: defines %q, the room's own block: call it, {{template %q .}}", file, name, name)
			}
			continue
		}
		if strings.HasPrefix(name, BlockPrefix) {
			return fmt.Errorf("%s: defines %q: names beginning with %q are the room's", file, name, BlockPrefix)
		}
		trees, own[name] = append(trees, x.Tree), x.Tree
	}
	calls := map[string]int{}
	for _, tree := range trees {
		walk(tree.Root, func(n parse.Node) {
			if c, ok := n.(*parse.TemplateNode); ok {
				calls[c.Name]++
			}
		})
	}
	for _, b := range []string{HeadBlock, LiveBlock} {
		switch calls[b] {
		case 0:
			return fmt.Errorf("%s: lacks {{template %q .}}: the page needs it for the room to work", file, b)
		case 1:
		default:
			return fmt.Errorf("%s: calls {{template %q .}} %d times; once is the page's", file, b, calls[b])
		}
	}
	if err := CheckFields(t.Tree, own); err != nil {
		return err
	}
	byLang := map[string]*template.Template{}
	for _, lang := range Languages {
		c, err := t.Clone()
		if err != nil {
			return err
		}
		loc := l.locales[lang.Code]
		byLang[lang.Code] = c.Funcs(helpers(loc, loc.words))
	}
	l.pages[page], l.files[page] = byLang, file
	return nil
}

// helpers are the functions a page's template may call (docs/PAGES.md),
// bound to loc's words; nil gives their names alone, for parsing.
func helpers(loc *Locale, words string) template.FuncMap {
	if loc == nil {
		loc = LocaleFor(DefaultLanguage)
	}
	return template.FuncMap{
		"t":     loc.T,
		"when":  loc.When,
		"count": loc.Count,
		"price": loc.Price,
		"eta":   loc.ETA,
		"span":  loc.Span,
		// words is the head block's: the site's own words in this
		// language as JSON, for the room's script ("" = none).
		"words": func() string { return words },
	}
}

// walk calls f on every node under n.
func walk(n parse.Node, f func(parse.Node)) {
	if n == nil {
		return
	}
	f(n)
	switch x := n.(type) {
	case *parse.ListNode:
		if x != nil {
			for _, c := range x.Nodes {
				walk(c, f)
			}
		}
	case *parse.IfNode:
		walk(x.List, f)
		walk(x.ElseList, f)
	case *parse.RangeNode:
		walk(x.List, f)
		walk(x.ElseList, f)
	case *parse.WithNode:
		walk(x.List, f)
		walk(x.ElseList, f)
	}
}

// readMessages reads the site's messages.<lang>.yaml of dir: per language
// code, its words (a missing file is no words).
func readMessages(dir string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, lang := range Languages {
		file := filepath.Join(dir, "messages."+lang.Code+".yaml")
		b, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var m map[string]string
		if err := yaml.Unmarshal(b, &m); err != nil {
			// yaml's errors name the line: "line 3: cannot unmarshal !!map
			// into string".
			msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "yaml: "), "unmarshal errors:")
			return nil, fmt.Errorf("%s: %s (a flat map of dotted keys to strings)", file, strings.Join(strings.Fields(msg), " "))
		}
		for k := range m {
			if strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("%s: an empty key", file)
			}
		}
		out[lang.Code] = m
	}
	return out, nil
}

// locales are every language's words with site's laid over the built-in
// ones: the site's own words in the language, else the built-in ones,
// else the site's English (a key the site added in English only).
func locales(site map[string]map[string]string) map[string]*Locale {
	keys := map[string]bool{}
	for _, m := range site {
		for k := range m {
			keys[k] = true
		}
	}
	out := map[string]*Locale{}
	for _, lang := range Languages {
		cat := maps.Clone(site[DefaultLanguage])
		if cat == nil {
			cat = map[string]string{}
		}
		maps.Copy(cat, catalogs[lang.Code])
		maps.Copy(cat, site[lang.Code])
		loc := &Locale{Lang: lang.Code, cat: cat}
		if len(keys) > 0 {
			own := map[string]string{}
			for k := range keys {
				own[k] = cat[k]
			}
			b, _ := json.Marshal(own) // strings only: cannot fail
			loc.words = string(b)
		}
		out[lang.Code] = loc
	}
	return out
}

// What the Content-Security-Policy of the fans' pages would block in a
// site's template, refused at load rather than silently dropped in the
// fan's browser: the room's script is the only one the pages run, and
// their styles and files come from this gateway.
var cspRules = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`(?i)<script\b`), "a <script> element: the room's script comes with {{template \"waitroom-head\" .}} and the Content-Security-Policy runs no other"},
	{regexp.MustCompile(`(?i)<[a-z][^>]*\son[a-z]+\s*=`), "an inline event handler (on…=): the Content-Security-Policy runs no inline script"},
	{regexp.MustCompile(`(?i)javascript:`), "a javascript: URL: the Content-Security-Policy runs no inline script"},
	{regexp.MustCompile(`(?i)<style\b`), "a <style> element: the Content-Security-Policy applies no inline style; put it in a stylesheet under assets/"},
	{regexp.MustCompile(`(?i)<[a-z][^>]*\sstyle\s*=`), "a style attribute: the Content-Security-Policy applies no inline style; put it in a stylesheet under assets/"},
	{regexp.MustCompile(`(?i)<[a-z][^>]*\s(src|srcset|poster|data|action)\s*=\s*["']?\s*(https?:|//)`), "a file from another origin: the Content-Security-Policy loads only this gateway's; put it under assets/"},
	{regexp.MustCompile(`(?i)<link\b[^>]*\shref\s*=\s*["']?\s*(https?:|//)`), "a file from another origin: the Content-Security-Policy loads only this gateway's; put it under assets/"},
}

var (
	reHTMLComment = regexp.MustCompile(`(?s)<!--.*?-->`)
	reTmplComment = regexp.MustCompile(`(?s)\{\{-?\s*/\*.*?\*/\s*-?\}\}`)
)

// checkSource refuses what the CSP would block in file's template src
// (cspRules), naming its line. Comments are skipped: html/template drops
// HTML comments from what it writes, and template comments write nothing.
func checkSource(file, src string) error {
	blank := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	}
	src = reTmplComment.ReplaceAllStringFunc(src, blank)
	src = reHTMLComment.ReplaceAllStringFunc(src, blank)
	for _, r := range cspRules {
		if loc := r.re.FindStringIndex(src); loc != nil {
			line := 1 + strings.Count(src[:loc[0]], "\n")
			return fmt.Errorf("%s:%d: %s", file, line, r.what)
		}
	}
	return nil
}

// BuiltinTemplate is the built-in template of page (RoomPage or
// RegisterPage, both builtinPage): what a site's page folder starts from
// (README, "The site's own look").
func BuiltinTemplate(page string) ([]byte, error) {
	if !slices.Contains(LookPages, page) {
		return nil, fmt.Errorf("web: no page %q", page)
	}
	return fs.ReadFile(templateFiles, builtinPage)
}

// renderString is Render into a string (tests and checks).
func (l *Look) renderString(page string, m *Model) (string, error) {
	var b bytes.Buffer
	err := l.Render(&b, page, m)
	return b.String(), err
}

// maxAsset bounds one file of a site's assets/: they are small (styles,
// images, fonts) and read whole.
const maxAsset = 4 << 20

// ReadAsset reads name (slash-separated) from dir's assets/ folder. A name
// that is not a plain path inside it (fs.ValidPath: no .., no leading /),
// a folder, a symbolic link leading out of assets/ (os.Root refuses it),
// or a file past maxAsset is fs.ErrNotExist.
func ReadAsset(dir, name string) ([]byte, error) {
	if !fs.ValidPath(name) || name == "." {
		return nil, fs.ErrNotExist
	}
	root, err := os.OpenRoot(filepath.Join(dir, "assets"))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxAsset {
		return nil, fs.ErrNotExist
	}
	return io.ReadAll(io.LimitReader(f, maxAsset))
}
