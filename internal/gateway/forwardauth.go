package gateway

import (
	"bytes"
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/platform/breaker"
	"github.com/waitroom/waitroom/internal/platform/metrics"
)

// Any site behind the room (DESIGN.md, "Any site behind the room"): the
// reverse proxy a site already runs (nginx auth_request, Caddy
// forward_auth, Traefik forwardAuth) asks GET /api/v1/forward-auth about
// each request, and the gateway answers from the events' protect rules:
//
//   - no X-Forwarded-Host, or one no rule names: 403 unknown_host (it fails
//     closed: a Host the room does not know never opens a guarded page);
//   - no rule of the host guards the path (normalPath): 200, and nothing
//     else is done (no Redis);
//   - the event's bypass takes the request (bypass.go): 200 with no
//     X-Waitroom-* header, and no Redis either;
//   - a rule guards it and the request carries the event's pass (cookie
//     wr_fa_{event}), valid and its ticket still active: 200 with
//     X-Waitroom-Event and X-Waitroom-Ticket-Id (one Redis call, and one
//     signature check the first time the gateway sees that pass);
//   - the URL carries a return token (wr_token) that the room minted: it
//     is spent, once, while its ticket is active, for the pass, which the
//     200 sets as a cookie for the proxy to pass on;
//   - an auto event with room (straight.go): the visitor's place is made in
//     the ask (one join step, counted against the address's join budget),
//     and the 200 sets its pass as a cookie;
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
	"Forward-auth answers on guarded paths, by event and result: passed (a live pass), exchanged (a return token traded for a pass), through (an auto event's visitor with no live pass let straight through, its place made in the ask), bypass (passed with no pass by the event's bypass: its addresses, paths or methods), refused (sent to the room), degraded (a valid pass let through by its signature alone while Redis did not answer).",
	"event", "result")

var forwardAuthResults = []string{"passed", "exchanged", "through", "bypass", "refused", "degraded"}

// guard is the events' protect rules, compiled: per host (lower case),
// the rules from the longest prefix down. It is swapped whole on reload.
type guard map[string][]guardRule

type guardRule struct {
	prefix string // lower case, cleaned (normalPath of the rule's path_prefix)
	event  string
	cookie string  // siteCookie + event
	bypass *bypass // the event's (nil: none)
}

func guardOf(cfg *config.Config) guard {
	g := guard{}
	for _, ev := range cfg.Events {
		by := bypassOf(ev.Bypass)
		for _, r := range ev.Protect {
			host := strings.ToLower(r.Host)
			prefix, _ := normalPath(r.PathPrefix) // config.Validate took it: a plain, clean path
			g[host] = append(g[host], guardRule{prefix: prefix, event: ev.ID, cookie: siteCookie + ev.ID, bypass: by})
		}
	}
	for _, rules := range g {
		sort.SliceStable(rules, func(i, j int) bool { return len(rules[i].prefix) > len(rules[j].prefix) })
	}
	return g
}

// match is the rule that guards path (a request target) on host (as the
// fan sent it, port and all), if any; named reports whether some rule
// names the host at all (forward auth fails closed on a host none names).
// A path that cannot be normalized (normalPath) is guarded by the host's
// broadest rule, the last of its rules (the shortest prefix; of equals,
// the first in the config): it may be any path of the host as the origin
// reads it, and the broadest rule is the one most likely to cover it.
func (g guard) match(host, target string) (r guardRule, guarded, named bool) {
	rules := g[hostName(host)]
	if len(rules) == 0 {
		return guardRule{}, false, false
	}
	p, ok := normalPath(target)
	if !ok {
		return broadest(rules), true, true
	}
	for _, r := range rules {
		if strings.HasPrefix(p, r.prefix) {
			return r, true, true
		}
	}
	return guardRule{}, false, true
}

// broadest is the rule of rules (sorted from the longest prefix down, the
// config's order kept among equals) with the shortest prefix, the first of
// the config among equals.
func broadest(rules []guardRule) guardRule {
	r := rules[len(rules)-1]
	for i := len(rules) - 2; i >= 0 && len(rules[i].prefix) == len(r.prefix); i-- {
		r = rules[i]
	}
	return r
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
// that no spelling of a guarded path slips past its rule (DESIGN.md, "Fair
// play, third round"): the query cut off, backslashes read as
// slashes, the ;-parameters of every segment dropped (Tomcat and Spring
// read /x/..;/tour-tokyo as /tour-tokyo), the escapes of unreserved
// characters decoded (RFC 3986, 2.3: %74 is t, %2E is a dot), empty and
// dot segments resolved, in lower case (guarding /Tour-Tokyo too costs a
// case-sensitive origin nothing). Every other escape stays as it is: one
// decoding is what an origin does, so %2574 is not %74.
//
// ok is false for a path that cannot be normalized so: one with a bad
// escape, or an escaped slash, backslash or semicolon, which an origin
// that decodes before it splits reads as a segment's end or a parameter;
// or with a raw '#', which a request target never has (RFC 9112, 3.2: no
// fragment): a proxy passes it on, one origin reads a fragment there and
// another (Go's http.FileServer) a path to clean, /x#/../y as /y.
func normalPath(target string) (p string, ok bool) { return normalize(target, true) }

// normalize is normalPath, in lower case only if fold: a bypass compares
// the path in its own case (bypass.go), since passing more than asked is
// what it must never do.
func normalize(target string, fold bool) (p string, ok bool) {
	low := lower
	if !fold {
		low = func(c byte) byte { return c }
	}
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	if strings.IndexByte(target, '#') >= 0 {
		return "", false
	}
	b := make([]byte, 0, len(target)+1)
	b = append(b, '/')
	param := false // in a segment's ;-parameters, dropped
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c == '%' {
			// Checked in a parameter too: an origin that decodes first
			// reads /x;%2F..%2F/tour-tokyo as /x;/../tour-tokyo.
			if i+2 >= len(target) || !isHex(target[i+1]) || !isHex(target[i+2]) {
				return "", false
			}
			switch d := unhex(target[i+1])<<4 | unhex(target[i+2]); {
			case d == '/' || d == '\\' || d == ';':
				return "", false
			case param:
			case unreserved(d):
				b = append(b, low(d))
			default:
				// Kept escaped, in one spelling (lower case, as the rest).
				b = append(b, '%', lower(target[i+1]), lower(target[i+2]))
			}
			i += 2
			continue
		}
		switch {
		case c == '/' || c == '\\':
			b, param = append(b, '/'), false
		case param:
		case c == ';':
			param = true
		default:
			b = append(b, low(c))
		}
	}
	return path.Clean(string(b)), true
}

// unreserved reports whether c is an unreserved character of RFC 3986
// (2.3), whose escape means the character itself.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
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

// ForwardAuthLine is what forward auth asks of the line: a return token
// spent for the site's pass, and a place made in the ask when a visitor
// goes straight through (straight.go).
type ForwardAuthLine interface {
	SpendReturn(ctx context.Context, event, id, jti string, keep, ttl time.Duration) (until time.Time, active bool, err error)
	Enter(ctx context.Context, r line.EnterRequest) (line.Entry, error)
}

// forwardAuth answers the reverse proxy of a site behind the room: the
// protect rules, the site's pass (its place checked as the gate checks a
// pass), the return token traded for it, the visitor let straight through
// or sent to the room.
type forwardAuth struct {
	*edge
	line     ForwardAuthLine
	signer   *pass.Signer
	redis    *breaker.Breaker       // the server's breaker of the line (server.go)
	guard    *atomic.Pointer[guard] // the server's: the protect rules in force
	sessions *sessions              // a pass's place checked, a sliding one renewed (session.go)
	returns  *returns               // the way back, and the sites' ports

	// The site's pass (verified once per pass, then remembered) and the
	// return token.
	sitePasses     *pass.Cache
	returnVerifier *pass.Verifier
	linesSeen      linesSeen // the auto events this gateway saw refuse a place straight through (straight.go)
}

// ask: GET /api/v1/forward-auth (any method: a proxy may ask with the
// fan's).
func (s *forwardAuth) ask(c *fiber.Ctx) error {
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
	// The host the fan asked for is the proxy's X-Forwarded-Host, never
	// the ask's own Host (the gateway's address): without it, or when no
	// rule names it, the room cannot tell what the fan asked for, and a
	// made-up Host must not open a guarded page (fails closed).
	cl := ps.clientOf(c)
	if len(bytes.TrimSpace(c.Request().Header.Peek(fiber.HeaderXForwardedHost))) == 0 {
		return errUnknownHost
	}
	rule, guarded, named := s.guard.Load().match(string(cl.host), target)
	switch {
	case !named:
		return errUnknownHost
	case !guarded:
		return c.SendStatus(fiber.StatusOK)
	case rule.bypass.passes(c, target, cl.addr):
		forwardAuths.WithLabelValues(rule.event, "bypass").Inc()
		return c.SendStatus(fiber.StatusOK)
	}
	ctx := c.UserContext()
	if tok := c.Cookies(rule.cookie); tok != "" {
		if claims, err := s.sitePasses.Verify(ctx, tok); err == nil && claims.Event == rule.event {
			// While Redis does not answer, a valid pass goes on as at the
			// gate (DESIGN.md, "When parts fail"); revocations wait. A
			// sliding session's use renews its place (session.go).
			active, degraded, again, err := s.sessions.usePass(ctx, claims)
			switch {
			case err != nil:
				return err
			case degraded:
				return s.letThrough(c, rule, claims.Ticket, "degraded")
			case active:
				if !again.IsZero() {
					if err := s.reissueSite(c, rule, claims.Ticket, again); err != nil {
						return err
					}
				}
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
	if ok, err := s.straightThrough(c, rule, cl); ok || err != nil {
		return err
	}
	return s.sendToRoom(c, rule, cl, fan)
}

// letThrough answers 200 for the ticket's fan, with the event and the
// ticket for the origin.
func (s *forwardAuth) letThrough(c *fiber.Ctx, rule guardRule, ticket, result string) error {
	forwardAuths.WithLabelValues(rule.event, result).Inc()
	c.Set("X-Waitroom-Event", rule.event)
	c.Set("X-Waitroom-Ticket-Id", ticket)
	return c.SendStatus(fiber.StatusOK)
}

// exchange trades the return token tok for the site's pass: 200 with its
// cookie when the token is the room's, of this event, unexpired, unspent,
// and its ticket active (ok); nothing done otherwise (the fan goes to the
// room). The trade claims the fan's place, as a poll of the room would: a
// fan on the site is a fan present (the line's SpendReturn).
func (s *forwardAuth) exchange(c *fiber.Ctx, rule guardRule, tok string) (ok bool, err error) {
	ctx := c.UserContext()
	claims, err := s.returnVerifier.Verify(ctx, tok)
	if err != nil || claims.Event != rule.event {
		return false, nil
	}
	ev, found := s.config().Event(rule.event)
	if !found {
		return false, nil // the event left the config since the rules were compiled
	}
	ttl := s.settingsFor(ev).AccessTTL
	var (
		until  time.Time
		active bool
	)
	err = s.redis.Do(ctx, func(ctx context.Context) (err error) {
		until, active, err = s.line.SpendReturn(ctx, rule.event, claims.Ticket, claims.ID, spentFor, ttl)
		return err
	})
	switch {
	case errors.Is(err, line.ErrTokenSpent), err == nil && !active:
		return false, nil
	case err != nil:
		return false, err
	}
	if err := s.handOutSite(c, rule, claims.Ticket, until); err != nil {
		return false, err
	}
	return true, s.letThrough(c, rule, claims.Ticket, "exchanged")
}

// sendToRoom answers 401 with the room's address for the proxy to send the
// fan to: the event's room, with return= the URL the fan asked for (when
// the host it asked for can be written in one). The body is a page that
// goes there by itself, for a proxy that shows the 401 as it is.
func (s *forwardAuth) sendToRoom(c *fiber.Ctx, rule guardRule, cl client, target string) error {
	forwardAuths.WithLabelValues(rule.event, "refused").Inc()
	room := s.config().Gateway.PublicURL + "/e/" + rule.event
	if hostOK(cl.host) {
		scheme := "http"
		if cl.secure {
			scheme = "https"
		}
		s.returns.learnPort(c.UserContext(), rule, scheme, cl.host)
		room += "?return=" + url.QueryEscape(scheme+"://"+string(cl.host)+escapeTarget(target))
	}
	c.Set("X-Waitroom-Location", room)
	c.Type("html", "utf-8")
	href := html.EscapeString(room)
	return c.Status(fiber.StatusUnauthorized).SendString(`<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url=` +
		href + `"><title>Waiting room</title><p>This page is behind a waiting room: <a href="` + href + `">take your place in line</a>.</p>`)
}

// escapeTarget writes the bytes of a request target that a URL cannot
// carry as they are as %XX: those beyond ASCII, and a % that begins no
// escape (a target whose path has no clean reading is still guarded, by
// its host's broadest rule, and its way back must be a URL the room takes).
func escapeTarget(t string) string {
	for i := 0; i < len(t); i++ {
		if carried(t, i) {
			continue
		}
		var b strings.Builder
		b.Grow(len(t) + 8)
		b.WriteString(t[:i])
		for j := i; j < len(t); j++ {
			if carried(t, j) {
				b.WriteByte(t[j])
				continue
			}
			b.WriteByte('%')
			b.WriteByte(upperHex[t[j]>>4])
			b.WriteByte(upperHex[t[j]&15])
		}
		return b.String()
	}
	return t
}

// carried reports whether a URL carries t[i] as it is: ASCII, and a %
// only as the start of an escape.
func carried(t string, i int) bool {
	switch c := t[i]; {
	case c >= 0x80:
		return false
	case c == '%':
		return i+2 < len(t) && isHex(t[i+1]) && isHex(t[i+2])
	}
	return true
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
// a join's "return", the answer to the consent page): an absolute http(s)
// URL, with no user, on a host some protect rule of ev names, at most
// maxReturnLen printable ASCII bytes, https when the room is
// (gateway.public_url), on its scheme's default port or one the site's
// own proxy named (sitePort). Anything else is errInvalidReturn: the room
// sends no fan, nor a return token, to a site, a port or a scheme it does
// not guard. Other errors are the line's.
func (s *returns) wayBack(ctx context.Context, ev *config.Event, raw string) (string, error) {
	u, err := s.wayBackURL(ev, raw)
	if err != nil {
		return "", err
	}
	if u.Port() == "" {
		return raw, nil
	}
	hostport, ok := sitePortOf(u.Scheme, u.Hostname(), u.Port())
	switch {
	case !ok:
		return "", errInvalidReturn
	case hostport == "": // the scheme's default port, spelled out
		return raw, nil
	}
	if s.sitePorts.known(ev.ID, hostport) {
		return raw, nil
	}
	known, err := s.line.SitePort(ctx, ev.ID, hostport)
	switch {
	case err != nil:
		return "", err
	case !known:
		return "", errInvalidReturn
	}
	return raw, nil
}

// wayBackURL is wayBack but for the port: what the URL says alone (a way
// back kept before is checked again with it, the rules may have changed).
func (s *returns) wayBackURL(ev *config.Event, raw string) (*url.URL, error) {
	if raw == "" || len(raw) > maxReturnLen {
		return nil, errInvalidReturn
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] <= ' ' || raw[i] >= 0x7f {
			return nil, errInvalidReturn
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Host == "" || !s.guard.Load().guards(ev.ID, u.Host) {
		return nil, errInvalidReturn
	}
	// A room served over https sends no return token in clear.
	if u.Scheme == "http" && strings.HasPrefix(s.config().Gateway.PublicURL, "https://") {
		return nil, errInvalidReturn
	}
	return u, nil
}

// The ports of a site (DESIGN.md, "The way back changes only with
// consent": a return on another port than its site's is 400
// invalid_return). A protect rule names a host and no port, so a site's
// port is its scheme's default, or one its own proxy named in the
// X-Forwarded-Host of a forward-auth ask that sent a fan to the room: the
// port the fan asked for, the one the room's link back carries. The
// gateway keeps those in Redis (the line's AddSitePort), for every
// gateway's room page to take, once per port and process (sitePorts):
// never a write per request.

// ReturnsLine is what the way back asks of the line: the way back kept
// with a place, and the sites' ports.
type ReturnsLine interface {
	SetReturn(ctx context.Context, event, id, returnURL string, ttl time.Duration) error
	Return(ctx context.Context, event, id string) (string, error)
	AddSitePort(ctx context.Context, event, hostport string) error
	SitePort(ctx context.Context, event, hostport string) (bool, error)
}

// returns is the way back to a site behind the room: checked when a fan
// brings one (wayBack), kept with the fan's place, and handed out with a
// return token once the fan is let in (returnLink); the sites' ports
// learnt from forward auth's asks.
type returns struct {
	*edge
	line      ReturnsLine
	signer    *pass.Signer
	guard     *atomic.Pointer[guard] // the server's: the protect rules in force
	sitePorts sitePorts              // the sites' ports this gateway kept in Redis
}

// sitePortOf is the port key "<host>:<port>" of a URL's or a Host's port
// (host lower case, the port as a number), "" for the scheme's default
// port; ok is false for a port that is no port (0, past 65535).
func sitePortOf(scheme, host, port string) (hostport string, ok bool) {
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", false
	}
	if scheme == "https" && p == 443 || scheme == "http" && p == 80 {
		return "", true
	}
	return net.JoinHostPort(hostName(host), strconv.Itoa(p)), true
}

// portsKept is how many ports of sites a gateway remembers having kept in
// Redis; past it, it forgets them all and keeps each again when it sees it.
const portsKept = 4096

// sitePorts is the ports this gateway has kept in Redis, per event.
type sitePorts struct {
	mu   sync.Mutex
	kept map[string]bool // event + " " + hostport
}

func (p *sitePorts) known(event, hostport string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kept[event+" "+hostport]
}

func (p *sitePorts) add(event, hostport string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept == nil || len(p.kept) >= portsKept {
		p.kept = map[string]bool{}
	}
	p.kept[event+" "+hostport] = true
}

// learnPort keeps the port of host (the fan's X-Forwarded-Host, which
// hostOK took) as one the site of rule's event is served on, unless it is
// the scheme's default or kept already. A line that cannot keep it costs
// the fan nothing now (its way back is checked at the room): logged, and
// tried again at the next refusal.
func (s *returns) learnPort(ctx context.Context, rule guardRule, scheme string, host []byte) {
	h, port, err := net.SplitHostPort(string(host))
	if err != nil {
		return
	}
	hostport, ok := sitePortOf(scheme, h, port)
	if !ok || hostport == "" || s.sitePorts.known(rule.event, hostport) {
		return
	}
	if err := s.line.AddSitePort(ctx, rule.event, hostport); err != nil {
		s.log.Warn("forward auth: keep the site's port", "event", rule.event, "err", err)
		return
	}
	s.sitePorts.add(rule.event, hostport)
}

// joinReturn is the way back a join carries ("" = none): form field return
// (the room page's form), or "return" of a JSON body. One that wayBack
// refuses is errInvalidReturn, before the join changes anything.
func (s *returns) joinReturn(c *fiber.Ctx, ev *config.Event) (string, error) {
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
	return s.wayBack(c.UserContext(), ev, raw)
}

// returnLink is the way back kept for the ticket id of ev, with a fresh
// return token in it, or "" when there is none (or the event guards no
// site). A line that cannot say is no way back: the fan is admitted all
// the same, and the next poll asks again.
func (s *returns) returnLink(c *fiber.Ctx, ev *config.Event, id string) string {
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
	if _, err := s.wayBackURL(ev, ret); err != nil {
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

// keepReturn keeps ret as the way back of the fan holding the ticket of ev
// with id (Ticket.ID of a ticket checked here), as long as the ticket's
// cookie lives. A line that cannot keep it loses the way back, not the
// place: logged.
func (s *returns) keepReturn(c *fiber.Ctx, ev *config.Event, id, ret string) {
	until := ticketCookieUntil(s.settingsFor(ev), s.now())
	if err := s.line.SetReturn(c.UserContext(), ev.ID, id, ret, until.Sub(s.now())); err != nil && !errors.Is(err, line.ErrInvalidTicket) {
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
