package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
)

// fixedClock pins the gateway's clock (the per-IP window is a calendar
// minute: a test must not straddle two).
func fixedClock(o *gateway.Options) {
	now := time.Now()
	o.Now = func() time.Time { return now }
}

// A dead ticket is a new join: sent back after it left the line (by header
// or by cookie), it gets a new place at the back, and that place counts
// against joins_per_ip_per_minute like any other.
func TestRejoinWithADeadTicketCountsAgainstTheIPLimit(t *testing.T) {
	e := setupWith(t, 5, "", "", fixedClock)
	r := e.join("premiere")
	if r.code != http.StatusCreated {
		t.Fatalf("first join: %d %s", r.code, r.raw)
	}
	tk := r.body["ticket"].(string)
	places := 1
	for i := range 10 {
		if l := e.do(http.MethodDelete, "/api/v1/events/premiere/tickets/"+tk, nil); l.code != http.StatusNoContent {
			t.Fatalf("leave %d: %d %s", i, l.code, l.raw)
		}
		hdr := []string{"X-Waitroom-Ticket", tk}
		if i%2 == 1 {
			hdr = []string{"Cookie", "wr_t_premiere=" + tk}
		}
		r := e.join("premiere", hdr...)
		if places < 5 {
			if r.code != http.StatusCreated || r.body["ticket"] == tk {
				t.Fatalf("rejoin %d with a dead ticket: %d %s; want 201 and a new ticket", i, r.code, r.raw)
			}
			places++
			tk = r.body["ticket"].(string)
			continue
		}
		if r.code != http.StatusTooManyRequests || r.body["error"] != "rate_limited" {
			t.Fatalf("rejoin %d past the limit: %d %s; want 429 rate_limited", i, r.code, r.raw)
		}
	}
	joined := queuetest.Of(t, e.rdb, "premiere").Stat("joined")
	if joined != 5 {
		t.Fatalf("the line handed out %d places; want 5 (joins_per_ip_per_minute)", joined)
	}
}

// A resumed place is claimed: a fan admitted while away who comes back
// through join (the page does that on load) gets the full access window,
// not what was left of the abandon deadline.
func TestResumeThroughJoinClaimsThePlace(t *testing.T) {
	e := setup(t, 0)
	r := e.join("premiere")
	tk := r.body["ticket"].(string)
	ev, _ := e.cfg.Event("premiere")
	set := policy.SettingsFor(*ev)
	for range 2 { // the bucket starts empty
		if _, err := e.line.Tick(context.Background(), "premiere", set); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	back := e.join("premiere", "X-Waitroom-Ticket", tk)
	if back.code != http.StatusOK || back.body["status"] != "admitted" || back.body["ticket"] != tk {
		t.Fatalf("resume: %d %s; want 200 admitted with the same ticket", back.code, back.raw)
	}
	exp, err := time.Parse(time.RFC3339, back.body["expiresAt"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(exp); left < set.AccessTTL-5*time.Second {
		t.Fatalf("resumed place lasts %v; want the full access_ttl (%v)", left, set.AccessTTL)
	}
	if st := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+tk, nil); st.body["expiresAt"] != back.body["expiresAt"] {
		t.Fatalf("the next poll says %v; want the claimed window %v (claimed once)", st.body["expiresAt"], back.body["expiresAt"])
	}
}

// No endless window: holds cycled through the gate (each 201 asks for an
// hour) never keep the place past claim + access_ttl + hold_ttl, however
// many race; the pass handed out never outlives it either.
func TestHoldsNeverStretchTheWindowPastItsCeiling(t *testing.T) {
	e := setup(t, 0)
	e.upstream.holdFor.Store(int64(time.Hour))
	claimed := time.Now().Truncate(time.Second) // claim times are kept in whole seconds
	ticket, token := e.admit("premiere")
	id := e.idOf("premiere", ticket)
	ceiling := time.Now().Add(20 * time.Minute) // access_ttl 10m + hold_ttl 10m (the defaults)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var latest time.Time
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do(http.MethodPost, "/api/v1/booking/showtimes/42/holds", strings.NewReader(`{"seats":["A1"]}`), "Authorization", "Bearer "+token)
			if r.code != http.StatusCreated {
				t.Errorf("hold %d: %d %s", i, r.code, r.raw)
				return
			}
			if h := r.hdr.Get("X-Waitroom-Access-Expires"); h != "" {
				until, err := time.Parse(time.RFC3339, h)
				if err != nil {
					t.Errorf("hold %d: X-Waitroom-Access-Expires %q: %v", i, h, err)
					return
				}
				mu.Lock()
				if until.After(latest) {
					latest = until
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	inRedis := queuetest.Of(t, e.rdb, "premiere").Window(id)
	if inRedis.After(ceiling) || latest.After(ceiling) {
		t.Fatalf("window ends %v, pass until %v; want no later than %v", inRedis, latest, ceiling)
	}
	if inRedis.Before(claimed.Add(20*time.Minute - time.Second)) {
		t.Fatalf("window ends %v; want the holds to stretch it to the ceiling (~%v)", inRedis, claimed.Add(20*time.Minute))
	}
}

// Behind a load balancer (trusted_proxies) the limit is per fan: the fan is
// the right-most X-Forwarded-For entry outside the trusted ranges, and
// X-Forwarded-Proto: https makes the cookies Secure. From anyone else both
// headers are ignored.
func TestTrustedProxies(t *testing.T) {
	// app.Test's connections come from 0.0.0.0: it plays the balancer.
	t.Run("behind a trusted balancer each fan has its own limit", func(t *testing.T) {
		e := setupWith(t, 2, `, trusted_proxies: ["0.0.0.0/32", "10.0.0.0/8"]`, "", fixedClock)
		for _, fan := range []string{"203.0.113.1", "203.0.113.2"} {
			for i := range 3 {
				// A fan-written entry on the left, an inner proxy on the right.
				r := e.join("premiere", "X-Forwarded-For", "198.51.100.77, "+fan+", 10.1.2.3")
				want := http.StatusCreated
				if i == 2 {
					want = http.StatusTooManyRequests
				}
				if r.code != want {
					t.Fatalf("fan %s join %d: %d %s; want %d", fan, i, r.code, r.raw, want)
				}
			}
		}
		// The left-most entry is the client's own word: writing another one
		// does not buy a fresh limit.
		if r := e.join("premiere", "X-Forwarded-For", "192.0.2.200, 203.0.113.1"); r.code != http.StatusTooManyRequests {
			t.Fatalf("spoofed left-most entry: %d %s; want 429 (still fan 203.0.113.1)", r.code, r.raw)
		}
		r := e.join("premiere", "X-Forwarded-Proto", "https")
		if r.code != http.StatusCreated {
			t.Fatalf("join: %d %s", r.code, r.raw)
		}
		if c := r.hdr.Get("Set-Cookie"); !strings.Contains(c, "secure") && !strings.Contains(c, "Secure") {
			t.Fatalf("X-Forwarded-Proto https from the balancer: cookie %q; want Secure", c)
		}
		_, token := e.admit("premiere")
		e.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, "Authorization", "Bearer "+token, "X-Forwarded-For", "203.0.113.5")
		if got := e.upstream.lastHdr.Load().(http.Header).Get("X-Forwarded-For"); got != "203.0.113.5" {
			t.Fatalf("booking sees X-Forwarded-For %q; want the fan, 203.0.113.5", got)
		}
	})
	t.Run("from anyone else the headers are ignored", func(t *testing.T) {
		e := setupWith(t, 2, "", "", fixedClock)
		for i := range 3 {
			r := e.join("premiere", "X-Forwarded-For", "203.0.113."+strconv.Itoa(i+1), "X-Forwarded-Proto", "https")
			want := http.StatusCreated
			if i == 2 {
				want = http.StatusTooManyRequests
			}
			if r.code != want {
				t.Fatalf("join %d with a made-up X-Forwarded-For: %d %s; want %d", i, r.code, r.raw, want)
			}
			if c := r.hdr.Get("Set-Cookie"); strings.Contains(strings.ToLower(c), "secure") {
				t.Fatalf("a made-up X-Forwarded-Proto made the cookie Secure: %q", c)
			}
		}
	})
}

// One budget per network: the per-IP join limit counts an IPv4 address
// alone and an IPv6 address by its gateway.ipv6_prefix (64 unless set), so
// the 2^64 addresses of one home's /64 are one budget. An IPv4 address
// written as IPv4-mapped IPv6 is that IPv4 address. The fans here are
// connections' own addresses, and then X-Forwarded-For entries of a
// trusted balancer.
func TestOneJoinBudgetPerNetwork(t *testing.T) {
	const limit = 2
	tests := []struct {
		name   string
		prefix string   // gateway.ipv6_prefix ("" = the default)
		same   []string // addresses that share one budget: limit joins in all, then 429
		other  []string // addresses each with a budget of their own after that
	}{
		{"one /64", "", []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:fffe", "2001:db8:1:2:8000::7"},
			[]string{"2001:db8:1:3::1", "2001:db8:1::1", "2001:db8:2:2::1", "203.0.113.1"}},
		{"IPv4 alone, mapped or not", "", []string{"203.0.113.1", "::ffff:203.0.113.1"},
			[]string{"203.0.113.2", "203.0.113.0", "2001:db8::cb00:7101"}},
		{"one /48", ", ipv6_prefix: 48", []string{"2001:db8:1:2::1", "2001:db8:1:ffff::1"},
			[]string{"2001:db8:2::1"}},
		{"one address", ", ipv6_prefix: 128", []string{"2001:db8:1:2::1"},
			[]string{"2001:db8:1:2::2", "2001:db8:1:2::3"}},
	}
	ways := []struct {
		name    string
		proxies string // gateway.trusted_proxies
		join    func(e *env, fan string) resp
	}{
		{"connecting", "[]", func(e *env, fan string) resp { return e.joinFrom(fan, "premiere") }},
		{"behind a balancer", `["192.0.2.10/32"]`, func(e *env, fan string) resp {
			return e.joinFrom("192.0.2.10", "premiere", "X-Forwarded-For", fan)
		}},
	}
	for _, way := range ways {
		for _, tt := range tests {
			t.Run(way.name+"/"+tt.name, func(t *testing.T) {
				e := setupWith(t, limit, `, trusted_proxies: `+way.proxies+tt.prefix, "", fixedClock)
				for i := range limit + 1 {
					fan := tt.same[i%len(tt.same)]
					want := http.StatusCreated
					if i == limit {
						want = http.StatusTooManyRequests
					}
					if r := way.join(e, fan); r.code != want {
						t.Fatalf("join %d from %s: %d %s; want %d", i, fan, r.code, r.raw, want)
					}
				}
				for _, fan := range tt.same {
					if r := way.join(e, fan); r.code != http.StatusTooManyRequests {
						t.Errorf("join from %s after its network's budget ran out: %d %s; want 429", fan, r.code, r.raw)
					}
				}
				for _, fan := range tt.other {
					if r := way.join(e, fan); r.code != http.StatusCreated {
						t.Errorf("join from %s, another network: %d %s; want 201 (a budget of its own)", fan, r.code, r.raw)
					}
				}
			})
		}
	}
}

// joinFrom joins event over a connection from addr (see doFrom).
func (e *env) joinFrom(addr, event string, hdr ...string) resp {
	e.t.Helper()
	return e.doFrom(addr, http.MethodPost, "/api/v1/events/"+event+"/tickets", hdr...)
}

// doFrom is do over a connection from addr: the app's handler driven as
// the server drives it, with that peer (app.Test's connections all come
// from 0.0.0.0), and the headers as they are given, Host too, whatever
// net/http would make of them.
func (e *env) doFrom(addr, method, path string, hdr ...string) resp {
	e.t.Helper()
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Header.SetHost(hdr[i+1])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	peer := net.ParseIP(addr)
	if peer == nil {
		e.t.Fatalf("doFrom: %q is not an address", addr)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: peer, Port: 40000}, nil)
	e.srv.App().Handler()(&ctx)
	out := resp{code: ctx.Response.StatusCode(), hdr: http.Header{}, raw: append([]byte(nil), ctx.Response.Body()...)}
	ctx.Response.Header.VisitAll(func(k, v []byte) { out.hdr.Add(string(k), string(v)) })
	_ = json.Unmarshal(out.raw, &out.body)
	return out
}
