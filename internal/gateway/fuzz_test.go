package gateway_test

import (
	"crypto/ed25519"
	"encoding/json"
	"html"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/gateway"
)

// The gateway's parsers of outside input, fuzzed through the real fiber
// application (its handler called in process with a request the fuzzer
// shaped, on a real Redis): the join request, the operators' PATCH body,
// and the forwarded headers. Whatever comes, no answer is a 5xx, a JSON
// refusal carries an error code, and what the answer prints comes only from
// where the contract lets it.

// fuzzAccountKey is the origin site's key the fuzzed gateways trust.
var fuzzAccountKey = ed25519.NewKeyFromSeed([]byte("gateway-fuzz-account-seed-012345"))

// fuzzServe sends one request the fuzzer shaped to e's gateway from peer,
// and returns its answer; a 5xx fails t.
func fuzzServe(t *testing.T, e *env, peer net.IP, method, uri, host string, body []byte, hdr ...string) resp {
	t.Helper()
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	if host != "" {
		req.Header.SetHost(host)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	req.SetBody(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: peer, Port: 40000}, nil)
	e.srv.App().Handler()(&ctx)
	out := resp{code: ctx.Response.StatusCode(), hdr: http.Header{}, raw: append([]byte(nil), ctx.Response.Body()...)}
	ctx.Response.Header.VisitAll(func(k, v []byte) { out.hdr.Add(string(k), string(v)) })
	if out.code >= 500 {
		t.Fatalf("%s %q from %s (Host %q, headers %q, body %q): %d %s; want no 5xx", method, uri, peer, host, hdr, body, out.code, out.raw)
	}
	if strings.HasPrefix(out.hdr.Get("Content-Type"), "application/json") {
		err := json.Unmarshal(out.raw, &out.body)
		if err != nil || (out.code >= 400 && out.body["error"] == nil) {
			t.Fatalf("%s %q: %d %s; want a JSON object (with an error code when refused)", method, uri, out.code, out.raw)
		}
	}
	return out
}

// FuzzJoin: POST /api/v1/events/{event}/tickets with the fan's words: the
// event in the path, a ticket (X-Waitroom-Ticket, cookie), a proof, an
// account token, and a JSON body (its "return", the way back to a site
// behind the room, is read; the rest ignored). The answer is one the
// contract lets a join give.
func FuzzJoin(f *testing.F) {
	e := setupWith(f, 0, "", "", func(o *gateway.Options) {
		o.Accounts = account.NewVerifier([]ed25519.PublicKey{fuzzAccountKey.Public().(ed25519.PublicKey)})
	})
	ticket := e.join("premiere").body["ticket"].(string)
	tok, err := account.Mint(fuzzAccountKey, "acct-42", "", time.Now(), time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("premiere", ticket, "", "", "", []byte(nil))
	f.Add("premiere", "", "wr_t_premiere="+ticket, "", tok, []byte(`{}`))
	f.Add("other", ticket, "", "AAAA:1", "", []byte(nil))
	f.Add("shut", "", "", "", "", []byte(nil))
	f.Add("later", "", "wr_t_later=x; wr_u="+tok, "", "", []byte(nil))
	f.Add("nope", "x", "wr_t_nope", "", "eyJhbGciOiJub25lIn0.e30.", []byte("garbage"))
	f.Add("premiere/../other", strings.Repeat("A", 300), "", strings.Repeat("9", 90), "a.b.c", []byte(nil))
	f.Add("premiere", "", "", "", "", []byte(`{"return":"https://evil.example/"}`))
	f.Add("premiere", "", "", "", "", []byte(`{"return":7}`))
	allowed := map[int]bool{200: true, 201: true, 400: true, 401: true, 403: true, 404: true, 405: true, 409: true, 410: true, 428: true, 429: true}
	f.Fuzz(func(t *testing.T, event, ticket, cookie, proof, acct string, body []byte) {
		r := fuzzServe(t, e, net.IPv4(198, 51, 100, 7), http.MethodPost, "/api/v1/events/"+url.PathEscape(event)+"/tickets", "", body,
			"X-Waitroom-Ticket", ticket, "Cookie", cookie, "X-Waitroom-Proof", proof, "X-Waitroom-Account", acct, "Content-Type", "application/json")
		if !allowed[r.code] {
			t.Fatalf("join of %q: %d %s; not an answer a join gives", event, r.code, r.raw)
		}
		if r.code == http.StatusCreated || r.code == http.StatusOK {
			if tk, _ := r.body["ticket"].(string); tk == "" || r.hdr.Get("Cache-Control") != "no-store" {
				t.Fatalf("join of %q: %d %s (Cache-Control %q); want a ticket, no-store", event, r.code, r.raw, r.hdr.Get("Cache-Control"))
			}
		}
	})
}

// FuzzAdminPatch: the operators' PATCH /api/v1/admin/events/{event}, its
// JSON body ({"mode","admitPerSecond","maxActive"}, each a value or null).
// For an event, 200 is for an object naming only those settings, anything
// else 400 naming the field; a path that names no event is refused.
func FuzzAdminPatch(f *testing.F) {
	const token = "fuzz-admin-token-0123456789abcdef"
	e := setupWith(f, 0, "", "", func(o *gateway.Options) { o.Config.Auth.AdminToken = token })
	for _, b := range []string{
		`{"mode":"paused"}`, `{"admitPerSecond":12.5,"maxActive":40}`, `{"mode":null,"admitPerSecond":null}`,
		`{"maxActive":1e9}`, `{"maxActive":1.5}`, `{"admitPerSecond":-1}`, `{"admitPerSecond":"5"}`,
		`{"mode":"queue","extra":1}`, `{}`, `null`, `[]`, `{"mode":"paused"}{}`, `{"maxActive":1e400}`,
	} {
		f.Add("premiere", []byte(b))
	}
	f.Add("unknown", []byte(`{"mode":"paused"}`))
	f.Add("premiere", []byte(`{"mode":"paused"}}`)) // taken for one object while patchOf asked dec.More()
	fields := map[string]bool{"mode": true, "admitPerSecond": true, "maxActive": true}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		r := fuzzServe(t, e, net.IPv4(198, 51, 100, 7), http.MethodPatch, "/api/v1/admin/events/"+url.PathEscape(event), "", body,
			"Authorization", "Bearer "+token, "Content-Type", "application/json")
		switch {
		case r.code == http.StatusOK:
			var m map[string]json.RawMessage
			if event != "premiere" || json.Unmarshal(body, &m) != nil || len(m) == 0 {
				t.Fatalf("PATCH %q with %q: 200; want a refusal", event, body)
			}
			for k := range m {
				if !fields[k] {
					t.Fatalf("PATCH %q with %q: 200 though it names %q; want 400 naming it", event, body, k)
				}
			}
		case event == "premiere" && r.code != http.StatusBadRequest:
			t.Fatalf("PATCH %q with %q: %d %s; want 200 or 400", event, body, r.code, r.raw)
		case r.code < 400:
			// No event, or a path that is no event's (corpus ad4f6727…:
			// "" is the events' list, 405 for a PATCH): a refusal.
			t.Fatalf("PATCH %q with %q: %d %s; want a refusal", event, body, r.code, r.raw)
		}
	})
}

// isShop reports whether host is the guarded shop's: a host name's case is
// ASCII's alone (RFC 4343), so "ſhop.example", whose ſ (U+017F)
// strings.EqualFold folds to an s, is another host (forward auth calls it
// unknown, and no way back may lead there).
func isShop(host string) bool {
	if len(host) != len(shopHost) {
		return false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != shopHost[i] {
			return false
		}
	}
	return true
}

// sitePassOf is the site's pass a proxy's Cookie header "wr_fa_premiere="
// + cookie carries, as the gateway's cookie parser (fasthttp's) reads it:
// spaces and quotes round the value trimmed, the value ended at a ';', the
// first of two taken. So the valid pass followed by a ';' is the valid
// pass, not a forged one that got through.
func sitePassOf(cookie string) string {
	var h fasthttp.RequestHeader
	h.Set("Cookie", "wr_fa_premiere="+cookie)
	return string(h.Cookie("wr_fa_premiere"))
}

// linkBase is a share link's base: a scheme and a host a link may carry.
var linkBase = regexp.MustCompile(`^https?://[A-Za-z0-9._:\[\]-]{1,259}$`)

// FuzzForwardedHeaders: Host, X-Forwarded-For, -Host and -Proto, Origin,
// Referer and Sec-Fetch-Site, from a balancer the gateway trusts or from
// anyone, on the waiting room page (whose share link is built from them)
// and on a join (whose budget is counted by the fan's address). No answer
// is a 5xx; the share link is relative or on a well-formed host, and that
// host is the request's own Host unless a trusted balancer named another.
func FuzzForwardedHeaders(f *testing.F) {
	e := setupWith(f, 1000, `, trusted_proxies: ["`+balancer+`/32", "2001:db8::/32"]`, "")
	ticket := e.join("premiere").body["ticket"].(string)
	f.Add(true, "backend:8080", "198.51.100.7", "tickets.example", "https", "", "", "")
	f.Add(true, "backend:8080", "203.0.113.9, 192.0.2.10", "evil.example, tickets.example", "http, https", "https://tickets.example", "", "same-origin")
	f.Add(false, "tickets.example", "1.2.3.4", "evil.example", "https", "https://evil.example", "https://evil.example/x", "cross-site")
	f.Add(true, "[::1]:8080", "::ffff:1.2.3.4, 2001:db8::1", "[2001:db8::1]:443", "HTTPS", "null", "/relative", "none")
	f.Add(true, "a b", "not-an-ip", "x/y?z@w", "ftp", "http://[::1", "%zz", "same-site")
	f.Add(false, strings.Repeat("h", 300), strings.Repeat("1.1.1.1,", 50), strings.Repeat("x", 300), "https", "", "", "")
	f.Fuzz(func(t *testing.T, trusted bool, host, xff, xfh, xfp, origin, referer, site string) {
		peer := net.ParseIP(stranger)
		if trusted {
			peer = net.ParseIP(balancer)
		}
		hdr := []string{"X-Forwarded-For", xff, "X-Forwarded-Host", xfh, "X-Forwarded-Proto", xfp,
			"Origin", origin, "Referer", referer, "Sec-Fetch-Site", site, "Cookie", "wr_t_premiere=" + ticket}
		page := fuzzServe(t, e, peer, http.MethodGet, "/e/premiere", host, nil, hdr...)
		if m := shareLinkRE.FindSubmatch(page.raw); m != nil {
			link := html.UnescapeString(string(m[1]))
			i := strings.Index(link, "/e/premiere?t=")
			if i < 0 {
				t.Fatalf("share link %q; want …/e/premiere?t=…", link)
			}
			if base := link[:i]; base != "" {
				if !linkBase.MatchString(base) {
					t.Fatalf("share link %q (Host %q, X-Forwarded-Host %q); want a relative link or one on a well-formed host", link, host, xfh)
				}
				if h := base[strings.Index(base, "//")+2:]; !trusted && h != host {
					t.Fatalf("share link %q for a stranger whose Host is %q; want the request's own Host", link, host)
				}
			}
		}
		fuzzServe(t, e, peer, http.MethodGet, "/e/premiere?t="+url.QueryEscape(ticket), host, nil, hdr...)
		fuzzServe(t, e, peer, http.MethodPost, "/api/v1/events/premiere/tickets", host, nil, hdr...)
	})
}

// FuzzAway: POST /api/v1/events/{event}/tickets/{ticket}/away, its
// ticket, account token (header or cookie, with or without an email) and
// JSON body ({"lang"}). A step away is 202 (no-store, naming the signed
// address) or a refusal of the contract's: never a 500.
func FuzzAway(f *testing.F) {
	e := setupWith(f, 0, "", "", func(o *gateway.Options) {
		o.Accounts = account.NewVerifier([]ed25519.PublicKey{fuzzAccountKey.Public().(ed25519.PublicKey)})
		o.Config.Notify.SMTPURL = "smtp://127.0.0.1:2525"
	})
	tok, err := account.MintWithEmail(fuzzAccountKey, "acct-42", "", "fan@example.test", time.Now(), time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	ticket := e.join("premiere", "X-Waitroom-Account", tok).body["ticket"].(string)
	noEmail, _ := account.Mint(fuzzAccountKey, "acct-42", "", time.Now(), time.Hour)
	f.Add("premiere", ticket, tok, "", []byte(nil))
	f.Add("premiere", ticket, "", "wr_u="+tok+"; wr_lang=ja", []byte(`{"lang":"ko"}`))
	f.Add("premiere", ticket, noEmail, "", []byte(`{"lang":"xx"}`))
	f.Add("premiere", ticket, tok, "", []byte(`{"lang":`))
	f.Add("other", ticket, tok, "", []byte(`[]`))
	f.Add("premiere", strings.Repeat("A", 300), "a.b.c", "wr_u=", []byte("garbage"))
	allowed := map[int]bool{202: true, 400: true, 401: true, 403: true, 404: true, 405: true, 409: true, 429: true}
	f.Fuzz(func(t *testing.T, event, ticket, acct, cookie string, body []byte) {
		r := fuzzServe(t, e, net.IPv4(198, 51, 100, 7), http.MethodPost,
			"/api/v1/events/"+url.PathEscape(event)+"/tickets/"+url.PathEscape(ticket)+"/away", "", body,
			"X-Waitroom-Account", acct, "Cookie", cookie, "Content-Type", "application/json")
		if !allowed[r.code] {
			t.Fatalf("away of %q: %d %s; not an answer the route gives", event, r.code, r.raw)
		}
		if r.code == http.StatusAccepted && (r.body["email"] != "fan@example.test" || r.hdr.Get("Cache-Control") != "no-store") {
			t.Fatalf("away: %s (Cache-Control %q); want the signed address, no-store", r.raw, r.hdr.Get("Cache-Control"))
		}
	})
}

// FuzzForwardAuth: a proxy's question (GET /api/v1/forward-auth) with the
// fan's words in it: X-Forwarded-Host, -Uri (or X-Original-URI), -Proto,
// the pass's cookie, a return token in the target; and the room's
// ?return=. No answer is a 5xx; only a pass or a token the room made lets
// anyone through; a refusal sends the fan to the room with a way back on
// the host asked for, which is one the event guards; a host no rule names
// is 403 unknown_host, and only such a host; the room page takes
// a way back only to a guarded host.
func FuzzForwardAuth(f *testing.F) {
	g := setupGuarded(f)
	_, st := g.admitWithReturn("https://" + shopHost + "/tour-tokyo")
	link := st.body["returnUrl"].(string)
	_, tok, _ := strings.Cut(link, "wr_token=")
	trade := g.ask(strings.TrimPrefix(link, "https://"+shopHost))
	valid := cookieOf(trade, "wr_fa_premiere")
	f.Add(shopHost, "/tour-tokyo/seats?a=1", "", "https", valid, "https://shop.example/tour-tokyo")
	f.Add("SHOP.example:8443", "/%74our-tokyo", "", "http", "", "https://shop.example:8443/x#y")
	f.Add(shopHost, "/tour-tokyo?wr_token="+tok, "", "https", "", "//shop.example/")
	f.Add(shopHost, "", "/tour-tokyo", "", "garbage", "javascript:alert(1)")
	f.Add("evil.example, shop.example", "/x/../tour-tokyo/", "", "https, http", valid+"x", "https://evil.example/")
	f.Add("a b", "/\x00", "/", "ftp", "a.b.c", "https://user@shop.example/")
	f.Add("SHOP.example", "/%tokyo", "", "http", "", "") // CI's find: a way back with a bad escape
	// The valid pass as a Cookie header may spell it: a cookie parser's
	// reading of these is the pass itself.
	for _, c := range []string{valid + ";", valid + " ", " " + valid, `"` + valid + `"`, valid + "; wr_fa_premiere=x"} {
		f.Add(shopHost, "/tour-tokyo", "", "https", c, "")
	}
	// A port that is no number: a way back no URL parser took.
	f.Add("SHOP.eXAmple:A", "/#0", "", "0", "", "0")
	// ſ (U+017F) is no s: another host, unknown to forward auth, no way back.
	f.Add("\u017fhop.example", "/tour-tokyo", "", "https", "", "https://\u017fhop.example/tour-tokyo")
	f.Fuzz(func(t *testing.T, xfh, uri, original, proto, cookie, ret string) {
		r := fuzzServe(t, g.env, net.ParseIP(balancer), http.MethodGet, "/api/v1/forward-auth", "gateway:8080", nil,
			"X-Forwarded-Host", xfh, "X-Forwarded-Uri", uri, "X-Original-URI", original, "X-Forwarded-Proto", proto,
			"Cookie", "wr_fa_premiere="+cookie)
		switch r.code {
		case http.StatusOK:
			if ev := r.hdr.Get("X-Waitroom-Event"); ev != "" && sitePassOf(cookie) != valid && !strings.Contains(uri+original, tok) {
				t.Fatalf("let through as %s with cookie %q and target %q: only the room's own pass or token may", ev, cookie, uri+original)
			}
		case http.StatusUnauthorized:
			loc, err := url.Parse(r.hdr.Get("X-Waitroom-Location"))
			if err != nil || loc.Scheme+"://"+loc.Host != roomURL || !strings.HasPrefix(loc.Path, "/e/") {
				t.Fatalf("refused to %q; want the room, %s/e/…", r.hdr.Get("X-Waitroom-Location"), roomURL)
			}
			if back := loc.Query().Get("return"); back != "" {
				u, err := url.Parse(back)
				if err != nil || !isShop(u.Hostname()) || u.User != nil {
					t.Fatalf("refused with the way back %q; want one on %s", back, shopHost)
				}
			}
		case http.StatusForbidden:
			// Fails closed: only a host no rule names (or none at all).
			last := xfh[strings.LastIndexByte(xfh, ',')+1:]
			if host, _, err := net.SplitHostPort(strings.TrimSpace(last)); r.body["error"] != "unknown_host" ||
				isShop(strings.TrimSuffix(strings.TrimSpace(last), ".")) || err == nil && isShop(strings.TrimSuffix(host, ".")) {
				t.Fatalf("forward auth, X-Forwarded-Host %q: %d %s; want 403 unknown_host only for a host no rule names", xfh, r.code, r.raw)
			}
		case http.StatusBadRequest:
		default:
			t.Fatalf("forward auth: %d %s; want 200, 400, 401 or 403", r.code, r.raw)
		}
		p := fuzzServe(t, g.env, net.ParseIP(stranger), http.MethodGet, "/e/premiere?return="+url.QueryEscape(ret), "", nil)
		switch {
		case p.code == http.StatusOK && ret != "":
			u, err := url.Parse(ret)
			if err != nil || !isShop(u.Hostname()) || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
				t.Fatalf("the room took the way back %q; want only one on %s", ret, shopHost)
			}
		case p.code != http.StatusOK && p.code != http.StatusBadRequest:
			t.Fatalf("room page with return %q: %d; want 200 or 400", ret, p.code)
		}
	})
}
