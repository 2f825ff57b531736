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
	// site"). A host some rule names is known to forward auth: a request
	// to any other host is refused (403 unknown_host).
	PathPrefix string `yaml:"path_prefix"`
}

// hostName is a DNS name: labels of letters, digits and inner hyphens.
var hostName = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// validateProtect checks the protect rules of the event at key k; gw is the
// gateway section, where fans are sent back and the site's proxies listed.
// guarded holds the rules seen so far (lower-cased), each with its key:
// one host and prefix belongs to one event.
func validateProtect(v *problems, k string, rules []Protect, gw Gateway, guarded map[Protect]string) {
	if len(rules) == 0 {
		return
	}
	if gw.PublicURL == "" {
		v.add(k+".protect", "needs gateway.public_url (where the site's proxy sends fans to the room)")
	}
	if len(gw.TrustedProxies) == 0 {
		v.add(k+".protect", "needs gateway.trusted_proxies (the site's proxies, the only callers of /api/v1/forward-auth)")
	}
	for i, r := range rules {
		rk := fmt.Sprintf("%s.protect[%d]", k, i)
		if msg := badProtectHost(r.Host); msg != "" {
			v.add(rk+".host", "%q %s", r.Host, msg)
		}
		if msg := badPathPrefix(r.PathPrefix); msg != "" {
			v.add(rk+".path_prefix", "%q %s", r.PathPrefix, msg)
		}
		low := Protect{Host: strings.ToLower(r.Host), PathPrefix: strings.ToLower(r.PathPrefix)}
		if other, dup := guarded[low]; dup {
			v.add(rk, "%s%s duplicates %s", r.Host, r.PathPrefix, other)
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
// with), with nothing that is not a path. A ;-parameter could never match:
// the gateway drops them from the request's path before it compares.
func badPathPrefix(p string) string {
	if !strings.HasPrefix(p, "/") {
		return `must start with "/" ("/" guards the whole site)`
	}
	for _, b := range []byte(p) {
		if b <= ' ' || b >= 0x7f || b == '?' || b == '#' || b == '%' || b == '\\' || b == ';' {
			return "must be a plain path: no query, fragment, escape, parameter (;), space or control character"
		}
	}
	if clean := path.Clean(p); clean != p && clean+"/" != p {
		return fmt.Sprintf("must be a clean path (%q)", clean)
	}
	return ""
}

// Bypass is events[].bypass (DESIGN.md, "Always on"): the requests to the
// event's guarded paths that pass forward auth with no pass, for what must
// never wait (monitoring, the site's own assets, CORS preflights). A
// request passes when any one list takes it.
type Bypass struct {
	// CIDRs are the fans' addresses (as gateway.trusted_proxies decides
	// them, Fair play) that pass: CIDRs or single addresses.
	CIDRs []string `yaml:"cidrs"`
	// PathPrefixes are absolute paths on the guarded host: a path equal to
	// one, or under it (the prefix then "/"), passes, compared once the
	// request's path is normalized as for protect (Fair play, third round),
	// its case kept.
	PathPrefixes []string `yaml:"path_prefixes"`
	// Methods are the request methods that pass, in upper case (e.g.
	// OPTIONS).
	Methods []string `yaml:"methods"`
}

// Empty reports whether b lets nothing through.
func (b Bypass) Empty() bool {
	return len(b.CIDRs) == 0 && len(b.PathPrefixes) == 0 && len(b.Methods) == 0
}

// methodToken is an HTTP method in upper case: a token (RFC 9110, 5.6.2)
// without lower-case letters.
var methodToken = regexp.MustCompile("^[A-Z0-9!#$%&'*+.^_`|~-]+$")

// validate checks the bypass of the event at key k (k ends in ".bypass");
// protect says whether the event guards any path, which a bypass needs.
func (b Bypass) validate(v *problems, k string, protect bool) {
	if b.Empty() {
		return
	}
	if !protect {
		v.add(k, "needs protect (it lets requests to a guarded site through)")
	}
	for i, c := range b.CIDRs {
		if _, err := ParsePrefix(c); err != nil {
			v.add(fmt.Sprintf("%s.cidrs[%d]", k, i), "%q is not a CIDR or an IP address", c)
		}
	}
	for i, p := range b.PathPrefixes {
		pk := fmt.Sprintf("%s.path_prefixes[%d]", k, i)
		if msg := badPathPrefix(p); msg != "" {
			v.add(pk, "%q %s", p, msg)
		} else if p == "/" {
			v.add(pk, `"/" would let the whole site through (remove the protect rule instead)`)
		}
	}
	for i, m := range b.Methods {
		if !methodToken.MatchString(m) {
			v.add(fmt.Sprintf("%s.methods[%d]", k, i), "%q must be an upper-case HTTP method (e.g. OPTIONS)", m)
		}
	}
}
