package web

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"time"
)

// Language is one language the pages speak.
type Language struct {
	Code string // BCP 47: "en", "ja", "ko"
	Name string // in itself: "日本語"
}

// Languages the pages speak, in the order the switcher shows them. Each has
// one catalog, static/i18n/<code>.json, shared by the server's templates and
// the browser's scripts (i18n.js): no word of the pages lives in code.
var Languages = []Language{{"en", "English"}, {"ja", "日本語"}, {"ko", "한국어"}}

// DefaultLanguage is spoken when the fan asks for none of Languages.
const DefaultLanguage = "en"

// catalogs holds every language's words, read once from the embedded files.
var catalogs = mustCatalogs()

func mustCatalogs() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, l := range Languages {
		b, err := fs.ReadFile(FS(), "i18n/"+l.Code+".json")
		if err != nil {
			panic(err) // embedded: a missing catalog is a broken build
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			panic(fmt.Sprintf("i18n/%s.json: %v", l.Code, err))
		}
		out[l.Code] = m
	}
	return out
}

// Supported reports whether code is one of Languages.
func Supported(code string) bool {
	_, ok := catalogs[code]
	return ok
}

// Negotiate picks the language: the fan's choice (cookie wr_lang) when it is
// one we speak, else the best of Accept-Language by q-value ("ja-JP" counts
// as "ja"), else DefaultLanguage.
func Negotiate(chosen, acceptLanguage string) string {
	if Supported(chosen) {
		return chosen
	}
	best, bestQ := DefaultLanguage, 0.0
	for _, part := range strings.Split(acceptLanguage, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			q = f
		}
		base, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(tag)), "-")
		if Supported(base) && q > bestQ {
			best, bestQ = base, q
		}
	}
	return best
}

// Locale speaks one language: words, counts, prices and dates.
type Locale struct {
	Lang string
	cat  map[string]string
	// words are a site's own words in this language as JSON, for the
	// room's script ("" = the built-in words alone; see Look).
	words string
}

// LocaleFor returns the locale of a language code (DefaultLanguage for one
// we do not speak).
func LocaleFor(code string) *Locale {
	if !Supported(code) {
		code = DefaultLanguage
	}
	return &Locale{Lang: code, cat: catalogs[code]}
}

// plural is the CLDR plural category of n: English has "one" and "other",
// Japanese and Korean only "other".
func (l *Locale) plural(n int64) string {
	if l.Lang == "en" && n == 1 {
		return "one"
	}
	return "other"
}

// T returns the words of key with {name} placeholders filled from kv (name,
// value pairs; whole numbers are written for people: 12,345). A key with
// ".one"/".other" variants is chosen by the plural of the value named "n".
// A key the catalog lacks comes back as ⟦key⟧, which the tests look for.
func (l *Locale) T(key string, kv ...any) string {
	msg, ok := "", false
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "n" {
			if n, isInt := asInt(kv[i+1]); isInt {
				msg, ok = l.cat[key+"."+l.plural(n)]
				if !ok {
					msg, ok = l.cat[key+".other"]
				}
			}
		}
	}
	if !ok {
		msg, ok = l.cat[key]
	}
	if !ok {
		return "⟦" + key + "⟧"
	}
	for i := 0; i+1 < len(kv); i += 2 {
		name, _ := kv[i].(string)
		var v string
		if n, isInt := asInt(kv[i+1]); isInt {
			v = l.Count(n)
		} else {
			v = fmt.Sprint(kv[i+1])
		}
		msg = strings.ReplaceAll(msg, "{"+name+"}", v)
	}
	return msg
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case *int64:
		if x != nil {
			return *x, true
		}
	}
	return 0, false
}

// Count writes a whole number for people: 12,345 in all three languages.
func (l *Locale) Count(n int64) string { return Thousands(n) }

// Thousands writes n with a comma between each group of three digits, as
// English, Japanese and Korean all write counts: 12,345.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// MinorDigits is how many digits a currency's minor unit has (ISO 4217):
// 2 for most (cents), 0 for JPY and KRW (price_cents: 1500 is ¥1,500), 3 for
// a few. The browser asks Intl; this table is the same answer for the
// server's pages, which work without JavaScript.
func MinorDigits(currency string) int {
	switch currency {
	case "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF":
		return 0
	case "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND":
		return 3
	}
	return 2
}

var symbols = map[string]string{"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "KRW": "₩"}

// Price writes an amount in the currency's minor unit: $15.00, ¥1,500,
// ₩15,000; other currencies as "CHF 15.00". The browser writes the same
// amounts with Intl.NumberFormat in the fan's locale.
func (l *Locale) Price(currency string, cents int64) string {
	d := MinorDigits(currency)
	p := int64(math.Pow10(d))
	neg := cents < 0
	if neg {
		cents = -cents
	}
	s := l.Count(cents / p)
	if d > 0 {
		s += "." + fmt.Sprintf("%0*d", d, cents%p)
	}
	if sym, ok := symbols[currency]; ok {
		// As Intl writes them: Japanese has its full-width yen, Korean names
		// the dollar and the yen it means.
		switch {
		case l.Lang == "ja" && currency == "JPY":
			sym = "￥"
		case l.Lang == "ko" && currency == "USD":
			sym = "US$"
		case l.Lang == "ko" && currency == "JPY":
			sym = "JP¥"
		}
		s = sym + s
	} else {
		s = currency + "\u00a0" + s
	}
	if neg {
		s = "-" + s
	}
	return s
}

var (
	weekdaysJa = []string{"日", "月", "火", "水", "木", "金", "土"}
	weekdaysKo = []string{"일", "월", "화", "수", "목", "금", "토"}
)

// When writes a date and time in t's own zone, the event's (the offset its
// starts_at was written with): "Tue, Dec 1, 2026, 19:00", "2026年12月1日(火)
// 19:00", "2026년 12월 1일 (화) 19:00", as Intl writes them in the browser.
func (l *Locale) When(t time.Time) string {
	switch l.Lang {
	case "ja":
		return fmt.Sprintf("%d年%d月%d日(%s) %s", t.Year(), t.Month(), t.Day(), weekdaysJa[t.Weekday()], t.Format("15:04"))
	case "ko":
		return fmt.Sprintf("%d년 %d월 %d일 (%s) %s", t.Year(), t.Month(), t.Day(), weekdaysKo[t.Weekday()], t.Format("15:04"))
	}
	return t.Format("Mon, Jan 2, 2006, 15:04")
}

// Span writes a length of time exactly, in whole minutes from a minute on
// ("10 minutes", "10分"), else in seconds ("20 seconds").
func (l *Locale) Span(d time.Duration) string {
	if d >= time.Minute {
		return l.T("span.minutes", "n", int64(math.Round(d.Minutes())))
	}
	return l.T("span.seconds", "n", int64(math.Round(d.Seconds())))
}

// ETA writes a wait for people: "less than a minute", "about 4 minutes",
// "about 1 hour 15 minutes" (quarter hours past an hour: more would be a
// false promise), "more than a day".
func (l *Locale) ETA(seconds int64) string {
	if seconds < 60 {
		return l.T("eta.underMinute")
	}
	min := int64(math.Round(float64(seconds) / 60))
	if min < 60 {
		return l.T("eta.minutes", "n", min)
	}
	quarters := int64(math.Round(float64(seconds)/900)) * 15
	h, m := quarters/60, quarters%60
	if h >= 24 {
		return l.T("eta.overDay")
	}
	if m == 0 {
		return l.T("eta.hours", "n", h)
	}
	return l.T("eta.hoursMinutes", "h", h, "m", m)
}
