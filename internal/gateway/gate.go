package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/queue"
)

var proxyErrors = metrics.CounterVec("waitroom_proxy_errors_total",
	"Proxied booking calls that failed at the gateway, by reason (timeout → 504, unavailable → 503).", "reason")

const (
	bookingPrefix = "/api/v1/booking"
	callbackPath  = bookingPrefix + "/payments/callback"
)

var (
	holdPath    = regexp.MustCompile(`^/api/v1/booking/showtimes/[0-9]+/holds$`)
	bookingPath = regexp.MustCompile(`^/api/v1/booking/(bookings/[^/]+|wallet)$`)
	requestID   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// gate: ANY /api/v1/booking/* — proxied only for a valid pass whose ticket
// is still active. Every refusal is the same bare 401: nothing in it tells an
// attacker which check failed.
func (s *Server) gate(c *fiber.Ctx) error {
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
	claims, token, err := s.admitted(c, path)
	if err != nil {
		return err
	}
	if err := s.proxy.forward(c, token, s.clientOf(c)); err != nil {
		return err
	}
	if c.Method() == fiber.MethodPost && c.Response().StatusCode() == fiber.StatusCreated && holdPath.MatchString(path) {
		s.extendForHold(c, claims)
	}
	return nil
}

// admitted finds a pass (Bearer header, else the event's cookie) that
// verifies and whose ticket is active; reading one's own booking (or
// wallet) needs only a valid pass, so a fan whose place was freed by the
// booking can see it.
func (s *Server) admitted(c *fiber.Ctx, path string) (pass.Claims, string, error) {
	ctx := c.UserContext()
	readOnlyBooking := c.Method() == fiber.MethodGet && bookingPath.MatchString(path)
	var candidates []string
	if h := c.Get(fiber.HeaderAuthorization); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		candidates = append(candidates, strings.TrimSpace(h[7:]))
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
		if readOnlyBooking {
			return claims, tok, nil
		}
		active, _, err := s.activeNow(ctx, claims.Event, claims.Ticket)
		if err != nil {
			return pass.Claims{}, "", err
		}
		if active {
			return claims, tok, nil
		}
	}
	return pass.Claims{}, "", errAdmissionRequired
}

// activeNow reports whether the ticket of a pass that verified is active,
// asking the line through the breaker. When Redis does not answer (or did
// not lately) a pass of an event of the sale is honoured alone (degraded),
// so that a fan in the middle of paying goes on; a revocation waits for
// Redis. The gate and forward auth both ask it.
func (s *Server) activeNow(ctx context.Context, event, ticket string) (active, degraded bool, err error) {
	err = s.redis.Do(ctx, func(ctx context.Context) (err error) {
		active, err = s.line.Active(ctx, event, ticket)
		return err
	})
	switch {
	case errors.Is(err, queue.ErrUnavailable):
		if _, ok := s.config().Event(event); ok {
			s.degraded.Inc()
			return true, true, nil
		}
		return false, false, nil
	case err != nil:
		return false, false, err
	}
	return active, false, nil
}

// extendForHold stretches the fan's active window to cover the hold just
// taken (never past it), and hands out a pass that lasts as long.
func (s *Server) extendForHold(c *fiber.Ctx, claims pass.Claims) {
	var hold struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := json.Unmarshal(c.Response().Body(), &hold); err != nil || hold.ExpiresAt.IsZero() {
		return
	}
	// No endless window: a chain of holds keeps the place at most
	// access_ttl + hold_ttl after it was claimed (every hold taken inside
	// the access window lapses by then).
	cfg := s.config()
	window := cfg.Booking.HoldTTL.D()
	if ev, ok := cfg.Event(claims.Event); ok {
		window += s.settingsFor(ev).AccessTTL
	}
	var (
		until time.Time
		ok    bool
	)
	// Not while Redis does not answer: the fan keeps the pass it has.
	err := s.redis.Do(c.UserContext(), func(ctx context.Context) (err error) {
		until, ok, err = s.line.Extend(ctx, claims.Event, claims.Ticket, hold.ExpiresAt, window)
		return err
	})
	if err != nil || !ok {
		if err != nil {
			s.log.Warn("extend active window", "event", claims.Event, "err", err)
		}
		return
	}
	if !until.After(claims.ExpiresAt) {
		return
	}
	tok, err := s.signer.MintFor(claims.Ticket, claims.Event, claims.Account, s.now(), until)
	if err != nil {
		return
	}
	noStore(c) // an answer with a pass in it
	s.setCookie(c, accessCookie+claims.Event, tok, until)
	c.Set("X-Waitroom-Access-Token", tok)
	c.Set("X-Waitroom-Access-Expires", until.UTC().Format(time.RFC3339))
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
