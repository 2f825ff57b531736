package web

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"time"
)

// Page templates the gateway renders (html/template, embedded): each of
// Pages inside templates/base.html; the room and the register page are
// a Look's (look.go), whole documents drawn from a Model.
const (
	IndexPage    = "index"    // GET /
	RoomPage     = "room"     // GET /e/{event}: a Look's, drawn from a Model
	BookPage     = "book"     // GET /e/{event}/book
	LeavePage    = "leave"    // GET /e/{event}/leave: "Leave the line?" without JavaScript
	NotFoundPage = "notfound" // an unknown event
	MovePage     = "move"     // GET /e/{event}?t=… or ?return=… from another site: "Replace your place N with place M?", "Go back to this page instead?"
	RegisterPage = "register" // GET /e/{event}/register: a presale's registration, a Look's
	AdminPage    = "admin"    // GET /admin, the operators' page (RenderAdmin)
)

//go:embed templates
var templateFiles embed.FS

// Pages are the parsed templates, one set per page.
type Pages struct{ sets map[string]*template.Template }

// NewPages parses every page with the base layout.
func NewPages() (*Pages, error) {
	funcs := template.FuncMap{
		// showtime bundles what the "showtime" template draws of one.
		"showtime": func(l *Locale, currency string, st Showtime) showtimeItem {
			return showtimeItem{L: l, Currency: currency, Showtime: st}
		},
		"deref": func(p *int64) int64 {
			if p == nil {
				return 0
			}
			return *p
		},
	}
	base, err := template.New("base.html").Funcs(funcs).ParseFS(templateFiles, "templates/base.html")
	if err != nil {
		return nil, err
	}
	p := &Pages{sets: map[string]*template.Template{}}
	for _, name := range []string{IndexPage, BookPage, LeavePage, NotFoundPage, ReportPage, MovePage} {
		b, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if _, err := b.ParseFS(templateFiles, "templates/"+name+".html"); err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		p.sets[name] = b
	}
	admin, err := template.New("admin.html").Funcs(template.FuncMap{
		// previewState bundles what the "preview-state" template draws of one.
		"previewState": func(state string, presale bool, langs []Language) previewStateItem {
			return previewStateItem{State: state, Presale: presale, Languages: langs}
		},
	}).ParseFS(templateFiles, "templates/admin.html")
	if err != nil {
		return nil, fmt.Errorf("template admin: %w", err)
	}
	p.sets[AdminPage] = admin
	return p, nil
}

// previewStateItem is one state's row of previews on the operators' page:
// a frame per language; a presale's state is hidden until its event is
// chosen.
type previewStateItem struct {
	State     string
	Presale   bool
	Languages []Language
}

// Admin is what the operators' page is drawn with: no data of a sale (its
// script fetches that with the operator's token), only the frame of its
// previews, one per state and language.
type Admin struct {
	PreviewStates []string
	// PresaleStates are previewed for the events of PresaleEvents only.
	PresaleStates []string
	PresaleEvents []string
	Languages     []Language
}

// RenderAdmin writes the operators' page (templates/admin.html: English
// only, no layout of the fans' pages).
func (p *Pages) RenderAdmin(w io.Writer, a Admin) error {
	return p.sets[AdminPage].ExecuteTemplate(w, "admin", a)
}

// Render writes page with data.
func (p *Pages) Render(w io.Writer, page string, data *Page) error {
	t, ok := p.sets[page]
	if !ok {
		return fmt.Errorf("web: no page %q", page)
	}
	return t.ExecuteTemplate(w, "base", data)
}

// Page is what every template reads.
type Page struct {
	L        *Locale
	Title    string
	Script   string     // the page's module under /static/ ("" = none)
	Refresh  string     // <meta http-equiv="refresh"> content for pages without JavaScript
	Langs    []LangLink // the language switcher
	Currency string     // booking.currency
	Events   []Event    // the index
	Event    *Event     // the booking, leave and move pages
	Report   *Report    // the sale's report
	Move     *Move      // the question before a place from another site replaces the fan's
}

// Move is a place a link from another site would move here, over the fan's
// own live place, or a way back it would give that place instead of the
// one it has: the page asks before it replaces anything.
type Move struct {
	Ticket string // the link's ticket, posted back if the fan says yes
	From   int64  // the link's from (0 = none)
	Mine   int64  // the fan's place in line (0 = not waiting: its turn came, or unknown)
	Theirs int64  // the link's place in line (0 = not waiting, or unknown)
	// A way back instead of a place: the link's (posted back if the fan
	// says yes), and the one the fan's place has ("" = unknown).
	Return, Kept string
}

// Places is true when both places are in line, so that the question can
// name them.
func (m *Move) Places() bool { return m.Mine > 0 && m.Theirs > 0 }

// LangLink is one entry of the language switcher.
type LangLink struct {
	Code, Name, Href string
	Current          bool
}

// Event as the pages show it.
type Event struct {
	ID, Name, Venue, State string
	Waiting                int64
	Detail                 *Detail // a line under the state on the index
	RoomDetail             *Detail // the same, worded for the waiting room
	Showtimes              []Showtime
}

// First is the first showtime, nil when there is none.
func (e *Event) First() *Showtime {
	if len(e.Showtimes) == 0 {
		return nil
	}
	return &e.Showtimes[0]
}

// Detail is a catalog key with the time it names ({at}).
type Detail struct {
	Key string
	At  time.Time
}

// Showtime as the pages show it; StartsAt keeps the offset it was written
// with, which is the event's time zone.
// showtimeItem is one showtime as the "showtime" template draws it.
type showtimeItem struct {
	L        *Locale
	Currency string
	Showtime
}

type Showtime struct {
	ID         int64
	Title      string
	StartsAt   time.Time
	Past       bool
	PriceCents int64
	Blocks     []int64 // the general-admission blocks' prices
}

// ISO is StartsAt as RFC 3339, for <time datetime> and the scripts.
func (s Showtime) ISO() string { return s.StartsAt.Format(time.RFC3339) }

// FromCents is the lowest price of a place.
func (s Showtime) FromCents() int64 {
	low, any := s.PriceCents, false
	for _, p := range s.Blocks {
		if !any || p < low {
			low = p
		}
		any = true
	}
	if any && s.PriceCents < low {
		low = s.PriceCents
	}
	return low
}

// OnePrice is true when every place costs the same.
func (s Showtime) OnePrice() bool {
	for _, p := range s.Blocks {
		if p != s.PriceCents {
			return false
		}
	}
	return true
}
