package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/gatekeeper"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/breaker"
	"github.com/waitroom/waitroom/internal/platform/metrics"
)

var proxyErrors = metrics.CounterVec("waitroom_proxy_errors_total",
	"Proxied booking calls that failed at the gateway, by reason (timeout → 504, unavailable → 503).", "reason")

const (
	bookingPrefix = "/api/v1/booking"
	callbackPath  = bookingPrefix + "/payments/callback"
)

var (
	bookingPath  = regexp.MustCompile(`^/api/v1/booking/(bookings/[^/]+|wallet)$`)
	checkoutPath = regexp.MustCompile(`^/api/v1/booking/holds/[^/]+/checkout$`)
	requestID    = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// validPassEnough reports whether c is one of the gate's exceptions, which
// need a valid pass and not an active place (DESIGN.md, Gateway API, and
// "A checkout replayed after it completed gets its answer"): reading one's
// own booking or wallet, so that a fan whose place its booking freed can
// see them; and a checkout with an Idempotency-Key, which the booking core
// answers only with the stored answer of that key when the place is gone
// (its own check of the line, then 401 for a new checkout).
func validPassEnough(c *fiber.Ctx, path string) bool {
	switch c.Method() {
	case fiber.MethodGet:
		return bookingPath.MatchString(path)
	case fiber.MethodPost:
		return c.Get("Idempotency-Key") != "" && checkoutPath.MatchString(path)
	}
	return false
}

// GateLine is what the gate asks of the line beyond the check of a pass's
// place (sessions'): the active window a hold stretches.
type GateLine interface {
	Extend(ctx context.Context, event, ticket string, until time.Time, window time.Duration) (time.Time, bool, error)
}

// gate is the only way in to the booking API: a pass checked, the request
// passed on to the booking core, a hold's window stretched and its pass
// handed out.
type gate struct {
	*edge
	line     GateLine
	signer   *pass.Signer
	verifier *pass.Verifier   // the gate's passes, by the gateway's own key
	proxy    *proxy           // to the booking core
	redis    *breaker.Breaker // the server's breaker of the line (server.go)
	sessions *sessions        // a pass's place checked, a sliding one renewed (session.go)
}

// serve: ANY /api/v1/booking/* — proxied only for a valid pass whose
// ticket is still active. Every refusal is the same bare 401: nothing in
// it tells an attacker which check failed.
func (s *gate) serve(c *fiber.Ctx) error {
	path := c.Path()
	if c.Method() == fiber.MethodPost && path == callbackPath {
		// The payment provider's callback carries no pass: the booking core
		// verifies its HMAC signature itself.
		return s.proxy.forward(c, "", s.clientOf(c))
	}
	if strings.HasPrefix(path, bookingPrefix+"/admin/") {
		// The booking core's operators' routes are reached through the
		// gateway's /api/v1/admin only (admin_wallet.go), never by fans.
		return errNotFound
	}
	claims, token, again, err := s.admitted(c, path)
	if err != nil {
		return err
	}
	if err := s.proxy.forward(c, token, s.clientOf(c)); err != nil {
		return err
	}
	if exp := c.Response().Header.Peek(line.HoldExpiresHeader); len(exp) > 0 {
		// A hold taken: the booking core said until when (its one header
		// for the gate, not the fan's).
		holdExp, err := time.Parse(time.RFC3339Nano, string(exp))
		c.Response().Header.Del(line.HoldExpiresHeader)
		if err == nil && c.Response().StatusCode() == fiber.StatusCreated {
			if until, ok := s.extendForHold(c, claims, holdExp); ok && !until.Before(again) {
				return nil
			}
		}
	}
	if !again.IsZero() {
		s.reissue(c, claims, again) // a sliding session's pass (session.go)
	}
	return nil
}

// admitted finds a pass (Bearer header, else the event's cookie) that
// verifies and whose ticket is active; the gate's exceptions need only a
// valid pass (validPassEnough). again is the expiry of the pass to issue
// again for a sliding session's use (zero: none; session.go).
func (s *gate) admitted(c *fiber.Ctx, path string) (claims pass.Claims, token string, again time.Time, err error) {
	ctx := c.UserContext()
	validEnough := validPassEnough(c, path)
	var candidates []string
	if token, ok := pass.Bearer(c.Get(fiber.HeaderAuthorization)); ok {
		candidates = append(candidates, token)
	} else {
		c.Request().Header.VisitAllCookie(func(k, v []byte) {
			if bytes.HasPrefix(k, []byte(accessCookie)) && len(candidates) < 8 {
				candidates = append(candidates, string(v))
			}
		})
	}
	for _, tok := range candidates {
		claims, err := s.verifier.Verify(ctx, tok)
		if err != nil {
			continue
		}
		if validEnough || len(candidates) == 1 && s.coreChecks(c, path, claims.Event) {
			return claims, tok, time.Time{}, nil
		}
		active, _, again, err := s.sessions.usePass(ctx, claims)
		if err != nil {
			return pass.Claims{}, "", time.Time{}, err
		}
		if active {
			return claims, tok, again, nil
		}
	}
	return pass.Claims{}, "", time.Time{}, errAdmissionRequired
}

// coreChecks reports whether the booking core checks the place of a
// pass of event in the very call that answers the request, so that the
// gate, having verified the pass, need not ask the line first: a hold
// (POST …/showtimes/{id}/holds), whose reservation of its places is the
// core's check of the place (queue's reserve: nothing is reserved for a
// place that is not active, and the core answers 401 admission_required
// before any statement runs). The fan gets the answer the gate would have
// given, and the hold asks Redis once at the core and once at the gate
// (extendForHold), not twice at the gate. Not for an event of sliding
// sessions: the gate's check renews the place (session.go). Only for a
// request with one pass: of several cookies, the gate finds the one whose
// place is active.
func (s *gate) coreChecks(c *fiber.Ctx, path, event string) bool {
	if c.Method() != fiber.MethodPost || !isHoldRoute(path) {
		return false
	}
	_, sliding := s.sessions.sliding(event)
	return !sliding
}

// isHoldRoute reports whether path is /api/v1/booking/showtimes/{id}/holds.
func isHoldRoute(path string) bool {
	id, ok := strings.CutPrefix(path, bookingPrefix+"/showtimes/")
	if !ok {
		return false
	}
	id, ok = strings.CutSuffix(id, "/holds")
	return ok && id != "" && !strings.Contains(id, "/")
}

// activeNow reports whether the ticket of a pass that verified is active:
// the gatekeeper's answer (gatekeeper.Gatekeeper, the booking core's too). While
// Redis does not answer (the breaker gave up on it), a pass of an event of
// the sale whose end was not heard goes on alone (degraded), so that a fan
// in the middle of paying goes on; one check without an answer is a 503.
// The gate and forward auth both ask it.
func (s *sessions) activeNow(ctx context.Context, event, ticket string) (active, degraded bool, err error) {
	v, err := s.keeper.Check(ctx, event, ticket)
	return v != gatekeeper.PassRefused, v == gatekeeper.PassDegraded, err
}

// extendForHold stretches the fan's active window to cover the hold just
// taken, which ends at holdExp (never past it), and hands out a pass that
// lasts as long: ok when it did, until its end.
func (s *gate) extendForHold(c *fiber.Ctx, claims pass.Claims, holdExp time.Time) (until time.Time, ok bool) {
	// No endless window: a chain of holds keeps the place at most
	// access_ttl + hold_ttl after it was claimed (every hold taken inside
	// the access window lapses by then).
	cfg := s.config()
	window := cfg.Booking.HoldTTL.D()
	if ev, ok := cfg.Event(claims.Event); ok {
		window += s.settingsFor(ev).AccessTTL
	}
	// Not while Redis does not answer: the fan keeps the pass it has.
	err := s.redis.Do(c.UserContext(), func(ctx context.Context) (err error) {
		until, ok, err = s.line.Extend(ctx, claims.Event, claims.Ticket, holdExp, window)
		return err
	})
	if err != nil || !ok {
		if err != nil {
			s.log.Warn("extend active window", "event", claims.Event, "err", err)
		}
		return time.Time{}, false
	}
	if !until.After(claims.ExpiresAt) {
		return time.Time{}, false
	}
	s.handOut(c, claims, until)
	return until, true
}

// proxy forwards to the booking core over a pooled fasthttp client.
type proxy struct {
	hc      *fasthttp.HostClient
	host    string
	timeout time.Duration
}

func newProxy(bookingURL string, timeout time.Duration) (*proxy, error) {
	u, err := url.Parse(bookingURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("gateway: booking_url %q: must be an http(s) URL", bookingURL)
	}
	addr := u.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		if u.Scheme == "https" {
			addr += ":443"
		} else {
			addr += ":80"
		}
	}
	return &proxy{
		host:    u.Host,
		timeout: timeout,
		hc: &fasthttp.HostClient{
			Addr:                      addr,
			IsTLS:                     u.Scheme == "https",
			MaxConns:                  2048,
			MaxIdleConnDuration:       30 * time.Second,
			ReadTimeout:               timeout,
			WriteTimeout:              timeout,
			MaxResponseBodySize:       4 << 20,
			MaxIdemponentCallAttempts: 1,
			NoDefaultUserAgentHeader:  true,
			DisablePathNormalizing:    true,
			Dial: func(addr string) (net.Conn, error) {
				return fasthttp.DialTimeout(addr, 2*time.Second)
			},
		},
	}, nil
}

func (p *proxy) close() { p.hc.CloseIdleConnections() }

// Hop-by-hop headers (RFC 9110 §7.6.1) are never forwarded.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends the request on with the pass as a Bearer header (never the
// fan's cookies), and the fan's address, scheme and host as the gateway
// believes them (cl: never the client's own X-Forwarded-* words), and
// copies the answer back. A booking core that is down gets 503 with
// Retry-After; one that does not answer in time gets 504.
func (p *proxy) forward(c *fiber.Ctx, token string, cl client) error {
	req, resp := c.Request(), c.Response()
	id := c.Get("X-Request-Id")
	if !requestID.MatchString(id) {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.Header.Del(fiber.HeaderCookie)
	req.Header.Del(fiber.HeaderAuthorization)
	if token != "" {
		req.Header.Set(fiber.HeaderAuthorization, "Bearer "+token)
	}
	req.Header.Set("X-Request-Id", id)
	req.Header.Set(fiber.HeaderXForwardedFor, cl.addr.String())
	if cl.secure {
		req.Header.Set(fiber.HeaderXForwardedProto, "https")
	} else {
		req.Header.Set(fiber.HeaderXForwardedProto, "http")
	}
	if hostOK(cl.host) {
		// cl.host may point into this very header: copied first.
		var buf [maxHost]byte
		req.Header.SetBytesV(fiber.HeaderXForwardedHost, append(buf[:0], cl.host...))
	} else {
		req.Header.Del(fiber.HeaderXForwardedHost)
	}
	req.SetHost(p.host)
	req.UseHostHeader = false
	err := p.hc.DoTimeout(req, resp, p.timeout)
	if err != nil {
		resp.Reset()
		if errors.Is(err, fasthttp.ErrTimeout) {
			proxyErrors.WithLabelValues("timeout").Inc()
			return errBookingTimeout
		}
		proxyErrors.WithLabelValues("unavailable").Inc()
		return errBookingDown
	}
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	resp.Header.Set("X-Request-Id", id)
	return nil
}
