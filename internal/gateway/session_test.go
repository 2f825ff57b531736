package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// Sessions that last while they are used (DESIGN.md, "Always on"): event
// other guards shop.example's /flash; its passes are used at the gate (the
// booking API, with the room's pass) and through forward auth (the site's
// pass), and its admission.session is fixed or sliding.

// setupSession is a guarded gateway whose event other has sessions of mode
// and an access_ttl of ttl.
func setupSession(t testing.TB, mode string, ttl time.Duration) guarded {
	t.Helper()
	return setupGuardedAt(t, roomURL+"/", balancer+"/32", sessionsOf(mode, ttl))
}

func sessionsOf(mode string, ttl time.Duration) func(*gateway.Options) {
	return func(o *gateway.Options) {
		o.Config.Events[1].Admission.Session = mode
		o.Config.Events[1].Admission.AccessTTL = config.Duration(ttl)
	}
}

// another is a second gateway of g's room: its config, its Redis (through
// a client of its own), its key.
func (g guarded) another() guarded {
	g.t.Helper()
	ev, _ := g.cfg.Event("other")
	rc := redis.NewClient(&redis.Options{Addr: g.redis.Addr})
	g.t.Cleanup(func() { rc.Close() })
	return setupGuardedOn(g.t, g.redis, rc, roomURL+"/", balancer+"/32", sessionsOf(ev.Admission.Session, ev.Admission.AccessTTL.D()),
		func(o *gateway.Options) { o.Signer = pass.NewSigner(g.priv) })
}

// sessionFan is a fan of other, admitted and claimed: its ticket, its
// ticket id (the passes' sub), the room's pass (the gate's) and the site's
// pass (forward auth's, traded for the return token).
type sessionFan struct {
	ticket, id, gate, site string
}

func (g guarded) admitOther() sessionFan {
	g.t.Helper()
	ev, _ := g.cfg.Event("other")
	ticket, st := g.admitWithReturnTo("other", "https://"+shopHost+"/flash/x", policy.SettingsFor(*ev))
	link, _ := st.body["returnUrl"].(string)
	trade := g.ask(strings.TrimPrefix(link, "https://"+shopHost))
	f := sessionFan{ticket: ticket, gate: st.body["accessToken"].(string), site: cookieOf(trade, "wr_fa_other")}
	if trade.code != http.StatusOK || f.site == "" {
		g.t.Fatalf("trade of the return token: %d, pass %q", trade.code, f.site)
	}
	f.id, _ = passClaims(g.t, f.gate)
	return f
}

// A use of a pass: the answer's status and the pass issued again in it
// ("" = none).
type passUse func(g guarded, pass string) (code int, reissued string)

// passWay is a way a fan's pass is used: the use, and which of the fan's
// passes it takes.
type passWay struct {
	name string
	use  passUse
	pass func(sessionFan) string
}

var passUses = []passWay{
	{"forward auth", useSite, func(f sessionFan) string { return f.site }},
	{"gate", useGate, func(f sessionFan) string { return f.gate }},
}

// eachPassWay runs f in a parallel subtest per way of passUses, each on a
// sliding session of ttl of its own with a fan admitted: f gets the way,
// the session and the fan.
func eachPassWay(t *testing.T, ttl time.Duration, f func(t *testing.T, u passWay, g guarded, fan sessionFan)) {
	for _, u := range passUses {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			g := setupSession(t, config.SessionSliding, ttl)
			f(t, u, g, g.admitOther())
		})
	}
}

// useSite is the site's proxy asking about a page of /flash the fan with
// pass asks for: a new pass comes as the 200's Set-Cookie.
func useSite(g guarded, pass string) (int, string) {
	r := g.ask("/flash/x", "Cookie", "wr_fa_other="+pass)
	return r.code, cookieOf(r, "wr_fa_other")
}

// useGate is a call of the booking API with pass: a new pass comes as the
// gate's after a hold, X-Waitroom-Access-Token and the cookie, the same.
func useGate(g guarded, pass string) (int, string) {
	r := g.do(http.MethodGet, "/api/v1/booking/showtimes/43", nil, "Authorization", "Bearer "+pass)
	tok := r.hdr.Get("X-Waitroom-Access-Token")
	if c := cookieOf(r, "wr_a_other"); c != tok {
		g.t.Errorf("gate: cookie %q and X-Waitroom-Access-Token %q differ", c, tok)
	}
	return r.code, tok
}

// reissuedMetric is waitroom_passes_reissued_total of other's passes of
// the use named.
func reissuedMetric(use string) prometheus.Collector {
	kind := map[string]string{"gate": "gate", "forward auth": "site"}[use]
	return gateway.PassesReissued.WithLabelValues("other", kind)
}

// passClaims reads a pass's sub and exp (the test's own passes: no check).
func passClaims(t testing.TB, tok string) (sub string, exp time.Time) {
	t.Helper()
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil || c.ExpiresAt == nil {
		t.Fatalf("pass %q: %v", tok, err)
	}
	return c.Subject, c.ExpiresAt.Time
}

// activeUntil is the fan's active expiry in Redis (ok false: not active).
func (g guarded) activeUntil(id string) (time.Time, bool) {
	g.t.Helper()
	ms, err := g.rdb.ZScore(context.Background(), rdb.KeysOf("other").Active, id).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false
	}
	if err != nil {
		g.t.Fatal(err)
	}
	return time.UnixMilli(int64(ms)), true
}

// redisNow is Redis's clock, the one the active expiries are kept by.
func (g guarded) redisNow() time.Time {
	g.t.Helper()
	now, err := g.rdb.Time(context.Background()).Result()
	if err != nil {
		g.t.Fatal(err)
	}
	return now
}

// waitRedisPast waits until Redis's clock is past at.
func (g guarded) waitRedisPast(at time.Time) {
	g.t.Helper()
	for deadline := time.Now().Add(at.Sub(g.redisNow()) + 10*time.Second); g.redisNow().Before(at); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			g.t.Fatalf("Redis's clock never passed %v", at)
		}
	}
}

// A pass used every access_ttl/3: with sliding sessions it stays good past
// its first access_ttl (its place's expiry moves, a new pass comes when
// less than half is left); with fixed ones the window ends access_ttl after
// the claim however it is used, and the place's expiry never moves.
func TestSessionsWhileUsed(t *testing.T) {
	const ttl = 3 * time.Second
	for _, mode := range []string{config.SessionFixed, config.SessionSliding} {
		for _, u := range passUses {
			t.Run(mode+" "+u.name, func(t *testing.T) {
				t.Parallel()
				g := setupSession(t, mode, ttl)
				f := g.admitOther()
				first, _ := g.activeUntil(f.id)
				pass := u.pass(f)
				_, firstExp := passClaims(t, pass)
				reissues := 0
				for time.Now().Before(first.Add(ttl)) {
					time.Sleep(ttl / 3) // the fan's pace
					code, again := u.use(g, pass)
					if mode == config.SessionFixed {
						if again != "" {
							t.Fatalf("fixed: a pass issued again")
						}
						if code != http.StatusOK {
							if now := g.redisNow(); now.Before(first) {
								t.Fatalf("fixed: refused at %v, before the window's end %v", now, first)
							}
							if until, _ := g.activeUntil(f.id); !until.Equal(first) {
								t.Errorf("fixed: the place's expiry moved: %v; want %v", until, first)
							}
							return
						}
						continue
					}
					if code != http.StatusOK {
						t.Fatalf("sliding: a use %v after the first window's end: %d; want 200", time.Since(first), code)
					}
					if again != "" {
						_, was := passClaims(t, pass)
						if _, exp := passClaims(t, again); !exp.After(was) {
							t.Fatalf("a pass issued again ending %v, not after the one used (%v)", exp, was)
						}
						pass, reissues = again, reissues+1
					}
				}
				if mode == config.SessionFixed {
					t.Fatalf("fixed: still let in a full access_ttl past the window's end")
				}
				until, ok := g.activeUntil(f.id)
				if !ok || until.Before(first.Add(ttl/2)) {
					t.Errorf("sliding: the place's expiry %v (active %v); want it moved past %v", until, ok, first.Add(ttl/2))
				}
				if _, exp := passClaims(t, pass); reissues == 0 || !exp.After(firstExp.Add(ttl/2)) {
					t.Errorf("sliding: %d passes issued again, the last ending %v; want one ending past %v", reissues, exp, firstExp.Add(ttl/2))
				}
			})
		}
	}
}

// monitorZADDs counts the ZADDs of id that Redis runs (MONITOR shows those
// of the scripts too) until stop is called.
func (g guarded) monitorZADDs(id string) (stop func() int) {
	g.t.Helper()
	return testenv.Monitor(g.t, g.redis.Addr, g.rdb, func(l string) bool {
		return strings.Contains(l, `"ZADD"`) && strings.Contains(l, `"`+id+`"`)
	})
}

// Many uses of a pass inside access_ttl/10 write its place's expiry to
// Redis at most once (the first use due for a renewal), at the gate and
// through forward auth together, however many at once, on two gateways.
func TestSlidingRenewalsAreFew(t *testing.T) {
	// A pass is renewed once less than half of it is left: the 400 uses
	// must end within ttl/2 - ttl/10 of the admission, 12 s here. (With a
	// ttl of 10 s, 4 s, a loaded machine ran past it and the uses were
	// rightly given new passes.)
	const ttl = 30 * time.Second
	every := ttl / 10
	g := setupSession(t, config.SessionSliding, ttl)
	gateways := []guarded{g, g.another()}
	f := g.admitOther()
	first, _ := g.activeUntil(f.id)
	// A renewal is due once the place's expiry is every behind now + ttl.
	g.waitRedisPast(first.Add(every - ttl))
	stop := g.monitorZADDs(f.id)
	start := time.Now()
	var mu sync.Mutex
	var bad []string
	testenv.Race(8, func(i int) {
		for range 25 {
			for _, u := range passUses {
				code, again := u.use(gateways[i%2], u.pass(f))
				if code != http.StatusOK || again != "" {
					mu.Lock()
					bad = append(bad, u.name)
					mu.Unlock()
				}
			}
		}
	})
	elapsed := time.Since(start)
	n := stop()
	if len(bad) > 0 {
		t.Fatalf("%d uses refused or given a new pass (with more than half of it left): %v", len(bad), bad[:min(len(bad), 5)])
	}
	if most := 1 + int(elapsed/every); n < 1 || n > most {
		t.Fatalf("400 uses in %v wrote the place's expiry %d times; want 1 (at most %d, one per %v)", elapsed, n, most, every)
	}
	if until, _ := g.activeUntil(f.id); !until.After(first) {
		t.Errorf("the place's expiry %v; want it moved past %v", until, first)
	}
	t.Logf("400 uses on two gateways in %v: %d write(s)", elapsed, n)
}

// A pass of a sliding session left unused for access_ttl ends: its place's
// expiry passes, both passes are refused, and the admitter's tick frees the
// place.
func TestSlidingUnusedPassEnds(t *testing.T) {
	const ttl = 2 * time.Second
	g := setupSession(t, config.SessionSliding, ttl)
	f := g.admitOther()
	first, _ := g.activeUntil(f.id)
	g.waitRedisPast(first.Add(ttl/10 - ttl))
	if code, _ := useSite(g, f.site); code != http.StatusOK {
		t.Fatalf("a use: %d; want 200", code)
	}
	last, _ := g.activeUntil(f.id)
	if !last.After(first) {
		t.Fatalf("the use did not renew the place: %v; want past %v", last, first)
	}
	g.waitRedisPast(last)
	for _, u := range passUses {
		if code, again := u.use(g, u.pass(f)); code != http.StatusUnauthorized || again != "" {
			t.Errorf("%s after access_ttl unused: %d (a new pass: %v); want 401", u.name, code, again != "")
		}
	}
	ev, _ := g.cfg.Event("other")
	if _, err := g.line.Tick(context.Background(), "other", policy.SettingsFor(*ev)); err != nil {
		t.Fatal(err)
	}
	if n, err := g.rdb.ZCard(context.Background(), rdb.KeysOf("other").Active).Result(); err != nil || n != 0 {
		t.Errorf("active places after the tick: %d (%v); want 0: the place freed", n, err)
	}
}

// A use with less than half of the pass's access_ttl left issues it again:
// a new pass ending access_ttl from now (its cookie too), which the place
// outlasts in Redis; a use with more left issues none.
func TestSlidingPassIssuedAgain(t *testing.T) {
	const ttl = 4 * time.Second
	eachPassWay(t, ttl, func(t *testing.T, u passWay, g guarded, f sessionFan) {
		pass := u.pass(f)
		if code, again := u.use(g, pass); code != http.StatusOK || again != "" {
			t.Fatalf("a use with the whole pass left: %d, a new pass %v; want 200 and none", code, again != "")
		}
		_, exp := passClaims(t, pass)
		g.waitRedisPast(exp.Add(-ttl/2 + 100*time.Millisecond))
		counted := testutil.ToFloat64(reissuedMetric(u.name))
		before := g.redisNow()
		code, again := u.use(g, pass)
		after := g.redisNow()
		if code != http.StatusOK || again == "" {
			t.Fatalf("a use with less than half left: %d, a new pass %v; want 200 and one", code, again != "")
		}
		if n := testutil.ToFloat64(reissuedMetric(u.name)) - counted; n != 1 {
			t.Errorf("waitroom_passes_reissued_total went up by %v; want 1", n)
		}
		sub, newExp := passClaims(t, again)
		if sub != f.id || newExp.Before(before.Add(ttl-time.Second)) || newExp.After(after.Add(ttl+time.Second)) {
			t.Errorf("new pass: sub %s, ends %v; want %s, access_ttl (%v) after the use at %v", sub, newExp, f.id, ttl, before)
		}
		if until, ok := g.activeUntil(f.id); !ok || until.Before(newExp) {
			t.Errorf("the place ends %v (active %v), before its new pass (%v)", until, ok, newExp)
		}
		if code, again := u.use(g, again); code != http.StatusOK || again != "" {
			t.Errorf("the new pass: %d, issued again %v; want 200, not again", code, again != "")
		}
	})
}

// A place that ends (revoked, left) while its passes are being used and
// renewed at once stays ended: no renewal brings it back, and every pass
// of it is refused afterwards.
func TestSlidingRenewalNeverRevives(t *testing.T) {
	const ttl = 4 * time.Second
	ends := []struct {
		name string
		end  func(g guarded, f sessionFan) error
	}{
		{"revoked", func(g guarded, f sessionFan) error { return g.line.Revoke(context.Background(), "other", f.id) }},
		{"left", func(g guarded, f sessionFan) error {
			t, err := g.parse("other", f.ticket)
			if err != nil {
				return err
			}
			return g.line.Leave(context.Background(), "other", t)
		}},
	}
	for _, e := range ends {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			g := setupSession(t, config.SessionSliding, ttl)
			f := g.admitOther()
			// Past half: every use issues a new pass, on the expiry in force.
			_, exp := passClaims(t, f.site)
			g.waitRedisPast(exp.Add(-ttl/2 + 100*time.Millisecond))
			var (
				mu     sync.Mutex
				passes = []string{f.site, f.gate}
				used   int
			)
			testenv.Race(16, func(i int) {
				if i == 0 {
					time.Sleep(time.Millisecond) // some renewals before it, some after
					if err := e.end(g, f); err != nil {
						t.Error(err)
					}
					return
				}
				u := passUses[i%len(passUses)]
				for range 20 {
					code, again := u.use(g, u.pass(f))
					mu.Lock()
					if code == http.StatusOK {
						used++
					}
					if again != "" {
						passes = append(passes, again)
					}
					mu.Unlock()
				}
			})
			if until, ok := g.activeUntil(f.id); ok {
				t.Fatalf("the place is active again in Redis (until %v) after it was %s", until, e.name)
			}
			for _, p := range passes {
				for _, u := range passUses {
					if code, _ := u.use(g, p); code != http.StatusUnauthorized {
						t.Errorf("%s with a pass of the %s place: %d; want 401", u.name, e.name, code)
					}
				}
			}
			if until, ok := g.activeUntil(f.id); ok {
				t.Fatalf("the place is active again in Redis (until %v) after the last uses", until)
			}
			t.Logf("%d uses let in before the end, %d passes issued again", used, len(passes)-2)
		})
	}
}

// A pass past its half, used again and again as it is (a client that keeps
// no cookies, a page's requests in flight together), by clients racing,
// still writes its place's expiry at most once per access_ttl/10: each use
// is given a pass ending with the place, never after it, and only the
// first writes.
func TestSlidingPassPastHalfRenewsOnce(t *testing.T) {
	const ttl = 10 * time.Second
	every := ttl / 10
	eachPassWay(t, ttl, func(t *testing.T, u passWay, g guarded, f sessionFan) {
		pass := u.pass(f)
		_, exp := passClaims(t, pass)
		g.waitRedisPast(exp.Add(-ttl/2 + 100*time.Millisecond))
		stop := g.monitorZADDs(f.id)
		start := time.Now()
		var (
			mu     sync.Mutex
			issued []string
			bad    []int
		)
		// 8 clients at once, 5 uses each, all with the one pass.
		testenv.Race(8, func(int) {
			for range 5 {
				code, again := u.use(g, pass)
				mu.Lock()
				if code != http.StatusOK || again == "" {
					bad = append(bad, code)
				} else {
					issued = append(issued, again)
				}
				mu.Unlock()
			}
		})
		if len(bad) > 0 {
			t.Fatalf("%d uses of a pass past its half refused or given no new pass (%v); want 200 and one each", len(bad), bad[:min(len(bad), 5)])
		}
		until, ok := g.activeUntil(f.id)
		for _, p := range issued {
			if _, newExp := passClaims(t, p); !ok || newExp.After(until) {
				t.Fatalf("a pass issued again ending %v, after its place (%v, active %v)", newExp, until, ok)
			}
		}
		elapsed := time.Since(start)
		if n, most := stop(), 1+int(elapsed/every); n < 1 || n > most {
			t.Errorf("40 uses of one pass past its half in %v wrote the place's expiry %d times; want 1 (at most %d, one per %v)", elapsed, n, most, every)
		}
	})
}
