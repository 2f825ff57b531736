package config_test

import (
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/config"
)

// guarding is valid with what events[].protect needs: the room's public
// URL and the proxies that ask.
const guarding = valid + `gateway: {public_url: "https://tickets.example", trusted_proxies: ["10.0.0.0/8"]}
`

// protect adds rules (flow-style YAML) to the first event of guarding.
func protect(rules string) string {
	return strings.Replace(guarding, `id: "premiere"`, "id: \"premiere\"\n    protect: "+rules, 1)
}

func TestProtectRules(t *testing.T) {
	c, err := config.Parse([]byte(protect(`[{host: "shop.example", path_prefix: "/tour-tokyo"}, {host: "Shop.Example", path_prefix: "/"}, {host: "10.1.2.3", path_prefix: "/drop/"}]`)), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Protect{{Host: "shop.example", PathPrefix: "/tour-tokyo"}, {Host: "Shop.Example", PathPrefix: "/"}, {Host: "10.1.2.3", PathPrefix: "/drop/"}}
	got := c.Events[0].Protect
	if len(got) != len(want) {
		t.Fatalf("protect = %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("protect[%d] = %+v; want %+v", i, got[i], want[i])
		}
	}
	if len(c.Events[1].Protect) != 0 {
		t.Errorf("events[1].protect = %+v; want none", c.Events[1].Protect)
	}
}

func TestBadProtectRules(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"no public url", strings.Replace(protect(`[{host: "shop.example", path_prefix: "/a"}]`), `public_url: "https://tickets.example", `, "", 1),
			"events[0].protect: needs gateway.public_url"},
		{"no trusted proxy", strings.Replace(protect(`[{host: "shop.example", path_prefix: "/a"}]`), `trusted_proxies: ["10.0.0.0/8"]`, "", 1),
			"events[0].protect: needs gateway.trusted_proxies"},
		{"no host", protect(`[{path_prefix: "/a"}]`), `events[0].protect[0].host: "" must be set`},
		{"host with a scheme", protect(`[{host: "https://shop.example", path_prefix: "/a"}]`), `events[0].protect[0].host: "https://shop.example" must be a host name`},
		{"host with a port", protect(`[{host: "shop.example:8443", path_prefix: "/a"}]`), `events[0].protect[0].host: "shop.example:8443" must be a host name`},
		{"host with a path", protect(`[{host: "shop.example/a", path_prefix: "/a"}]`), `must be a host name`},
		{"no prefix", protect(`[{host: "shop.example"}]`), `events[0].protect[0].path_prefix: "" must start with "/"`},
		{"relative prefix", protect(`[{host: "shop.example", path_prefix: "a"}]`), `must start with "/"`},
		{"prefix with a query", protect(`[{host: "shop.example", path_prefix: "/a?b=1"}]`), "must be a plain path"},
		{"prefix with an escape", protect(`[{host: "shop.example", path_prefix: "/%61"}]`), "must be a plain path"},
		{"prefix with a parameter", protect(`[{host: "shop.example", path_prefix: "/a;b"}]`), "must be a plain path"},
		{"prefix with a space", protect(`[{host: "shop.example", path_prefix: "/a b"}]`), "must be a plain path"},
		{"prefix with dots", protect(`[{host: "shop.example", path_prefix: "/a/../b"}]`), `must be a clean path ("/b")`},
		{"prefix with double slashes", protect(`[{host: "shop.example", path_prefix: "//a"}]`), `must be a clean path ("/a")`},
		{"duplicate rule", protect(`[{host: "shop.example", path_prefix: "/a"}, {host: "SHOP.example", path_prefix: "/A"}]`),
			"events[0].protect[1]: SHOP.example/A duplicates events[0].protect[0]"},
		{"rule of two events", strings.Replace(protect(`[{host: "shop.example", path_prefix: "/a"}]`), `id: "live"`, "id: \"live\"\n    protect: [{host: \"shop.example\", path_prefix: \"/a\"}]", 1),
			"events[1].protect[0]: shop.example/a duplicates events[0].protect[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.src), noEnv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

// bypass adds a protect rule and the bypass (flow-style YAML) to the first
// event of guarding.
func bypass(b string) string {
	return strings.Replace(protect(`[{host: "shop.example", path_prefix: "/"}]`), "protect: ", "bypass: "+b+"\n    protect: ", 1)
}

func TestBypass(t *testing.T) {
	c, err := config.Parse([]byte(bypass(`{cidrs: ["10.9.0.0/16", "192.0.2.7", "2001:db8::/32"], path_prefixes: ["/assets/", "/health"], methods: ["OPTIONS", "M-SEARCH"]}`)), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	b := c.Events[0].Bypass
	if strings.Join(b.CIDRs, " ") != "10.9.0.0/16 192.0.2.7 2001:db8::/32" || strings.Join(b.PathPrefixes, " ") != "/assets/ /health" || strings.Join(b.Methods, " ") != "OPTIONS M-SEARCH" {
		t.Errorf("bypass = %+v", b)
	}
	if !c.Events[1].Bypass.Empty() {
		t.Errorf("events[1].bypass = %+v; want none", c.Events[1].Bypass)
	}
}

func TestBadBypass(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"without protect", strings.Replace(guarding, `id: "premiere"`, "id: \"premiere\"\n    bypass: {methods: [\"OPTIONS\"]}", 1),
			"events[0].bypass: needs protect (it lets requests to a guarded site through)"},
		{"bad cidr", bypass(`{cidrs: ["10.9.0.0/33"]}`), `events[0].bypass.cidrs[0]: "10.9.0.0/33" is not a CIDR or an IP address`},
		{"name for a cidr", bypass(`{cidrs: ["monitoring.example"]}`), `events[0].bypass.cidrs[0]: "monitoring.example" is not a CIDR`},
		{"relative prefix", bypass(`{path_prefixes: ["assets"]}`), `events[0].bypass.path_prefixes[0]: "assets" must start with "/"`},
		{"prefix with a parameter", bypass(`{path_prefixes: ["/assets;x"]}`), `events[0].bypass.path_prefixes[0]: "/assets;x" must be a plain path`},
		{"prefix with dots", bypass(`{path_prefixes: ["/assets/../checkout"]}`), `must be a clean path ("/checkout")`},
		{"the whole site", bypass(`{path_prefixes: ["/"]}`), `events[0].bypass.path_prefixes[0]: "/" would let the whole site through`},
		{"lower-case method", bypass(`{methods: ["options"]}`), `events[0].bypass.methods[0]: "options" must be an upper-case HTTP method (e.g. OPTIONS)`},
		{"method with a space", bypass(`{methods: ["GET POST"]}`), `events[0].bypass.methods[0]: "GET POST" must be an upper-case HTTP method`},
		{"empty method", bypass(`{methods: [""]}`), `events[0].bypass.methods[0]: "" must be an upper-case HTTP method`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.src), noEnv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}
