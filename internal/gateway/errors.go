package gateway

import (
	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/queue"
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
	// Field names the request's field at fault (400 invalid_request of the
	// operators' API).
	Field string `json:"field,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

var (
	errUnknownEvent      = &apiError{Status: fiber.StatusNotFound, Code: "unknown_event", Message: "no such event"}
	errInvalidTicket     = &apiError{Status: fiber.StatusBadRequest, Code: "invalid_ticket", Message: "the ticket is malformed, forged or of another event"}
	errEventClosed       = &apiError{Status: fiber.StatusConflict, Code: "event_closed", Message: "this sale is closed"}
	errSoldOut           = &apiError{Status: fiber.StatusConflict, Code: "sold_out", Message: "every place of this sale is sold"}
	errAdmissionRequired = &apiError{Status: fiber.StatusUnauthorized, Code: "admission_required", Message: "admission required"}
	errUnavailable       = &apiError{Status: fiber.StatusServiceUnavailable, Code: "unavailable", Message: "temporarily unavailable, try again shortly", RetryAfter: 2}
	errBookingDown       = &apiError{Status: fiber.StatusServiceUnavailable, Code: "booking_unavailable", Message: "the booking service is unavailable, try again shortly", RetryAfter: 2}
	errBookingTimeout    = &apiError{Status: fiber.StatusGatewayTimeout, Code: "booking_timeout", Message: "the booking service did not answer in time"}
	errNotFound          = &apiError{Status: fiber.StatusNotFound, Code: "not_found", Message: "no such route"}
	errMethod            = &apiError{Status: fiber.StatusMethodNotAllowed, Code: "method_not_allowed", Message: "method not allowed on this route"}
	errTooLarge          = &apiError{Status: fiber.StatusRequestEntityTooLarge, Code: "body_too_large", Message: "request body too large"}
	errInternal          = &apiError{Status: fiber.StatusInternalServerError, Code: "internal", Message: "internal error"}
)

func rateLimited(retryAfter int) *apiError {
	return &apiError{Status: fiber.StatusTooManyRequests, Code: "rate_limited", Message: "too many joins from this address, slow down", RetryAfter: retryAfter}
}

// toAPI maps domain errors to the contract's codes, in one place.
func toAPI(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, queue.ErrInvalidTicket):
		return errInvalidTicket
	case errors.Is(err, queue.ErrClosed):
		return errEventClosed
	case errors.Is(err, queue.ErrSoldOut):
		return errSoldOut
	case errors.Is(err, queue.ErrUnavailable):
		return errUnavailable
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
