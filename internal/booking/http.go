package booking

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/breaker"
	"github.com/waitroom/waitroom/internal/platform/health"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/queue"
)

// Authenticate verifies an access JWT and returns who it admits. Any error
// is answered 401 admission_required.
type Authenticate func(ctx context.Context, token string) (Pass, error)

// PassAuth verifies passes with v (EdDSA only, iss, aud, exp, kid).
func PassAuth(v *pass.Verifier) Authenticate {
	return func(ctx context.Context, token string) (Pass, error) {
		c, err := v.Verify(ctx, token)
		if err != nil {
			return Pass{}, err
		}
		return NewPass(c.Ticket, c.Account, c.Event), nil
	}
}

// ActiveLine is the waiting room's line as the booking core asks it of
// every pass (*queue.Store): whether ticket still holds its active place in
// event (it has not left, been revoked, had its window end or its place
// completed).
type ActiveLine interface {
	Active(ctx context.Context, event, ticket string) (bool, error)
	// Ping reports whether the line answers (the breaker's probe).
	Ping(ctx context.Context) error
}

// maxBody bounds every request body.
const maxBody = 64 << 10

// RequestBudget bounds each request's work in the booking core, its
// database statements above all: a database that stops answering is a 503
// from here, before the gateway's proxy gives up (gateway.proxy_timeout, 10 s
// by default, must stay above it).
const RequestBudget = 5 * time.Second

// errBudgetSpent is why a request's context ends when RequestBudget passes
// (context.Cause), as opposed to its caller going away.
var errBudgetSpent = fmt.Errorf("booking: request took more than %s: %w", RequestBudget, context.DeadlineExceeded)

// errorTable maps the domain's sentinel errors to the contract's statuses and
// codes: the one place where that mapping lives.
var errorTable = []struct {
	err        error
	status     int
	code       string
	retryAfter int // seconds; 0 = no Retry-After (or the error's own)
}{
	{ErrInvalidRequest, http.StatusBadRequest, "invalid_request", 0},
	{ErrAdmissionRequired, http.StatusUnauthorized, "admission_required", 0},
	{ErrBadSignature, http.StatusUnauthorized, "invalid_signature", 0},
	{ErrWrongEvent, http.StatusForbidden, "wrong_event", 0},
	{ErrNotFound, http.StatusNotFound, "not_found", 0},
	{ErrSeatsUnavailable, http.StatusConflict, "seats_unavailable", 0},
	{ErrSoldOut, http.StatusConflict, "sold_out", 0},
	{ErrHoldExpired, http.StatusConflict, "hold_expired", 0},
	{ErrHoldNotActive, http.StatusConflict, "hold_booked", 0},
	{ErrTooManySeats, http.StatusUnprocessableEntity, "too_many_seats", 0},
	{ErrIdempotencyReused, http.StatusUnprocessableEntity, "idempotency_key_reused", 0},
	{ErrRateLimited, http.StatusTooManyRequests, "rate_limited", 0},
	{ErrAccountRequired, http.StatusForbidden, "account_required", 0},
	{ErrInsufficientPoints, http.StatusPaymentRequired, "insufficient_points", 0},
	{ErrPaymentOpen, http.StatusConflict, "payment_open", 0},
	{ErrAdminRequired, http.StatusUnauthorized, "unauthorized", 0},
	{ErrUnavailable, http.StatusServiceUnavailable, "unavailable", 2},
}

// Handler is the booking API under /api/v1/booking, with /healthz and /readyz.
type Handler struct {
	svc  *Service
	auth Authenticate
	line ActiveLine
	// redis guards the check of the line: a Redis that does not answer
	// holds a request at most a second, and none again while it stays
	// silent; meanwhile passes are honoured alone (admitted).
	redis    *breaker.Breaker
	degraded prometheus.Counter // waitroom_gate_degraded_total{service="booking"}
	log      *slog.Logger
	mux      *http.ServeMux
	// adminToken guards the operators' routes of the booking core (the
	// wallet credits the gateway's operators' API forwards); "" = off.
	adminToken string
}

// NewHandler builds the API. line says whether a pass's ticket is still
// active; ready reports whether PostgreSQL is reachable.
func NewHandler(svc *Service, auth Authenticate, line ActiveLine, ready func(context.Context) error, log *slog.Logger) *Handler {
	h := &Handler{svc: svc, auth: auth, line: line, log: log, mux: http.NewServeMux(),
		degraded: metrics.GateDegraded("booking")}
	// One breaker for the process's Redis: a request that found it silent
	// checking the pass does not wait for it again telling the inventory.
	if svc.inv != nil {
		h.redis = svc.inv.redis
	} else {
		h.redis = queue.NewBreaker(line.Ping, log)
	}
	const p = "/api/v1/booking"
	route := func(pattern string, f http.HandlerFunc) { h.mux.HandleFunc(pattern, bounded(f)) }
	route("GET "+p+"/showtimes/{id}/seats", h.withPass(h.seatMap))
	route("POST "+p+"/showtimes/{id}/holds", h.withPass(h.hold))
	route("DELETE "+p+"/holds/{holdId}", h.withPass(h.release))
	route("POST "+p+"/holds/{holdId}/checkout", h.withPass(h.checkout))
	route("POST "+p+"/payments/callback", h.callback)
	route("GET "+p+"/payments/{paymentId}", h.withPass(h.paymentPage))
	// The gate's one exception: a fan whose booking completed (and freed
	// its place) can still read it.
	route("GET "+p+"/bookings/{id}", h.withValidPass(h.booking))
	route("GET "+p+"/wallet", h.withPass(h.wallet))
	route("POST "+p+"/admin/wallets/{account}/credits", h.withAdmin(h.credit))
	health.Routes(h.mux, health.Check{Name: "postgres", Ping: ready})
	h.mux.HandleFunc(p+"/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "not_found", Message: "no such route"})
	})
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// bounded runs a route within RequestBudget. It wraps each route, not the
// mux: the mux writes the matched pattern into the request it is given,
// where the middleware around (metrics, health) reads it back.
func bounded(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeoutCause(r.Context(), RequestBudget, errBudgetSpent)
		defer cancel()
		next(w, r.WithContext(ctx))
	}
}

// callerGone reports whether r's client went away (nobody to answer), as
// opposed to its budget running out (answered 503).
func callerGone(r *http.Request) bool {
	return r.Context().Err() != nil && !errors.Is(context.Cause(r.Context()), errBudgetSpent)
}

// WithAdminToken turns on the operators' routes, guarded by token
// (auth.admin_token), and returns h.
func (h *Handler) WithAdminToken(token string) *Handler {
	h.adminToken = token
	return h
}

// withAdmin runs next for a request bearing the operators' token (compared
// in constant time); off (404) while there is none, 401 for a wrong or
// missing one.
func (h *Handler) withAdmin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.adminToken == "" {
			h.fail(w, r, ErrNotFound)
			return
		}
		authz := r.Header.Get("Authorization")
		tok := ""
		if len(authz) > 7 && strings.EqualFold(authz[:7], "bearer ") {
			tok = strings.TrimSpace(authz[7:])
		}
		if subtle.ConstantTimeCompare([]byte(tok), []byte(h.adminToken)) != 1 {
			h.fail(w, r, ErrAdminRequired)
			return
		}
		next(w, r)
	}
}

type passHandler func(w http.ResponseWriter, r *http.Request, p Pass) error

// withPass runs next for a Bearer access JWT that verifies and whose ticket
// is still active in the line, as the gate checks it: the booking core's own
// port gives nothing the gate refuses (DESIGN.md, "A pass counts only while
// its ticket is active, wherever it is shown"). A ticket that left, was
// revoked, or whose window ended or place was completed is 401
// admission_required, as a bad pass is; a line that does not answer, 503.
// A hold taken here stretches no window (only the gate extends one, and
// mints the longer pass), so this port never gives a fan more time either.
// next's error goes through the table.
func (h *Handler) withPass(next passHandler) http.HandlerFunc { return h.pass(true, next) }

// withValidPass is withPass for a valid pass, active or not.
func (h *Handler) withValidPass(next passHandler) http.HandlerFunc { return h.pass(false, next) }

func (h *Handler) pass(active bool, next passHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		authz := r.Header.Get("Authorization")
		tok, ok := "", len(authz) > 7 && strings.EqualFold(authz[:7], "bearer ")
		if ok {
			tok = strings.TrimSpace(authz[7:])
		}
		if !ok || tok == "" {
			h.fail(w, r, ErrAdmissionRequired)
			return
		}
		p, err := h.auth(r.Context(), strings.TrimSpace(tok))
		if err != nil || p.Customer == "" {
			h.fail(w, r, ErrAdmissionRequired)
			return
		}
		if active {
			if err := h.admitted(r.Context(), p); err != nil {
				h.fail(w, r, err)
				return
			}
		}
		if err := next(w, r, p); err != nil {
			h.fail(w, r, err)
		}
	}
}

// admitted is nil if p's ticket holds its active place in p's event now,
// or, while the line does not answer, if p names an event sold here: the
// pass verified already (signature, audience, exp), and a fan in the middle
// of paying goes on (DESIGN.md, "When parts fail"; a revocation waits for
// Redis).
func (h *Handler) admitted(ctx context.Context, p Pass) error {
	ticket := p.Ticket
	if ticket == "" {
		ticket = p.Customer // a pass made without NewPass: its sub
	}
	var ok bool
	err := h.redis.Do(ctx, func(ctx context.Context) (err error) {
		ok, err = h.line.Active(ctx, p.Event, ticket)
		return err
	})
	switch {
	case errors.Is(err, queue.ErrUnavailable):
		if !h.svc.cat.HasEvent(p.Event) {
			return ErrAdmissionRequired
		}
		h.degraded.Inc()
		return nil
	case err != nil:
		return fmt.Errorf("active: %w", err)
	case !ok:
		return ErrAdmissionRequired
	}
	return nil
}

func (h *Handler) seatMap(w http.ResponseWriter, r *http.Request, p Pass) error {
	id, err := pathInt(r, "id")
	if err != nil {
		return err
	}
	m, err := h.svc.SeatMap(r.Context(), p, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (h *Handler) hold(w http.ResponseWriter, r *http.Request, p Pass) error {
	id, err := pathInt(r, "id")
	if err != nil {
		return err
	}
	var in HoldInput
	if err := decode(w, r, &in); err != nil {
		return err
	}
	hold, err := h.svc.Hold(r.Context(), p, id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, hold)
	return nil
}

func (h *Handler) release(w http.ResponseWriter, r *http.Request, p Pass) error {
	if err := h.svc.Release(r.Context(), p, r.PathValue("holdId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkoutInput is a checkout's optional body: how to pay ("" or "card":
// the provider's hosted page; "points": the account's wallet, at once).
type checkoutInput struct {
	Method string `json:"method"`
}

func (h *Handler) checkout(w http.ResponseWriter, r *http.Request, p Pass) error {
	var in checkoutInput
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return fmt.Errorf("body too large or unreadable: %w", ErrInvalidRequest)
	}
	if len(bytes.TrimSpace(body)) > 0 {
		// (A card checkout has always been sent with no body.)
		if err := decodeBytes(body, &in); err != nil {
			return err
		}
	}
	switch in.Method {
	case "", "card":
	case "points":
		paid, err := h.svc.CheckoutPoints(r.Context(), p, r.PathValue("holdId"), r.Header.Get("Idempotency-Key"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, paid)
		return nil
	default:
		return fmt.Errorf("checkout: method must be card or points, not %q: %w", in.Method, ErrInvalidRequest)
	}
	c, err := h.svc.Checkout(r.Context(), p, r.PathValue("holdId"), r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, c)
	return nil
}

func (h *Handler) booking(w http.ResponseWriter, r *http.Request, p Pass) error {
	b, err := h.svc.Booking(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (h *Handler) wallet(w http.ResponseWriter, r *http.Request, p Pass) error {
	wl, err := h.svc.Wallet(r.Context(), p)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, wl)
	return nil
}

// credit: POST /api/v1/booking/admin/wallets/{account}/credits, the
// operators' credit of an account's points (the gateway's
// /api/v1/admin/wallets/{account}/credits forwards here).
func (h *Handler) credit(w http.ResponseWriter, r *http.Request) {
	var in CreditInput
	if err := decode(w, r, &in); err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := h.svc.Credit(r.Context(), r.PathValue("account"), in)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]int64{"balance": b})
}

func (h *Handler) paymentPage(w http.ResponseWriter, r *http.Request, p Pass) error {
	id := r.PathValue("paymentId")
	st, err := h.svc.PaymentStatus(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"paymentId": id, "status": st,
		"message": "What the provider knows of this payment; the fan pays on the page paymentUrl opens. Poll your booking for the result.",
	})
	return nil
}

func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		h.fail(w, r, ErrInvalidRequest)
		return
	}
	out, err := h.svc.Callback(r.Context(), r.Header, body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"bookingId": out.BookingID, "result": string(out.Outcome)})
}

type errorBody struct {
	Error   string   `json:"error"`
	Message string   `json:"message"`
	Seats   []string `json:"seats,omitempty"`
	Block   string   `json:"block,omitempty"`
}

// fail answers err from the table; anything else is logged with its detail
// and answered with a plain 500. A database outage (the store says so:
// ErrUnavailable) is logged as one, not as a bug.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	for _, e := range errorTable {
		if !errors.Is(err, e.err) {
			continue
		}
		if e.err == ErrUnavailable {
			if callerGone(r) {
				return
			}
			dbErrorsTotal.WithLabelValues("api").Inc()
			h.log.Warn("booking request failed: database unavailable", "method", r.Method, "route", r.Pattern, "err", err)
		}
		body := errorBody{Error: e.code, Message: message(e.err, err)}
		if e.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
		}
		var d *DetailError
		if errors.As(err, &d) {
			body.Seats, body.Block = d.Seats, d.Block
			if d.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.RetryAfter.Seconds()))))
			}
		}
		writeJSON(w, e.status, body)
		return
	}
	if callerGone(r) {
		return
	}
	if errors.Is(context.Cause(r.Context()), errBudgetSpent) {
		// Whatever the budget cut short answers as the outage it is.
		h.fail(w, r, fmt.Errorf("%w: %w", ErrUnavailable, err))
		return
	}
	h.log.Error("booking request failed", "method", r.Method, "route", r.Pattern, "err", err)
	writeJSON(w, http.StatusInternalServerError, errorBody{Error: "internal", Message: "internal error"})
}

// message is the human text: the wrapped detail for a bad request, the
// sentinel's own words otherwise (never internal detail).
func message(sentinel, err error) string {
	if errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrTooManySeats) || errors.Is(err, ErrWrongEvent) {
		return err.Error()
	}
	return strings.TrimPrefix(sentinel.Error(), "booking: ")
}

func pathInt(r *http.Request, name string) (int64, error) {
	v, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || v < 1 {
		return 0, ErrNotFound
	}
	return v, nil
}

// decode reads one JSON object of at most maxBody bytes; unknown fields and
// trailing data are a bad request.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return fmt.Errorf("body too large or unreadable: %w", ErrInvalidRequest)
	}
	return decodeBytes(body, v)
}

// decodeBytes is decode of a body read already.
func decodeBytes(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body: %v: %w", err, ErrInvalidRequest)
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON object: %w", ErrInvalidRequest)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
