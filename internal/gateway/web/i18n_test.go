package web

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

var placeholder = regexp.MustCompile(`\{(\w+)\}`)

func placeholders(s string) string {
	var out []string
	for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// baseKey drops a plural variant: "index.waiting.one" → "index.waiting".
func baseKey(k string) string {
	return strings.TrimSuffix(strings.TrimSuffix(k, ".one"), ".other")
}

// TestCatalogsAgree checks that every language has every message, with the
// same placeholders, and nothing else.
func TestCatalogsAgree(t *testing.T) {
	en := catalogs["en"]
	for _, l := range Languages {
		if l.Code == "en" {
			continue
		}
		t.Run(l.Code, func(t *testing.T) {
			cat := catalogs[l.Code]
			have := map[string]bool{}
			for k, v := range cat {
				have[baseKey(k)] = true
				ref, ok := en[k]
				if !ok {
					ref, ok = en[baseKey(k)+".other"]
				}
				if !ok {
					t.Errorf("%s has %q, which English has not", l.Code, k)
					continue
				}
				if placeholders(v) != placeholders(ref) {
					t.Errorf("%s %q has placeholders {%s}; English has {%s}", l.Code, k, placeholders(v), placeholders(ref))
				}
			}
			for k := range en {
				if !have[baseKey(k)] {
					t.Errorf("%s lacks %q", l.Code, k)
				}
			}
		})
	}
}

var (
	reJSKey   = regexp.MustCompile("\\bt\\(['`]([a-zA-Z0-9.\\-]+)['`]")
	reTmplKey = regexp.MustCompile(`\.T "([a-zA-Z0-9.\-]+)"`)
)

// TestKeysExist checks every literal key the scripts and templates ask for.
// Keys built at run time (state.<state>, room.status.<status>…) are checked
// by TestRender and the browser journey, which fail on ⟦key⟧.
func TestKeysExist(t *testing.T) {
	for name, body := range readAll(t) {
		var re *regexp.Regexp
		switch {
		case strings.HasSuffix(name, ".js"):
			re = reJSKey
		case strings.HasSuffix(name, ".html"):
			re = reTmplKey
		default:
			continue
		}
		for _, m := range re.FindAllStringSubmatch(body, -1) {
			k := m[1]
			_, one := catalogs["en"][k]
			_, other := catalogs["en"][k+".other"]
			if !one && !other {
				t.Errorf("%s asks for %q, which en.json lacks", name, k)
			}
		}
	}
}

// TestNoWordsInScripts keeps English out of the scripts: a quoted string
// that reads like a sentence (a capital, then lower-case words) is a word
// that belongs in the catalog.
func TestNoWordsInScripts(t *testing.T) {
	sentence := regexp.MustCompile("['\"`]([A-Z][a-z]+(?: [a-z']+){2,}[^'\"`]*)['\"`]")
	for name, body := range readAll(t) {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			if m := sentence.FindStringSubmatch(line); m != nil {
				t.Errorf("%s: words in code, not in the catalog: %q", name, m[1])
			}
		}
	}
}

func TestNegotiate(t *testing.T) {
	tests := []struct{ cookie, accept, want string }{
		{"", "", "en"},
		{"", "ja-JP,ja;q=0.9,en;q=0.8", "ja"},
		{"", "ko-KR", "ko"},
		{"", "fr-FR,ko;q=0.5,ja;q=0.7", "ja"},
		{"", "de", "en"},
		{"ko", "ja", "ko"},
		{"xx", "ja", "ja"},
		{"", "en;q=0.1,ko;q=0.2", "ko"},
		{"", "ja;q=bad,ko", "ko"},
	}
	for _, tt := range tests {
		if got := Negotiate(tt.cookie, tt.accept); got != tt.want {
			t.Errorf("Negotiate(%q, %q) = %q; want %q", tt.cookie, tt.accept, got, tt.want)
		}
	}
}

func TestFormats(t *testing.T) {
	tokyo := time.FixedZone("", 9*3600)
	at := time.Date(2026, 12, 1, 19, 0, 0, 0, tokyo)
	tests := []struct{ lang, got, want string }{
		// As Intl.DateTimeFormat and NumberFormat write them in Chromium.
		{"en", LocaleFor("en").When(at), "Tue, Dec 1, 2026, 19:00"},
		{"ja", LocaleFor("ja").When(at), "2026年12月1日(火) 19:00"},
		{"ko", LocaleFor("ko").When(at), "2026년 12월 1일 (화) 19:00"},
		{"en", LocaleFor("en").Price("USD", 1500), "$15.00"},
		{"ko", LocaleFor("ko").Price("USD", 123456), "US$1,234.56"},
		{"ja", LocaleFor("ja").Price("JPY", 1500), "￥1,500"},
		{"en", LocaleFor("en").Price("KRW", 15000), "₩15,000"},
		{"en", LocaleFor("en").Price("CHF", 5), "CHF\u00a00.05"},
		{"en", LocaleFor("en").T("index.waiting", "n", int64(1)), "1 person waiting"},
		{"en", LocaleFor("en").T("index.waiting", "n", int64(12345)), "12,345 people waiting"},
		{"ja", LocaleFor("ja").T("index.waiting", "n", int64(1)), "1人が待っています"},
		{"en", LocaleFor("en").ETA(30), "less than a minute"},
		{"en", LocaleFor("en").ETA(12 * 60), "about 12 minutes"},
		{"ko", LocaleFor("ko").ETA(75 * 60), "약 1시간 15분"},
		{"ja", LocaleFor("ja").ETA(2 * 3600), "約2時間"},
		{"en", LocaleFor("en").T("no.such.key"), "⟦no.such.key⟧"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q; want %q", tt.lang, tt.got, tt.want)
		}
	}
}

// TestRender renders every page in every language with every room status:
// no key may be missing (⟦…⟧), and <html lang> follows the language.
func TestRender(t *testing.T) {
	pages, err := NewPages()
	if err != nil {
		t.Fatal(err)
	}
	look, err := BuiltinLook()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 19, 0, 0, 0, time.FixedZone("", 9*3600))
	eta := int64(700)
	for _, l := range Languages {
		for _, state := range []string{"prequeue", "open", "auto", "paused", "passthrough", "closed"} {
			ev := Event{ID: "premiere", Name: "Premiere night", Venue: "Shinjuku Hall 3", State: state, Waiting: 3,
				Detail: &Detail{Key: "index.detail.prequeue", At: at}, RoomDetail: &Detail{Key: "room.detail.prequeue", At: at},
				Showtimes: []Showtime{{ID: 42, Title: "Premiere 19:00", StartsAt: at, PriceCents: 1500, Blocks: []int64{900}}, {ID: 43, Title: "Late", StartsAt: at, Past: true, PriceCents: 1500}}}
			for _, status := range []string{"none", "waiting", "next", "admitted", "left", "expired", "closed", "error", "away"} {
				theirs := int64(0) // the move's question without places, and with them
				if status == "waiting" {
					theirs = 2
				}
				move := &Move{Ticket: "x", From: 9, Mine: 5, Theirs: theirs}
				if status == "next" { // the way back's question
					move = &Move{Return: "https://shop.example/tour-tokyo?a=1&b=2", Kept: "https://shop.example/tour-tokyo"}
				}
				for _, page := range []string{IndexPage, RoomPage, BookPage, LeavePage, NotFoundPage, MovePage} {
					langs := []LangLink{{Code: "en", Name: "English", Href: "?lang=en", Current: true}}
					p := &Page{L: LocaleFor(l.Code), Title: "t", Currency: "USD", Events: []Event{ev}, Event: &ev, Move: move, Langs: langs}
					links := LinksOf("premiere", 9, false)
					links.Share, links.QR = "/e/premiere?t=x", "/e/premiere/qr.svg"
					m := &Model{Lang: l.Code, Langs: langs, Title: "t", Currency: "USD", Event: &ev, Status: status, State: StateOf(state, status, ""),
						Hint: "waiting", Position: 5, Ahead: 4, ETASeconds: eta, Available: -1, From: 9, Refresh: 3, Notice: "rate_limited",
						Moved: status == "waiting", Links: links, Away: &Away{Email: "fan@example.test", Within: 10 * time.Minute}}
					var b bytes.Buffer
					if page == RoomPage {
						err = look.Render(&b, page, m)
					} else {
						err = pages.Render(&b, page, p)
					}
					if err != nil {
						t.Fatalf("%s %s %s: %v", l.Code, page, status, err)
					}
					out := b.String()
					if i := strings.Index(out, "⟦"); i >= 0 {
						t.Errorf("%s %s (state %s, status %s): missing word %s", l.Code, page, state, status, out[i:min(len(out), i+40)])
					}
					if !strings.Contains(out, `<html lang="`+l.Code+`">`) {
						t.Errorf("%s %s: no <html lang=%q>", l.Code, page, l.Code)
					}
					if problems := htmlProblems(out); len(problems) > 0 {
						t.Errorf("%s %s: %v", l.Code, page, problems)
					}
				}
			}
		}
	}
}

func TestCatalogsAreJSON(t *testing.T) {
	for _, l := range Languages {
		b, err := fs.ReadFile(FS(), "i18n/"+l.Code+".json")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", l.Code, err)
		}
	}
}
