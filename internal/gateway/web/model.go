package web

import (
	"strconv"
	"time"
)

// Model is what the fans' two pages of an event are drawn from: the
// waiting room (room.html) and a presale's register page (register.html),
// the built-in ones and a site's own alike (DESIGN.md, "The site's own
// look"). docs/PAGES.md documents every field and helper with an example;
// a field added here is added there, since a site's template names them.
//
// A Model is made fresh for each page and never shared: the gateway fills
// it from the line's answer for the fan's ticket (a live page), or from the
// event's config and a made-up fan (an operators' preview, and the check of
// a site's templates at load).
type Model struct {
	// Lang is the fan's language: "en", "ja" or "ko" (Languages).
	Lang string
	// Langs is the language switcher: every language, the current one
	// marked, each a link to this page in it.
	Langs []LangLink
	// Title is the page's title in the fan's language.
	Title string
	// Preview is true for an operators' preview: the page is inert (the
	// head block then loads no script and never refreshes).
	Preview bool
	// State is what the page shows, one word of States (RegisterStates on
	// the register page).
	State string
	// Event is the event: its id, name, venue, state and showtimes.
	Event *Event
	// Currency is booking.currency, the currency of every price.
	Currency string

	// The fan's place in line (the room page). Position is 1 for the fan
	// next in (State "next"), 0 without a place.
	Position, Ahead int64
	// ETASeconds is the wait the line foresees, in seconds (0 when it is
	// unknown: paused, before the line opens, or no place).
	ETASeconds int64
	// Available is the places left to hold (-1 until the booking core
	// publishes them).
	Available int64
	// From is the place the fan started at: the progress bar's zero.
	From int64
	// Refresh is how many seconds until the page refreshes itself without
	// JavaScript (0: it does not).
	Refresh int64
	// Status is the fan's status as the room's script names it (the
	// data-status of #status): none, waiting, next, admitted, left,
	// expired, closed, soldout, error, away.
	Status string
	// Still: the fan asked the page not to refresh itself (?still=1).
	Still bool
	// Notice is a catalog key under room.notice. ("" = none): what a join
	// ended with (rate_limited, not_invited, invalid_code, …).
	Notice string
	// Hint is a catalog key under room.hint.: what keeps (or lost) the
	// place.
	Hint string
	// Moved: the page follows a move this site made (the script then
	// follows the moved ticket).
	Moved bool
	// Return is the way back to the site behind the room that sent the
	// fan here ("" = none): the join carries it.
	Return string
	// NeedsCode: a new place spends an access code (the join form asks
	// it).
	NeedsCode bool
	// NeedsScript: a new place costs a proof of work, which only the
	// page's script can pay.
	NeedsScript bool
	// Away is the offer to leave and be emailed (nil: this fan cannot);
	// with Status "away", what was set.
	Away *Away

	// Links are the page's links, every one on this gateway.
	Links Links
	// Presale is the event's presale (nil: it has none); on the register
	// page, with the fan's registration.
	Presale *Presale
}

// States a room page is in, in the order the operators' previews show the
// first seven (DESIGN.md, "Rehearsing a sale"):
//
//	prequeue     the line forms; the order is drawn when it opens (with or without a place)
//	waiting      in line, not first
//	next         in line, first (Position 1)
//	paused       the line is paused (with or without a place)
//	admitted     the fan's turn: on to booking
//	soldout      every place is sold
//	closed       the sale is closed (or the fan's place was closed)
//	open         no place yet; the line is open (the page offers to join)
//	left         the fan left the line
//	expired      the fan's place lapsed (no polls for too long)
//	away         the fan stepped away and will be emailed
//	not_invited  a presale's join refused: the fan's account has no invitation
//	error        the line did not answer; the page tries again
var States = []string{"prequeue", "waiting", "next", "paused", "admitted", "soldout", "closed",
	"open", "left", "expired", "away", "not_invited", "error"}

// RegisterStates are the register page's states:
//
//	registration         not registered (or signed out) while registration is open
//	registration_closed  not registered, and registration is not open
//	registered           registered; the selection is not drawn yet
//	selected             invited: the fan's window is in .Presale
//	waitlisted           on the wait list (a top-up may invite the fan)
//	not_selected         the selection is drawn and the fan is not in it
var RegisterStates = []string{"registration", "registration_closed", "registered", "selected", "waitlisted", "not_selected"}

// StateOf is a room page's State: the fan's status (Model.Status) in the
// event's state (Event.State), with the page's notice. The line's own
// pauses and pre-queue win over a place in line, since they are what the
// fan waits for.
func StateOf(event, status, notice string) string {
	switch status {
	case "waiting", "next":
		if event == "prequeue" || event == "paused" {
			return event
		}
		return status
	case "none":
		if notice == "not_invited" {
			return "not_invited"
		}
		switch event {
		case "prequeue", "paused", "closed", "soldout":
			return event
		}
		return "open"
	}
	return status
}

// RegisterStateOf is the register page's State for the fan's registration
// status (Presale.Status) while registration is open or not.
func RegisterStateOf(status string, open bool) string {
	switch status {
	case "signed-out", "none", "":
		if open {
			return "registration"
		}
		return "registration_closed"
	}
	return status
}

// Links are a page's links on this gateway.
type Links struct {
	Room     string // /e/{event}: the waiting room
	Join     string // /e/{event}/join: the join form's action (POST)
	Leave    string // /e/{event}/leave: leaving, asked first
	Away     string // /e/{event}/away: the step-away form's action (POST)
	Book     string // /e/{event}/book: the seat map, once admitted
	Report   string // /e/{event}/report: the sale's report
	Register string // /e/{event}/register ("" without a presale)
	// Selection is the presale's published selection (its JSON; ""
	// without a presale).
	Selection string
	// Share is the fan's place as a link for another device ("" = no
	// place); QR is that link as an SVG QR code ("" = none).
	Share, QR string
	// Update reloads the page now; Still is the page that stops
	// refreshing itself (both keep the progress bar's zero).
	Update, Still string
	// Refresh is where the page goes when it refreshes itself ("" =
	// itself).
	Refresh string
	// Assets is the site's own files, /e/{event}/assets/ (a site's page:
	// {{.Links.Assets}}shop.css).
	Assets string
}

// LinksOf are the links of event id's pages; from is the progress bar's
// zero (0: none); presale tells whether the event has one.
func LinksOf(id string, from int64, presale bool) Links {
	e := "/e/" + id
	l := Links{Room: e, Join: e + "/join", Leave: e + "/leave", Away: e + "/away", Book: e + "/book", Report: e + "/report",
		Update: e, Still: e + "?still=1", Assets: e + "/assets/"}
	if from > 0 {
		f := strconv.FormatInt(from, 10)
		l.Update, l.Still = e+"?from="+f, e+"?still=1&from="+f
	}
	if presale {
		l.Register, l.Selection = e+"/register", "/api/v1/events/"+id+"/selection"
	}
	return l
}

// Presale is an event's presale as its pages show it, with the fan's
// registration on the register page.
type Presale struct {
	// Status is the fan's registration: signed-out (no account), none (not
	// registered), or the contract's registered, selected, waitlisted,
	// not_selected; "" on the room page, which does not ask.
	Status string
	ID     string // the registration's id ("" = none)
	Rank   int64  // its rank in the selection (0 = not drawn)
	// Open: registration is open now (from OpensAt to ClosesAt).
	Open              bool
	OpensAt, ClosesAt time.Time
	// The window of a selected fan (nil: none).
	WindowOpensAt, WindowClosesAt *time.Time
	// WindowOpen: the window is open now (the page offers to join).
	WindowOpen bool
	Notice     string // a catalog key under register.notice. ("" = none)
}

// Away is what the waiting page says of stepping away.
type Away struct {
	Email  string        // the address the origin site signed
	Within time.Duration // how long the place, once let in, waits for the fan
}

// Waiting is true while the fan has a place in line.
func (m *Model) Waiting() bool { return m.Status == "waiting" || m.Status == "next" }

// CanJoin is true when the page offers to join (again).
func (m *Model) CanJoin() bool {
	switch m.Status {
	case "none", "left", "expired", "closed", "error":
		return true
	}
	return false
}

// Progress is the progress bar's value, in thousandths of the way from
// From to the front.
func (m *Model) Progress() int64 {
	if m.From <= 1 {
		if m.Waiting() {
			return 0
		}
		return 1000
	}
	v := (m.From - m.Position) * 1000 / (m.From - 1)
	return max(0, min(1000, v))
}

// Percent is Progress in whole percent.
func (m *Model) Percent() int64 { return (m.Progress() + 5) / 10 }
