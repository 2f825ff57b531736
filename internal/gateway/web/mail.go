package web

import (
	"bytes"
	"fmt"
	"html/template"
	ttemplate "text/template"
	"time"

	"github.com/waitroom/waitroom/internal/config"
)

// The emails to fans speak the pages' three languages, from the same
// catalogs (keys mail.*): each kind of email is two templates,
// templates/mail/<kind>.txt (plain text) and templates/mail/<kind>.html, and
// a subject (mail.<kind>.subject), written in the frame all kinds share
// (templates/mail/frame.html and frame.txt).

// Mails are the emails' templates, parsed once.
type Mails struct {
	text *ttemplate.Template
	html *template.Template
}

// MailKinds are the kinds of email there are templates for.
var MailKinds = []string{"your_turn", "presale_selected"}

// NewMails parses every email's templates.
func NewMails() (*Mails, error) {
	text, err := ttemplate.New("mail").ParseFS(templateFiles, "templates/mail/*.txt")
	if err != nil {
		return nil, fmt.Errorf("mail templates: %w", err)
	}
	html, err := template.New("mail").ParseFS(templateFiles, "templates/mail/*.html")
	if err != nil {
		return nil, fmt.Errorf("mail templates: %w", err)
	}
	return &Mails{text: text, html: html}, nil
}

// Mail is what an email's templates read.
type Mail struct {
	// Kind is the email's kind (Render sets it): the frame's subject and
	// why are mail.<Kind>.subject and mail.<Kind>.why.
	Kind     string
	L        *Locale
	Currency string
	Event    *Event
	// Link is the absolute link the email carries (your_turn: the place,
	// /e/{event}?t=<ticket>).
	Link string
	// Until is when what the email offers ends (your_turn: the place's
	// wait for its claim), in the event's time zone.
	Until time.Time
	// Opens is when what the email offers begins (presale_selected: the
	// window's opening).
	Opens time.Time
	// Data are the message's other facts.
	Data map[string]string
}

// Render writes the email of kind: its subject, plain text and HTML.
func (m *Mails) Render(kind string, mail *Mail) (subject, text, html string, err error) {
	d := *mail
	d.Kind = kind
	var tb, hb bytes.Buffer
	if err := m.text.ExecuteTemplate(&tb, kind+".txt", &d); err != nil {
		return "", "", "", err
	}
	if err := m.html.ExecuteTemplate(&hb, kind+".html", &d); err != nil {
		return "", "", "", err
	}
	return d.L.T("mail."+kind+".subject", "event", d.Event.Name), tb.String(), hb.String(), nil
}

// EventOf is ev as the pages and emails show its facts (name, venue,
// showtimes with their prices) at now; the state is the caller's.
func EventOf(ev *config.Event, now time.Time) *Event {
	v := &Event{ID: ev.ID, Name: ev.Name, Venue: ev.Venue}
	for _, st := range ev.Showtimes {
		w := Showtime{ID: st.ID, Title: st.Title, StartsAt: st.StartsAt, Past: st.StartsAt.Before(now), PriceCents: st.PriceCents}
		if st.Rows == 0 && len(st.GeneralAdmission) > 0 {
			w.PriceCents = st.GeneralAdmission[0].PriceCents // no reserved seats: the blocks set the price
		}
		for _, b := range st.GeneralAdmission {
			w.Blocks = append(w.Blocks, b.PriceCents)
		}
		v.Showtimes = append(v.Showtimes, w)
	}
	return v
}

// ZoneOf is an event's time zone: the offset its first showtime's
// starts_at was written with (the config has no zone of its own).
func ZoneOf(ev *config.Event) *time.Location {
	if len(ev.Showtimes) > 0 {
		return ev.Showtimes[0].StartsAt.Location()
	}
	return time.UTC
}
