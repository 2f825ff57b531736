package web

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"time"
)

// Page templates the gateway renders (html/template, embedded), each inside
// templates/base.html.
const (
	IndexPage    = "index"    // GET /
	RoomPage     = "room"     // GET /e/{event}
	BookPage     = "book"     // GET /e/{event}/book
	LeavePage    = "leave"    // GET /e/{event}/leave: "Leave the line?" without JavaScript
	NotFoundPage = "notfound" // an unknown event
	MovePage     = "move"     // GET /e/{event}?t=… from another site: "Replace your place N with place M?"
	RegisterPage = "register" // GET /e/{event}/register: a presale's registration
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
		"derefTime": func(p *time.Time) time.Time {
			if p == nil {
				return time.Time{}
			}
			return *p
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
	for _, name := range []string{IndexPage, RoomPage, BookPage, LeavePage, NotFoundPage, ReportPage, MovePage, RegisterPage} {
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
	Event    *Event     // the room, booking and leave pages
	Room     *Room      // the room
	Report   *Report    // the sale's report
	Move     *Move      // the question before a place from another site replaces the fan's
	// Registration is the fan's registration for a presale (the register
	// page).
	Registration *Registration
}

// Registration is a fan's registration for a presale, as the register page
// shows it without JavaScript.
type Registration struct {
	// Status: signed-out (no account), none (not registered), or the
	// contract's registered, selected, waitlisted, not_selected.
	Status string
	ID     string
	Rank   int64
	// Open: registration is open now (from OpensAt to ClosesAt).
	Open              bool
	OpensAt, ClosesAt time.Time
	// The window of a selected fan.
	WindowOpensAt, WindowClosesAt *time.Time
	// WindowOpen: the window is open now (the page offers to join).
	WindowOpen bool
	Notice     string // a catalog key under register.notice. ("" = none)
}

// Move is a place a link from another site would move here, over the fan's
// own live place: the page asks before it replaces anything.
type Move struct {
	Ticket string // the link's ticket, posted back if the fan says yes
	From   int64  // the link's from (0 = none)
	Mine   int64  // the fan's place in line (0 = not waiting: its turn came, or unknown)
	Theirs int64  // the link's place in line (0 = not waiting, or unknown)
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

// Room is the fan's place in the waiting room, rendered without JavaScript.
type Room struct {
	// Status: none (no ticket), waiting, next, admitted, left, expired,
	// closed, soldout, error.
	Status          string
	Position, Ahead int64
	ETA             *int64 // seconds; nil while paused or before opening
	Available       *int64 // places left to hold; nil until the booking core publishes them
	From            int64  // the place the fan started at (the progress bar's zero)
	Refresh         int64  // seconds until the page refreshes itself (0 = it does not)
	Still           bool   // the fan asked the page not to refresh itself (?still=1)
	Notice          string // a catalog key under room.notice. ("" = none)
	Hint            string // a catalog key under room.hint.
	ShareURL        string // /e/{event}?t=<ticket>: the place on another device
	// Moved: the page follows a move this site made (its redirect), and
	// room.js is to follow the moved ticket, not the one it kept.
	Moved bool
	QRURL string // that link as an SVG QR code
	// NeedsCode: a new place needs an access code (the join form asks it).
	NeedsCode bool
	// Presale: the sale has a presale (the page links its registration).
	Presale bool
	// NeedsScript: the sale asks a proof of work for a new place, which only
	// the page's script can pay; without JavaScript the page says so in place
	// of the join form.
	NeedsScript bool
	// Return is the way back to the site behind the room that sent the fan
	// here (?return=, checked): the join carries it.
	Return string
	// Away is the offer to leave and be emailed (nil: this fan cannot:
	// no email, or the room sends none); with Status "away", what was set.
	Away *Away
}

// Away is what the waiting page says of stepping away.
type Away struct {
	Email  string        // the address the origin site signed
	Within time.Duration // how long the place, once let in, waits for the fan
}

// Waiting is true while the fan has a place in line.
func (r *Room) Waiting() bool { return r.Status == "waiting" || r.Status == "next" }

// CanJoin is true when the page offers to join (again).
func (r *Room) CanJoin() bool {
	switch r.Status {
	case "none", "left", "expired", "closed", "error":
		return true
	}
	return false
}

// Permille is the progress bar's value (max 1000) from From to the front.
func (r *Room) Permille() int64 {
	if r.From <= 1 {
		if r.Waiting() {
			return 0
		}
		return 1000
	}
	v := (r.From - r.Position) * 1000 / (r.From - 1)
	return max(0, min(1000, v))
}

// Percent is Permille in whole percent.
func (r *Room) Percent() int64 { return (r.Permille() + 5) / 10 }
