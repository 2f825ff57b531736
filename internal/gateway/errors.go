package gateway

import (
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/presale"
)

// apiError is the one error shape of the API: {"error": code, "message": text}.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"error"`
	Message string `json:"message"`
	// RetryAfter, when set, becomes the Retry-After header (seconds).
	RetryAfter int `json:"-"`
	// Extra fields some errors carry (e.g. opensAt of not_open).
	OpensAt string `json:"opensAt,omitempty"`
	// proof_required's challenge (proof.go).
	Challenge string `json:"challenge,omitempty"`
	Bits      int    `json:"bits,omitempty"`
	ExpiresAt string `json:"expiresAt,omitempty"`
	// A presale's window_not_open: the fan's window.
	WindowOpensAt  string `json:"windowOpensAt,omitempty"`
	WindowClosesAt string `json:"windowClosesAt,omitempty"`
	// Field names the request's field at fault (400 invalid_request of the
	// operators' API).
	Field string `json:"field,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// The API's fixed answers, every route's, in one catalogue: a route returns
// one of them (or a domain error that domainErrors maps to one), and
// errorHandler writes it.
var (
	// The line's.
	errUnknownEvent      = &apiError{Status: fiber.StatusNotFound, Code: "unknown_event", Message: "no such event"}
	errInvalidTicket     = &apiError{Status: fiber.StatusBadRequest, Code: "invalid_ticket", Message: "the ticket is malformed, forged or of another event"}
	errEventClosed       = &apiError{Status: fiber.StatusConflict, Code: "event_closed", Message: "this sale is closed"}
	errSoldOut           = &apiError{Status: fiber.StatusConflict, Code: "sold_out", Message: "every place of this sale is sold"}
	errAdmissionRequired = &apiError{Status: fiber.StatusUnauthorized, Code: "admission_required", Message: "admission required"}
	errUnknownTicket     = &apiError{Status: fiber.StatusNotFound, Code: "unknown_ticket", Message: "the ticket is neither waiting nor active"}
	errNoLottery         = &apiError{Status: fiber.StatusNotFound, Code: "no_lottery", Message: "this sale has no lottery (no pre-queue, or it has not opened yet)"}
	errNotDrawn          = &apiError{Status: fiber.StatusConflict, Code: "not_drawn", Message: "the lottery is drawn when the sale opens"}
	errDrawing           = &apiError{Status: fiber.StatusConflict, Code: "not_drawn", Message: "the sale has opened and the lottery is being drawn: try again in a few seconds", RetryAfter: 2}
	errNotInLottery      = &apiError{Status: fiber.StatusNotFound, Code: "not_in_lottery", Message: "this ticket joined after the pre-queue: its place is first come, first served"}

	// Accounts, and stepping away (an account's email).
	errAccountRequired = &apiError{Status: fiber.StatusUnauthorized, Code: "account_required", Message: "this sale needs you to sign in on the organiser's site first"}
	errInvalidAccount  = &apiError{Status: fiber.StatusUnauthorized, Code: "invalid_account", Message: "the account token is invalid or expired: sign in again on the organiser's site"}
	errNoEmail         = &apiError{Status: fiber.StatusForbidden, Code: "no_email", Message: "stepping away needs an account token from the organiser's site that carries your email"}
	errNotYourPlace    = &apiError{Status: fiber.StatusForbidden, Code: "not_your_place", Message: "this place belongs to another account (or to none): only its own account can step away from it"}
	errAlreadyAdmitted = &apiError{Status: fiber.StatusConflict, Code: "already_admitted", Message: "it is your turn already: go to booking"}

	// The presale's.
	errRegistrationClosed = &apiError{Status: fiber.StatusConflict, Code: "registration_closed", Message: "registration for this presale is not open"}
	// No Retry-After: the limit is the event's, for good (DESIGN.md, Fair
	// play, third round), so no wait would help.
	errTooManyRegistrations = &apiError{Status: fiber.StatusTooManyRequests, Code: "rate_limited", Message: "this account has registered for this presale 3 times already (withdrawals count): it cannot register again"}
	errNotRegistered        = &apiError{Status: fiber.StatusNotFound, Code: "not_registered", Message: "this account has no registration for this presale"}
	errNoPresale            = &apiError{Status: fiber.StatusNotFound, Code: "no_presale", Message: "this sale has no presale"}
	errSelectionNotDrawn    = &apiError{Status: fiber.StatusConflict, Code: "not_drawn", Message: "the selection is drawn when registration closes"}
	errNotInvited           = &apiError{Status: fiber.StatusForbidden, Code: "not_invited", Message: "this presale is for invited accounts: yours holds no invitation"}
	errInvitationUsed       = &apiError{Status: fiber.StatusForbidden, Code: "invitation_used", Message: "your invitation has bought its tickets already: it buys once"}
	errCodeRequired         = &apiError{Status: fiber.StatusForbidden, Code: "code_required", Message: "this sale needs an access code"}
	errInvalidCode          = &apiError{Status: fiber.StatusForbidden, Code: "invalid_code", Message: "no such access code"}
	errCodeUsed             = &apiError{Status: fiber.StatusConflict, Code: "code_used", Message: "this access code has been used up"}

	// Forward auth's.
	errUntrustedProxy  = &apiError{Status: fiber.StatusForbidden, Code: "untrusted_proxy", Message: "forward auth answers the proxies of gateway.trusted_proxies only"}
	errInvalidReturn   = &apiError{Status: fiber.StatusBadRequest, Code: "invalid_return", Message: "return must be an absolute http(s) URL on a host this event guards"}
	errUnknownHost     = &apiError{Status: fiber.StatusForbidden, Code: "unknown_host", Message: "X-Forwarded-Host must name a host some protect rule names"}
	errBadForwardedURI = &apiError{Status: fiber.StatusBadRequest, Code: "invalid_request", Message: "X-Forwarded-Uri (or X-Original-URI) must be a request target starting with /"}

	// The operators'.
	errUnauthorized = &apiError{Status: fiber.StatusUnauthorized, Code: "unauthorized", Message: "a valid operators' token is required (Authorization: Bearer <token>)"}

	// Any route's.
	errUnavailable    = &apiError{Status: fiber.StatusServiceUnavailable, Code: "unavailable", Message: "temporarily unavailable, try again shortly", RetryAfter: 2}
	errBookingDown    = &apiError{Status: fiber.StatusServiceUnavailable, Code: "booking_unavailable", Message: "the booking service is unavailable, try again shortly", RetryAfter: 2}
	errBookingTimeout = &apiError{Status: fiber.StatusGatewayTimeout, Code: "booking_timeout", Message: "the booking service did not answer in time"}
	errNotFound       = &apiError{Status: fiber.StatusNotFound, Code: "not_found", Message: "no such route"}
	errMethod         = &apiError{Status: fiber.StatusMethodNotAllowed, Code: "method_not_allowed", Message: "method not allowed on this route"}
	errTooLarge       = &apiError{Status: fiber.StatusRequestEntityTooLarge, Code: "body_too_large", Message: "request body too large"}
	errCrossSite      = &apiError{Status: fiber.StatusForbidden, Code: "cross_site", Message: "cross-site form post refused"}
	errInternal       = &apiError{Status: fiber.StatusInternalServerError, Code: "internal", Message: "internal error"}
)

func rateLimited(retryAfter int) *apiError {
	return &apiError{Status: fiber.StatusTooManyRequests, Code: "rate_limited", Message: "too many joins from this address, slow down", RetryAfter: retryAfter}
}

// listsLimited is 429 rate_limited for an address past its downloads of
// the published lists this minute (transparency.go).
func listsLimited(retryAfter int) *apiError {
	return &apiError{Status: fiber.StatusTooManyRequests, Code: "rate_limited", Message: "too many downloads of the published lists from this address: keep the copy you have (it never changes), or try again in a minute", RetryAfter: retryAfter}
}

// windowNotOpen is 403 window_not_open with the fan's window.
func windowNotOpen(w presale.WindowNotOpen) *apiError {
	return &apiError{Status: fiber.StatusForbidden, Code: "window_not_open", Message: "your window to join this presale is not open",
		WindowOpensAt: w.OpensAt.UTC().Format(time.RFC3339), WindowClosesAt: w.ClosesAt.UTC().Format(time.RFC3339)}
}

// domainErrors maps the line's and the presale's errors to the contract's
// answers: the one table (a route that answers one of them otherwise, or
// with more, says so where it does: the join's proof and limit, a draw
// being drawn, a selection not drawn).
var domainErrors = []struct {
	err error
	api *apiError
}{
	{line.ErrInvalidTicket, errInvalidTicket},
	{line.ErrClosed, errEventClosed},
	{line.ErrSoldOut, errSoldOut},
	{line.ErrUnavailable, errUnavailable},
	{line.ErrNoLottery, errNoLottery},
	{line.ErrNotDrawn, errNotDrawn},
	{line.ErrNotInLottery, errNotInLottery},
	{line.ErrUnknownTicket, errUnknownTicket},
	{presale.ErrRegistrationClosed, errRegistrationClosed},
	{presale.ErrTooManyRegistrations, errTooManyRegistrations},
	{presale.ErrNotRegistered, errNotRegistered},
	{presale.ErrNoPresale, errNoPresale},
	{presale.ErrNotDrawn, errSelectionNotDrawn},
	{presale.ErrAccountRequired, errAccountRequired},
	{presale.ErrNotInvited, errNotInvited},
	{presale.ErrInvitationUsed, errInvitationUsed},
	{presale.ErrCodeRequired, errCodeRequired},
	{presale.ErrInvalidCode, errInvalidCode},
	{presale.ErrCodeUsed, errCodeUsed},
}

// toAPI maps domain errors to the contract's codes, in one place.
func toAPI(err error) *apiError {
	var (
		ae      *apiError
		notOpen line.NotOpen
		tooMany line.RateLimited
		window  presale.WindowNotOpen
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &notOpen):
		out := &apiError{Status: fiber.StatusForbidden, Code: "not_open", Message: "the line for this sale is not open yet"}
		if notOpen.OpensAt != nil {
			out.OpensAt = notOpen.OpensAt.UTC().Format(time.RFC3339)
		}
		return out
	case errors.As(err, &tooMany):
		return rateLimited(int((tooMany.RetryAfter + time.Second - 1) / time.Second))
	case errors.As(err, &window):
		return windowNotOpen(window)
	}
	for _, e := range domainErrors {
		if errors.Is(err, e.err) {
			return e.api
		}
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusNotFound:
			return errNotFound
		case fiber.StatusMethodNotAllowed:
			return errMethod
		case fiber.StatusRequestEntityTooLarge:
			return errTooLarge
		}
		return &apiError{Status: fe.Code, Code: "bad_request", Message: fe.Message}
	}
	return nil
}

// errorHandler answers every error returned by a handler in the API shape.
// Errors that are not the contract's are logged and answered 500; an outage
// of Redis (the only store the edge has) is logged as one and answered 503.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	ae := toAPI(err)
	switch {
	case ae == errUnavailable:
		s.log.Warn("request failed: redis unavailable", "route", c.Route().Path, "method", c.Method(), "err", err)
	case ae == nil:
		s.log.Error("request failed", "route", c.Route().Path, "method", c.Method(), "err", err)
		ae = errInternal
	}
	if ae.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(ae.RetryAfter))
	}
	return c.Status(ae.Status).JSON(ae)
}
