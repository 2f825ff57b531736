package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/presale"
)

// The presale's routes (DESIGN.md "Presale"): registration by account, the
// selection anyone can check, and the operators' access codes. The join's
// gate and the codes' spending are the line's (its join script).

// Presale is what the gateway needs of the presale (package presale
// implements it): the parts below together, as New takes it.
type Presale interface {
	PresaleRegistrations
	PresaleCodes
	TransparencyPresale
}

// PresaleRegistrations is what the presale's routes ask of it:
// registration by account, the selection, the registrants' addresses.
type PresaleRegistrations interface {
	Register(ctx context.Context, event string, p presale.Plan, account string) (string, bool, error)
	Withdraw(ctx context.Context, event string, p presale.Plan, account string) error
	Status(ctx context.Context, event string, p presale.Plan, account string) (presale.Registration, error)
	Selection(ctx context.Context, event string, p presale.Plan) (line.Draw, error)
	Entries(ctx context.Context, event string, w io.Writer) error
	Remember(ctx context.Context, event, account, email, lang string) error
}

// PresaleCodes is what the access codes ask of the presale: a join's
// code as the line looks it up, and the operators' codes.
type PresaleCodes interface {
	CodeHash(event, code string) string
	NewCodes(ctx context.Context, event string, count, uses int) ([]string, error)
	AddCodes(ctx context.Context, event string, codes []string, uses int) error
	CodeCounts(ctx context.Context, event string) (presale.CodeCounts, error)
}

// presaleAPI is the presale's routes and its register page.
type presaleAPI struct {
	*edge
	presale PresaleRegistrations // nil: no presale (404 no_presale)
	lists   *publishedLists      // the selection, once drawn (transparency.go)
	views   *views
}

// accessCodes is the access codes: the code a join brings, and the
// operators' routes that add and count them.
type accessCodes struct {
	*edge
	presale PresaleCodes // nil: no presale's part (404 no_presale; joins bring no code)
	audit   Auditor
}

// codeHeader carries a join's access code (or form field "code").
const codeHeader = "X-Waitroom-Code"

// presaleEvent is the event of the request and its plan; 404 no_presale
// for an event without one.
func (s *presaleAPI) presaleEvent(c *fiber.Ctx) (*config.Event, presale.Plan, error) {
	ev, err := s.event(c)
	if err != nil {
		return nil, presale.Plan{}, err
	}
	if ev.Presale == nil || s.presale == nil {
		return nil, presale.Plan{}, errNoPresale
	}
	return ev, policy.PlanFor(*ev), nil
}

// registrant is the presale's event, plan and the request's account: 401
// account_required without one.
func (s *presaleAPI) registrant(c *fiber.Ctx) (*config.Event, presale.Plan, string, error) {
	ev, p, err := s.presaleEvent(c)
	if err != nil {
		return nil, p, "", err
	}
	acct, err := s.accountOf(c, ev)
	if err == nil && acct == "" {
		err = errAccountRequired
	}
	return ev, p, acct, err
}

type registrationJSON struct {
	RegistrationID string     `json:"registrationId"`
	Status         string     `json:"status"`
	Rank           *int64     `json:"rank"`
	WindowOpensAt  *time.Time `json:"windowOpensAt"`
	WindowClosesAt *time.Time `json:"windowClosesAt"`
}

func registrationView(r presale.Registration) registrationJSON {
	out := registrationJSON{RegistrationID: r.ID, Status: r.Status}
	if r.Rank > 0 {
		out.Rank = &r.Rank
	}
	if r.WindowOpensAt != nil {
		o, c := r.WindowOpensAt.UTC(), r.WindowClosesAt.UTC()
		out.WindowOpensAt, out.WindowClosesAt = &o, &c
	}
	return out
}

// register: POST /api/v1/events/:event/registrations — 201 the first time,
// 200 with the same id after.
func (s *presaleAPI) register(c *fiber.Ctx) error {
	ev, p, acct, err := s.registrant(c)
	if err != nil {
		return err
	}
	id, created, err := s.presale.Register(c.UserContext(), ev.ID, p, acct)
	if err != nil {
		return err
	}
	s.rememberContact(c, ev, acct)
	noStore(c)
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(fiber.Map{"registrationId": id, "status": presale.Registered})
}

// registration: GET /api/v1/events/:event/registrations/me
func (s *presaleAPI) registration(c *fiber.Ctx) error {
	ev, p, acct, err := s.registrant(c)
	if err != nil {
		return err
	}
	r, err := s.presale.Status(c.UserContext(), ev.ID, p, acct)
	if err != nil {
		return err
	}
	noStore(c)
	return c.JSON(registrationView(r))
}

// withdraw: DELETE /api/v1/events/:event/registrations/me — 204.
func (s *presaleAPI) withdraw(c *fiber.Ctx) error {
	ev, p, acct, err := s.registrant(c)
	if err != nil {
		return err
	}
	if err := s.presale.Withdraw(c.UserContext(), ev.ID, p, acct); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// selection: GET /api/v1/events/:event/selection — the lottery's shape.
func (s *presaleAPI) selection(c *fiber.Ctx) error {
	ev, p, err := s.presaleEvent(c)
	if err != nil {
		return err
	}
	sel, err := s.presale.Selection(c.UserContext(), ev.ID, p)
	if errors.Is(err, presale.ErrNoPresale) {
		// Nobody registered and no admitter committed yet: the commitment
		// comes with registration's opening.
		return errSelectionNotDrawn
	}
	if err != nil {
		return err
	}
	return c.JSON(lotteryView(sel))
}

// selectionEntries: GET /api/v1/events/:event/selection/entries — the
// registration ids in rank order, one per line: 409 not_drawn before the
// draw (never cached), the published list once drawn (transparency.go).
func (s *presaleAPI) selectionEntries(c *fiber.Ctx) error {
	ev, p, err := s.presaleEvent(c)
	if err != nil {
		return err
	}
	if l := s.lists.get(listSelection, ev.ID); l != nil {
		return s.lists.serveList(c, l)
	}
	sel, err := s.presale.Selection(c.UserContext(), ev.ID, p)
	switch {
	case errors.Is(err, presale.ErrNoPresale) || (err == nil && !sel.Drawn):
		return errSelectionNotDrawn
	case err != nil:
		return err
	}
	return s.lists.publishedList(c, listSelection, ev.ID, sel, s.presale.Entries)
}

// codeOf is the access code a join brings, as the line looks it up ("" =
// none).
func (s *accessCodes) codeOf(c *fiber.Ctx, ev *config.Event) string {
	if s.presale == nil || !ev.Admission.CodesRequired() {
		return ""
	}
	code := c.Get(codeHeader)
	if code == "" {
		code = c.FormValue("code")
	}
	return s.presale.CodeHash(ev.ID, code)
}

// codesEvent is the event of an operators' codes route: any event has
// codes once the gateway runs the presale's part (404 no_presale without).
func (s *accessCodes) codesEvent(c *fiber.Ctx) (*config.Event, error) {
	ev, err := s.event(c)
	if err == nil && s.presale == nil {
		err = errNoPresale
	}
	return ev, err
}

// codesRequest is the body of POST /api/v1/admin/events/:event/codes:
// count random codes, or the given ones, of uses each.
type codesRequest struct {
	Count *int     `json:"count"`
	Codes []string `json:"codes"`
	Uses  *int     `json:"uses"`
}

// add: POST /api/v1/admin/events/:event/codes — 201 {"codes":[…]}:
// the random codes made (shown this once), or the given ones.
func (s *accessCodes) add(c *fiber.Ctx) error {
	ev, err := s.codesEvent(c)
	if err != nil {
		return err
	}
	var req codesRequest
	dec := json.NewDecoder(bytes.NewReader(c.Body()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return invalidField("body", "must be {\"count\":N,\"uses\":N} or {\"codes\":[…],\"uses\":N}: %v", err)
	}
	uses := 1
	if req.Uses != nil {
		uses = *req.Uses
	}
	if uses < 1 || uses > presale.MaxCodeUses {
		return invalidField("uses", "must be between 1 and %d", presale.MaxCodeUses)
	}
	switch {
	case (req.Count == nil) == (req.Codes == nil):
		return invalidField("count", "give either count or codes")
	case req.Count != nil && (*req.Count < 1 || *req.Count > presale.MaxCodesPerRequest):
		return invalidField("count", "must be between 1 and %d", presale.MaxCodesPerRequest)
	case req.Codes != nil && (len(req.Codes) < 1 || len(req.Codes) > presale.MaxCodesPerRequest):
		return invalidField("codes", "must hold 1 to %d codes", presale.MaxCodesPerRequest)
	}
	for _, code := range req.Codes {
		if _, ok := presale.NormalizeCode(code); !ok {
			return invalidField("codes", "%q: a code is 1 to %d letters and digits (dashes and spaces are ignored)", code, presale.MaxCodeLen)
		}
	}
	codes := req.Codes
	if req.Count != nil {
		codes, err = s.presale.NewCodes(c.UserContext(), ev.ID, *req.Count, uses)
	} else {
		err = s.presale.AddCodes(c.UserContext(), ev.ID, codes, uses)
	}
	if err != nil {
		return err
	}
	s.auditCodes(c, ev, len(codes), uses)
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{"codes": codes})
}

// counts: GET /api/v1/admin/events/:event/codes — counts only.
func (s *accessCodes) counts(c *fiber.Ctx) error {
	ev, err := s.codesEvent(c)
	if err != nil {
		return err
	}
	n, err := s.presale.CodeCounts(c.UserContext(), ev.ID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"codes": n.Codes, "uses": n.Uses, "used": n.Used})
}

// auditCodes tells the audit trail codes were added (how many, never
// which).
func (s *accessCodes) auditCodes(c *fiber.Ctx, ev *config.Event, n, uses int) {
	change := fmt.Sprintf("access codes: %d added, %d uses each", n, uses)
	audit(c, s.audit, s.log, ev.ID, change)
}

// registerNotices are the ?n= codes the register page explains.
var registerNotices = map[string]bool{
	"registered": true, "withdrawn": true, "registration_closed": true, "rate_limited": true, "invalid_account": true, "error": true,
}

// registerPage: GET /e/:event/register — the fan's registration for the
// presale (the account from cookie wr_u), rendered by the server: register
// or withdraw while registration is open, then the status, the rank and
// the window (a countdown with JavaScript; the page refreshes itself when
// the window is minutes away).
func (s *presaleAPI) registerPage(c *fiber.Ctx, l *web.Locale) error {
	ev, err := s.views.pageEvent(c, l)
	if ev == nil {
		return err
	}
	if ev.Presale == nil || s.presale == nil {
		return s.views.render(c, fiber.StatusNotFound, web.NotFoundPage, l, &web.Page{Title: l.T("notfound.title")})
	}
	p := policy.PlanFor(*ev)
	now := s.now()
	r := presaleView(ev, now)
	r.Status = "signed-out"
	if n := c.Query("n"); registerNotices[n] {
		r.Notice = n
	}
	m := &web.Model{Lang: l.Lang, Event: s.views.eventView(c.UserContext(), ev), Presale: r, Available: -1, Links: web.LinksOf(ev.ID, 0, true)}
	acct, err := s.accountOf(c, ev)
	switch {
	case errors.Is(err, errInvalidAccount):
		r.Notice = "invalid_account"
	case err != nil && !errors.Is(err, errAccountRequired):
		return err
	case acct != "":
		reg, err := s.presale.Status(c.UserContext(), ev.ID, p, acct)
		switch {
		case errors.Is(err, presale.ErrNotRegistered):
			r.Status = "none"
		case err != nil:
			return err
		default:
			r.Status, r.ID, r.Rank = reg.Status, reg.ID, reg.Rank
			if reg.WindowOpensAt != nil {
				o, cl := reg.WindowOpensAt.In(web.ZoneOf(ev)), reg.WindowClosesAt.In(web.ZoneOf(ev))
				r.WindowOpensAt, r.WindowClosesAt = &o, &cl
				r.WindowOpen = !now.Before(o) && now.Before(cl)
				if wait := o.Sub(now); wait > 0 && wait <= 5*time.Minute {
					m.Refresh = int64(wait/time.Second) + 1
				}
			}
		}
	}
	noStore(c)
	return s.views.renderLook(c, fiber.StatusOK, ev, web.RegisterPage, m)
}

// registerForm: POST /e/:event/register — register (action=register) or
// withdraw (action=withdraw) without JavaScript, then back to the page.
func (s *presaleAPI) registerForm(c *fiber.Ctx) error {
	ev, err := s.formEvent(c)
	if err != nil {
		return err
	}
	back := "/e/" + ev.ID + "/register"
	_, p, acct, err := s.registrant(c)
	if err == nil {
		if c.FormValue("action") == "withdraw" {
			err = s.presale.Withdraw(c.UserContext(), ev.ID, p, acct)
		} else {
			if _, _, err = s.presale.Register(c.UserContext(), ev.ID, p, acct); err == nil {
				s.rememberContact(c, ev, acct)
			}
		}
	}
	notice := "registered"
	if c.FormValue("action") == "withdraw" {
		notice = "withdrawn"
	}
	if err != nil {
		notice = "error"
		if ae := toAPI(err); ae != nil && registerNotices[ae.Code] {
			notice = ae.Code
		} else if ae == nil || ae == errNoPresale {
			s.log.Warn("register form", "event", ev.ID, "err", err)
		}
		if errors.Is(err, errAccountRequired) || errors.Is(err, presale.ErrAccountRequired) {
			return c.Redirect(back, fiber.StatusSeeOther) // the page says to sign in
		}
	}
	return c.Redirect(back+"?n="+notice, fiber.StatusSeeOther)
}

// rememberContact keeps where a registrant is told its window, if the
// origin site signed an address for it: that address, in the language of
// the fan's pages. Best effort: a registration stands without it.
func (s *presaleAPI) rememberContact(c *fiber.Ctx, ev *config.Event, acct string) {
	claims, err := s.accountClaims(c, ev)
	if err != nil || claims.Account != acct || !notify.ValidAddress(claims.Email) {
		return
	}
	lang := web.Negotiate(c.Cookies(langCookie), c.Get(fiber.HeaderAcceptLanguage))
	if err := s.presale.Remember(c.UserContext(), ev.ID, acct, claims.Email, lang); err != nil {
		s.log.Warn("registration: contact", "event", ev.ID, "err", err)
	}
}
