package web

import (
	"strings"
	"testing"
	"time"
)

// Every email, in every language: no word missing, the link in both
// parts, the event's facts (name, venue, date in the event's zone, price)
// and the deadline said in the fan's language; HTML escapes what it shows.
func TestMailsRender(t *testing.T) {
	mails, err := NewMails()
	if err != nil {
		t.Fatal(err)
	}
	zone := time.FixedZone("", 9*3600)
	at := time.Date(2036, 12, 1, 19, 0, 0, 0, zone)
	ev := &Event{ID: "premiere", Name: "Premiere <night>", Venue: "Shinjuku Hall 3",
		Showtimes: []Showtime{{ID: 42, Title: "Premiere 19:00", StartsAt: at, PriceCents: 1500, Blocks: []int64{900}}}}
	link := "https://tickets.example.com/e/premiere?t=abc_DEF-123"
	until := time.Date(2036, 11, 30, 10, 5, 0, 0, zone)
	for _, kind := range MailKinds {
		for _, l := range Languages {
			loc := LocaleFor(l.Code)
			subject, text, html, err := mails.Render(kind, &Mail{L: loc, Currency: "JPY", Event: ev, Link: link, Until: until})
			if err != nil {
				t.Fatalf("%s %s: %v", kind, l.Code, err)
			}
			for part, body := range map[string]string{"subject": subject, "text": text, "html": html} {
				if strings.Contains(body, "⟦") {
					t.Errorf("%s %s %s: a word is missing: %s", kind, l.Code, part, body)
				}
			}
			for _, want := range []string{link, "Shinjuku Hall 3", loc.When(at), loc.When(until), loc.Price("JPY", 900)} {
				if !strings.Contains(text, want) {
					t.Errorf("%s %s text lacks %q:\n%s", kind, l.Code, want, text)
				}
			}
			if !strings.Contains(text, "Premiere <night>") || !strings.Contains(html, "Premiere &lt;night&gt;") || strings.Contains(html, "<night>") {
				t.Errorf("%s %s: the name is not escaped in HTML only", kind, l.Code)
			}
			if !strings.Contains(html, `href="`+link+`"`) || !strings.Contains(html, `<html lang="`+l.Code+`">`) {
				t.Errorf("%s %s html lacks its link or lang", kind, l.Code)
			}
			if !strings.Contains(subject, "Premiere <night>") {
				t.Errorf("%s %s subject %q", kind, l.Code, subject)
			}
		}
	}
}
