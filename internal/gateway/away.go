package gateway

import (
	"context"
	"errors"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/notify"
)

// Away from the page (DESIGN.md): a fan whose account token carries an
// email steps away; the line keeps the place without polls and, once it is
// let in, the admitter emails that address a link to it. The address is
// only ever the one the origin site signed: the route takes none of its
// own.

// AwayLine is what stepping away asks of the line.
type AwayLine interface {
	StepAway(ctx context.Context, r line.AwayRequest) error
}

// awayAPI is stepping away, by the API and by the waiting page's form.
type awayAPI struct {
	*edge
	line AwayLine
}

// awayError maps StepAway's own errors (the rest are the line's).
func awayError(err error) error {
	var limited line.AwayLimited
	switch {
	case errors.Is(err, line.ErrNotYours):
		return errNotYourPlace
	case errors.Is(err, line.ErrAlreadyAdmitted):
		return errAlreadyAdmitted
	case errors.As(err, &limited):
		e := rateLimited(int((limited.RetryAfter.Seconds()) + 1))
		e.Message = "this account asked for emails too often this hour"
		return e
	}
	return err
}

// away: POST /api/v1/events/:event/tickets/:ticket/away → 202
// {"status":"away","email"}. The account token as at join (header
// X-Waitroom-Account or cookie wr_u) must carry an email claim (else 403
// no_email; a bad token is 401 invalid_account) and be the place's own
// account (403 not_your_place). The email is written in the fan's language
// (body {"lang"} if one of ours, else wr_lang, else Accept-Language).
func (s *awayAPI) away(c *fiber.Ctx) error {
	ev, err := s.event(c)
	if err != nil {
		return err
	}
	var body struct {
		Lang string `json:"lang"`
	}
	if len(c.Body()) > 0 {
		if err := c.BodyParser(&body); err != nil {
			return &apiError{Status: fiber.StatusBadRequest, Code: "invalid_request", Message: "the body must be a JSON object, e.g. {\"lang\":\"ja\"}"}
		}
	}
	lang := body.Lang
	if !web.Supported(lang) {
		lang = web.Negotiate(c.Cookies(langCookie), c.Get(fiber.HeaderAcceptLanguage))
	}
	claims, err := s.awayClaims(c, ev)
	if err != nil {
		return err
	}
	// The ticket is checked here, once, after the route and the account
	// (a bad one is 400 invalid_ticket only for a fan who may step away).
	ticket, err := s.tickets.Parse(ev.ID, utils.CopyString(c.Params("ticket")))
	if err != nil {
		return err
	}
	email, err := s.stepAway(c, ev, ticket, claims, lang)
	if err != nil {
		return err
	}
	noStore(c)
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"status": "away", "email": email})
}

// awayClaims are the account claims of the request (its account token)
// that let its fan step away: a room that sends email, an account with an
// address.
func (s *awayAPI) awayClaims(c *fiber.Ctx, ev *config.Event) (account.Claims, error) {
	if s.config().Notify.SMTPURL == "" {
		return account.Claims{}, errNotFound // a room that sends no email has no such route
	}
	claims, err := s.accountClaims(c, ev)
	if err != nil {
		return account.Claims{}, err
	}
	if claims.Account == "" || !notify.ValidAddress(claims.Email) {
		return account.Claims{}, errNoEmail
	}
	return claims, nil
}

// stepAway steps the fan of ticket (checked) away, as its account's claims
// (awayClaims) allow; it returns the address the email will go to.
func (s *awayAPI) stepAway(c *fiber.Ctx, ev *config.Event, ticket line.Ticket, claims account.Claims, lang string) (string, error) {
	err := s.line.StepAway(c.UserContext(), line.AwayRequest{Event: ev.ID, Settings: s.settingsFor(ev), Ticket: ticket,
		Account: claims.Account, Email: claims.Email, Lang: lang, Limit: s.config().Notify.PerAccountPerHour, Now: s.now()})
	if err != nil {
		return "", awayError(err)
	}
	return claims.Email, nil
}

// awayForm: POST /e/:event/away — "Leave and email me" on the waiting
// page, with or without JavaScript: the ticket from its cookie, the
// account from wr_u. 303 to the room, which says what happens next
// (?away=1), or why it did not (?e=…).
func (s *awayAPI) awayForm(c *fiber.Ctx) error {
	ev, err := s.formEvent(c)
	if err != nil {
		return err
	}
	room := "/e/" + ev.ID
	ticket := s.ticketCookie(c, ev)
	if ticket.IsZero() {
		return c.Redirect(room, fiber.StatusSeeOther)
	}
	lang := web.Negotiate(c.Cookies(langCookie), c.Get(fiber.HeaderAcceptLanguage))
	claims, err := s.awayClaims(c, ev)
	if err == nil {
		_, err = s.stepAway(c, ev, ticket, claims, lang)
	}
	if err != nil {
		code := "away_failed"
		switch ae := toAPI(err); {
		case ae == nil:
			s.log.Warn("away form", "event", ev.ID, "err", err)
		case ae.Code == "rate_limited":
			code = "away_limited"
		case ae.Code == "already_admitted":
			return c.Redirect(room, fiber.StatusSeeOther) // the room takes the fan on to booking
		}
		c.Response().ResetBody()
		return c.Redirect(room+"?e="+code, fiber.StatusSeeOther)
	}
	return c.Redirect(room+"?away=1", fiber.StatusSeeOther)
}

// awayOffer is what the waiting page says of stepping away, when this fan
// can (the room sends email, and the fan's account token carries an
// address): nil otherwise.
func (s *awayAPI) awayOffer(c *fiber.Ctx, ev *config.Event) *web.Away {
	cfg := s.config()
	if cfg.Notify.SMTPURL == "" || c.Cookies(accountCookie) == "" {
		return nil
	}
	claims, err := s.accountClaims(c, ev)
	if err != nil || !notify.ValidAddress(claims.Email) {
		return nil
	}
	return &web.Away{Email: claims.Email, Within: ev.Admission.AwayClaimWithin.D()}
}
