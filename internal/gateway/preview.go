package gateway

import (
	"bytes"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/presale"
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

// operatorsPage is the operators' page (GET /admin) and the previews it
// frames, drawn by the views from the config and the settings in force.
type operatorsPage struct {
	*edge
	views *views
}

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

// preview: GET /api/v1/admin/events/{event}/preview?state=<state>&lang=<en|ja|ko>
func (s *operatorsPage) preview(c *fiber.Ctx) error {
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
	m := s.previewModel(c, ev, name, lang)
	page := web.RoomPage
	if m.Presale != nil && m.Presale.Status != "" {
		page = web.RegisterPage
	}
	return s.views.renderLook(c, fiber.StatusOK, ev, page, m)
}

// previewModel is the model of ev's preview in state name (a preview
// state of ev), in lang: the register page's for a presale's own states
// but not_invited, the room's for the others.
func (s *operatorsPage) previewModel(c *fiber.Ctx, ev *config.Event, name, lang string) *web.Model {
	var m *web.Model
	if slices.Contains(PresalePreviewStates, name) && name != "not_invited" {
		m = s.views.registrationSample(ev, name, lang)
	} else {
		m = s.views.roomSample(ev, name, lang)
		m.Refresh = 0   // inert: a preview never reloads itself
		m.Links.QR = "" // it would be the fan's ticket
		if m.Waiting() {
			// The share link as a fan's looks, without a ticket to carry.
			m.Links.Share = s.publicURL(c) + "/e/" + ev.ID + "?t=…"
		}
	}
	m.Preview = true
	return m
}

// roomSample is a made-up fan of ev in the room's state name (web.States),
// in lang, as the previews show it (for the preview states) and as a
// site's room.html is checked against at load: from ev's config and the
// settings in force, touching no live state.
func (s *views) roomSample(ev *config.Event, name, lang string) *web.Model {
	now := s.now()
	set := s.settingsFor(ev)
	view, st, from := previewOf(ev, set, name, now)
	m := newRoom(ev, view, lang)
	open := func() *web.Event { return viewOf(ev, set, stateOpen, -1, now) }
	switch name {
	case "not_invited":
		m.Notice = "not_invited"
	case "open":
		m.Event = open()
	case "left":
		m.Event, m.Status, m.Hint = open(), "left", "left"
	case "expired":
		m.Event = open()
		roomOf(m, line.Status{State: line.Expired}, from)
	case "away":
		m.Event, m.Status, m.Hint = open(), "away", "away"
		m.Away = &web.Away{Email: "fan@example.com", Within: ev.Admission.AwayClaimWithin.D()}
	case "error":
		m.Event, m.Status, m.Notice, m.Refresh = open(), "error", "error", 5
	default:
		roomOf(m, st, from)
	}
	if m.Waiting() {
		f := strconv.FormatInt(m.From, 10)
		m.Links.Share, m.Links.QR = "/e/"+ev.ID+"?t=1.sample&from="+f, "/e/"+ev.ID+"/qr.svg?from="+f
	}
	finishRoom(m, ev)
	return m
}

// registrationSample is a made-up registrant of ev's presale in the
// register page's state name (web.RegisterStates), in lang: registration
// open and not registered yet; signed out after the close; registered;
// selected, rank 1, the first window; on the wait list, the first rank
// after the selected; not selected.
func (s *views) registrationSample(ev *config.Event, name, lang string) *web.Model {
	p := policy.PlanFor(*ev)
	zone := web.ZoneOf(ev)
	r := &web.Presale{OpensAt: p.RegistrationOpensAt.In(zone), ClosesAt: p.RegistrationClosesAt.In(zone)}
	m := &web.Model{Lang: lang, Event: viewOf(ev, s.settingsFor(ev), stateOpen, -1, s.now()), Presale: r, Available: -1,
		Links: web.LinksOf(ev.ID, 0, true)}
	switch name {
	case "registration":
		r.Status, r.Open = "none", true
	case "registration_closed":
		r.Status = "signed-out"
	case "registered":
		r.Status, r.ID, r.Open = presale.Registered, "1.preview", true
	case "selected":
		o, cl := p.OpensAt.In(zone), p.OpensAt.Add(p.Window).In(zone)
		r.Status, r.ID, r.Rank, r.WindowOpensAt, r.WindowClosesAt = presale.Selected, "1.preview", 1, &o, &cl
	case "waitlisted":
		r.Status, r.ID, r.Rank = presale.Waitlisted, "2.preview", int64(p.Selected)+1
	case "not_selected":
		r.Status, r.ID = presale.NotSelected, "3.preview"
	}
	return m
}

// page: GET /admin, the operators' page. It carries no data and no
// token: the operator types the token in, the page keeps it in the tab's
// sessionStorage and calls the API above with it (the previews too: it
// puts each into a sandboxed frame of its own, scripts off).
func (s *operatorsPage) page(c *fiber.Ctx) error {
	if !s.config().Auth.OperatorsOn() {
		return errNotFound
	}
	var buf bytes.Buffer
	if err := s.renderAdmin(&buf); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentSecurityPolicy, csp)
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Type("html", "utf-8")
	return c.Send(buf.Bytes())
}

// renderAdmin writes the operators' page with the frames of its previews,
// one per state and language; a presale's states are shown for the events
// with a presale.
func (s *operatorsPage) renderAdmin(w io.Writer) error {
	a := web.Admin{PreviewStates: PreviewStates, PresaleStates: PresalePreviewStates, Languages: web.Languages}
	for _, ev := range s.config().Events {
		if ev.Presale != nil {
			a.PresaleEvents = append(a.PresaleEvents, ev.ID)
		}
	}
	return s.views.pages.RenderAdmin(w, a)
}

// previewOf is the preview of state name: the event as the page shows it
// then, the line's answer for a made-up fan, and the place that fan
// started at.
func previewOf(ev *config.Event, set line.Settings, name string, now time.Time) (*web.Event, line.Status, int64) {
	far := farPlace(set.AdmitPerSecond)
	places := placesOf(ev)
	waitingAt := func(pos int64, eta bool) line.Status {
		p := line.Position{Position: pos, Ahead: pos - 1, Available: &places}
		if r := set.AdmitPerSecond; eta && r > 0 {
			// As the line tells a fan (queue's position): its place over the rate.
			d := time.Duration(float64(pos) / r * float64(time.Second)).Round(time.Millisecond)
			p.ETA = &d
		}
		return line.Status{State: line.Waiting, Position: p}
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
		return view(stateOpen), line.Status{State: line.Admitted}, far
	case "soldout":
		return view(stateSoldOut), line.Status{State: line.SoldOut}, far
	}
	return view(stateClosed), line.Status{State: line.Closed}, far
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
