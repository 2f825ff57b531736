package booking

import (
	"bytes"
	"context"
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

	"github.com/waitroom/waitroom/internal/gatekeeper"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/breaker"
	"github.com/waitroom/waitroom/internal/platform/health"
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
// every pass: whether ticket still holds its active place in event (it has
// not left, been revoked, had its window end or its place completed), and
// which places ended early (followed while Redis answers, to keep refusing
// their passes while it does not: package gatekeeper).
type ActiveLine interface {
	gatekeeper.Line
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
	// keeper checks a pass against the line, as the gate does (the same
	// gatekeeper.Gatekeeper): through the process's breaker of Redis, and
	// while the breaker has given up on it, by the pass alone unless its
	// place's end was heard (admitted).
	keeper *gatekeeper.Gatekeeper
	log    *slog.Logger
	mux    *http.ServeMux
	// operator guards the operators' routes of the booking core (the
	// wallet credits the gateway's operators' API forwards): whether a
	// bearer token may credit wallets; nil = off.
	operator func(token string) bool
}

// NewHandler builds the API. active says whether a pass's ticket is still
// active; ready reports whether PostgreSQL is reachable.
func NewHandler(svc *Service, auth Authenticate, active ActiveLine, ready func(context.Context) error, log *slog.Logger) *Handler {
	h := &Handler{svc: svc, auth: auth, log: log, mux: http.NewServeMux()}
	// One breaker for the process's Redis: a request that found it silent
	// checking the pass does not wait for it again telling the inventory.
	var redis *breaker.Breaker
	if svc.inv != nil {
		redis = svc.inv.redis
	} else {
		redis = gatekeeper.NewBreaker(active.Ping, log)
	}
	h.keeper = gatekeeper.New(gatekeeper.Options{
		Line: active, Redis: redis, Sells: svc.cat.HasEvent, Service: "booking", Log: log,
		Events: func() []string {
			evs := svc.cat.Events()
			ids := make([]string, len(evs))
			for i := range evs {
				ids[i] = evs[i].ID
			}
			return ids
		},
	})
	for _, rt := range h.routes() {
		h.mux.HandleFunc(rt.Method+" "+Prefix+rt.Path, bounded(rt.handle))
	}
	health.Routes(h.mux, health.Check{Name: "postgres", Ping: ready})
	h.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "not_found", Message: "no such route"})
	})
	return h
}

// Prefix is where the booking API lives (the gateway passes it on under the
// same path).
const Prefix = "/api/v1/booking"

// Route is one route of the booking API: its method, its path under Prefix
// (net/http's pattern: {name} a parameter), and who may call it.
type Route struct {
	Method, Path string
	Access       Access
}

// Access is who may call a route.
type Access string

// The kinds of access.
const (
	// AccessActivePass: a pass whose ticket holds its active place.
	AccessActivePass Access = "active pass"
	// AccessValidPass: a valid pass, active or not (the gate's exceptions).
	AccessValidPass Access = "valid pass"
	// AccessSigned: the payment provider, by the body's signature.
	AccessSigned Access = "signed"
	// AccessOperator: an operators' token of scope wallets:write; the
	// gateway's own operators' API forwards here, the gate never does.
	AccessOperator Access = "operator"
)

// route is a Route with its handler.
type route struct {
	Route
	handle http.HandlerFunc
}

// routes is the booking API, every route of it: NewHandler registers
// these, Routes lists them (the OpenAPI document's test reads that list).
func (h *Handler) routes() []route {
	r := func(method, path string, a Access, f http.HandlerFunc) route {
		return route{Route{method, path, a}, f}
	}
	return []route{
		r(http.MethodGet, "/showtimes/{id}/seats", AccessActivePass, h.withPass(h.seatMap)),
		// A hold checks its pass in its own call to the line, with its
		// reservation (hold).
		r(http.MethodPost, "/showtimes/{id}/holds", AccessActivePass, h.withValidPass(h.hold)),
		r(http.MethodDelete, "/holds/{holdId}", AccessActivePass, h.withPass(h.release)),
		// A checkout needs an active place, but for the replay of one made
		// already (checkout says how).
		r(http.MethodPost, "/holds/{holdId}/checkout", AccessActivePass, h.withValidPass(h.checkout)),
		r(http.MethodPost, "/payments/callback", AccessSigned, h.callback),
		r(http.MethodGet, "/payments/{paymentId}", AccessActivePass, h.withPass(h.paymentPage)),
		// The gate's exceptions, given here too (DESIGN.md, "The booking
		// core's own port gives what the gate gives"): a fan whose booking
		// completed (and freed its place) can still read it, and its wallet.
		r(http.MethodGet, "/bookings/{id}", AccessValidPass, h.withValidPass(h.booking)),
		r(http.MethodGet, "/wallet", AccessValidPass, h.withValidPass(h.wallet)),
		r(http.MethodPost, "/admin/wallets/{account}/credits", AccessOperator, h.withAdmin(h.credit)),
	}
}

// Routes lists the booking API's routes, as NewHandler registers them.
func Routes() []Route {
	var out []Route
	for _, rt := range (&Handler{}).routes() {
		out = append(out, rt.Route)
	}
	return out
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

// WithOperators turns on the operators' routes, each request's bearer
// token judged by may (auth.admin_token, or a named token of scope
// wallets:write for every event: cmd/booking asks the config), and
// returns h.
func (h *Handler) WithOperators(may func(token string) bool) *Handler {
	h.operator = may
	return h
}

// withAdmin runs next for a request bearing a token the operators' check
// allows; off (404) while there is no check, 401 for a token it refuses
// or none.
func (h *Handler) withAdmin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.operator == nil {
			h.fail(w, r, ErrNotFound)
			return
		}
		tok, _ := pass.Bearer(r.Header.Get("Authorization"))
		if !h.operator(tok) {
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
		tok, ok := pass.Bearer(r.Header.Get("Authorization"))
		if !ok {
			h.fail(w, r, ErrAdmissionRequired)
			return
		}
		p, err := h.auth(r.Context(), tok)
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

// Follow follows the line's ends for the check of every pass until ctx
// ends (gatekeeper.Gatekeeper.Follow): run it beside the handler, with the
// process's jobs.
func (h *Handler) Follow(ctx context.Context) { h.keeper.Follow(ctx) }

// admitted is nil if p's ticket holds its active place in p's event now,
// or, while the breaker has given up on Redis, if p names an event sold
// here and its place's end was not heard: the pass verified already
// (signature, audience, exp), and a fan in the middle of paying goes on
// (DESIGN.md, "When parts fail" and "Fans cannot open the gate"). A check
// that got no answer while the breaker has not given up is a 503.
func (h *Handler) admitted(ctx context.Context, p Pass) error { return h.check(ctx, p, nil) }

// check is admitted with the line asked by active (gatekeeper.CheckBy: a
// call that answers the check and does more), or by the plain check (nil).
func (h *Handler) check(ctx context.Context, p Pass, active func(context.Context) (bool, error)) error {
	ticket := p.Ticket
	if ticket == "" {
		ticket = p.Customer // a pass made without NewPass: its sub
	}
	var (
		v   gatekeeper.Verdict
		err error
	)
	if active == nil {
		v, err = h.keeper.Check(ctx, p.Event, ticket)
	} else {
		v, err = h.keeper.CheckBy(ctx, p.Event, ticket, active)
	}
	switch {
	case errors.Is(err, line.ErrUnavailable):
		return fmt.Errorf("%w: the line: %w", ErrUnavailable, err)
	case err != nil:
		return fmt.Errorf("active: %w", err)
	case v == gatekeeper.PassRefused:
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

// hold: a pass whose ticket holds its active place takes a hold. The pass
// is checked against the line in the hold's one call to it, which also
// counts the hold's places out (Service.HoldAdmitted): one round trip to
// Redis, not two. A request refused before it got that far asks the line
// first all the same, so a pass whose place is gone is 401 whatever it
// asked, as on every route that needs an active place.
func (h *Handler) hold(w http.ResponseWriter, r *http.Request, p Pass) error {
	asked := false
	admit := func(ctx context.Context, active func(context.Context) (bool, error)) error {
		asked = true
		return h.check(ctx, p, active)
	}
	hold, err := h.holdOf(w, r, p, admit)
	if err != nil {
		if !asked {
			if aerr := h.admitted(r.Context(), p); aerr != nil {
				return aerr
			}
		}
		return err
	}
	w.Header().Set(line.HoldExpiresHeader, hold.ExpiresAt.UTC().Format(time.RFC3339Nano))
	writeJSON(w, http.StatusCreated, hold)
	return nil
}

func (h *Handler) holdOf(w http.ResponseWriter, r *http.Request, p Pass, admit Admission) (Hold, error) {
	id, err := pathInt(r, "id")
	if err != nil {
		return Hold{}, err
	}
	var in HoldInput
	if err := decode(w, r, &in); err != nil {
		return Hold{}, err
	}
	return h.svc.HoldAdmitted(r.Context(), p, id, in, admit)
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

// checkout: a pass whose ticket holds its active place checks out (opens
// the payment, or pays with points); a valid pass whose place is gone gets
// only the answer of a checkout it made already, replayed by its
// Idempotency-Key (Service.Replay): its booking confirmed and freed the
// place, and the first answer was lost on the way.
func (h *Handler) checkout(w http.ResponseWriter, r *http.Request, p Pass) error {
	in, bad := checkoutBody(w, r)
	if err := h.admitted(r.Context(), p); err != nil {
		if !errors.Is(err, ErrAdmissionRequired) || bad != nil {
			return err
		}
		out, err := h.svc.Replay(r.Context(), p, r.PathValue("holdId"), r.Header.Get("Idempotency-Key"), in.Method)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, out)
		return nil
	}
	if bad != nil {
		return bad
	}
	switch in.Method {
	case "card":
	case "points":
		paid, err := h.svc.CheckoutPoints(r.Context(), p, r.PathValue("holdId"), r.Header.Get("Idempotency-Key"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, paid)
		return nil
	}
	c, err := h.svc.Checkout(r.Context(), p, r.PathValue("holdId"), r.Header.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, c)
	return nil
}

// checkoutBody reads a checkout's optional body: its method, "card" when
// none is named (a card checkout has always been sent with no body).
func checkoutBody(w http.ResponseWriter, r *http.Request) (checkoutInput, error) {
	var in checkoutInput
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return in, fmt.Errorf("body too large or unreadable: %w", ErrInvalidRequest)
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeBytes(body, &in); err != nil {
			return in, err
		}
	}
	switch in.Method {
	case "", "card":
		in.Method = "card"
	case "points":
	default:
		return in, fmt.Errorf("checkout: method must be card or points, not %q: %w", in.Method, ErrInvalidRequest)
	}
	return in, nil
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
		switch {
		case e.err != ErrUnavailable:
		case callerGone(r):
			return
		case errors.Is(err, line.ErrUnavailable):
			h.log.Warn("booking request failed: the line (Redis) did not answer its check", "method", r.Method, "route", r.Pattern, "err", err)
		default:
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
	// Only JSON's whitespace may follow (dec.More is false before a '}' or
	// a ']' too: {"seats":["A2"]}} passed for one object).
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		return fmt.Errorf("trailing data after the JSON object: %w", ErrInvalidRequest)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
