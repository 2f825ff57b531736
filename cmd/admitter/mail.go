package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/notify"
)

// tickets signs the ticket of an away fan's place (queue.Store, with
// auth.ticket_secret: all the sender needs to sign a link).
type tickets interface {
	AwayTicket(event, place, to string) (string, error)
}

// renderer writes the emails of the config in force (cfg): each in its
// fan's language, with the event's facts as the pages show them, and a
// your_turn email's link to the place, /e/{event}?t=<ticket>, on the
// gateway as fans reach it (gateway.public_url). The link's ticket is
// signed here, as the email is written, from the place the message
// carries: the outbox in Redis never holds it.
func renderer(cfg func() *config.Config, mails *web.Mails, line tickets) notify.Renderer {
	return func(event string, m notify.Message) (notify.Mail, error) {
		c := cfg()
		ev, ok := c.Event(event)
		if !ok {
			return notify.Mail{}, fmt.Errorf("event %q is not in the config", event)
		}
		d := &web.Mail{L: web.LocaleFor(m.Lang), Currency: c.Booking.Currency, Event: web.EventOf(ev, time.Now()), Data: m.Data}
		if until, err := time.Parse(time.RFC3339, m.Data["until"]); err == nil {
			d.Until = until.In(web.ZoneOf(ev))
		}
		t := m.Data["ticket"] // queued by an earlier release, which kept the ticket itself
		if p := m.Data["place"]; p != "" {
			var err error
			if t, err = line.AwayTicket(event, p, m.To); err != nil {
				return notify.Mail{}, fmt.Errorf("the place of %s: %w", m.Key, err)
			}
		}
		if t != "" {
			d.Link = c.FansURL() + "/e/" + url.PathEscape(event) + "?t=" + url.QueryEscape(t)
		}
		if p := m.Data["path"]; p != "" {
			d.Link = c.FansURL() + p // presale_selected: the register page
		}
		if opens, err := time.Parse(time.RFC3339, m.Data["opens"]); err == nil {
			d.Opens = opens.In(web.ZoneOf(ev))
		}
		subject, text, html, err := mails.Render(m.Kind, d)
		return notify.Mail{Subject: subject, Text: text, HTML: html}, err
	}
}

// eventIDs lists the events of the config in force.
func eventIDs(cfg func() *config.Config) func() []string {
	return func() []string {
		c := cfg()
		out := make([]string, len(c.Events))
		for i, ev := range c.Events {
			out[i] = ev.ID
		}
		return out
	}
}
