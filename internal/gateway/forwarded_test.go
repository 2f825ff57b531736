package gateway_test

import (
	"bytes"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// The addresses of these tests: a balancer the gateway trusts, and anyone.
const (
	balancer = "192.0.2.10"
	stranger = "198.51.100.7"
)

// shareLinkOf reads the share link off a waiting room page.
var shareLinkRE = regexp.MustCompile(`id="share-link" href="([^"]*)"`)

func shareLinkOf(t *testing.T, page resp) string {
	t.Helper()
	m := shareLinkRE.FindSubmatch(page.raw)
	if page.code != http.StatusOK || m == nil {
		t.Fatalf("room page: %d, no share link:\n%.600s", page.code, page.raw)
	}
	return html.UnescapeString(string(m[1]))
}

// Forwarded headers only from trusted proxies: X-Forwarded-Host and
// X-Forwarded-Proto shape the links a page prints (the share link, the QR
// code) only when a balancer of gateway.trusted_proxies sent them; from
// anyone else the link is the request's own Host, over the connection's
// own scheme. gateway.public_url, when set, is the link's base whatever
// the request says.
func TestForwardedHostAndProtoOnlyFromTrustedProxies(t *testing.T) {
	open := setup(t, 0)                                                       // trusts nobody
	behind := setupWith(t, 0, `, trusted_proxies: ["`+balancer+`/32"]`, "")   // behind a balancer
	public := setupWith(t, 0, `, public_url: "https://tickets.example/"`, "") // told its address
	tests := []struct {
		name string
		e    *env
		peer string
		hdr  []string
		want string // the links' base
	}{
		{"anyone, own Host", open, stranger, []string{"Host", "tickets.example"}, "http://tickets.example"},
		{"anyone, made-up X-Forwarded-Host and -Proto", open, stranger,
			[]string{"Host", "tickets.example", "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https"}, "http://tickets.example"},
		{"trusted balancer", behind, balancer,
			[]string{"Host", "backend:8080", "X-Forwarded-Host", "tickets.example", "X-Forwarded-Proto", "https"}, "https://tickets.example"},
		{"trusted balancer, the entry it wrote last", behind, balancer,
			[]string{"Host", "backend:8080", "X-Forwarded-Host", "evil.example, tickets.example", "X-Forwarded-Proto", "http, https"}, "https://tickets.example"},
		{"stranger to a gateway behind a balancer", behind, stranger,
			[]string{"Host", "backend:8080", "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https"}, "http://backend:8080"},
		{"public_url, whatever the request says", public, stranger,
			[]string{"Host", "backend:8080", "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "http"}, "https://tickets.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := tt.e.join("premiere")
			ticket := j.body["ticket"].(string)
			cookie := []string{"Cookie", "wr_t_premiere=" + ticket}
			link := shareLinkOf(t, tt.e.doFrom(tt.peer, http.MethodGet, "/e/premiere", append(cookie, tt.hdr...)...))
			if want := tt.want + "/e/premiere?t=" + url.QueryEscape(ticket) + "&from="; !strings.HasPrefix(link, want) {
				t.Errorf("share link %q; want %q…", link, want)
			}
			// The QR code says what a gateway told that very base says.
			ref := setupWith(t, 0, `, public_url: "`+tt.want+`"`, "")
			want := ref.do(http.MethodGet, "/e/premiere/qr.svg?from=1", nil, cookie...)
			got := tt.e.doFrom(tt.peer, http.MethodGet, "/e/premiere/qr.svg?from=1", append(cookie, tt.hdr...)...)
			if got.code != http.StatusOK || want.code != http.StatusOK || !bytes.Equal(got.raw, want.raw) {
				t.Errorf("QR code: %d, the same as public_url %s's (%d): %v; want 200 and the same", got.code, tt.want, want.code, bytes.Equal(got.raw, want.raw))
			}
		})
	}
}

// No header, however long or malformed, makes a 500: not on the pages that
// print links, not on the QR code, not on the forms that compare Origin
// with the request's host; and no such header ever makes it into a link.
func TestMalformedHostHeadersAreNever500(t *testing.T) {
	long := strings.Repeat("a", 3000)
	bad := []struct {
		name string
		hdr  []string
		// unrouted: fasthttp cannot make a URL of the Host (a space, a
		// slash) and the request reaches no route: 404, before the gateway.
		unrouted bool
	}{
		{"3,000-character X-Forwarded-Host", []string{"Host", "tickets.example", "X-Forwarded-Host", long}, false},
		{"very long Host", []string{"Host", strings.Repeat("h", 3000) + ".example"}, false},
		{"empty Host", []string{"Host", ""}, false},
		{"Host with spaces", []string{"Host", "tickets example.com"}, true},
		{"non-ASCII Host", []string{"Host", "tïckets.example"}, false},
		{"Host with a path", []string{"Host", "tickets.example/e/x?t=1#"}, true},
		{"Host with quotes", []string{"Host", `tickets.example"><script>`}, false},
		{"empty X-Forwarded-Host", []string{"Host", "tickets.example", "X-Forwarded-Host", ""}, false},
		{"X-Forwarded-Host of spaces", []string{"Host", "tickets.example", "X-Forwarded-Host", "   "}, false},
		{"non-ASCII X-Forwarded-Host", []string{"Host", "tickets.example", "X-Forwarded-Host", "évil.example"}, false},
		{"X-Forwarded-Host with control bytes", []string{"Host", "tickets.example", "X-Forwarded-Host", "evil\x01\x7f.example"}, false},
		{"X-Forwarded-Host with a path", []string{"Host", "tickets.example", "X-Forwarded-Host", "evil.example/x?y#z"}, false},
		{"X-Forwarded-Host of commas", []string{"Host", "tickets.example", "X-Forwarded-Host", ",,,"}, false},
		{"long X-Forwarded-Proto", []string{"Host", "tickets.example", "X-Forwarded-Proto", strings.Repeat("https,", 500)}, false},
		{"long Origin", []string{"Host", "tickets.example", "Origin", "http://" + long}, false},
		{"long Referer", []string{"Host", "tickets.example", "Referer", "http://" + long + "/"}, false},
		{"Origin not a URL", []string{"Host", "tickets.example", "Origin", "http://[::1"}, false},
	}
	gateways := []struct {
		name string
		e    *env
		peer string
	}{
		{"trusting nobody", setup(t, 0), stranger},
		{"from its trusted balancer", setupWith(t, 0, `, trusted_proxies: ["`+balancer+`/32"]`, ""), balancer},
		{"with public_url", setupWith(t, 0, `, public_url: "https://tickets.example"`, ""), stranger},
	}
	for _, g := range gateways {
		ticket := g.e.join("premiere").body["ticket"].(string)
		cookie := []string{"Cookie", "wr_t_premiere=" + ticket}
		for _, b := range bad {
			t.Run(g.name+"/"+b.name, func(t *testing.T) {
				hdr := append(append([]string{}, cookie...), b.hdr...)
				qr := g.e.doFrom(g.peer, http.MethodGet, "/e/premiere/qr.svg", hdr...)
				room := g.e.doFrom(g.peer, http.MethodGet, "/e/premiere", hdr...)
				if b.unrouted {
					if qr.code >= 500 || room.code >= 500 {
						t.Errorf("QR code %d, room page %d; want no 5xx", qr.code, room.code)
					}
					return
				}
				if qr.code != http.StatusOK || !bytes.Contains(qr.raw, []byte("<svg")) {
					t.Errorf("QR code: %d %.200s; want 200 and an SVG", qr.code, qr.raw)
				}
				if link := shareLinkOf(t, room); strings.Contains(link, "aaaaaaaa") || strings.Contains(link, "hhhhhhhh") ||
					strings.ContainsAny(link, " \"<>#\x01\x7f") || strings.Contains(link, "évil") || strings.Contains(link, "tïckets") || strings.Contains(link, "/x?y") {
					t.Errorf("share link %q carries the bad header", link)
				}
				for _, r := range []struct{ method, path string }{
					{http.MethodGet, "/e/premiere?t=" + url.QueryEscape(ticket)},
					{http.MethodPost, "/e/premiere/join"},
					{http.MethodPost, "/e/premiere/leave"},
					{http.MethodGet, "/e/premiere/book"},
				} {
					if got := g.e.doFrom(g.peer, r.method, r.path, b.hdr...); got.code >= 500 {
						t.Errorf("%s %s: %d %.200s; want no 5xx", r.method, r.path, got.code, got.raw)
					}
				}
			})
		}
	}
}

// The join and leave forms' same-site check compares Origin with the
// gateway's own host: public_url's, or the one the fan asked for, which a
// made-up X-Forwarded-Host does not change.
func TestFormsCompareOriginWithTheRealHost(t *testing.T) {
	open := setup(t, 0)
	behind := setupWith(t, 0, `, trusted_proxies: ["`+balancer+`/32"]`, "")
	public := setupWith(t, 0, `, public_url: "https://tickets.example"`, "")
	tests := []struct {
		name string
		e    *env
		peer string
		hdr  []string
		want int
	}{
		{"Origin of the Host", open, stranger, []string{"Host", "tickets.example", "Origin", "http://tickets.example"}, http.StatusSeeOther},
		{"Origin of a made-up X-Forwarded-Host", open, stranger,
			[]string{"Host", "tickets.example", "X-Forwarded-Host", "evil.example", "Origin", "http://evil.example"}, http.StatusForbidden},
		{"Referer of another host", open, stranger, []string{"Host", "tickets.example", "Referer", "http://evil.example/page"}, http.StatusForbidden},
		{"Referer of the Host", open, stranger, []string{"Host", "tickets.example", "Referer", "http://tickets.example/e/premiere"}, http.StatusSeeOther},
		{"Origin of the trusted balancer's X-Forwarded-Host", behind, balancer,
			[]string{"Host", "backend:8080", "X-Forwarded-Host", "tickets.example", "X-Forwarded-Proto", "https", "Origin", "https://tickets.example"}, http.StatusSeeOther},
		{"Origin of public_url", public, stranger, []string{"Host", "backend:8080", "Origin", "https://tickets.example"}, http.StatusSeeOther},
		{"Origin of another host with public_url", public, stranger, []string{"Host", "backend:8080", "Origin", "https://evil.example"}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := tt.e.doFrom(tt.peer, http.MethodPost, "/e/premiere/join", tt.hdr...); r.code != tt.want {
				t.Errorf("join form: %d %q; want %d", r.code, r.raw, tt.want)
			}
		})
	}
}

// The booking core behind the gate is told the fan's address, scheme and
// host as the gateway believes them, never as the client wrote them.
func TestGateForwardsOnlyWhatItBelieves(t *testing.T) {
	e := setupWith(t, 0, `, trusted_proxies: ["`+balancer+`/32"]`, "")
	_, token := e.admit("premiere")
	tests := []struct {
		name               string
		peer               string
		hdr                []string
		wantFor, wantProto string
		wantHost           string // "" = none
	}{
		{"a stranger's made-up headers", stranger,
			[]string{"Host", "tickets.example", "X-Forwarded-For", "203.0.113.9", "X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https"},
			stranger, "http", "tickets.example"},
		{"the trusted balancer's", balancer,
			[]string{"Host", "backend:8080", "X-Forwarded-For", "203.0.113.9", "X-Forwarded-Host", "tickets.example", "X-Forwarded-Proto", "https"},
			"203.0.113.9", "https", "tickets.example"},
		{"a host no link can carry", stranger, []string{"Host", strings.Repeat("h", 3000)}, stranger, "http", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.doFrom(tt.peer, http.MethodGet, "/api/v1/booking/showtimes/42/seats", append([]string{"Authorization", "Bearer " + token}, tt.hdr...)...)
			if r.code != http.StatusOK {
				t.Fatalf("through the gate: %d %s", r.code, r.raw)
			}
			got := e.upstream.lastHdr.Load().(http.Header)
			if got.Get("X-Forwarded-For") != tt.wantFor || got.Get("X-Forwarded-Proto") != tt.wantProto || got.Get("X-Forwarded-Host") != tt.wantHost {
				t.Errorf("booking is told For %q, Proto %q, Host %q; want %q, %q, %q",
					got.Get("X-Forwarded-For"), got.Get("X-Forwarded-Proto"), got.Get("X-Forwarded-Host"), tt.wantFor, tt.wantProto, tt.wantHost)
			}
		})
	}
}
