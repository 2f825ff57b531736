package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
	"github.com/waitroom/waitroom/internal/webhook"
)

const cfgYAML = `
auth: {ticket_secret: "gateway-test-secret-0123456789abcdef", draw_secret: "gateway-draw-secret-0123456789abcdef"}
gateway: {booking_url: "%s", joins_per_ip_per_minute: %d%s}
booking: {%s}
events:
  - id: "premiere"
    admission: {admit_per_second: 100, max_active: 100}
    showtimes: [{id: 42, title: "T", starts_at: "2026-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "other"
    admission: {admit_per_second: 100, max_active: 100}
    showtimes: [{id: 43, title: "U", starts_at: "2026-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "shut"
    mode: "closed"
    showtimes: [{id: 44, title: "V", starts_at: "2026-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "later"
    prequeue_opens_at: "2099-01-01T09:00:00Z"
    opens_at: "2099-01-01T10:00:00Z"
    showtimes: [{id: 45, title: "W", starts_at: "2099-01-01T19:00:00Z", rows: 2, seats_per_row: 2}]
`

type env struct {
	t        testing.TB
	redis    *localsvc.Redis
	srv      *gateway.Server
	line     *queue.Store
	ops      *operators.Store
	rdb      redis.UniversalClient
	cfg      *config.Config
	priv     ed25519.PrivateKey
	upstream *upstream
}

// upstream stands in for the booking core behind the proxy and records what
// reached it.
type upstream struct {
	*httptest.Server
	hits     atomic.Int32
	lastAuth atomic.Value
	lastHdr  atomic.Value
	delay    atomic.Int64
	holdFor  atomic.Int64 // how long a hold it grants lasts (default 20m)
	holdBody atomic.Value // a hold's body instead of its JSON (a string), if set
	// placeActive is the booking core's own check of a hold's place (in
	// the core, its reserve: nothing is reserved for a place that is not
	// active), a func(event, ticketID string) bool: a hold whose pass's
	// place is not active is answered 401 admission_required, as the core
	// answers it.
	placeActive atomic.Value
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.lastAuth.Store(r.Header.Get("Authorization"))
		u.lastHdr.Store(r.Header.Clone())
		if d := u.delay.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/holds") {
			if active, ok := u.placeActive.Load().(func(event, ticket string) bool); ok {
				if c, ok := bearerClaims(r); !ok || !active(c.Event, c.Subject) {
					w.WriteHeader(http.StatusUnauthorized)
					fmt.Fprint(w, `{"error":"admission_required","message":"the booking core: no active place"}`)
					return
				}
			}
			d := 20 * time.Minute
			if f := u.holdFor.Load(); f > 0 {
				d = time.Duration(f)
			}
			exp := time.Now().Add(d).UTC().Format(time.RFC3339Nano)
			w.Header().Set(line.HoldExpiresHeader, exp) // as the booking core answers a hold
			w.WriteHeader(http.StatusCreated)
			if b, ok := u.holdBody.Load().(string); ok {
				fmt.Fprint(w, b)
				return
			}
			fmt.Fprintf(w, `{"holdId":"h1","expiresAt":%q,"seats":["A1"]}`, exp)
			return
		}
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(u.Close)
	return u
}

// bearerClaims reads the claims of r's Bearer pass without checking it
// (the gate checked its signature before passing it on).
func bearerClaims(r *http.Request) (c struct {
	Subject string `json:"sub"`
	Event   string `json:"evt"`
}, ok bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	parts := strings.Split(tok, ".")
	if !ok || len(parts) != 3 {
		return c, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	return c, err == nil && json.Unmarshal(payload, &c) == nil
}

func setup(t testing.TB, joinsPerIP int) *env { t.Helper(); return setupWith(t, joinsPerIP, "", "") }

// setupWith is setup with extra flow-style keys for the gateway: map
// (starting with ", ") and the booking: map's content ("" = just the
// payment secret); opts edit the gateway's options.
func setupWith(t testing.TB, joinsPerIP int, gatewayKeys, bookingKeys string, opts ...func(*gateway.Options)) *env {
	t.Helper()
	rs, rc := testenv.Redis(t)
	return setupOn(t, rs, rc, joinsPerIP, gatewayKeys, bookingKeys, opts...)
}

// setupOn is setupWith on a Redis the test started (rs, and its client rc
// for the env's own line).
func setupOn(t testing.TB, rs *localsvc.Redis, rc *redis.Client, joinsPerIP int, gatewayKeys, bookingKeys string, opts ...func(*gateway.Options)) *env {
	t.Helper()
	up := newUpstream(t)
	if bookingKeys == "" {
		bookingKeys = `payment: {secret: "gateway-test-payment-secret-0123456789"}`
	}
	if !strings.Contains(gatewayKeys, "proxy_timeout") {
		// Long enough for the stand-in core's own call to the line on a
		// busy machine; a test of a slow core sets its own.
		gatewayKeys += `, proxy_timeout: "5s"`
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(cfgYAML, up.URL, joinsPerIP, gatewayKeys, bookingKeys)), nil)
	if err != nil {
		t.Fatal(err)
	}
	priv := testenv.Ed25519Key(t)
	line := queue.NewStore(rc, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret))
	// The stand-in core asks the line over connections of its own, as the
	// booking core does, made before the test starts (a test's proxy
	// timeout is short); while Redis does not answer it lets the fan go
	// on, as the core's gatekeeper does (degraded).
	coreRC := redis.NewClient(&redis.Options{Addr: rs.Addr, PoolSize: 64, MinIdleConns: 32, DialTimeout: 200 * time.Millisecond, DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { coreRC.Close() })
	coreLine := queue.NewStore(coreRC, []byte(cfg.Auth.TicketSecret))
	if _, err := coreLine.Active(context.Background(), "premiere", "warm-up"); err != nil {
		t.Fatal(err)
	}
	up.placeActive.Store(func(event, ticket string) bool {
		ok, err := coreLine.Active(context.Background(), event, ticket)
		return err != nil || ok
	})
	ops := operators.New(rdb.New(rc))
	o := gateway.Options{Config: cfg, Line: line, Operators: ops, Webhooks: webhook.NewStore(rdb.New(rc)), Signer: pass.NewSigner(priv)}
	for _, f := range opts {
		f(&o)
	}
	srv, err := gateway.New(o)
	if err != nil {
		t.Fatal(err)
	}
	// Its jobs (the settings, the line's ends) stop with the test.
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return &env{t: t, redis: rs, srv: srv, line: line, ops: ops, rdb: rc, cfg: cfg, priv: priv, upstream: up}
}

// configFile is src, a config the test may reload, written to a file of
// its own (path) and parsed.
func configFile(t testing.TB, src string) (path string, cfg *config.Config) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "waitroom.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return path, cfg
}

type resp struct {
	code int
	hdr  http.Header
	body map[string]any
	raw  []byte
}

func (e *env) do(method, path string, body io.Reader, hdr ...string) resp {
	e.t.Helper()
	req := httptest.NewRequest(method, path, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.srv.App().Test(req, 5000)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := resp{code: res.StatusCode, hdr: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func (e *env) join(event string, hdr ...string) resp {
	e.t.Helper()
	return e.do(http.MethodPost, "/api/v1/events/"+event+"/tickets", nil, hdr...)
}

// admit joins and runs a tick, returning the ticket and its access token.
// parse is ticket, as a fan holds it, checked for event as the gateway
// checks it (the config's ticket secret): a test's way to the line's
// words.
func (e *env) parse(event, ticket string) (line.Ticket, error) {
	return line.NewCodec([]byte(e.cfg.Auth.TicketSecret)).Parse(event, ticket)
}

// idOf is the id (the pass's sub) of ticket of event; "" for a bad one.
func (e *env) idOf(event, ticket string) string {
	t, err := e.parse(event, ticket)
	if err != nil {
		return ""
	}
	return t.ID()
}

// mustID is idOf failing the test on a bad ticket.
func (e *env) mustID(event, ticket string) string {
	e.t.Helper()
	id := e.idOf(event, ticket)
	if id == "" {
		e.t.Fatalf("ticket %q is not one of %s", ticket, event)
	}
	return id
}

func (e *env) admit(event string) (ticket, token string) {
	e.t.Helper()
	r := e.join(event, "X-Forwarded-For", "")
	if r.code != http.StatusCreated {
		e.t.Fatalf("join: %d %s", r.code, r.raw)
	}
	ticket = r.body["ticket"].(string)
	ev, _ := e.cfg.Event(event)
	set := line.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
	_ = ev
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := e.line.Tick(context.Background(), event, set); err != nil {
			e.t.Fatal(err)
		}
		s := e.do(http.MethodGet, "/api/v1/events/"+event+"/tickets/"+ticket, nil)
		if s.code == http.StatusOK && s.body["status"] == "admitted" {
			return ticket, s.body["accessToken"].(string)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatal("ticket never admitted")
	return "", ""
}

func TestJoinStatusLeave(t *testing.T) {
	e := setup(t, 0)
	r := e.join("premiere")
	if r.code != http.StatusCreated {
		t.Fatalf("join: got %d %s; want 201", r.code, r.raw)
	}
	for _, f := range []string{"ticket", "status", "position", "ahead", "etaSeconds", "pollAfterMs"} {
		if _, ok := r.body[f]; !ok {
			t.Errorf("join body lacks %q: %s", f, r.raw)
		}
	}
	if r.body["status"] != "waiting" || r.body["position"] != 1.0 || r.body["ahead"] != 0.0 {
		t.Errorf("join body = %s; want waiting, position 1, ahead 0", r.raw)
	}
	ticket := r.body["ticket"].(string)
	cookie := r.hdr.Get("Set-Cookie")
	if !strings.Contains(cookie, "wr_t_premiere=") || !strings.Contains(cookie, "HttpOnly") || !strings.Contains(strings.ToLower(cookie), "samesite=lax") {
		t.Errorf("ticket cookie = %q; want wr_t_premiere, HttpOnly, SameSite=Lax", cookie)
	}

	// One place per fan: the same ticket comes back, by cookie or by header.
	for name, hdr := range map[string][]string{
		"cookie": {"Cookie", "wr_t_premiere=" + ticket},
		"header": {"X-Waitroom-Ticket", ticket},
	} {
		again := e.join("premiere", hdr...)
		if again.code != http.StatusOK || again.body["ticket"] != ticket {
			t.Errorf("re-join by %s: got %d %s; want 200 with the same ticket", name, again.code, again.raw)
		}
	}
	// A stale or foreign ticket in the header never hides the good cookie.
	other := e.join("other").body["ticket"].(string)
	if r := e.join("premiere", "X-Waitroom-Ticket", other, "Cookie", "wr_t_premiere="+ticket); r.code != http.StatusOK || r.body["ticket"] != ticket {
		t.Errorf("re-join with a foreign header ticket and the good cookie: %d %s; want 200 with the same ticket", r.code, r.raw)
	}
	second := e.join("premiere")
	if second.body["position"] != 2.0 || second.body["ahead"] != 1.0 {
		t.Errorf("second fan: %s; want position 2, ahead 1", second.raw)
	}

	st := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, nil)
	if st.code != http.StatusOK || st.body["status"] != "waiting" || st.body["position"] != 1.0 {
		t.Fatalf("status: %d %s; want 200 waiting position 1", st.code, st.raw)
	}
	if _, ok := st.body["ticket"]; ok {
		t.Errorf("status body carries the ticket: %s", st.raw)
	}

	if r := e.do(http.MethodDelete, "/api/v1/events/premiere/tickets/"+ticket, nil); r.code != http.StatusNoContent {
		t.Fatalf("leave: %d %s; want 204", r.code, r.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, nil); r.code != http.StatusGone || r.body["status"] != "expired" {
		t.Fatalf("status after leave: %d %s; want 410 expired", r.code, r.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+second.body["ticket"].(string), nil); r.body["position"] != 1.0 {
		t.Errorf("second fan after the first left: %s; want position 1", r.raw)
	}
}

func TestBadInput(t *testing.T) {
	e := setup(t, 0)
	good := e.join("premiere").body["ticket"].(string)
	other := e.join("other").body["ticket"].(string)
	tampered := []byte(good)
	tampered[len(tampered)/2] ^= 1
	cases := []struct {
		name, method, path string
		code               int
		errCode            string
	}{
		{"unknown event join", "POST", "/api/v1/events/nope/tickets", 404, "unknown_event"},
		{"unknown event status", "GET", "/api/v1/events/nope/tickets/" + good, 404, "unknown_event"},
		{"unknown event info", "GET", "/api/v1/events/nope", 404, "unknown_event"},
		{"garbage ticket", "GET", "/api/v1/events/premiere/tickets/garbage", 400, "invalid_ticket"},
		{"tampered ticket", "GET", "/api/v1/events/premiere/tickets/" + string(tampered), 400, "invalid_ticket"},
		{"truncated ticket", "GET", "/api/v1/events/premiere/tickets/" + good[:len(good)-3], 400, "invalid_ticket"},
		{"ticket of another event", "GET", "/api/v1/events/premiere/tickets/" + other, 400, "invalid_ticket"},
		{"leave with forged ticket", "DELETE", "/api/v1/events/premiere/tickets/" + string(tampered), 400, "invalid_ticket"},
		{"bad method on tickets", "PUT", "/api/v1/events/premiere/tickets", 405, "method_not_allowed"},
		{"no such route", "GET", "/api/v1/nothing", 404, "not_found"},
		{"closed event", "POST", "/api/v1/events/shut/tickets", 409, "event_closed"},
		{"before the pre-queue", "POST", "/api/v1/events/later/tickets", 403, "not_open"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, nil)
			if r.code != tc.code || r.body["error"] != tc.errCode {
				t.Fatalf("got %d %s; want %d %s", r.code, r.raw, tc.code, tc.errCode)
			}
			if msg, _ := r.body["message"].(string); msg == "" {
				t.Errorf("no message in %s", r.raw)
			}
		})
	}
	if r := e.join("later"); r.body["opensAt"] != "2099-01-01T09:00:00Z" {
		t.Errorf("not_open body = %s; want opensAt 2099-01-01T09:00:00Z", r.raw)
	}
	// Nothing above added a place in line.
	if n := queuetest.Of(t, e.rdb, "premiere").WaitingCount(); n != 1 {
		t.Errorf("premiere line holds %d tickets; want 1", n)
	}
}

func TestJoinRateLimitPerIP(t *testing.T) {
	e := setup(t, 3)
	for i := 0; i < 3; i++ {
		if r := e.join("premiere"); r.code != http.StatusCreated {
			t.Fatalf("join %d: %d %s", i, r.code, r.raw)
		}
	}
	r := e.join("premiere")
	if r.code != http.StatusTooManyRequests || r.body["error"] != "rate_limited" || r.hdr.Get("Retry-After") == "" {
		t.Fatalf("4th join: %d %s (Retry-After %q); want 429 rate_limited with Retry-After", r.code, r.raw, r.hdr.Get("Retry-After"))
	}
	if n := queuetest.Of(t, e.rdb, "premiere").WaitingCount(); n != 3 {
		t.Errorf("line holds %d; want 3 (a refused join takes no place)", n)
	}
}

func TestAdmittedGetsAPass(t *testing.T) {
	e := setup(t, 0)
	ticket, token := e.admit("premiere")
	claims, err := pass.NewStaticVerifier(e.priv.Public().(ed25519.PublicKey)).Verify(context.Background(), token)
	if err != nil {
		t.Fatalf("pass does not verify: %v", err)
	}
	tk, err := e.parse("premiere", ticket)
	id := tk.ID()
	if err != nil || claims.Ticket != id || claims.Event != "premiere" {
		t.Fatalf("claims = %+v; want sub %q evt premiere", claims, id)
	}
	st := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, nil)
	if !strings.Contains(strings.Join(st.hdr.Values("Set-Cookie"), ";"), "wr_a_premiere=") {
		t.Errorf("admitted status sets no wr_a_premiere cookie: %v", st.hdr.Values("Set-Cookie"))
	}
	exp, err := time.Parse(time.RFC3339, st.body["expiresAt"].(string))
	if err != nil || exp.Sub(claims.ExpiresAt).Abs() > time.Second {
		t.Errorf("expiresAt %v vs pass exp %v", st.body["expiresAt"], claims.ExpiresAt)
	}
	if _, ok := st.body["etaSeconds"]; ok {
		t.Errorf("admitted body carries etaSeconds: %s", st.raw)
	}
	// aud is the plain string "booking", as strict verifiers expect.
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	var raw map[string]any
	_ = json.Unmarshal(payload, &raw)
	if raw["aud"] != "booking" || raw["iss"] != "waitroom" || raw["evt"] != "premiere" {
		t.Errorf("claims = %s; want aud \"booking\" (a string), iss waitroom, evt premiere", payload)
	}
	jwks := e.do(http.MethodGet, "/.well-known/jwks.json", nil)
	keys, _ := jwks.body["keys"].([]any)
	if len(keys) != 1 || keys[0].(map[string]any)["crv"] != "Ed25519" {
		t.Errorf("jwks = %s", jwks.raw)
	}
}

func TestGate(t *testing.T) {
	e := setup(t, 0)
	ticket, token := e.admit("premiere")
	id := e.idOf("premiere", ticket)
	now := time.Now()
	sign := func(method jwt.SigningMethod, key any, mut func(jwt.MapClaims)) string {
		c := jwt.MapClaims{"iss": "waitroom", "aud": "booking", "sub": id, "evt": "premiere", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
		if mut != nil {
			mut(c)
		}
		tok := jwt.NewWithClaims(method, c)
		tok.Header["kid"] = pass.KeyID(e.priv.Public().(ed25519.PublicKey))
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pub := []byte(e.priv.Public().(ed25519.PublicKey))
	parts := strings.Split(token, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	tamperedPayload := bytes.Replace(payload, []byte(`"premiere"`), []byte(`"other"`), 1)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(tamperedPayload) + "." + parts[2]

	refused := []struct{ name, auth string }{
		{"no token", ""},
		{"garbage", "Bearer garbage"},
		{"alg none", "Bearer " + sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil)},
		{"HS256 keyed with the public key", "Bearer " + sign(jwt.SigningMethodHS256, pub, nil)},
		{"tampered payload", "Bearer " + tampered},
		{"expired", "Bearer " + sign(jwt.SigningMethodEdDSA, e.priv, func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() })},
		{"wrong audience", "Bearer " + sign(jwt.SigningMethodEdDSA, e.priv, func(c jwt.MapClaims) { c["aud"] = "gateway" })},
		{"ticket not active in that event", "Bearer " + sign(jwt.SigningMethodEdDSA, e.priv, func(c jwt.MapClaims) { c["evt"] = "other" })},
		{"basic auth", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b"))},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			before := e.upstream.hits.Load()
			r := e.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, "Authorization", tc.auth)
			if r.code != http.StatusUnauthorized || r.body["error"] != "admission_required" {
				t.Fatalf("got %d %s; want 401 admission_required", r.code, r.raw)
			}
			if e.upstream.hits.Load() != before {
				t.Fatal("a refused request reached the booking core")
			}
		})
	}

	t.Run("valid pass is proxied with Bearer and request id, without cookies", func(t *testing.T) {
		r := e.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, "Authorization", "Bearer "+token, "Cookie", "wr_t_premiere="+ticket)
		if r.code != http.StatusOK || r.body["path"] != "/api/v1/booking/showtimes/42/seats" {
			t.Fatalf("got %d %s; want 200 from upstream", r.code, r.raw)
		}
		if got := e.upstream.lastAuth.Load(); got != "Bearer "+token {
			t.Errorf("upstream Authorization = %v", got)
		}
		h := e.upstream.lastHdr.Load().(http.Header)
		if h.Get("X-Request-Id") == "" || h.Get("Cookie") != "" {
			t.Errorf("upstream headers: X-Request-Id %q, Cookie %q; want an id and no cookie", h.Get("X-Request-Id"), h.Get("Cookie"))
		}
		if r.hdr.Get("X-Request-Id") == "" {
			t.Error("answer lacks X-Request-Id")
		}
	})
	t.Run("the access cookie works as well as the header", func(t *testing.T) {
		r := e.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, "Cookie", "wr_a_premiere="+token)
		if r.code != http.StatusOK {
			t.Fatalf("got %d %s; want 200", r.code, r.raw)
		}
	})
	t.Run("oversized body is refused", func(t *testing.T) {
		// Through a real listener: fasthttp refuses the body while reading it.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go e.srv.App().Listener(ln)
		defer ln.Close()
		// Announce a 70 KiB body and send only its start: the gateway must
		// refuse on the announced length, before reading (a client that
		// pushes the whole body may see its connection reset instead).
		before := e.upstream.hits.Load()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /api/v1/booking/showtimes/42/holds HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"seats\":", token, 70<<10)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(body, []byte("body_too_large")) {
			t.Fatalf("got %d %s; want 413 body_too_large", res.StatusCode, body)
		}
		if e.upstream.hits.Load() != before {
			t.Fatal("the oversized body reached the booking core")
		}
	})
	t.Run("a hold stretches the active window and hands out a longer pass", func(t *testing.T) {
		r := e.do(http.MethodPost, "/api/v1/booking/showtimes/42/holds", strings.NewReader(`{"seats":["A1"]}`), "Authorization", "Bearer "+token)
		if r.code != http.StatusCreated {
			t.Fatalf("hold: %d %s", r.code, r.raw)
		}
		until := queuetest.Of(t, e.rdb, "premiere").Window(id)
		if d := time.Until(until); d < 19*time.Minute || d > 21*time.Minute {
			t.Errorf("active expiry in %v; want about 20m (the hold's expiry)", d)
		}
		if nt := r.hdr.Get("X-Waitroom-Access-Token"); nt == "" {
			t.Error("no refreshed pass after the hold")
		} else {
			token = nt
		}
		if cc := r.hdr.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("a hold's answer with a pass in it: Cache-Control %q; want no-store", cc)
		}
	})
	t.Run("booking core slow → 504, down → 503 with Retry-After", func(t *testing.T) {
		slow := setupWith(t, 0, `, proxy_timeout: "300ms"`, "")
		_, token := slow.admit("premiere")
		slow.upstream.delay.Store(int64(time.Second))
		r := slow.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, "Authorization", "Bearer "+token)
		slow.upstream.delay.Store(0)
		if r.code != http.StatusGatewayTimeout {
			t.Errorf("slow upstream: %d %s; want 504", r.code, r.raw)
		}
	})
	t.Run("after completion the pass is refused, but the booking stays readable", func(t *testing.T) {
		if err := e.line.Complete(context.Background(), "premiere", id); err != nil {
			t.Fatal(err)
		}
		hits := e.upstream.hits.Load()
		for _, r := range []struct {
			name, method, path string
			hdr                []string
		}{
			{"seat map", http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil},
			{"hold", http.MethodPost, "/api/v1/booking/showtimes/42/holds", nil},
			{"checkout without an Idempotency-Key", http.MethodPost, "/api/v1/booking/holds/h1/checkout", nil},
			{"checkout with an empty Idempotency-Key", http.MethodPost, "/api/v1/booking/holds/h1/checkout", []string{"Idempotency-Key", ""}},
			{"a key on another route", http.MethodDelete, "/api/v1/booking/holds/h1", []string{"Idempotency-Key", "k1"}},
		} {
			if got := e.do(r.method, r.path, nil, append([]string{"Authorization", "Bearer " + token}, r.hdr...)...); got.code != http.StatusUnauthorized {
				t.Errorf("%s after completion: %d; want 401", r.name, got.code)
			}
		}
		// A hold is passed on: the core checks its place in the call that
		// reserves its places (TestAHoldAsksTheLineOnceAtTheGate), and
		// answers 401 as the gate would.
		if n := e.upstream.hits.Load(); n != hits+1 {
			t.Errorf("refused requests reached the booking core %d times; want once (the hold)", n-hits)
		}
		// What the booking core decides for a valid pass: the fan's own
		// booking and wallet, and the replay of a checkout by its key (the
		// booking core answers the stored answer, or 401 for a new one).
		for _, r := range []struct {
			name, method, path string
			hdr                []string
		}{
			{"own booking", http.MethodGet, "/api/v1/booking/bookings/b1", nil},
			{"own wallet", http.MethodGet, "/api/v1/booking/wallet", nil},
			{"a checkout with its Idempotency-Key", http.MethodPost, "/api/v1/booking/holds/h1/checkout", []string{"Idempotency-Key", "k1"}},
		} {
			got := e.do(r.method, r.path, nil, append([]string{"Authorization", "Bearer " + token}, r.hdr...)...)
			if got.code != http.StatusOK || got.body["path"] != r.path {
				t.Errorf("%s after completion: %d %s; want it passed to the booking core", r.name, got.code, got.raw)
			}
		}
	})
	t.Run("revoked after leave", func(t *testing.T) {
		t2, tok2 := e.admit("premiere")
		if r := e.do(http.MethodDelete, "/api/v1/events/premiere/tickets/"+t2, nil); r.code != http.StatusNoContent {
			t.Fatal(r.code)
		}
		if r := e.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, "Authorization", "Bearer "+tok2); r.code != http.StatusUnauthorized {
			t.Errorf("after leave: %d; want 401", r.code)
		}
	})
	t.Run("booking core down → 503", func(t *testing.T) {
		_, tok3 := e.admit("premiere")
		e.upstream.Close()
		r := e.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, "Authorization", "Bearer "+tok3)
		if r.code != http.StatusServiceUnavailable || r.hdr.Get("Retry-After") == "" {
			t.Errorf("down upstream: %d %s Retry-After %q; want 503 with Retry-After", r.code, r.raw, r.hdr.Get("Retry-After"))
		}
	})
}

// TestEventRouteShowsTheDesignSizing: event "later" has no admit_per_second
// or max_active, so both come from the default capacity model, the concert
// design's: 1000 TPS, 3 calls, ×2 retries, 60 s. The route shows 166.67 and
// 10,000 (not 167 and 10,020), from the config before an admitter publishes
// and from what it publishes after, while Redis keeps the rate unrounded for
// the token bucket.
func TestEventRouteShowsTheDesignSizing(t *testing.T) {
	e := setup(t, 0)
	ev, _ := e.cfg.Event("later")
	set := policy.SettingsFor(*ev)
	tiny := set
	tiny.AdmitPerSecond = 0.004
	cases := []struct {
		name     string
		publish  *line.Settings // nil: nothing published yet
		wantRate float64
		wantCap  float64
	}{
		{"from the config, before any admitter", nil, 166.67, 10000},
		{"as an admitter published it", &set, 166.67, 10000},
		{"a rate below two decimals is not shown as 0", &tiny, 0.004, 10000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.publish != nil {
				if err := e.line.PublishSettings(context.Background(), "later", *c.publish); err != nil {
					t.Fatal(err)
				}
				time.Sleep(1100 * time.Millisecond) // the gateway caches settings for a second
			}
			r := e.do(http.MethodGet, "/api/v1/events/later", nil)
			if r.code != 200 || r.body["admitPerSecond"] != c.wantRate || r.body["maxActive"] != c.wantCap {
				t.Errorf("event: %d %s; want admitPerSecond %v, maxActive %v", r.code, r.raw, c.wantRate, c.wantCap)
			}
		})
	}
	if err := e.line.PublishSettings(context.Background(), "later", set); err != nil {
		t.Fatal(err)
	}
	got, err := e.line.Settings(context.Background(), "later")
	if err != nil {
		t.Fatal(err)
	}
	if got.AdmitPerSecond != 1000.0/6 {
		t.Errorf("rate in Redis %.17g; want 1000/6 unrounded", got.AdmitPerSecond)
	}
}

func TestEventRouteReportsSettingsInForce(t *testing.T) {
	e := setup(t, 0)
	r := e.do(http.MethodGet, "/api/v1/events/premiere", nil)
	if r.code != 200 || r.body["admitPerSecond"] != 100.0 || r.body["maxActive"] != 100.0 || r.body["state"] != "open" {
		t.Fatalf("before any admitter: %s; want the config's 100/100, open", r.raw)
	}
	set := line.Settings{Mode: "paused", AdmitPerSecond: 7, MaxActive: 70, AccessTTL: time.Minute, AbandonAfter: time.Minute}
	if err := e.line.PublishSettings(context.Background(), "premiere", set); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the gateway caches settings for a second
	r = e.do(http.MethodGet, "/api/v1/events/premiere", nil)
	if r.body["admitPerSecond"] != 7.0 || r.body["maxActive"] != 70.0 || r.body["state"] != "paused" {
		t.Fatalf("after publish: %s; want 7/70 paused", r.raw)
	}
	for _, f := range []string{"id", "name", "state", "waiting", "active", "maxActive", "admitPerSecond", "opensAt"} {
		if _, ok := r.body[f]; !ok {
			t.Errorf("event lacks %q: %s", f, r.raw)
		}
	}
	list := e.do(http.MethodGet, "/api/v1/events", nil)
	if evs, _ := list.body["events"].([]any); len(evs) != 4 {
		t.Errorf("events list: %s; want 4 events", list.raw)
	}
	states := map[string]string{}
	for _, ev := range list.body["events"].([]any) {
		m := ev.(map[string]any)
		states[m["id"].(string)] = m["state"].(string)
	}
	if states["shut"] != "closed" || states["later"] != "prequeue" {
		t.Errorf("states = %v; want shut closed, later prequeue", states)
	}
}

func TestPagesAndProbes(t *testing.T) {
	e := setup(t, 0)
	for _, p := range []string{"/", "/e/premiere", "/e/premiere/book"} {
		r := e.do(http.MethodGet, p, nil)
		if r.code != 200 || !strings.Contains(r.hdr.Get("Content-Type"), "text/html") || !strings.Contains(r.hdr.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: %d %q CSP %q", p, r.code, r.hdr.Get("Content-Type"), r.hdr.Get("Content-Security-Policy"))
		}
	}
	if r := e.do(http.MethodGet, "/e/nope", nil); r.code != 404 {
		t.Errorf("page of unknown event: %d; want 404", r.code)
	}
	for p, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		if r := e.do(http.MethodGet, p, nil); r.code != want {
			t.Errorf("GET %s: %d; want %d", p, r.code, want)
		}
	}
	e.join("premiere")
	m := e.do(http.MethodGet, "/metrics", nil)
	for _, name := range []string{"waitroom_tickets_issued_total", "waitroom_http_requests_total", "waitroom_http_request_duration_seconds"} {
		if !bytes.Contains(m.raw, []byte(name)) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if bytes.Contains(m.raw, []byte(`route="/api/v1/events/premiere`)) {
		t.Error("metrics labelled by raw path")
	}
}

// Redis gone: the queue routes answer 503 with Retry-After (never 500), and
// readiness says so.
func TestRedisDownIs503(t *testing.T) {
	e := setup(t, 0)
	tk := e.join("premiere").body["ticket"].(string)
	e.redis.Kill()
	for name, r := range map[string]resp{
		"join":   e.join("premiere"),
		"status": e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+tk, nil),
		"event":  e.do(http.MethodGet, "/api/v1/events/premiere", nil),
		"readyz": e.do(http.MethodGet, "/readyz", nil),
	} {
		if r.code != http.StatusServiceUnavailable || r.hdr.Get("Retry-After") == "" {
			t.Errorf("%s with Redis down: %d %s (Retry-After %q); want 503 with Retry-After", name, r.code, r.raw, r.hdr.Get("Retry-After"))
		}
	}
}

// The inventory as the gateway tells it: the event route's available, held
// and state, the places left in a waiting fan's status, sold out ending the
// wait (status 200 soldout, join 409 sold_out, the page without JavaScript),
// and the two gauges.
func TestInventoryAtTheEdge(t *testing.T) {
	e := setup(t, 0)
	ctx := context.Background()
	tk := e.join("premiere").body["ticket"].(string)
	if ev := e.do(http.MethodGet, "/api/v1/events/premiere", nil); ev.body["available"] != nil || ev.body["state"] != "open" {
		t.Fatalf("before the booking core published: %s; want available null, open", ev.raw)
	}
	mark, _ := e.line.SyncMark(ctx)
	if err := e.line.SyncInventory(ctx, "premiere", mark, line.Snapshot{Free: 3, Holds: []line.LiveHold{{HoldID: "h", Ticket: "1.x", Places: 1}}}); err != nil {
		t.Fatal(err)
	}
	ev := e.do(http.MethodGet, "/api/v1/events/premiere", nil)
	if ev.body["available"] != 3.0 || ev.body["held"] != 1.0 || ev.body["state"] != "open" {
		t.Fatalf("event route: %s; want 3 available, 1 held, open", ev.raw)
	}
	if st := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+tk, nil); st.body["available"] != 3.0 {
		t.Fatalf("status: %s; want available 3", st.raw)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.srv.NewCollector())
	for name, want := range map[string]string{
		"waitroom_places_available": `waitroom_places_available{event="premiere"} 3`,
		"waitroom_places_held":      `waitroom_places_held{event="premiere"} 1`,
	} {
		if err := testutil.GatherAndCompare(reg, strings.NewReader(gaugeText(name, want)), name); err != nil {
			t.Error(err)
		}
	}
	// Everything sold: the hold was booked, nothing is free.
	if err := e.line.SyncInventory(ctx, "premiere", mark+int64(time.Hour/time.Millisecond), line.Snapshot{Free: 0}); err != nil {
		t.Fatal(err)
	}
	if ev := e.do(http.MethodGet, "/api/v1/events/premiere", nil); ev.body["state"] != "soldout" {
		t.Fatalf("event route: %s; want soldout", ev.raw)
	}
	if st := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+tk, nil); st.code != http.StatusOK || st.body["status"] != "soldout" {
		t.Fatalf("a waiting fan's status: %d %s; want 200 soldout", st.code, st.raw)
	}
	if j := e.join("premiere"); j.code != http.StatusConflict || j.body["error"] != "sold_out" {
		t.Fatalf("join: %d %s; want 409 sold_out", j.code, j.raw)
	}
	if j := e.join("premiere", "X-Waitroom-Ticket", tk); j.code != http.StatusConflict || j.body["error"] != "sold_out" {
		t.Fatalf("resume of a waiting ticket: %d %s; want 409 sold_out", j.code, j.raw)
	}
	page := e.do(http.MethodGet, "/e/premiere", nil, "Cookie", "wr_t_premiere="+tk)
	if !strings.Contains(string(page.raw), `data-status="soldout"`) || strings.Contains(string(page.raw), `http-equiv="refresh"`) {
		t.Fatalf("the page without JavaScript does not say sold out, or still refreshes:\n%s", page.raw)
	}
}

// gaugeText is the text exposition of one gauge sample, with its HELP as the
// collector writes it.
func gaugeText(name, sample string) string {
	help := map[string]string{
		"waitroom_places_available": "Places (seats and general-admission) that can be held now, as the booking core published them.",
		"waitroom_places_held":      "Places in live holds, as the booking core published them.",
	}[name]
	return "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n" + sample + "\n"
}

// The HTTP metric counts what the client got: an API error is its 4xx, not
// a 500 (the fiber middleware once saw the handler's error, not the answer).
func TestHTTPMetricCountsTheAnswersStatus(t *testing.T) {
	e := setupWith(t, 1, "", "", fixedClock)
	e.join("other")
	if r := e.join("other"); r.code != http.StatusTooManyRequests {
		t.Fatalf("second join: %d; want 429", r.code)
	}
	e.do(http.MethodGet, "/api/v1/events/other/tickets/garbage", nil) // 400
	m := string(e.do(http.MethodGet, "/metrics", nil).raw)
	for _, want := range []string{
		`waitroom_http_requests_total{code="429",route="/api/v1/events/:event/tickets",service="gateway"}`,
		`waitroom_http_requests_total{code="400",route="/api/v1/events/:event/tickets/:ticket",service="gateway"}`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
