package gateway

import (
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
)

// Bypass (DESIGN.md, "Always on"): what must never wait (monitoring, the
// site's own assets, CORS preflights) passes forward auth with no pass:
// requests from the event's cidrs (the fan's address, as the trusted
// proxies tell it), to paths under its path_prefixes, or with one of its
// methods. No Redis is asked and nothing is made: the answer is a bare 200,
// with no X-Waitroom-* header, so the origin sees no visitor of the room.

// bypass is an event's bypass, compiled.
type bypass struct {
	cidrs []netip.Prefix
	// prefixes are normalized as a request's path is, in their own case:
	// "/assets" takes /assets and /assets/…, never /assetsx nor /ASSETS.
	prefixes []string
	methods  []string
}

// bypassOf compiles b (config.Validate took it), nil when it lets nothing
// through.
func bypassOf(b config.Bypass) *bypass {
	if b.Empty() {
		return nil
	}
	out := &bypass{methods: b.Methods}
	for _, c := range b.CIDRs {
		if p, err := config.ParsePrefix(c); err == nil {
			out.cidrs = append(out.cidrs, p)
		}
	}
	for _, p := range b.PathPrefixes {
		if n, ok := normalize(p, false); ok {
			out.prefixes = append(out.prefixes, n)
		}
	}
	return out
}

// passes reports whether b lets the request through: its method (the
// proxy's X-Forwarded-Method), its target's path (normalized, case kept;
// one that cannot be normalized passes by no prefix) or the fan's address
// addr is one b names.
func (b *bypass) passes(c *fiber.Ctx, target string, addr netip.Addr) bool {
	if b == nil {
		return false
	}
	if len(b.methods) > 0 {
		m := c.Request().Header.Peek("X-Forwarded-Method")
		for _, name := range b.methods {
			if string(m) == name {
				return true
			}
		}
	}
	if len(b.prefixes) > 0 {
		if p, ok := normalize(target, false); ok {
			for _, pre := range b.prefixes {
				if p == pre || strings.HasPrefix(p, pre) && p[len(pre)] == '/' {
					return true
				}
			}
		}
	}
	addr = addr.Unmap()
	for _, n := range b.cidrs {
		if n.Contains(addr) {
			return true
		}
	}
	return false
}
