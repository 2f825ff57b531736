package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html"
	"net"
	"net/netip"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/queue"
)

// Any site behind the room (DESIGN.md, "Any site behind the room"): the
// reverse proxy a site already runs (nginx auth_request, Caddy
// forward_auth, Traefik forwardAuth) asks GET /api/v1/forward-auth about
// each request, and the gateway answers from the events' protect rules:
//
//   - no rule guards the path: 200, and nothing else is done (no Redis);
//   - a rule guards it and the request carries the event's pass (cookie
//     wr_fa_{event}), valid and its ticket still active: 200 with
//     X-Waitroom-Event and X-Waitroom-Ticket-Id (one Redis call, and one
//     signature check the first time the gateway sees that pass);
//   - the URL carries a return token (wr_token) that the room minted: it
//     is spent, once, while its ticket is active, for the pass, which the
//     200 sets as a cookie for the proxy to pass on;
//   - otherwise 401, with X-Waitroom-Location: the room, and return= the
//     fan's URL, for the proxy to send the fan to.
//
// The pass is an EdDSA JWT of the gateway's key (aud "site"), so an origin
// may check it itself against the JWKS; the return token is one too (aud
// "forward-auth", 60 s, one use).

const (
	siteCookie   = "wr_fa_"   // + event: the site's pass
	returnParam  = "wr_token" // the return token in the way back's query
	returnTTL    = 60 * time.Second
	maxReturnLen = 2048 // the longest way back a room link carries
	maxURILen    = 8192 // the longest X-Forwarded-Uri read
	// spentFor is how long a spent return token is remembered: past its
	// 60 s and the verifier's leeway.
	spentFor = 2 * time.Minute
)

var forwardAuths = metrics.CounterVec("waitroom_forward_auth_total",
	"Forward-auth answers on guarded paths, by event and result: passed (a live pass), exchanged (a return token traded for a pass), refused (sent to the room), degraded (a valid pass let through by its signature alone while Redis did not answer).",
	"event", "result")

var forwardAuthResults = []string{"passed", "exchanged", "refused", "degraded"}

// guard is the events' protect rules, compiled: per host (lower case),
// the rules from the longest prefix down. It is swapped whole on reload.
type guard map[string][]guardRule

type guardRule struct {
	prefix string // lower case, cleaned (normalPath of the rule's path_prefix)
	event  string
	cookie string // siteCookie + event
}

func guardOf(cfg *config.Config) guard {
	g := guard{}
	for _, ev := range cfg.Events {
		for _, r := range ev.Protect {
			host := strings.ToLower(r.Host)
			g[host] = append(g[host], guardRule{prefix: normalPath(r.PathPrefix), event: ev.ID, cookie: siteCookie + ev.ID})
		}
	}
	for _, rules := range g {
		sort.SliceStable(rules, func(i, j int) bool { return len(rules[i].prefix) > len(rules[j].prefix) })
	}
	return g
}

// match is the rule that guards path (a request target) on host (as the
// fan sent it, port and all), if any.
func (g guard) match(host, target string) (guardRule, bool) {
	rules := g[hostName(host)]
	if len(rules) == 0 {
		return guardRule{}, false
	}
	p := normalPath(target)
	for _, r := range rules {
		if strings.HasPrefix(p, r.prefix) {
			return r, true
		}
	}
	return guardRule{}, false
}

// guards reports whether some rule of event names host (the way back's
// check: no open redirect).
func (g guard) guards(event, host string) bool {
	for _, r := range g[hostName(host)] {
		if r.event == event {
			return true
		}
	}
	return false
}

// hostName is host without its port or a final dot, in lower case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// normalPath is the path of a request target as an origin may read it, so
// that no spelling of a guarded path slips past its rule: the query and
// fragment cut off, every %XX decoded, backslashes read as slashes, empty
// and dot segments resolved (path.Clean), in lower case (guarding
// /Tour-Tokyo too costs a case-sensitive origin nothing).
func normalPath(target string) string {
	if i := strings.IndexAny(target, "?#"); i >= 0 {
		target = target[:i]
	}
	b := make([]byte, 0, len(target)+1)
	b = append(b, '/')
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c == '%' && i+2 < len(target) && isHex(target[i+1]) && isHex(target[i+2]) {
			c = unhex(target[i+1])<<4 | unhex(target[i+2])
			i += 2
		}
		switch {
		case c == '\\':
			c = '/'
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return path.Clean(string(b))
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// forwardedTarget is the fan's request target as the proxy tells it
// (X-Forwarded-Uri, else X-Original-URI), or errBadForwardedURI.
func forwardedTarget(c *fiber.Ctx) (string, error) {
	h := &c.Request().Header
	v := h.Peek("X-Forwarded-Uri")
	if len(v) == 0 {
		v = h.Peek("X-Original-URI")
	}
	if len(v) == 0 || len(v) > maxURILen || v[0] != '/' {
		return "", errBadForwardedURI
	}
	for _, b := range v {
		if b <= ' ' || b == 0x7f {
			return "", errBadForwardedURI
		}
	}
	return string(v), nil
}

// forwardAuth: GET /api/v1/forward-auth (any method: a proxy may ask with
// the fan's).
func (s *Server) forwardAuth(c *fiber.Ctx) error {
	noStore(c)
	ps := s.proxies.Load()
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ps.trusted(peer) {
		return errUntrustedProxy
	}
	target, err := forwardedTarget(c)
	if err != nil {
		return err
	}
	cl := ps.clientOf(c)
	rule, ok := s.guard.Load().match(string(cl.host), target)
	if !ok {
		return c.SendStatus(fiber.StatusOK)
	}
	ctx := c.UserContext()
	if tok := c.Cookies(rule.cookie); tok != "" {
		if claims, err := s.sitePasses.Verify(ctx, tok); err == nil && claims.Event == rule.event {
			// While Redis does not answer, a valid pass goes on as at the
			// gate (DESIGN.md, "When parts fail"); revocations wait.
			active, degraded, err := s.activeNow(ctx, rule.event, claims.Ticket)
			switch {
			case err != nil:
				return err
			case degraded:
				return s.letThrough(c, rule, claims.Ticket, "degraded")
			case active:
				return s.letThrough(c, rule, claims.Ticket, "passed")
			}
		}
	}
	fan, tok := splitReturnToken(target)
	if tok != "" {
		if ok, err := s.exchange(c, rule, tok); ok || err != nil {
			return err
		}
	}
	return s.sendToRoom(c, rule, cl, fan)
}

// letThrough answers 200 for the ticket's fan, with the event and the
// ticket for the origin.
func (s *Server) letThrough(c *fiber.Ctx, rule guardRule, ticket, result string) error {
	forwardAuths.WithLabelValues(rule.event, result).Inc()
	c.Set("X-Waitroom-Event", rule.event)
	c.Set("X-Waitroom-Ticket-Id", ticket)
	return c.SendStatus(fiber.StatusOK)
}

// exchange trades the return token tok for the site's pass: 200 with its
// cookie when the token is the room's, of this event, unexpired, unspent,
// and its ticket active (ok); nothing done otherwise (the fan goes to the
// room).
func (s *Server) exchange(c *fiber.Ctx, rule guardRule, tok string) (ok bool, err error) {
	ctx := c.UserContext()
	claims, err := s.returnVerifier.Verify(ctx, tok)
	if err != nil || claims.Event != rule.event {
		return false, nil
	}
	var (
		until  time.Time
		active bool
	)
	err = s.redis.Do(ctx, func(ctx context.Context) (err error) {
		until, active, err = s.line.SpendReturn(ctx, rule.event, claims.Ticket, claims.ID, spentFor)
		return err
	})
	switch {
	case errors.Is(err, queue.ErrTokenSpent), err == nil && !active:
		return false, nil
	case err != nil:
		return false, err
	}
	site, err := s.signer.MintSite(claims.Ticket, rule.event, s.now(), until)
	if err != nil {
		return false, err
	}
	s.setCookie(c, rule.cookie, site, until)
	return true, s.letThrough(c, rule, claims.Ticket, "exchanged")
}

// sendToRoom answers 401 with the room's address for the proxy to send the
// fan to: the event's room, with return= the URL the fan asked for (when
// the host it asked for can be written in one). The body is a page that
// goes there by itself, for a proxy that shows the 401 as it is.
func (s *Server) sendToRoom(c *fiber.Ctx, rule guardRule, cl client, target string) error {
	forwardAuths.WithLabelValues(rule.event, "refused").Inc()
	room := s.config().Gateway.PublicURL + "/e/" + rule.event
	if hostOK(cl.host) {
		scheme := "http://"
		if cl.secure {
			scheme = "https://"
		}
		room += "?return=" + url.QueryEscape(scheme+string(cl.host)+escapeTarget(target))
	}
	c.Set("X-Waitroom-Location", room)
	c.Type("html", "utf-8")
	href := html.EscapeString(room)
	return c.Status(fiber.StatusUnauthorized).SendString(`<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url=` +
		href + `"><title>Waiting room</title><p>This page is behind a waiting room: <a href="` + href + `">take your place in line</a>.</p>`)
}

// escapeTarget writes the bytes of a request target that a URL cannot
// carry as they are (beyond ASCII) as %XX.
func escapeTarget(t string) string {
	for i := 0; i < len(t); i++ {
		if t[i] >= 0x80 {
			var b strings.Builder
			for j := 0; j < len(t); j++ {
				if c := t[j]; c >= 0x80 {
					b.WriteByte('%')
					b.WriteByte(upperHex[c>>4])
					b.WriteByte(upperHex[c&15])
				} else {
					b.WriteByte(c)
				}
			}
			return b.String()
		}
	}
	return t
}

const upperHex = "0123456789ABCDEF"

// splitReturnToken takes the return token out of a request target: the
// target without it (every wr_token= of its query dropped, the rest as it
// was), and the token ("" = none).
func splitReturnToken(target string) (rest, tok string) {
	q := strings.IndexByte(target, '?')
	if q < 0 || !strings.Contains(target[q:], returnParam+"=") {
		return target, ""
	}
	base, query := target[:q], target[q+1:]
	var kept []string
	for _, p := range strings.Split(query, "&") {
		if v, found := strings.CutPrefix(p, returnParam+"="); found {
			if tok == "" {
				tok, _ = url.QueryUnescape(v)
			}
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 {
		return base, tok
	}
	return base + "?" + strings.Join(kept, "&"), tok
}

// wayBack checks a return URL for the room of ev (GET /e/{event}?return=,
// a join's "return"): an absolute http(s) URL, with no user, on a host
// some protect rule of ev names, at most maxReturnLen printable ASCII
// bytes. Anything else is errInvalidReturn: the room sends no fan to a
// site it does not guard.
func (s *Server) wayBack(ev *config.Event, raw string) (string, error) {
	if raw == "" || len(raw) > maxReturnLen {
		return "", errInvalidReturn
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] <= ' ' || raw[i] >= 0x7f {
			return "", errInvalidReturn
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Host == "" || !s.guard.Load().guards(ev.ID, u.Host) {
		return "", errInvalidReturn
	}
	return raw, nil
}

// joinReturn is the way back a join carries ("" = none): form field return
// (the room page's form), or "return" of a JSON body. One that wayBack
// refuses is errInvalidReturn, before the join changes anything.
func (s *Server) joinReturn(c *fiber.Ctx, ev *config.Event) (string, error) {
	var raw string
	if ct := c.Get(fiber.HeaderContentType); strings.HasPrefix(ct, fiber.MIMEApplicationJSON) {
		var body struct {
			Return string `json:"return"`
		}
		if json.Unmarshal(c.Body(), &body) == nil {
			raw = body.Return
		}
	} else if strings.HasPrefix(ct, fiber.MIMEApplicationForm) || strings.HasPrefix(ct, fiber.MIMEMultipartForm) {
		raw = c.FormValue("return")
	}
	if raw == "" {
		return "", nil
	}
	return s.wayBack(ev, raw)
}

// returnLink is the way back kept for the ticket id of ev, with a fresh
// return token in it, or "" when there is none (or the event guards no
// site). A line that cannot say is no way back: the fan is admitted all
// the same, and the next poll asks again.
func (s *Server) returnLink(c *fiber.Ctx, ev *config.Event, id string) string {
	if len(ev.Protect) == 0 {
		return ""
	}
	ret, err := s.line.Return(c.UserContext(), ev.ID, id)
	if err != nil {
		s.log.Warn("return link", "event", ev.ID, "err", err)
		return ""
	}
	if ret == "" {
		return ""
	}
	// A rule removed since it was kept leads nowhere now.
	if _, err := s.wayBack(ev, ret); err != nil {
		return ""
	}
	var jti [16]byte
	_, _ = rand.Read(jti[:])
	now := s.now()
	tok, err := s.signer.MintReturn(id, ev.ID, base64.RawURLEncoding.EncodeToString(jti[:]), now, now.Add(returnTTL))
	if err != nil {
		s.log.Error("return token", "event", ev.ID, "err", err)
		return ""
	}
	return withReturnToken(ret, tok)
}

// withReturnToken adds wr_token=tok to the query of the URL ret (before
// its fragment), the rest as it was.
func withReturnToken(ret, tok string) string {
	frag := ""
	if i := strings.IndexByte(ret, '#'); i >= 0 {
		ret, frag = ret[:i], ret[i:]
	}
	ret, _ = splitReturnToken(ret)
	sep := "?"
	if strings.Contains(ret, "?") {
		sep = "&"
	}
	return ret + sep + returnParam + "=" + tok + frag
}

// keepReturn keeps ret as the way back of the fan holding ticket of ev, as
// long as the ticket's cookie lives. A line that cannot keep it loses the
// way back, not the place: logged.
func (s *Server) keepReturn(c *fiber.Ctx, ev *config.Event, ticket, ret string) {
	until := s.ticketCookieUntil(s.settingsFor(ev))
	if err := s.line.SetReturn(c.UserContext(), ev.ID, ticket, ret, until.Sub(s.now())); err != nil && !errors.Is(err, queue.ErrInvalidTicket) {
		s.log.Warn("keep return", "event", ev.ID, "err", err)
	}
}

// sitePassesKept is how many site passes the gateway remembers as verified:
// a fan's every request after its first skips the signature check.
const sitePassesKept = 100_000

// passVerifiers are the gateway's own verifiers of a site's pass (through
// a cache) and of a return token (each is shown once).
func passVerifiers(signer *pass.Signer, now func() time.Time) (site *pass.Cache, ret *pass.Verifier) {
	sv, rv := pass.NewStaticVerifierFor(signer.PublicKey(), pass.AudienceSite), pass.NewStaticVerifierFor(signer.PublicKey(), pass.AudienceReturn)
	sv.Now, rv.Now = now, now
	return pass.NewCache(sv, sitePassesKept), rv
}
