package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"mime"
	"net/url"
	"path"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/line"
)

// csp allows nothing but the gateway itself: the pages carry no inline
// script or style and load nothing from elsewhere.
const csp = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// langCookie keeps the language a fan chose (DESIGN.md: wr_lang).
const langCookie = "wr_lang"

// notices are the ?e= codes the room page explains: what a form post to
// join ended with, or a takeover link that did not work.
var notices = map[string]bool{
	"rate_limited": true, "not_open": true, "event_closed": true, "sold_out": true, "invalid_link": true, "error": true,
	"proof_required":   true,                          // a sale that asks a proof of work, joined by a form that cannot pay it
	"account_required": true, "invalid_account": true, // accounts.go
	"invalid_return": true,                                                                                                                   // a way back to a site this event does not guard (forwardauth.go)
	"not_invited":    true, "invitation_used": true, "window_not_open": true, "code_required": true, "invalid_code": true, "code_used": true, // presale.go
	"away_failed": true, "away_limited": true, // away.go
}

// serveFiles serves the embedded files of fsys, each for five minutes in
// any cache (they change only with the gateway).
func serveFiles(fsys fs.FS) fiber.Handler {
	return func(c *fiber.Ctx) error {
		name := path.Clean(c.Params("+"))
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return errNotFound
		}
		switch ext := path.Ext(name); {
		case ext == ".ts":
			// Not the MPEG stream some systems' mime tables say.
			c.Set(fiber.HeaderContentType, "application/typescript; charset=utf-8")
		case mime.TypeByExtension(ext) != "":
			c.Set(fiber.HeaderContentType, mime.TypeByExtension(ext))
		}
		c.Set(fiber.HeaderCacheControl, "public, max-age=300")
		return c.Send(b)
	}
}

// PagesLine is what the fans' pages ask of the line: leaving, by the
// leave page's form.
type PagesLine interface {
	Leave(ctx context.Context, event string, ticket line.Ticket) error
}

// pages are the fans' pages but the room: the index, booking, leaving,
// the join form (the queue API's join, answered with a redirect) and the
// place's QR code.
type pages struct {
	*edge
	line  PagesLine
	views *views
	join  fiber.Handler // the queue API's join (queueAPI.join)
}

// RoomLine is what the waiting room asks of the line: where a place
// stands, and the way back kept with it.
type RoomLine interface {
	Status(ctx context.Context, event string, ticket line.Ticket, set line.Settings) (line.Status, error)
	Return(ctx context.Context, event, id string) (string, error)
}

// room is the waiting room page: where the fan stands (without
// JavaScript too), a place carried from another device, a way back asked
// for (each changed only with the fan's consent).
type room struct {
	*edge
	line    RoomLine
	views   *views
	queue   *queueAPI // the pass of a place let in, the ticket's cookie
	returns *returns  // the way back
	away    *awayAPI  // what the page offers of stepping away
}

type pageHandler func(c *fiber.Ctx, l *web.Locale) error

// page runs a page handler in the fan's language. ?lang=xx switches
// language: it is kept in wr_lang and the fan is sent back to the same page
// without it, so that every link and refresh after that speaks it.
func (s *views) page(h pageHandler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if q := c.Query("lang"); q != "" {
			if web.Supported(q) {
				c.Cookie(&fiber.Cookie{Name: langCookie, Value: q, Path: "/", Expires: s.now().AddDate(1, 0, 0),
					SameSite: fiber.CookieSameSiteLaxMode, Secure: s.secure(c)})
			}
			return c.Redirect(pathWith(c, "lang", ""), fiber.StatusSeeOther)
		}
		return h(c, web.LocaleFor(web.Negotiate(c.Cookies(langCookie), c.Get(fiber.HeaderAcceptLanguage))))
	}
}

// langLinks is the language switcher of a page in lang: every language,
// each linked at href(its code).
func langLinks(lang string, href func(code string) string) []web.LangLink {
	links := make([]web.LangLink, 0, len(web.Languages))
	for _, lg := range web.Languages {
		links = append(links, web.LangLink{Code: lg.Code, Name: lg.Name, Href: href(lg.Code), Current: lg.Code == lang})
	}
	return links
}

// pathWith is the request's path and query with key set to value ("" drops it).
func pathWith(c *fiber.Ctx, key, value string) string {
	q, _ := url.ParseQuery(string(c.Request().URI().QueryString()))
	q.Del("t") // a takeover link's ticket never travels further
	if value == "" {
		q.Del(key)
	} else {
		q.Set(key, value)
	}
	if len(q) == 0 {
		return c.Path()
	}
	return c.Path() + "?" + q.Encode()
}

// render writes a page in l's language (sendPage).
func (s *views) render(c *fiber.Ctx, status int, name string, l *web.Locale, p *web.Page) error {
	p.L = l
	p.Currency = s.config().Booking.Currency
	p.Langs = langLinks(l.Lang, func(code string) string { return pathWith(c, "lang", code) })
	var buf bytes.Buffer
	if err := s.pages.Render(&buf, name, p); err != nil {
		return err
	}
	return sendPage(c, status, l.Lang, buf.Bytes(), true)
}

// sendPage answers a fans' page, html in lang, under the CSP and never
// framed. A live page (not an operators' preview) is revalidated
// (no-cache) unless its handler said no-store already (every page that
// carries a ticket or a pass, or is the fan's own: noStore), and varies by
// the fan's language and cookies.
func sendPage(c *fiber.Ctx, status int, lang string, html []byte, live bool) error {
	c.Set(fiber.HeaderContentSecurityPolicy, csp)
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	if live {
		if len(c.Response().Header.Peek(fiber.HeaderCacheControl)) == 0 {
			c.Set(fiber.HeaderCacheControl, "no-cache")
		}
		c.Set(fiber.HeaderVary, "Accept-Language, Cookie")
	}
	c.Set(fiber.HeaderContentLanguage, lang)
	c.Type("html", "utf-8")
	return c.Status(status).Send(html)
}

// pageEvent finds the route's event, or renders the page that says it is not there.
func (s *views) pageEvent(c *fiber.Ctx, l *web.Locale) (*config.Event, error) {
	ev, err := s.event(c)
	if err != nil {
		return nil, s.render(c, fiber.StatusNotFound, web.NotFoundPage, l, &web.Page{Title: l.T("notfound.title")})
	}
	return ev, nil
}

// eventView is an event as the pages show it, with the line's figures when
// Redis answers (a page renders without them when it does not).
func (s *views) eventView(ctx context.Context, ev *config.Event) *web.Event {
	now := s.now()
	set := s.settingsFor(ev)
	var inv line.Inventory
	waiting := int64(-1)
	if counts, err := s.line.Counts(ctx, ev.ID); err == nil {
		inv, waiting = counts.Inventory, counts.Waiting
	}
	return viewOf(ev, set, state(set, inv, now), waiting, now)
}

// viewOf is ev as the pages show it in state st (the state route's word),
// with waiting fans in line (-1: unknown). The live pages and the
// operators' previews both draw the event with it.
func viewOf(ev *config.Event, set line.Settings, st string, waiting int64, now time.Time) *web.Event {
	v := web.EventOf(ev, now)
	v.State, v.Waiting = st, waiting
	zone := web.ZoneOf(ev)
	switch v.State {
	case statePrequeue:
		if set.OpensAt != nil {
			v.Detail = &web.Detail{Key: "index.detail.prequeue", At: set.OpensAt.In(zone)}
			v.RoomDetail = &web.Detail{Key: "room.detail.prequeue", At: set.OpensAt.In(zone)}
		} else {
			v.Detail = &web.Detail{Key: "index.detail.prequeueSoon"}
			v.RoomDetail = &web.Detail{Key: "room.detail.prequeueSoon"}
		}
	case statePaused, stateClosed, statePassthrough, stateSoldOut:
		v.Detail = &web.Detail{Key: "index.detail." + v.State}
		v.RoomDetail = &web.Detail{Key: "room.detail." + v.State}
	}
	return v
}

// indexPage: GET / — every event, rendered by the server.
func (s *pages) indexPage(c *fiber.Ctx, l *web.Locale) error {
	cfg := s.config()
	p := &web.Page{Title: l.T("index.pageTitle"), Script: "index.js"}
	for i := range cfg.Events {
		p.Events = append(p.Events, *s.views.eventView(c.UserContext(), &cfg.Events[i]))
	}
	return s.views.render(c, fiber.StatusOK, web.IndexPage, l, p)
}

// bookPage: GET /e/:event/book — the page; the seat map is the script's.
func (s *pages) bookPage(c *fiber.Ctx, l *web.Locale) error {
	ev, err := s.views.pageEvent(c, l)
	if ev == nil {
		return err
	}
	noStore(c)
	return s.views.render(c, fiber.StatusOK, web.BookPage, l, &web.Page{
		Title: l.T("book.pageTitle", "event", ev.Name), Script: "book.js", Event: s.views.eventView(c.UserContext(), ev),
	})
}

// leavePage: GET /e/:event/leave — "Leave the line? You will lose your
// place", for fans without JavaScript (the script asks in a dialog).
func (s *pages) leavePage(c *fiber.Ctx, l *web.Locale) error {
	ev, err := s.views.pageEvent(c, l)
	if ev == nil {
		return err
	}
	if s.ticketCookie(c, ev).IsZero() {
		return c.Redirect("/e/"+ev.ID, fiber.StatusSeeOther)
	}
	noStore(c)
	return s.views.render(c, fiber.StatusOK, web.LeavePage, l, &web.Page{Title: l.T("leave.question"), Event: s.views.eventView(c.UserContext(), ev)})
}

// ticketCookie is the fan's ticket of ev from its cookie, checked here
// (once: the line takes it parsed); the zero Ticket when there is none or
// it is not an authentic ticket of ev.
func (s *edge) ticketCookie(c *fiber.Ctx, ev *config.Event) line.Ticket {
	return s.ticketFrom(ev, c.Cookies(ticketCookie+ev.ID))
}

// ticketFrom is str (a cookie's, a link's, a form's: the fan's word)
// checked as a ticket of ev, copied out of the request; the zero Ticket
// when it is empty or not an authentic ticket of ev.
func (s *edge) ticketFrom(ev *config.Event, str string) line.Ticket {
	if str == "" {
		return line.Ticket{}
	}
	t, err := s.tickets.Parse(ev.ID, utils.CopyString(str))
	if err != nil {
		return line.Ticket{}
	}
	return t
}

// roomPage: GET /e/:event — the waiting room. With the fan's ticket cookie
// it asks the line where the fan stands (a poll, as the script's) and
// renders it, refreshing itself at pollAfter, so that it works without
// JavaScript. ?t=<ticket> is a place carried from another device: it takes
// that place over here (takeOver).
func (s *room) roomPage(c *fiber.Ctx, l *web.Locale) error {
	ev, err := s.views.pageEvent(c, l)
	if ev == nil {
		return err
	}
	from, _ := strconv.ParseInt(c.Query("from"), 10, 64)
	if t := c.Query("t"); t != "" {
		return s.takeOver(c, l, ev, t, from)
	}
	view := s.views.eventView(c.UserContext(), ev)
	// A proof of work needs the page's script: without it the page says so
	// instead of offering a form that cannot pay it.
	room := newRoom(ev, view, l.Lang)
	if n := c.Query("e"); notices[n] && !(n == "proof_required" && room.NeedsScript) {
		// (Where the sale asks a proof, the page says it needs JavaScript anyway.)
		room.Notice = n
	}
	if c.Query("left") != "" {
		room.Status, room.Hint = "left", "left"
	}
	// room.js drops the ticket it kept for the one a move set as the
	// cookie, only after a move made from this site (moveTo's redirect): a
	// link to ?moved=1 from elsewhere must not make it forget the fan's.
	room.Moved = c.Query("moved") != "" && s.sameSite(c)
	if r := c.Query("return"); r != "" {
		// The way back to the site behind the room that sent the fan here:
		// the join carries it, or it is kept with the live ticket at once
		// (asked first when it would replace another: askWayBack).
		if room.Return, err = s.returns.wayBack(c.UserContext(), ev, r); err != nil {
			if !errors.Is(err, errInvalidReturn) {
				return err
			}
			room.Notice = "invalid_return"
			noStore(c)
			return s.renderRoom(c, fiber.StatusBadRequest, ev, room)
		}
	}
	ticket := s.ticketCookie(c, ev)
	if !ticket.IsZero() && c.Query("away") != "" {
		// Just stepped away (awayForm): the page says what happens next,
		// and neither polls nor refreshes (a poll would claim a place let
		// in meanwhile: the emailed link is the fan's way back).
		if room.Away = s.away.awayOffer(c, ev); room.Away != nil {
			room.Status, room.Hint = "away", "away"
			noStore(c)
			return s.renderRoom(c, fiber.StatusOK, ev, room)
		}
	}
	if !ticket.IsZero() {
		if room.Return != "" {
			if asked, err := s.askWayBack(c, l, ev, ticket, room.Return); asked || err != nil {
				return err
			}
			s.returns.keepReturn(c, ev, ticket.ID(), room.Return)
		}
		st, err := s.line.Status(c.UserContext(), ev.ID, ticket, s.settingsFor(ev))
		switch {
		case errors.Is(err, line.ErrInvalidTicket):
		case err != nil:
			s.log.Warn("room page: status", "event", ev.ID, "err", err)
			room.Status, room.Notice, room.Refresh = "error", "error", 5
		default:
			roomOf(room, st, from)
			switch st.State {
			case line.Waiting:
				room.Away = s.away.awayOffer(c, ev)
				share := "/e/" + ev.ID + "?t=" + url.QueryEscape(ticket.String()) + "&from=" + strconv.FormatInt(room.From, 10)
				room.Links.Share = s.publicURL(c) + share
				room.Links.QR = "/e/" + ev.ID + "/qr.svg?from=" + strconv.FormatInt(room.From, 10)
			case line.Admitted:
				observeAdmission(ev, st, s.now())
				out, err := s.queue.grant(c, ev, "", st.ID, st.Account, st.ActiveUntil)
				if err != nil {
					return err
				}
				if out.ReturnURL != "" {
					// Back to the site behind the room, with its token.
					noStore(c)
					return c.Redirect(out.ReturnURL, fiber.StatusSeeOther)
				}
			case line.SoldOut:
			default: // Expired, Closed
				s.clearCookie(c, accessCookie+ev.ID)
			}
		}
	}
	if room.Waiting() && c.Query("still") != "" {
		// Without JavaScript the refresh is what keeps the place: a fan who
		// cannot bear a page that reloads by itself turns it off and is told
		// to update it at least once a minute (WCAG 2.2.1, "turn off").
		room.Still, room.Refresh = true, 0
	}
	noStore(c)
	return s.renderRoom(c, fiber.StatusOK, ev, room)
}

// renderRoom writes the waiting room of ev drawn from m, its links set
// from where the fan stands (finishRoom).
func (s *room) renderRoom(c *fiber.Ctx, status int, ev *config.Event, m *web.Model) error {
	finishRoom(m, ev)
	return s.views.renderLook(c, status, ev, web.RoomPage, m)
}

// roomOf shows in m where the fan stands, as the line answered for its
// ticket (from: the place the fan started at, for the progress bar). The
// live room page and the operators' previews both fill the page with it.
func roomOf(m *web.Model, st line.Status, from int64) {
	switch st.State {
	case line.Waiting:
		m.Status, m.Hint = "waiting", "waiting"
		if st.Position.Position == 1 {
			m.Status = "next"
		}
		w := waiting("", st.Position)
		m.Position, m.Ahead = w.Position, w.Ahead
		if w.ETASeconds != nil {
			m.ETASeconds = max(1, *w.ETASeconds) // 0 is "unknown"
		}
		if w.Available != nil {
			m.Available = *w.Available
		}
		m.From = max(from, w.Position)
		m.Refresh = max(1, (w.PollAfterMs+999)/1000)
	case line.Admitted:
		m.Status, m.Hint = "admitted", "admitted"
	case line.SoldOut:
		m.Status, m.Hint, m.Notice = "soldout", "soldout", "sold_out"
	default: // Expired, Closed
		m.Status, m.Hint = string(st.State), "ended"
	}
}

// takeOver: GET /e/:event?t=<ticket>, a place carried here from another
// device (the share link, its QR code). It moves at once, the ticket's
// cookie set and the fan sent on to the room, unless the link comes from
// another site while this browser holds a live place of the event
// (overLivePlace): a link or a redirect from anywhere must not swap the
// fan's place for another. Then nothing changes and the fan is asked, in
// their language, whether to replace place N with place M; the answer is
// a same-site form post (moveForm).
func (s *room) takeOver(c *fiber.Ctx, l *web.Locale, ev *config.Event, link string, from int64) error {
	noStore(c)
	t := s.ticketFrom(ev, link)
	if t.IsZero() {
		return c.Redirect("/e/"+ev.ID+"?e=invalid_link", fiber.StatusSeeOther)
	}
	mine := s.ticketCookie(c, ev)
	if mine.String() == t.String() {
		return s.moveTo(c, ev, t, from)
	}
	st, ask := s.overLivePlace(c, ev, mine)
	if !ask {
		return s.moveTo(c, ev, t, from) // nothing to lose
	}
	ctx := c.UserContext()
	m := &web.Move{Ticket: t.String(), From: from}
	if st.State == line.Waiting {
		m.Mine = st.Position.Position
	}
	if theirs, err := s.line.Status(ctx, ev.ID, t, s.settingsFor(ev)); err == nil && theirs.State == line.Waiting {
		m.Theirs = theirs.Position.Position
	}
	return s.views.render(c, fiber.StatusOK, web.MovePage, l, &web.Page{
		Title: l.T("move.pageTitle", "event", ev.Name), Event: s.views.eventView(ctx, ev), Move: m,
	})
}

// overLivePlace reports whether a link of another site (sameSite) meets
// the fan's live place of ev (ticket mine, waiting or admitted): such a
// link changes nothing of that place without the fan's consent (DESIGN.md,
// "A place moves only with its fan's consent" and "The way back changes
// only with consent"). st is the place's status. When the line cannot say
// whether the place is live, the answer is yes: the fan is asked.
func (s *room) overLivePlace(c *fiber.Ctx, ev *config.Event, mine line.Ticket) (st line.Status, ask bool) {
	if mine.IsZero() || s.sameSite(c) {
		return line.Status{}, false
	}
	st, err := s.line.Status(c.UserContext(), ev.ID, mine, s.settingsFor(ev))
	if err != nil {
		s.log.Warn("consent: the fan's own place", "event", ev.ID, "err", err)
		return line.Status{}, true
	}
	return st, st.State == line.Waiting || st.State == line.Admitted
}

// askWayBack: GET /e/:event?return=<ret> over the fan's live place of ev
// (ticket), from another site (overLivePlace), when the place has another
// way back kept: nothing changes and the fan is asked, in their language,
// whether to go back to ret instead; the answer is a same-site form post
// (moveForm). asked reports that the question was answered. A place with
// no way back, or with ret already, has nothing to lose: not asked.
func (s *room) askWayBack(c *fiber.Ctx, l *web.Locale, ev *config.Event, ticket line.Ticket, ret string) (asked bool, err error) {
	st, ask := s.overLivePlace(c, ev, ticket)
	if !ask {
		return false, nil
	}
	ctx := c.UserContext()
	var kept string
	if st.ID != "" {
		if kept, err = s.line.Return(ctx, ev.ID, st.ID); err != nil {
			s.log.Warn("consent: the fan's way back", "event", ev.ID, "err", err)
		} else if kept == "" || kept == ret {
			return false, nil
		}
	}
	noStore(c)
	return true, s.views.render(c, fiber.StatusOK, web.MovePage, l, &web.Page{
		Title: l.T("move.returnPageTitle", "event", ev.Name), Event: s.views.eventView(ctx, ev), Move: &web.Move{Return: ret, Kept: kept},
	})
}

// moveTo makes ticket the fan's place of ev here (its cookie) and sends the
// fan on to the room, which says the place moved.
func (s *room) moveTo(c *fiber.Ctx, ev *config.Event, ticket line.Ticket, from int64) error {
	noStore(c)
	s.queue.setTicketCookie(c, ev, ticket.String(), s.settingsFor(ev))
	to := "/e/" + ev.ID + "?moved=1"
	if from > 0 {
		to += "&from=" + strconv.FormatInt(from, 10)
	}
	return c.Redirect(to, fiber.StatusSeeOther)
}

// formEvent is the event of a form post of this site; another site's is
// refused (403), as a fan's own forms never come from elsewhere.
func (s *edge) formEvent(c *fiber.Ctx) (*config.Event, error) {
	ev, err := s.event(c)
	if err != nil {
		return nil, err
	}
	if !s.sameSite(c) {
		return nil, errCrossSite
	}
	return ev, nil
}

// moveForm: POST /e/:event/move — the fan said yes to the question of
// takeOver (the place of form field t replaces the fan's here) or of
// askWayBack (form field return becomes the way back of the fan's place).
// Another site's form post is refused, as the join and leave forms refuse
// it.
func (s *room) moveForm(c *fiber.Ctx) error {
	ev, err := s.formEvent(c)
	if err != nil {
		return err
	}
	if ret := c.FormValue("return"); ret != "" {
		return s.moveWayBack(c, ev, ret)
	}
	t := s.ticketFrom(ev, c.FormValue("t"))
	if t.IsZero() {
		return c.Redirect("/e/"+ev.ID+"?e=invalid_link", fiber.StatusSeeOther)
	}
	from, _ := strconv.ParseInt(c.FormValue("from"), 10, 64)
	return s.moveTo(c, ev, t, from)
}

// moveWayBack keeps raw, checked as any way back, with the fan's place of
// ev and sends the fan to the room (which sends it on, with a return
// token, once admitted); with no place, to the room's join, which carries
// it.
func (s *room) moveWayBack(c *fiber.Ctx, ev *config.Event, raw string) error {
	noStore(c)
	ret, err := s.returns.wayBack(c.UserContext(), ev, raw)
	switch {
	case errors.Is(err, errInvalidReturn):
		return c.Redirect("/e/"+ev.ID+"?e=invalid_return", fiber.StatusSeeOther)
	case err != nil:
		return err
	}
	if t := s.ticketCookie(c, ev); !t.IsZero() {
		s.returns.keepReturn(c, ev, t.ID(), ret)
		return c.Redirect("/e/"+ev.ID, fiber.StatusSeeOther)
	}
	return c.Redirect("/e/"+ev.ID+"?return="+url.QueryEscape(ret), fiber.StatusSeeOther)
}

// joinForm: POST /e/:event/join — joining without JavaScript. It is the
// join of the API, answered with a redirect (303): to the booking page when
// admitted at once, else to the waiting room, which shows the place.
func (s *pages) joinForm(c *fiber.Ctx) error {
	ev, err := s.formEvent(c)
	if err != nil {
		return err
	}
	room := "/e/" + ev.ID
	if err := s.join(c); err != nil {
		code := "error"
		if ae := toAPI(err); ae != nil && notices[ae.Code] {
			code = ae.Code
		} else if ae == nil {
			s.log.Warn("join form", "event", ev.ID, "err", err)
		}
		c.Response().ResetBody()
		return c.Redirect(room+"?e="+code, fiber.StatusSeeOther)
	}
	var out struct {
		Status    string `json:"status"`
		Position  int64  `json:"position"`
		ReturnURL string `json:"returnUrl"`
	}
	_ = json.Unmarshal(c.Response().Body(), &out)
	c.Response().ResetBody()
	c.Response().Header.SetContentType(fiber.MIMETextPlainCharsetUTF8)
	switch {
	case out.Status == string(line.Admitted) && out.ReturnURL != "":
		return c.Redirect(out.ReturnURL, fiber.StatusSeeOther)
	case out.Status == string(line.Admitted):
		return c.Redirect(room+"/book", fiber.StatusSeeOther)
	}
	return c.Redirect(room+"?from="+strconv.FormatInt(out.Position, 10), fiber.StatusSeeOther)
}

// leaveForm: POST /e/:event/leave — leaving without JavaScript, once the
// fan said yes on the leave page.
func (s *pages) leaveForm(c *fiber.Ctx) error {
	ev, err := s.formEvent(c)
	if err != nil {
		return err
	}
	if t := s.ticketCookie(c, ev); !t.IsZero() {
		if err := s.line.Leave(c.UserContext(), ev.ID, t); err != nil {
			s.log.Warn("leave form", "event", ev.ID, "err", err)
			return c.Redirect("/e/"+ev.ID+"?e=error", fiber.StatusSeeOther)
		}
	}
	s.clearCookie(c, ticketCookie+ev.ID)
	s.clearCookie(c, accessCookie+ev.ID)
	return c.Redirect("/e/"+ev.ID+"?left=1", fiber.StatusSeeOther)
}

// qrCode: GET /e/:event/qr.svg — the fan's place as a QR code of
// /e/{event}?t=<ticket>, for the phone camera of another device.
func (s *pages) qrCode(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	t := s.ticketCookie(c, ev)
	if t.IsZero() {
		return errNotFound
	}
	link := s.publicURL(c) + "/e/" + ev.ID + "?t=" + url.QueryEscape(t.String())
	if from, err := strconv.ParseInt(c.Query("from"), 10, 64); err == nil && from > 0 {
		link += "&from=" + strconv.FormatInt(from, 10)
	}
	svg, err := qrSVG(link)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "image/svg+xml")
	noStore(c)
	return c.Send(svg)
}
