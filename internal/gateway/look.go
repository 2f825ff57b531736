package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/url"
	"path"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/policy"
)

// The site's own look (DESIGN.md): an event's page folder (page.dir) gives
// its waiting room and register page their own templates, words and
// files. A folder is put in force only once every page it has drew every
// state of the model in every language (checkLook), at start (where a
// folder that does not is the gateway's refusal to start, as a bad config
// is) and at each reload (where it is logged and the event keeps the
// pages it had). A page that still fails on a fan's request is drawn in
// the built-in look instead: never a 500.

// looks is the looks in force, by event id; an event not in it has the
// built-in look.
type looks map[string]*web.Look

// ViewsLine is what drawing a page asks of the line: its figures, shown
// when Redis answers (eventView).
type ViewsLine interface {
	Counts(ctx context.Context, event string) (line.Counts, error)
}

// views draws the pages every feature shows: the built-in pages (the
// index, booking, leaving, moving, the report) and the room and register
// pages in each event's look, in the fan's language, under the CSP; and
// the made-up fans a look is checked against (preview.go).
type views struct {
	*edge
	line  ViewsLine
	pages *web.Pages // the built-in pages, rendered per request
	// builtin is the room's own look of the room and register pages;
	// looks, the events' own, swapped on reload.
	builtin *web.Look
	looks   atomic.Pointer[looks]
}

// lookOf is ev's look in force.
func (s *views) lookOf(ev *config.Event) *web.Look {
	if l, ok := (*s.looks.Load())[ev.ID]; ok {
		return l
	}
	return s.builtin
}

// loadLooks reads the page folders of cfg's events. At start (prev nil) a
// folder refused is an error; at a reload it is logged, counted with the
// config's refused reloads (waitroom_config_reload_errors_total), and the
// event keeps its look of prev.
func (s *views) loadLooks(cfg *config.Config, prev looks) (looks, error) {
	out := looks{}
	for i := range cfg.Events {
		ev := &cfg.Events[i]
		if ev.Page.Dir == "" {
			continue
		}
		l, err := s.loadLook(ev)
		if err == nil {
			out[ev.ID] = l
			continue
		}
		if prev == nil {
			return nil, fmt.Errorf("events[%d].page.dir %q: %w", i, ev.Page.Dir, err)
		}
		metrics.ConfigReloadErrors.Inc()
		s.log.Error("page folder refused; the event's previous pages stay", "event", ev.ID, "dir", ev.Page.Dir, "err", err)
		if p, ok := prev[ev.ID]; ok {
			out[ev.ID] = p
		}
	}
	return out, nil
}

// loadLook reads ev's page folder (web.LoadLook) and checks it.
func (s *views) loadLook(ev *config.Event) (*web.Look, error) {
	l, err := web.LoadLook(ev.Page.Dir)
	if err != nil {
		return nil, err
	}
	if err := s.checkLook(l, ev); err != nil {
		return nil, err
	}
	return l, nil
}

// checkLook draws every page of l for ev in every state of the model and
// every language (a register page only for an event with a presale, the
// one that shows it): the first template error, naming its file and line,
// refuses the look.
func (s *views) checkLook(l *web.Look, ev *config.Event) error {
	for _, lang := range web.Languages {
		for _, st := range web.States {
			if err := l.Render(io.Discard, web.RoomPage, s.lookModel(l, ev, web.RoomPage, s.roomSample(ev, st, lang.Code))); err != nil {
				return fmt.Errorf("%w (state %s, %s)", err, st, lang.Code)
			}
		}
		if ev.Presale == nil {
			continue
		}
		for _, st := range web.RegisterStates {
			if err := l.Render(io.Discard, web.RegisterPage, s.lookModel(l, ev, web.RegisterPage, s.registrationSample(ev, st, lang.Code))); err != nil {
				return fmt.Errorf("%w (state %s, %s)", err, st, lang.Code)
			}
		}
	}
	return nil
}

// lookModel finishes m for page of ev in look l: its title in l's words,
// the currency, the language switcher (to the live page), and its state.
func (s *views) lookModel(l *web.Look, ev *config.Event, page string, m *web.Model) *web.Model {
	loc := l.Locale(m.Lang)
	m.Lang = loc.Lang
	key := "room.pageTitle"
	if page == web.RegisterPage {
		key = "register.pageTitle"
		m.State = web.RegisterStateOf(m.Presale.Status, m.Presale.Open)
	} else {
		if m.Status == string(line.Admitted) {
			key = "room.turnTitle"
		}
		m.State = web.StateOf(m.Event.State, m.Status, m.Notice)
	}
	m.Title = loc.T(key, "event", ev.Name)
	m.Currency = s.config().Booking.Currency
	if m.Langs == nil {
		m.Langs = langLinks(m.Lang, func(code string) string { return "/e/" + ev.ID + "?lang=" + code })
	}
	return m
}

// renderLook writes page of ev drawn from m in ev's look, under the CSP
// as every page. A look whose template fails on m is logged, and the
// built-in look draws the page.
func (s *views) renderLook(c *fiber.Ctx, status int, ev *config.Event, page string, m *web.Model) error {
	if !m.Preview {
		m.Langs = langLinks(m.Lang, func(code string) string { return pathWith(c, "lang", code) })
	}
	look := s.lookOf(ev)
	s.lookModel(look, ev, page, m)
	var buf bytes.Buffer
	if err := look.Render(&buf, page, m); err != nil {
		s.log.Error("page template failed; the built-in page is shown", "event", ev.ID, "file", look.File(page), "state", m.State, "lang", m.Lang, "err", err)
		buf.Reset()
		if err := s.builtin.Render(&buf, page, m); err != nil {
			return err
		}
	}
	return sendPage(c, status, m.Lang, buf.Bytes(), !m.Preview)
}

// newRoom is the room page's model of ev for a fan with no place yet, in
// lang: the event as view shows it.
func newRoom(ev *config.Event, view *web.Event, lang string) *web.Model {
	return &web.Model{Lang: lang, Event: view, Status: "none", Hint: "none", Available: -1,
		NeedsScript: ev.Admission.JoinProofBits > 0, NeedsCode: ev.Admission.CodesRequired(),
		Presale: presaleView(ev, time.Time{}), Links: web.LinksOf(ev.ID, 0, ev.Presale != nil)}
}

// finishRoom sets m's links once where the fan stands is known (the
// progress bar's zero in them), keeping the share link and QR code.
func finishRoom(m *web.Model, ev *config.Event) {
	share, qr := m.Links.Share, m.Links.QR
	m.Links = web.LinksOf(ev.ID, m.From, ev.Presale != nil)
	m.Links.Share, m.Links.QR = share, qr
}

// presaleView is ev's presale as the pages show it (nil: none), its
// registration open or not at now (zero: not said, on the room page).
func presaleView(ev *config.Event, now time.Time) *web.Presale {
	if ev.Presale == nil {
		return nil
	}
	p := policy.PlanFor(*ev)
	zone := web.ZoneOf(ev)
	return &web.Presale{OpensAt: p.RegistrationOpensAt.In(zone), ClosesAt: p.RegistrationClosesAt.In(zone),
		Open: !now.IsZero() && !now.Before(p.RegistrationOpensAt) && now.Before(p.RegistrationClosesAt)}
}

// asset: GET /e/:event/assets/* — the event's site's own files (DESIGN.md,
// "The site's own look"), from its page folder's assets/, for five
// minutes in any cache. Anything else is 404: an event without a folder,
// a folder, a name that leaves assets/ (.., an encoded one, a symbolic
// link pointing out).
func (s *views) asset(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	dir := s.lookOf(ev).Dir()
	name, err := url.PathUnescape(c.Params("+"))
	if dir == "" || err != nil {
		return errNotFound
	}
	b, err := web.ReadAsset(dir, name)
	if err != nil {
		return errNotFound
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		c.Set(fiber.HeaderContentType, t)
	} else {
		c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	}
	// An SVG opened by itself is a document: it runs nothing either.
	c.Set(fiber.HeaderContentSecurityPolicy, csp)
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.Send(b)
}
