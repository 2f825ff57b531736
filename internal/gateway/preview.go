package gateway

import (
	"bytes"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/queue"
)

// The previews (DESIGN.md "Rehearsing a sale"): the fans' waiting page of
// an event as it would look in each state, in each language, for the
// operators to check its words, prices and dates before the sale. A
// preview is rendered from the event's config and the settings in force
// (kept in this gateway's memory) by the very templates and the same
// state-to-page mapping as the live page (viewOf, roomOf), with a made-up
// fan in it. It touches no live state: no Redis command, no cookie, and
// the page it renders is inert (no script, no self-refresh), so that
// nothing in it polls or joins.

// PreviewStates are the states a preview renders, in the order the
// operators' page shows them.
// An event with a presale has PresalePreviewStates too (previewStates).
var PreviewStates = []string{"prequeue", "waiting", "next", "paused", "admitted", "soldout", "closed"}

// PresalePreviewStates are a presale's: its register page for a made-up
// registrant (registration open, selected with the first window, on the
// wait list), and the room refusing an account with no invitation.
var PresalePreviewStates = []string{"registration", "selected", "waitlisted", "not_invited"}

// previewStates are ev's states.
func previewStates(ev *config.Event) []string {
	if ev.Presale == nil {
		return PreviewStates
	}
	return append(slices.Clone(PreviewStates), PresalePreviewStates...)
}

// previewFrom is how far from the front the previews' fan stands: about
// ten minutes of admission at the rate in force.
const previewFrom = 10 * time.Minute

// GET /api/v1/admin/events/{event}/preview?state=<state>&lang=<en|ja|ko>
func (s *Server) adminPreview(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	name := c.Query("state")
	if states := previewStates(ev); !slices.Contains(states, name) {
		return invalidField("state", "must be one of %s", strings.Join(states, ", "))
	}
	lang := c.Query("lang", web.DefaultLanguage)
	if !web.Supported(lang) {
		var codes []string
		for _, l := range web.Languages {
			codes = append(codes, l.Code)
		}
		return invalidField("lang", "must be one of %s", strings.Join(codes, ", "))
	}
	l := web.LocaleFor(lang)
	now := s.now()
	set := s.settingsFor(ev)
	if slices.Contains(PresalePreviewStates, name) && name != "not_invited" {
		return s.sendPreview(c, l, ev, web.RegisterPage, &web.Page{Title: l.T("register.pageTitle", "event", ev.Name),
			Event: viewOf(ev, set, stateOpen, -1, now), Registration: registrationPreview(ev, name)})
	}
	view, st, from := previewOf(ev, set, name, now)
	room := &web.Room{NeedsScript: ev.Admission.JoinProofBits > 0, NeedsCode: ev.Admission.CodesRequired(), Presale: ev.Presale != nil}
	if name == "not_invited" {
		room.Status, room.Hint, room.Notice = "none", "none", "not_invited"
		st.State = ""
	} else {
		roomOf(room, st, from)
	}
	room.Refresh = 0 // inert: a preview never reloads itself
	if room.Waiting() {
		// The share link as a fan's looks, without a ticket to carry; no
		// QR code (it would be the fan's ticket).
		room.ShareURL = s.publicURL(c) + "/e/" + ev.ID + "?t=…"
	}
	p := &web.Page{Title: l.T("room.pageTitle", "event", ev.Name), Event: view, Room: room}
	if st.State == queue.Admitted {
		p.Title = l.T("room.turnTitle", "event", ev.Name)
	}
	return s.sendPreview(c, l, ev, web.RoomPage, p)
}

// sendPreview renders page p as a preview: inert (no script), the
// language switcher linking to the live page.
func (s *Server) sendPreview(c *fiber.Ctx, l *web.Locale, ev *config.Event, page string, p *web.Page) error {
	p.L, p.Currency, p.Script, p.Refresh = l, s.config().Booking.Currency, "", ""
	for _, lg := range web.Languages {
		// The switcher as the fan's page has it: links to the live page.
		p.Langs = append(p.Langs, web.LangLink{Code: lg.Code, Name: lg.Name, Href: "/e/" + ev.ID + "?lang=" + lg.Code, Current: lg.Code == l.Lang})
	}
	var buf bytes.Buffer
	if err := s.pages.Render(&buf, page, p); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentSecurityPolicy, csp)
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderContentLanguage, l.Lang)
	c.Type("html", "utf-8")
	return c.Send(buf.Bytes())
}

// registrationPreview is a made-up registrant of ev's presale in state
// name: registration open and not registered yet; selected, rank 1, the
// first window; on the wait list, the first rank after the selected.
func registrationPreview(ev *config.Event, name string) *web.Registration {
	p := policy.PlanFor(*ev)
	zone := web.ZoneOf(ev)
	r := &web.Registration{OpensAt: p.RegistrationOpensAt.In(zone), ClosesAt: p.RegistrationClosesAt.In(zone)}
	switch name {
	case "registration":
		r.Status, r.Open = "none", true
	case "selected":
		o, cl := p.OpensAt.In(zone), p.OpensAt.Add(p.Window).In(zone)
		r.Status, r.ID, r.Rank, r.WindowOpensAt, r.WindowClosesAt = presale.Selected, "1.preview", 1, &o, &cl
	case "waitlisted":
		r.Status, r.ID, r.Rank = presale.Waitlisted, "2.preview", int64(p.Selected)+1
	}
	return r
}

// renderAdmin writes the operators' page with the frames of its previews,
// one per state and language; a presale's states are shown for the events
// with a presale.
func (s *Server) renderAdmin(w io.Writer) error {
	a := web.Admin{PreviewStates: PreviewStates, PresaleStates: PresalePreviewStates, Languages: web.Languages}
	for _, ev := range s.config().Events {
		if ev.Presale != nil {
			a.PresaleEvents = append(a.PresaleEvents, ev.ID)
		}
	}
	return s.pages.RenderAdmin(w, a)
}

// previewOf is the preview of state name: the event as the page shows it
// then, the line's answer for a made-up fan, and the place that fan
// started at.
func previewOf(ev *config.Event, set queue.Settings, name string, now time.Time) (*web.Event, queue.Status, int64) {
	far := farPlace(set.AdmitPerSecond)
	places := placesOf(ev)
	waitingAt := func(pos int64, eta bool) queue.Status {
		p := queue.Position{Position: pos, Ahead: pos - 1, Available: &places}
		if r := set.AdmitPerSecond; eta && r > 0 {
			// As the line tells a fan (queue's position): its place over the rate.
			d := time.Duration(float64(pos) / r * float64(time.Second)).Round(time.Millisecond)
			p.ETA = &d
		}
		return queue.Status{State: queue.Waiting, Position: p}
	}
	view := func(state string) *web.Event { return viewOf(ev, set, state, -1, now) }
	switch name {
	case "prequeue":
		if set.OpensAt != nil && !now.Before(*set.OpensAt) {
			// The page names the draw's time only when there is one to come.
			set.OpensAt = nil
		}
		return view(statePrequeue), waitingAt(far, false), far
	case "waiting":
		return view(stateOpen), waitingAt(far, true), far
	case "next":
		return view(stateOpen), waitingAt(1, true), far
	case "paused":
		return view(statePaused), waitingAt(far/2, false), far
	case "admitted":
		return view(stateOpen), queue.Status{State: queue.Admitted}, far
	case "soldout":
		return view(stateSoldOut), queue.Status{State: queue.SoldOut}, far
	}
	return view(stateClosed), queue.Status{State: queue.Closed}, far
}

// farPlace is the place of a fan previewFrom from the front at rate (a
// thousand when nothing is admitted).
func farPlace(rate float64) int64 {
	if rate <= 0 {
		return 1000
	}
	return max(2, int64(math.Round(rate*previewFrom.Seconds())))
}

// placesOf is every place the event's config sells: its showtimes' seats
// and general-admission places, the "places left" of a sale not yet begun.
func placesOf(ev *config.Event) int64 {
	var n int64
	for _, st := range ev.Showtimes {
		n += int64(st.Rows) * int64(st.SeatsPerRow)
		for _, b := range st.GeneralAdmission {
			n += int64(b.Capacity)
		}
	}
	return n
}
