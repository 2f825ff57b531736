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
	"github.com/waitroom/waitroom/internal/queue"
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
	"invalid_return": true,                                                                                          // a way back to a site this event does not guard (forwardauth.go)
	"not_invited":    true, "window_not_open": true, "code_required": true, "invalid_code": true, "code_used": true, // presale.go
	"away_failed": true, "away_limited": true, // away.go
}

func (s *Server) pageRoutes() {
	files := web.FS()
	s.app.Get("/", lineBudget, s.page(s.indexPage))
	s.app.Get("/e/:event", lineBudget, s.page(s.roomPage))
	s.app.Get("/e/:event/book", lineBudget, s.page(s.bookPage))
	s.app.Get("/e/:event/leave", lineBudget, s.page(s.leavePage))
	s.app.Get("/e/:event/report", lineBudget, s.page(s.reportPage))
	s.app.Get("/e/:event/qr.svg", s.qrCode)
	s.app.Post("/e/:event/join", lineBudget, s.joinForm)
	s.app.Post("/e/:event/leave", lineBudget, s.leaveForm)
	s.app.Post("/e/:event/away", lineBudget, s.awayForm)
	s.app.Post("/e/:event/move", s.moveForm)
	s.app.Get("/e/:event/register", lineBudget, s.page(s.registerPage))
	s.app.Post("/e/:event/register", lineBudget, s.registerForm)
	s.app.Get("/static/+", func(c *fiber.Ctx) error {
		name := path.Clean(c.Params("+"))
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return errNotFound
		}
		if t := mime.TypeByExtension(path.Ext(name)); t != "" {
			c.Set(fiber.HeaderContentType, t)
		}
		c.Set(fiber.HeaderCacheControl, "public, max-age=300")
		return c.Send(b)
	})
}

type pageHandler func(c *fiber.Ctx, l *web.Locale) error

// page runs a page handler in the fan's language. ?lang=xx switches
// language: it is kept in wr_lang and the fan is sent back to the same page
// without it, so that every link and refresh after that speaks it.
func (s *Server) page(h pageHandler) fiber.Handler {
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

// render writes a page under the CSP, in l's language. A page is
// revalidated (no-cache) unless its handler said no-store already: every
// page that carries a ticket or a pass, or is the fan's own (noStore).
func (s *Server) render(c *fiber.Ctx, status int, name string, l *web.Locale, p *web.Page) error {
	p.L = l
	p.Currency = s.config().Booking.Currency
	for _, lang := range web.Languages {
		p.Langs = append(p.Langs, web.LangLink{Code: lang.Code, Name: lang.Name, Href: pathWith(c, "lang", lang.Code), Current: lang.Code == l.Lang})
	}
	var buf bytes.Buffer
	if err := s.pages.Render(&buf, name, p); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentSecurityPolicy, csp)
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	if len(c.Response().Header.Peek(fiber.HeaderCacheControl)) == 0 {
		c.Set(fiber.HeaderCacheControl, "no-cache")
	}
	c.Set(fiber.HeaderVary, "Accept-Language, Cookie")
	c.Set(fiber.HeaderContentLanguage, l.Lang)
	c.Type("html", "utf-8")
	return c.Status(status).Send(buf.Bytes())
}

// pageEvent finds the route's event, or renders the page that says it is not there.
func (s *Server) pageEvent(c *fiber.Ctx, l *web.Locale) (*config.Event, error) {
	ev, err := s.event(c)
	if err != nil {
		return nil, s.render(c, fiber.StatusNotFound, web.NotFoundPage, l, &web.Page{Title: l.T("notfound.title")})
	}
	return ev, nil
}

// eventView is an event as the pages show it, with the line's figures when
// Redis answers (a page renders without them when it does not).
func (s *Server) eventView(ctx context.Context, ev *config.Event) *web.Event {
	now := s.now()
	set := s.settingsFor(ev)
	var inv queue.Inventory
	waiting := int64(-1)
	if counts, err := s.line.Counts(ctx, ev.ID); err == nil {
		inv, waiting = counts.Inventory, counts.Waiting
	}
	return viewOf(ev, set, state(set, inv, now), waiting, now)
}

// viewOf is ev as the pages show it in state st (the state route's word),
// with waiting fans in line (-1: unknown). The live pages and the
// operators' previews both draw the event with it.
func viewOf(ev *config.Event, set queue.Settings, st string, waiting int64, now time.Time) *web.Event {
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
func (s *Server) indexPage(c *fiber.Ctx, l *web.Locale) error {
	cfg := s.config()
	p := &web.Page{Title: l.T("index.pageTitle"), Script: "index.js"}
	for i := range cfg.Events {
		p.Events = append(p.Events, *s.eventView(c.UserContext(), &cfg.Events[i]))
	}
	return s.render(c, fiber.StatusOK, web.IndexPage, l, p)
}

// bookPage: GET /e/:event/book — the page; the seat map is the script's.
func (s *Server) bookPage(c *fiber.Ctx, l *web.Locale) error {
	ev, err := s.pageEvent(c, l)
	if ev == nil {
		return err
	}
	noStore(c)
	return s.render(c, fiber.StatusOK, web.BookPage, l, &web.Page{
		Title: l.T("book.pageTitle", "event", ev.Name), Script: "book.js", Event: s.eventView(c.UserContext(), ev),
	})
}

// leavePage: GET /e/:event/leave — "Leave the line? You will lose your
// place", for fans without JavaScript (the script asks in a dialog).
func (s *Server) leavePage(c *fiber.Ctx, l *web.Locale) error {
	ev, err := s.pageEvent(c, l)
	if ev == nil {
		return err
	}
	if s.ticketCookie(c, ev) == "" {
		return c.Redirect("/e/"+ev.ID, fiber.StatusSeeOther)
	}
	noStore(c)
	return s.render(c, fiber.StatusOK, web.LeavePage, l, &web.Page{Title: l.T("leave.question"), Event: s.eventView(c.UserContext(), ev)})
}

// ticketCookie is the fan's ticket of ev from its cookie, "" when there is
// none or it is not an authentic ticket of ev.
func (s *Server) ticketCookie(c *fiber.Ctx, ev *config.Event) string {
	t := c.Cookies(ticketCookie + ev.ID)
	if t == "" || s.line.CheckTicket(ev.ID, t) != nil {
		return ""
	}
	return utils.CopyString(t)
}

// roomPage: GET /e/:event — the waiting room. With the fan's ticket cookie
// it asks the line where the fan stands (a poll, as the script's) and
// renders it, refreshing itself at pollAfter, so that it works without
// JavaScript. ?t=<ticket> is a place carried from another device: it takes
// that place over here (takeOver).
func (s *Server) roomPage(c *fiber.Ctx, l *web.Locale) error {
	ev, err := s.pageEvent(c, l)
	if ev == nil {
		return err
	}
	from, _ := strconv.ParseInt(c.Query("from"), 10, 64)
	if t := c.Query("t"); t != "" {
		return s.takeOver(c, l, ev, t, from)
	}
	view := s.eventView(c.UserContext(), ev)
	// A proof of work needs the page's script: without it the page says so
	// instead of offering a form that cannot pay it.
	room := &web.Room{Status: "none", Hint: "none", NeedsScript: ev.Admission.JoinProofBits > 0,
		NeedsCode: ev.Admission.CodesRequired(), Presale: ev.Presale != nil}
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
	p := &web.Page{Title: l.T("room.pageTitle", "event", ev.Name), Script: "room.js", Event: view, Room: room}
	if r := c.Query("return"); r != "" {
		// The way back to the site behind the room that sent the fan here:
		// the join carries it, or it is kept with the live ticket at once.
		if room.Return, err = s.wayBack(ev, r); err != nil {
			room.Notice = "invalid_return"
			noStore(c)
			return s.render(c, fiber.StatusBadRequest, web.RoomPage, l, p)
		}
	}
	ticket := s.ticketCookie(c, ev)
	if ticket != "" && c.Query("away") != "" {
		// Just stepped away (awayForm): the page says what happens next,
		// and neither polls nor refreshes (a poll would claim a place let
		// in meanwhile: the emailed link is the fan's way back).
		if room.Away = s.awayOffer(c, ev); room.Away != nil {
			room.Status, room.Hint = "away", "away"
			noStore(c)
			return s.render(c, fiber.StatusOK, web.RoomPage, l, p)
		}
	}
	if ticket != "" {
		if room.Return != "" {
			s.keepReturn(c, ev, ticket, room.Return)
		}
		st, err := s.line.Status(c.UserContext(), ev.ID, ticket, s.settingsFor(ev))
		switch {
		case errors.Is(err, queue.ErrInvalidTicket):
		case err != nil:
			s.log.Warn("room page: status", "event", ev.ID, "err", err)
			room.Status, room.Notice, room.Refresh = "error", "error", 5
		default:
			roomOf(room, st, from)
			switch st.State {
			case queue.Waiting:
				room.Away = s.awayOffer(c, ev)
				share := "/e/" + ev.ID + "?t=" + url.QueryEscape(ticket) + "&from=" + strconv.FormatInt(room.From, 10)
				room.ShareURL = s.publicURL(c) + share
				room.QRURL = "/e/" + ev.ID + "/qr.svg?from=" + strconv.FormatInt(room.From, 10)
			case queue.Admitted:
				s.observeAdmission(ev, st)
				out, err := s.grant(c, ev, "", st.ID, st.Account, st.ActiveUntil)
				if err != nil {
					return err
				}
				if out.ReturnURL != "" {
					// Back to the site behind the room, with its token.
					noStore(c)
					return c.Redirect(out.ReturnURL, fiber.StatusSeeOther)
				}
				p.Title = l.T("room.turnTitle", "event", ev.Name)
			case queue.SoldOut:
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
	if room.Refresh > 0 {
		to := "/e/" + ev.ID
		if room.From > 0 {
			to += "?from=" + strconv.FormatInt(room.From, 10)
		}
		p.Refresh = strconv.FormatInt(room.Refresh, 10) + "; url=" + to
	}
	noStore(c)
	return s.render(c, fiber.StatusOK, web.RoomPage, l, p)
}

// roomOf shows in room where the fan stands, as the line answered for its
// ticket (from: the place the fan started at, for the progress bar). The
// live room page and the operators' previews both fill the page with it.
func roomOf(room *web.Room, st queue.Status, from int64) {
	switch st.State {
	case queue.Waiting:
		room.Status, room.Hint = "waiting", "waiting"
		if st.Position.Position == 1 {
			room.Status = "next"
		}
		w := waiting("", st.Position)
		room.Position, room.Ahead, room.ETA, room.Available = w.Position, w.Ahead, w.ETASeconds, w.Available
		room.From = max(from, w.Position)
		room.Refresh = max(1, (w.PollAfterMs+999)/1000)
	case queue.Admitted:
		room.Status, room.Hint = "admitted", "admitted"
	case queue.SoldOut:
		room.Status, room.Hint, room.Notice = "soldout", "soldout", "sold_out"
	default: // Expired, Closed
		room.Status, room.Hint = string(st.State), "ended"
	}
}

// takeOver: GET /e/:event?t=<ticket>, a place carried here from another
// device (the share link, its QR code). It moves at once, the ticket's
// cookie set and the fan sent on to the room, unless the link comes from
// another site (sameSite) while this browser holds a live place of the
// event: a link or a redirect from anywhere must not swap the fan's place
// for another. Then nothing changes and the fan is asked, in their
// language, whether to replace place N with place M; the answer is a
// same-site form post (moveForm). When the line cannot say whether the
// fan's place is live, the fan is asked.
func (s *Server) takeOver(c *fiber.Ctx, l *web.Locale, ev *config.Event, t string, from int64) error {
	noStore(c)
	if s.line.CheckTicket(ev.ID, t) != nil {
		return c.Redirect("/e/"+ev.ID+"?e=invalid_link", fiber.StatusSeeOther)
	}
	t = utils.CopyString(t)
	if s.sameSite(c) {
		return s.moveTo(c, ev, t, from)
	}
	mine := s.ticketCookie(c, ev)
	if mine == "" || mine == t {
		return s.moveTo(c, ev, t, from)
	}
	ctx, set := c.UserContext(), s.settingsFor(ev)
	st, err := s.line.Status(ctx, ev.ID, mine, set)
	if err == nil && st.State != queue.Waiting && st.State != queue.Admitted {
		return s.moveTo(c, ev, t, from) // nothing left to lose
	}
	if err != nil {
		s.log.Warn("takeover: the fan's own place", "event", ev.ID, "err", err)
	}
	m := &web.Move{Ticket: t, From: from}
	if err == nil && st.State == queue.Waiting {
		m.Mine = st.Position.Position
	}
	if theirs, err := s.line.Status(ctx, ev.ID, t, set); err == nil && theirs.State == queue.Waiting {
		m.Theirs = theirs.Position.Position
	}
	return s.render(c, fiber.StatusOK, web.MovePage, l, &web.Page{
		Title: l.T("move.pageTitle", "event", ev.Name), Event: s.eventView(ctx, ev), Move: m,
	})
}

// moveTo makes ticket the fan's place of ev here (its cookie) and sends the
// fan on to the room, which says the place moved.
func (s *Server) moveTo(c *fiber.Ctx, ev *config.Event, ticket string, from int64) error {
	noStore(c)
	s.setTicketCookie(c, ev, ticket, s.settingsFor(ev))
	to := "/e/" + ev.ID + "?moved=1"
	if from > 0 {
		to += "&from=" + strconv.FormatInt(from, 10)
	}
	return c.Redirect(to, fiber.StatusSeeOther)
}

// formEvent is the event of a form post of this site; another site's is
// refused (403), as a fan's own forms never come from elsewhere.
func (s *Server) formEvent(c *fiber.Ctx) (*config.Event, error) {
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
// takeOver: the place of form field t replaces the fan's here. Another
// site's form post is refused, as the join and leave forms refuse it.
func (s *Server) moveForm(c *fiber.Ctx) error {
	ev, err := s.formEvent(c)
	if err != nil {
		return err
	}
	t := c.FormValue("t")
	if t == "" || s.line.CheckTicket(ev.ID, t) != nil {
		return c.Redirect("/e/"+ev.ID+"?e=invalid_link", fiber.StatusSeeOther)
	}
	from, _ := strconv.ParseInt(c.FormValue("from"), 10, 64)
	return s.moveTo(c, ev, utils.CopyString(t), from)
}

// joinForm: POST /e/:event/join — joining without JavaScript. It is the
// join of the API, answered with a redirect (303): to the booking page when
// admitted at once, else to the waiting room, which shows the place.
func (s *Server) joinForm(c *fiber.Ctx) error {
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
	case out.Status == string(queue.Admitted) && out.ReturnURL != "":
		return c.Redirect(out.ReturnURL, fiber.StatusSeeOther)
	case out.Status == string(queue.Admitted):
		return c.Redirect(room+"/book", fiber.StatusSeeOther)
	}
	return c.Redirect(room+"?from="+strconv.FormatInt(out.Position, 10), fiber.StatusSeeOther)
}

// leaveForm: POST /e/:event/leave — leaving without JavaScript, once the
// fan said yes on the leave page.
func (s *Server) leaveForm(c *fiber.Ctx) error {
	ev, err := s.formEvent(c)
	if err != nil {
		return err
	}
	if t := s.ticketCookie(c, ev); t != "" {
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
func (s *Server) qrCode(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	t := s.ticketCookie(c, ev)
	if t == "" {
		return errNotFound
	}
	link := s.publicURL(c) + "/e/" + ev.ID + "?t=" + url.QueryEscape(t)
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
