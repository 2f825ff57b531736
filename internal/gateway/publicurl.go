package gateway

import (
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// publicURL is the public base URL of this request: where the fan reaches
// the gateway, with no trailing slash, for every absolute link a page
// prints (the share link, its QR code). It is gateway.public_url when set;
// else the scheme and host the fan asked for, as clientOf reads them (a
// trusted proxy's X-Forwarded-Proto and -Host, else the connection's and
// its Host). A host no link can carry as it is (hostOK) gives "": links
// relative to the page, never a header's bytes in one.
func (s *edge) publicURL(c *fiber.Ctx) string {
	if u := s.config().Gateway.PublicURL; u != "" {
		return u
	}
	cl := s.clientOf(c)
	if !hostOK(cl.host) {
		return ""
	}
	if cl.secure {
		return "https://" + string(cl.host)
	}
	return "http://" + string(cl.host)
}

// sameSite reports whether c comes from the gateway's own pages, or from no
// page at all (an address typed, a bookmark, a QR code): not from another
// site. Another site is Sec-Fetch-Site other than same-origin or none, or
// an Origin or a Referer of another host (ownHost). A form post from
// another site must not join or leave the line in the fan's name
// (SameSite=Lax keeps the cookie off such a post, but a join would still
// replace it), nor a link from another site replace the fan's place.
func (s *edge) sameSite(c *fiber.Ctx) bool {
	h := &c.Request().Header
	switch string(h.Peek("Sec-Fetch-Site")) {
	case "", "same-origin", "none":
	default:
		return false
	}
	if o := string(h.Peek(fiber.HeaderOrigin)); o != "" && o != "null" && !s.ownHost(c, o) {
		return false
	}
	if r := string(h.Peek(fiber.HeaderReferer)); r != "" && !s.ownHost(c, r) {
		return false
	}
	return true
}

// ownHost reports whether the URL u (an Origin or a Referer) is on the
// gateway's own host: gateway.public_url's, or the one the fan asked for
// (as clientOf reads it: a made-up X-Forwarded-Host changes nothing). A
// browser sends the host it talks to, so another site's page cannot name
// ours; only the host is compared, as the fair-play rule says.
func (s *edge) ownHost(c *fiber.Ctx, u string) bool {
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return false
	}
	if pub := s.config().Gateway.PublicURL; pub != "" {
		if p, err := url.Parse(pub); err == nil && strings.EqualFold(p.Host, pu.Host) {
			return true
		}
	}
	host := s.clientOf(c).host
	return hostOK(host) && strings.EqualFold(string(host), pu.Host)
}
