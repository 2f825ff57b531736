package gateway

import (
	"bytes"
	"net/netip"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
)

// proxies are the load balancers in front (gateway.trusted_proxies). Behind
// them every connection comes from their addresses, so a per-IP limit keyed
// on the connection would throttle every fan at once; only from them are
// X-Forwarded-For, X-Forwarded-Host and X-Forwarded-Proto believed. From
// anywhere else those headers are the client's own words and are ignored.
// (fiber's own Hostname, Protocol and BaseURL believe nobody either: the
// app is built with EnableTrustedProxyCheck and no proxy of its own.)
type proxies []netip.Prefix

// proxiesOf parses the config's list; config.Validate refused a bad entry
// already, so one that fails here is skipped.
func proxiesOf(cfg *config.Config) proxies {
	var out proxies
	for _, s := range cfg.Gateway.TrustedProxies {
		if p, err := config.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func (ps proxies) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// client is who sent a request: the fan's address, and the host and
// scheme the fan asked for.
type client struct {
	addr   netip.Addr
	secure bool // the fan's connection is HTTPS
	// host is the Host the fan sent (as a trusted proxy's X-Forwarded-Host
	// reports it), as it came: check it (hostOK) before printing it. It
	// points into the request, valid while the request is served.
	host []byte
}

// secure reports whether the fan's connection is HTTPS (the cookies' Secure
// flag): clientOf's answer, without looking at addresses when no proxy is
// trusted (every answer that sets a cookie asks).
func (ps proxies) secure(c *fiber.Ctx) bool {
	if len(ps) == 0 {
		return c.Context().IsTLS()
	}
	return ps.clientOf(c).secure
}

// clientOf finds the fan behind c. From a trusted proxy the fan is the
// right-most X-Forwarded-For entry outside the trusted ranges (entries to
// its left were written by whoever sent the request and prove nothing),
// X-Forwarded-Proto: https marks the fan's connection secure, and
// X-Forwarded-Host is the host the fan asked for; of a list, the entry the
// nearest proxy wrote, as for the proto.
func (ps proxies) clientOf(c *fiber.Ctx) client {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	peer = peer.Unmap()
	h := &c.Request().Header
	cl := client{addr: peer, secure: c.Context().IsTLS(), host: h.Host()}
	if len(ps) == 0 || !ps.trusted(peer) {
		return cl
	}
	if proto := h.Peek(fiber.HeaderXForwardedProto); len(proto) > 0 {
		cl.secure = cl.secure || bytes.EqualFold(bytes.TrimSpace(lastEntry(proto)), []byte("https"))
	}
	if host := h.Peek(fiber.HeaderXForwardedHost); len(host) > 0 {
		cl.host = bytes.TrimSpace(lastEntry(host))
	}
	values := h.PeekAll(fiber.HeaderXForwardedFor)
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for len(v) > 0 {
			entry := v
			if j := bytes.LastIndexByte(v, ','); j >= 0 {
				entry, v = v[j+1:], v[:j]
			} else {
				v = nil
			}
			a, err := netip.ParseAddr(string(bytes.TrimSpace(entry)))
			if err != nil {
				// A malformed hop: nothing to its left can be trusted either.
				return cl
			}
			cl.addr = a.Unmap()
			if !ps.trusted(cl.addr) {
				return cl
			}
		}
	}
	return cl
}

// joinBudgetOf is the address whose budget a join from a counts against
// (gateway.joins_per_ip_per_minute): an IPv4 address alone, an IPv6
// address by its first ipv6Bits bits (gateway.ipv6_prefix). One home or
// one server is handed a whole /64: counted address by address, it would
// have 2^64 budgets. IPv4-mapped IPv6 is the IPv4 address it maps.
func joinBudgetOf(a netip.Addr, ipv6Bits int) netip.Addr {
	a = a.Unmap()
	if !a.Is6() {
		return a
	}
	p, err := a.WithZone("").Prefix(ipv6Bits)
	if err != nil {
		return a // config.Validate keeps ipv6Bits within 1..128
	}
	return p.Addr()
}

// maxHost is the longest host[:port] a link carries: a DNS name (253)
// and a port.
const maxHost = 253 + len(":65535")

// hostOK reports whether h, a host the fan asked for, can go into a link as
// it is: 1 to maxHost bytes of a DNS name, an IPv4 address or a bracketed
// IPv6 one, and a port of up to 5 digits; nothing a URL would have to
// escape, nothing that ends the host (a slash, a query, a user), nothing
// beyond ASCII, and nothing a URL parser refuses (a port that is no number,
// brackets round no IPv6 address: FuzzForwardAuth found a way back on
// SHOP.eXAmple:A, which the room then refused).
func hostOK(h []byte) bool {
	if len(h) == 0 || len(h) > maxHost {
		return false
	}
	name, port := h, []byte(nil)
	if h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		if a, err := netip.ParseAddr(string(h[1:end])); err != nil || !a.Is6() || a.Zone() != "" {
			return false
		}
		name, port = nil, h[end+1:]
	} else if i := bytes.IndexByte(h, ':'); i >= 0 {
		name, port = h[:i], h[i:]
	}
	if name != nil && len(name) == 0 {
		return false
	}
	for _, b := range name {
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case b == '.', b == '-', b == '_':
		default:
			return false
		}
	}
	if len(port) > 0 {
		if port[0] != ':' || len(port) > 1+5 {
			return false
		}
		for _, b := range port[1:] {
			if b < '0' || b > '9' {
				return false
			}
		}
	}
	return true
}

// lastEntry is the last comma-separated entry of a header value: the one
// the nearest proxy wrote.
func lastEntry(v []byte) []byte {
	if j := bytes.LastIndexByte(v, ','); j >= 0 {
		return v[j+1:]
	}
	return v
}
