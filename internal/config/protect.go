package config

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strings"
)

// Protect is one rule of events[].protect: the requests to host whose path
// begins with PathPrefix are this event's, and pass only with its pass
// (GET /api/v1/forward-auth, asked by the site's own reverse proxy).
type Protect struct {
	// Host is the site's host name (or IP address), without scheme or
	// port; compared without regard to case or port.
	Host string `yaml:"host"`
	// PathPrefix starts with "/"; "/" guards the whole host. Compared
	// with the request's path once both are normalized as an origin would
	// read them (docs/OPERATIONS.md, "Putting the room in front of your
	// site").
	PathPrefix string `yaml:"path_prefix"`
}

// hostName is a DNS name: labels of letters, digits and inner hyphens.
var hostName = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// validateProtect checks the protect rules of the event at key k. guarded
// holds the rules seen so far (lower-cased), each with its key: one host
// and prefix belongs to one event.
func (c *Config) validateProtect(k string, rules []Protect, guarded map[Protect]string, bad func(key, format string, args ...any)) {
	if len(rules) == 0 {
		return
	}
	if c.Gateway.PublicURL == "" {
		bad(k+".protect", "needs gateway.public_url (where the site's proxy sends fans to the room)")
	}
	if len(c.Gateway.TrustedProxies) == 0 {
		bad(k+".protect", "needs gateway.trusted_proxies (the site's proxies, the only callers of /api/v1/forward-auth)")
	}
	for i, r := range rules {
		rk := fmt.Sprintf("%s.protect[%d]", k, i)
		if msg := badProtectHost(r.Host); msg != "" {
			bad(rk+".host", "%q %s", r.Host, msg)
		}
		if msg := badPathPrefix(r.PathPrefix); msg != "" {
			bad(rk+".path_prefix", "%q %s", r.PathPrefix, msg)
		}
		low := Protect{Host: strings.ToLower(r.Host), PathPrefix: strings.ToLower(r.PathPrefix)}
		if other, dup := guarded[low]; dup {
			bad(rk, "%s%s duplicates %s", r.Host, r.PathPrefix, other)
		} else {
			guarded[low] = rk
		}
	}
}

func badProtectHost(h string) string {
	if h == "" {
		return "must be set (the site's host name, e.g. shop.example.com)"
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return ""
	}
	if len(h) > 253 || !hostName.MatchString(h) {
		return "must be a host name or an IP address, with no scheme, port or path (e.g. shop.example.com)"
	}
	return ""
}

// badPathPrefix says what is wrong with a path_prefix: it must be a clean
// absolute path (what the gateway compares a request's normalized path
// with), with nothing that is not a path.
func badPathPrefix(p string) string {
	if !strings.HasPrefix(p, "/") {
		return `must start with "/" ("/" guards the whole site)`
	}
	for _, b := range []byte(p) {
		if b <= ' ' || b >= 0x7f || b == '?' || b == '#' || b == '%' || b == '\\' {
			return "must be a plain path: no query, fragment, escape, space or control character"
		}
	}
	if clean := path.Clean(p); clean != p && clean+"/" != p {
		return fmt.Sprintf("must be a clean path (%q)", clean)
	}
	return ""
}
