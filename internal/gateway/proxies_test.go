package gateway_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// siteProxy is a site's own reverse proxy, as docs/OPERATIONS.md ("Putting
// the room in front of your site") configures it: the file under
// docs/forward-auth/ that the docs show, run as it is but for the
// addresses.
type siteProxy struct {
	name  string
	file  string
	start func(context.Context, localsvc.ProxyOptions) (*localsvc.Proxy, error)
	// listen is how the file says where the site listens, each with the
	// same on the test's port (%s).
	listen [][2]string
	// uses is what the file must say: the proxy's own directive for
	// forward auth (DESIGN.md, "The proxies' own directives work").
	uses []string
}

var siteProxies = []siteProxy{
	{"nginx", "nginx.conf", localsvc.StartNginx, [][2]string{
		{"listen 80;", "listen 127.0.0.1:%s;"}, {"listen 80 default_server;", "listen 127.0.0.1:%s default_server;"}},
		[]string{"auth_request /_waitroom;", "server_name shop.example;"}},
	{"caddy", "Caddyfile", localsvc.StartCaddy, [][2]string{{"http://shop.example {", "http://shop.example:%s {"}},
		[]string{"forward_auth 127.0.0.1:8080 {", "copy_headers X-Waitroom-Event X-Waitroom-Ticket-Id"}},
}

// The addresses the docs' configurations name: the room's gateway and the
// site's origin.
const (
	docsGateway = "127.0.0.1:8080"
	docsOrigin  = "127.0.0.1:3000"
)

// docsFile is a file of docs/forward-auth/.
func docsFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Repo(t), "docs", "forward-auth", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// siteConfig is the docs' configuration of p with the test's addresses:
// each of the docs' addresses is named exactly once, and replaced.
func siteConfig(t *testing.T, p siteProxy, gateway, origin, port string) string {
	t.Helper()
	pairs := [][2]string{{docsGateway, gateway}, {docsOrigin, origin}}
	for _, l := range p.listen {
		pairs = append(pairs, [2]string{l[0], fmt.Sprintf(l[1], port)})
	}
	s, err := localsvc.Readdress(docsFile(t, p.file), pairs...)
	if err != nil {
		t.Fatalf("docs/forward-auth/%s: %v", p.file, err)
	}
	return s
}

// origin is the site behind the proxy: it answers every request with its
// path, and keeps what the proxy told it of the last one.
type origin struct {
	*httptest.Server
	mu           sync.Mutex
	hits         int
	path         string
	event, tckt  string
	sawWaitroomH bool // the request carried an X-Waitroom-* header at all
}

func newOrigin(t *testing.T) *origin {
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.hits++
		o.path = r.URL.RequestURI()
		o.event, o.tckt = r.Header.Get("X-Waitroom-Event"), r.Header.Get("X-Waitroom-Ticket-Id")
		_, a := r.Header["X-Waitroom-Event"]
		_, b := r.Header["X-Waitroom-Ticket-Id"]
		o.sawWaitroomH = a || b
		o.mu.Unlock()
		if strings.Contains(r.URL.Path, "/gone") { // a page the origin no longer has
			w.WriteHeader(http.StatusNotFound)
		}
		fmt.Fprintf(w, "origin %s", r.URL.Path)
	}))
	t.Cleanup(o.Close)
	return o
}

// last is what the origin saw last, and how many requests it had.
func (o *origin) last() (hits int, path, event, ticket string, sawHeader bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits, o.path, o.event, o.tckt, o.sawWaitroomH
}

// browser is a fan's browser: its cookies, shop.example resolved to the
// proxy, and redirects left for the test to follow.
type browser struct {
	t *testing.T
	c *http.Client
}

func newBrowser(t *testing.T, proxyAddr string) *browser {
	jar, _ := cookiejar.New(nil)
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(addr); host == shopHost {
			addr = proxyAddr
		}
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &browser{t: t, c: &http.Client{Jar: jar, Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request, headers hdr (name, value, …), and reads the answer.
func (b *browser) do(method, u string, body io.Reader, hdr ...string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, string(raw)
}

func (b *browser) get(u string, hdr ...string) (*http.Response, string) {
	b.t.Helper()
	return b.do(http.MethodGet, u, nil, hdr...)
}

func (b *browser) post(u string, form url.Values) *http.Response {
	b.t.Helper()
	res, _ := b.do(http.MethodPost, u, strings.NewReader(form.Encode()), "Content-Type", "application/x-www-form-urlencoded")
	return res
}

// refused checks that the proxy sends the fan asking u to the room: 302
// to an event's room with the way back to u (without a return token).
func refused(t *testing.T, b *browser, room, u string, hdr ...string) {
	t.Helper()
	res, _ := b.get(u, hdr...)
	back := u
	if i := strings.Index(back, "wr_token="); i > 0 {
		back = back[:i-1]
	}
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(loc, room+"/e/") || !strings.HasSuffix(loc, "?return="+url.QueryEscape(back)) {
		t.Fatalf("GET %s: %d, Location %q; want 302 to the room, return=%s", u, res.StatusCode, loc, back)
	}
}

// site is a site behind the room, as a test sees it: the room's gateway,
// the site's proxy (at addr, reached as shop) and its origin.
type site struct {
	t          *testing.T
	g          guarded
	o          *origin
	room, shop string
	addr       string
}

func (s *site) browser() *browser { return newBrowser(s.t, s.addr) }

// TestForwardAuth puts the room in front of a site with real nginx and
// real Caddy (Debian's packages, installed when missing), configured with
// the very files docs/OPERATIONS.md shows (nginx's auth_request, Caddy's
// forward_auth directive with copy_headers): a fan is refused, sent to the
// room, joins, is kept out while in line, is admitted, sent back, and
// reaches the origin with its pass; once revoked, gone, or at the end of
// its window, it is refused again at the next request. Forged, expired,
// reused and foreign tokens are refused, a return to a foreign host too,
// and the paths no rule guards reach the origin without the line being
// asked anything.
func TestForwardAuth(t *testing.T) {
	for _, p := range siteProxies {
		t.Run(p.name, func(t *testing.T) { testForwardAuth(t, p) })
	}
}

func testForwardAuth(t *testing.T, p siteProxy) {
	ctx := context.Background()
	for _, d := range p.uses {
		if !strings.Contains(docsFile(t, p.file), d) {
			t.Fatalf("docs/forward-auth/%s does not say %q", p.file, d)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	room := "http://" + ln.Addr().String()
	g := setupGuardedAt(t, room, "127.0.0.1/32")
	go func() { _ = g.srv.Serve(ln) }()
	t.Cleanup(func() { _ = g.srv.Shutdown(context.Background()) })
	o := newOrigin(t)
	port, err := localsvc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	px, err := p.start(ctx, localsvc.ProxyOptions{Dir: t.TempDir(), Addr: addr,
		Site: siteConfig(t, p, ln.Addr().String(), strings.TrimPrefix(o.URL, "http://"), fmt.Sprint(port))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Stop)
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(px.Log)
			t.Logf("%s's log:\n%s", p.name, b)
		}
	}()
	shop := fmt.Sprintf("http://%s:%d", shopHost, port)
	st := &site{t: t, g: g, o: o, room: room, shop: shop, addr: addr}
	fan := st.browser()

	// The paths no rule guards: to the origin, the line never asked, and
	// a client's own X-Waitroom-* never reaching it.
	before := g.counted.calls.Load()
	for _, path := range []string{"/", "/tour-osaka/seats", "/?next=/tour-tokyo"} {
		res, body := fan.get(shop+path, "X-Waitroom-Event", "premiere", "X-Waitroom-Ticket-Id", "forged")
		_, seen, event, ticket, told := o.last()
		if res.StatusCode != http.StatusOK || body != "origin "+strings.Split(path, "?")[0] || seen != path || told {
			t.Errorf("GET %s: %d %q, the origin saw %q with event %q, ticket %q; want 200 from the origin, no X-Waitroom-* header", path, res.StatusCode, body, seen, event, ticket)
		}
		if c := res.Header.Values("Set-Cookie"); len(c) != 0 {
			t.Errorf("GET %s: Set-Cookie %q; want none", path, c)
		}
	}
	if n := g.counted.calls.Load() - before; n != 0 {
		t.Errorf("paths no rule guards asked the line %d times; want 0", n)
	}

	st.failsClosed(port)

	// A guarded path, with no place: to the room, with the way back; the
	// origin never sees it.
	page := shop + "/tour-tokyo/seats?a=1"
	hits, _, _, _, _ := o.last()
	refused(t, fan, room, page, "X-Waitroom-Event", "premiere")
	if h, _, _, _, _ := o.last(); h != hits {
		t.Errorf("a refused request reached the origin")
	}
	id := st.enter(fan, "premiere", page)
	// The pass reaches the browser whatever the origin answers: the fan
	// coming back to a page the origin answers 404 gets it too (nginx's
	// add_header ... always).
	st.enter(st.browser(), "premiere", shop+"/tour-tokyo/gone")
	res, body := fan.get(shop+"/tour-tokyo/checkout", "X-Waitroom-Ticket-Id", "forged")
	if _, _, event, ticket, _ := o.last(); res.StatusCode != http.StatusOK || body != "origin /tour-tokyo/checkout" || event != "premiere" || ticket != id {
		t.Errorf("with the pass: %d %q, event %q, ticket %q; want 200 from the origin, premiere, %s", res.StatusCode, body, event, ticket, id)
	}
	if c := res.Header.Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("with the pass: Set-Cookie %q; want none (the pass is set once, on the way back)", c)
	}

	// Tokens that are not the room's own, live, unspent and of this event.
	stranger := st.browser()
	otherKey := testenv.Ed25519Key(t)
	now := time.Now()
	for name, mint := range map[string]func() (string, error){
		"forged": func() (string, error) {
			return pass.NewSigner(otherKey).MintReturn(id, "premiere", "AAAAAAAAAAAAAAAAAAAAAA", now, now.Add(time.Minute))
		},
		"expired": func() (string, error) {
			return pass.NewSigner(g.priv).MintReturn(id, "premiere", "BBBBBBBBBBBBBBBBBBBBBB", now.Add(-time.Hour), now.Add(-time.Minute))
		},
		"foreign": func() (string, error) {
			return pass.NewSigner(g.priv).MintReturn(id, "other", "CCCCCCCCCCCCCCCCCCCCCC", now, now.Add(time.Minute))
		},
	} {
		tok, err := mint()
		if err != nil {
			t.Fatal(err)
		}
		res, _ := stranger.get(shop + "/tour-tokyo?wr_token=" + tok)
		if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), room+"/e/premiere?return=") {
			t.Errorf("a %s token: %d, Location %q; want 302 to the room", name, res.StatusCode, res.Header.Get("Location"))
		}
	}
	// The room sends no one to a host it does not guard.
	if res, _ := fan.get(room + "/e/premiere?return=" + url.QueryEscape("http://evil.example/tour-tokyo")); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a return to a foreign host: %d; want 400", res.StatusCode)
	}

	// Revoked: refused at the next request.
	if err := g.line.Revoke(ctx, "premiere", id); err != nil {
		t.Fatal(err)
	}
	refused(t, fan, room, shop+"/tour-tokyo/checkout")

	// Left: likewise.
	leaver := st.browser()
	st.enter(leaver, "premiere", shop+"/tour-tokyo")
	if res := leaver.post(room+"/e/premiere/leave", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("leave: %d", res.StatusCode)
	}
	refused(t, leaver, room, shop+"/tour-tokyo")

	// The end of the window (event other: access_ttl 2s, guarding
	// /flash): refused at once, the pass's own expiry (and the cookie's)
	// not waited for.
	late := st.browser()
	st.enter(late, "other", shop+"/flash")
	u, _ := url.Parse(shop)
	var cookie string
	for _, c := range late.c.Jar.Cookies(u) {
		if c.Name == "wr_fa_other" {
			cookie = c.Value
		}
	}
	if cookie == "" {
		t.Fatal("no pass kept for the site")
	}
	claims, err := pass.NewStaticVerifierFor(g.priv.Public().(ed25519.PublicKey), pass.AudienceSite).Verify(ctx, cookie)
	if err != nil {
		t.Fatal(err)
	}
	// (The pass's exp is the window's end in whole seconds, rounded down.)
	time.Sleep(time.Until(claims.ExpiresAt.Add(1100 * time.Millisecond)))
	refused(t, st.browser(), room, shop+"/flash", "Cookie", "wr_fa_other="+cookie)
}

// failsClosed checks the third round's forward-auth rule through the
// proxy (DESIGN.md, "Fair play, third round": forward auth fails closed):
// a Host the site does not have, none at all (HTTP/1.0), a request whose
// target names the site but whose Host does not, and every spelling of a
// guarded path that an origin may resolve to it (;-parameters, dot
// segments, escapes) never reach the origin without a pass. Each request
// is written as a client may write it, byte for byte.
func (s *site) failsClosed(port int) {
	t := s.t
	t.Helper()
	shop := fmt.Sprintf("%s:%d", shopHost, port)
	var reqs []string
	for _, head := range []string{
		"GET /tour-tokyo HTTP/1.1\r\nHost: x\r\n",
		"GET /tour-tokyo HTTP/1.1\r\nHost: evil.example:" + fmt.Sprint(port) + "\r\n",
		"GET /tour-tokyo HTTP/1.1\r\nHost: 127.0.0.1:" + fmt.Sprint(port) + "\r\n",
		"GET /tour-tokyo HTTP/1.0\r\n",
		"GET /tour-tokyo/seats HTTP/1.0\r\nX-Forwarded-Host: " + shop + "\r\n",
		"GET http://" + shop + "/tour-tokyo HTTP/1.1\r\nHost: x\r\n",
	} {
		reqs = append(reqs, head)
	}
	for _, target := range []string{
		"/x/..;/tour-tokyo", "/;/tour-tokyo", "/.;/tour-tokyo", "/tour-tokyo;jsessionid=1/buy", "/x;a=b/..;c=d/tour-tokyo",
		"/x/%2e%2e/tour-tokyo", "/x/.%2E/tour-tokyo/seats", "/%74our-tokyo", "/TOUR-TOKYO", "//tour-tokyo", "/x/../tour-tokyo",
		"/x%2F..%2Ftour-tokyo", "/x%5C..%5Ctour-tokyo", "/x;%2F..%2F/tour-tokyo", "/tour-osaka%", "/x%3B/../tour-tokyo",
	} {
		reqs = append(reqs, "GET "+target+" HTTP/1.1\r\nHost: "+shop+"\r\n")
	}
	for _, req := range reqs {
		hits, _, _, _, _ := s.o.last()
		code, body := rawRequest(t, s.addr, req+"Connection: close\r\n\r\n")
		if h, seen, _, _, _ := s.o.last(); h != hits || strings.HasPrefix(body, "origin ") {
			t.Errorf("%q: %d %.60q, the origin saw %q; want it never reached", req, code, body, seen)
		}
	}
}

// rawRequest writes req (a whole request) to the proxy at addr and reads
// the answer: its status and body, 0 when the proxy closed the connection
// without one (nginx's 444).
func rawRequest(t *testing.T, addr, req string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// enter takes the browser's fan through the room the way a browser without
// JavaScript goes: the guarded page sends it to the room, it joins with
// the form, waits (kept out of the site meanwhile), is admitted with a
// window of the event's access_ttl, and the room sends it back to page with a token, which
// the proxy trades for the pass; the token is spent then. It returns the
// fan's ticket id, as the origin was told it.
func (s *site) enter(b *browser, event, page string) string {
	t := s.t
	t.Helper()
	res, _ := b.get(page)
	toRoom := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(toRoom, s.room+"/") {
		t.Fatalf("GET %s: %d to %q; want 302 to the room", page, res.StatusCode, toRoom)
	}
	res, body := b.get(toRoom)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `name="return"`) {
		t.Fatalf("the room page: %d; want 200 with a join form carrying the way back", res.StatusCode)
	}
	if res := b.post(s.room+"/e/"+event+"/join", url.Values{"return": {page}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("join: %d", res.StatusCode)
	}
	refused(t, b, s.room, page) // in line: kept out
	ev, _ := s.g.cfg.Event(event)
	set := line.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: ev.Admission.AccessTTL.D(), AbandonAfter: time.Minute}
	var back string
	for deadline := time.Now().Add(5 * time.Second); back == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := s.g.line.Tick(context.Background(), event, set); err != nil {
			t.Fatal(err)
		}
		if res, _ := b.get(s.room + "/e/" + event); res.StatusCode == http.StatusSeeOther {
			back = res.Header.Get("Location")
		}
	}
	if !strings.HasPrefix(back, page+"&wr_token=") && !strings.HasPrefix(back, page+"?wr_token=") {
		t.Fatalf("admitted: the room sends the fan to %q; want %s with a wr_token", back, page)
	}
	res, body = b.get(back)
	_, seen, told, ticket, _ := s.o.last()
	want := http.StatusOK
	if strings.Contains(page, "/gone") {
		want = http.StatusNotFound
	}
	if res.StatusCode != want || !strings.HasPrefix(body, "origin ") || seen != strings.TrimPrefix(back, s.shop) || told != event || ticket == "" {
		t.Fatalf("back with the token: %d %q, the origin saw %q, event %q, ticket %q; want 200 from the origin, %s and a ticket", res.StatusCode, body, seen, told, ticket, event)
	}
	c := res.Header.Get("Set-Cookie")
	for _, attr := range []string{"wr_fa_" + event + "=", "HttpOnly", "SameSite=Lax", "path=/"} {
		if !strings.Contains(c, attr) {
			t.Errorf("the pass's cookie %q lacks %s", c, attr)
		}
	}
	refused(t, s.browser(), s.room, back) // the token again, from anywhere: spent
	return ticket
}

// forwardAuthDocs are the files of docs/forward-auth/ that
// docs/OPERATIONS.md shows, with the language of their fenced block.
var forwardAuthDocs = [][2]string{
	{"nginx.conf", "nginx"}, {"Caddyfile", "caddy"}, {"traefik.yml", "yaml"},
	{"verify_pass.go", "go"}, {"verify_pass.py", "python"},
}

// The configurations and programs docs/OPERATIONS.md shows are, byte for
// byte, the files the tests run: the docs cannot drift from what works.
func TestForwardAuthDocsAreTheFilesTested(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.Repo(t), "docs", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	ops := string(b)
	for _, f := range forwardAuthDocs {
		block := "```" + f[1] + "\n" + docsFile(t, f[0]) + "```\n"
		if !strings.Contains(ops, block) {
			t.Errorf("docs/OPERATIONS.md does not show docs/forward-auth/%s as it is (a ```%s block, byte for byte)", f[0], f[1])
		}
	}
}

// Traefik is not packaged for Debian, so no test runs one: its
// configuration in the docs is checked against what the gateway answers
// and against the forward request Traefik's documentation describes
// (X-Forwarded-Method, -Proto, -Host, -Uri, -For, with the client's own
// headers, its cookies among them): a refusal is a page that goes to the
// room, the trade's cookie is the one the configuration passes on, and the
// headers it copies for the origin are the ones the gateway sets.
func TestTraefikConfig(t *testing.T) {
	var doc struct {
		HTTP struct {
			Routers map[string]struct {
				Rule        string   `yaml:"rule"`
				EntryPoints []string `yaml:"entryPoints"`
				Middlewares []string `yaml:"middlewares"`
				Service     string   `yaml:"service"`
			} `yaml:"routers"`
			Middlewares map[string]struct {
				ForwardAuth struct {
					Address             string   `yaml:"address"`
					TrustForwardHeader  bool     `yaml:"trustForwardHeader"`
					AuthResponseHeaders []string `yaml:"authResponseHeaders"`
					AddAuthCookies      []string `yaml:"addAuthCookiesToResponse"`
				} `yaml:"forwardAuth"`
			} `yaml:"middlewares"`
			Services map[string]struct {
				LoadBalancer struct {
					Servers []struct {
						URL string `yaml:"url"`
					} `yaml:"servers"`
				} `yaml:"loadBalancer"`
			} `yaml:"services"`
		} `yaml:"http"`
	}
	dec := yaml.NewDecoder(strings.NewReader(docsFile(t, "traefik.yml")))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	r, ok := doc.HTTP.Routers["shop"]
	if !ok || r.Rule != "Host(`"+shopHost+"`)" || len(r.Middlewares) != 1 || r.Service != "shop" {
		t.Fatalf("router shop = %+v; want Host(`%s`) through one middleware to service shop", r, shopHost)
	}
	fa := doc.HTTP.Middlewares[r.Middlewares[0]].ForwardAuth
	if fa.Address != "http://"+docsGateway+"/api/v1/forward-auth" || fa.TrustForwardHeader {
		t.Errorf("forwardAuth address %q, trustForwardHeader %v; want http://%s/api/v1/forward-auth, false", fa.Address, fa.TrustForwardHeader, docsGateway)
	}
	if s := doc.HTTP.Services["shop"].LoadBalancer.Servers; len(s) != 1 || s[0].URL != "http://"+docsOrigin {
		t.Errorf("service shop = %+v; want http://%s", s, docsOrigin)
	}

	g := setupGuarded(t)
	traefik := func(target string, hdr ...string) resp {
		return g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", append([]string{
			"X-Forwarded-Method", "GET", "X-Forwarded-Proto", "https", "X-Forwarded-Host", shopHost,
			"X-Forwarded-Uri", target, "X-Forwarded-For", "203.0.113.9", "Accept", "text/html",
		}, hdr...)...)
	}
	no := traefik("/tour-tokyo")
	loc := no.hdr.Get("X-Waitroom-Location")
	if no.code != http.StatusUnauthorized || !strings.Contains(string(no.raw), `content="0; url=`+html.EscapeString(loc)+`"`) {
		t.Errorf("refusal as Traefik shows it: %d %q; want 401, a page that goes to %s", no.code, no.raw, loc)
	}
	// A request with no Host: Traefik's forward request has no
	// X-Forwarded-Host, and the room refuses it.
	if r := g.doFrom(balancer, http.MethodGet, "/api/v1/forward-auth", "X-Forwarded-Method", "GET", "X-Forwarded-Proto", "https",
		"X-Forwarded-Uri", "/tour-tokyo", "X-Forwarded-For", "203.0.113.9"); r.code != http.StatusForbidden || r.body["error"] != "unknown_host" {
		t.Errorf("no Host, as Traefik asks: %d %s; want 403 unknown_host", r.code, r.raw)
	}
	_, st := g.admitWithReturn("https://" + shopHost + "/tour-tokyo")
	yes := traefik(strings.TrimPrefix(st.body["returnUrl"].(string), "https://"+shopHost))
	var cookies []string
	for _, c := range (&http.Response{Header: yes.hdr}).Cookies() {
		cookies = append(cookies, c.Name)
	}
	if yes.code != http.StatusOK || strings.Join(cookies, ",") != strings.Join(fa.AddAuthCookies, ",") {
		t.Errorf("the trade: %d, cookies %v; want 200 and the cookies addAuthCookiesToResponse passes on, %v", yes.code, cookies, fa.AddAuthCookies)
	}
	pass := cookieOf(yes, "wr_fa_premiere")
	in := traefik("/tour-tokyo/seats", "Cookie", "wr_fa_premiere="+pass)
	for _, h := range fa.AuthResponseHeaders {
		if in.hdr.Get(h) == "" {
			t.Errorf("an admitted fan's answer has no %s, which authResponseHeaders copies for the origin", h)
		}
	}
	if len(fa.AuthResponseHeaders) != 2 {
		t.Errorf("authResponseHeaders = %v; want the two the gateway sets, X-Waitroom-Event and X-Waitroom-Ticket-Id", fa.AuthResponseHeaders)
	}
}

// An origin may check the pass itself, against the room's JWKS: the Go and
// the Python programs the docs show take a pass the room gave and refuse
// a booking pass.
func TestOriginChecksThePassItself(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := setupGuarded(t)
	go func() { _ = g.srv.Serve(ln) }()
	t.Cleanup(func() { _ = g.srv.Shutdown(context.Background()) })
	jwks := "http://" + ln.Addr().String() + "/.well-known/jwks.json"
	_, st := g.admitWithReturn("https://" + shopHost + "/tour-tokyo")
	trade := g.ask(strings.TrimPrefix(st.body["returnUrl"].(string), "https://"+shopHost))
	site, id := cookieOf(trade, "wr_fa_premiere"), trade.hdr.Get("X-Waitroom-Ticket-Id")
	booking := st.body["accessToken"].(string)
	python, err := localsvc.EnsurePython("jwt", "python3-jwt")
	if err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join(testenv.Repo(t), "docs", "forward-auth")
	for name, prog := range map[string][]string{
		"go":     {"go", "run", filepath.Join(docs, "verify_pass.go")},
		"python": {python, filepath.Join(docs, "verify_pass.py")},
	} {
		run := func(token string) (string, error) {
			cmd := exec.Command(prog[0], append(prog[1:], jwks, token)...)
			cmd.Dir = testenv.Repo(t)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := run(site); err != nil || !strings.HasPrefix(out, "event premiere ticket "+id+" until ") {
			t.Errorf("%s, the site's pass: %v %q; want event premiere ticket %s until …", name, err, out, id)
		}
		if out, err := run(booking); err == nil || !strings.Contains(out, "refused") {
			t.Errorf("%s, a booking pass: %v %q; want it refused", name, err, out)
		}
	}
}
