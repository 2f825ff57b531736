package gateway_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

const accountsYAML = `
auth: {ticket_secret: "gateway-test-secret-0123456789abcdef", account_keys_file: %q}
gateway: {booking_url: "%s", joins_per_ip_per_minute: 0}
booking: {payment: {secret: "gateway-test-payment-secret-0123456789"}}
events:
  - id: "premiere"
    admission: {admit_per_second: 100, max_active: 100}
    showtimes: [{id: 42, title: "T", starts_at: "2026-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "members"
    admission: {admit_per_second: 100, max_active: 100, accounts: "required"}
    showtimes: [{id: 43, title: "U", starts_at: "2026-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
`

// accountEnv is a gateway whose origin site signs with site.
type accountEnv struct {
	*env
	site ed25519.PrivateKey
}

func setupAccounts(t *testing.T) *accountEnv {
	t.Helper()
	return setupAccountsWith(t, accountsYAML)
}

// setupAccountsWith is setupAccounts with a config of its own (yaml takes
// the origin's key file and the booking URL, as accountsYAML does).
func setupAccountsWith(t *testing.T, yaml string) *accountEnv {
	t.Helper()
	site, path := testenv.OriginSite(t)
	rs, rc := testenv.Redis(t)
	up := newUpstream(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(yaml, path, up.URL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := account.LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	priv := testenv.Ed25519Key(t)
	line := queue.NewStore(rc, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret))
	ops := operators.New(rdb.New(rc))
	srv, err := gateway.New(gateway.Options{Config: cfg, Line: line, Operators: ops, Signer: pass.NewSigner(priv), Accounts: account.NewVerifier(keys),
		Presale: presale.New(rdb.New(rc), line, []byte(cfg.Auth.TicketSecret), "gateway-test").WithDrawSecret([]byte(cfg.Auth.DrawSecret))})
	if err != nil {
		t.Fatal(err)
	}
	return &accountEnv{env: &env{t: t, redis: rs, srv: srv, line: line, ops: ops, rdb: rc, cfg: cfg, priv: priv, upstream: up}, site: site}
}

func (e *accountEnv) token(acct string) string {
	e.t.Helper()
	tok, err := account.Mint(e.site, acct, "", time.Now(), 10*time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// One place per account over HTTP: 32 devices join for one account at
// once (no ticket cookie): exactly one 201, every other 200 with the same
// ticket, one ticket in Redis. A later join by cookie wr_u is 200 too.
func TestJoinOnePlacePerAccount(t *testing.T) {
	e := setupAccounts(t)
	tok := e.token("fan-1")
	const n = 32
	var (
		mu      sync.Mutex
		codes   = map[int]int{}
		tickets = map[string]bool{}
	)
	testenv.Race(n, func(int) {
		r := e.join("premiere", "X-Waitroom-Account", tok)
		mu.Lock()
		defer mu.Unlock()
		codes[r.code]++
		if t, ok := r.body["ticket"].(string); ok {
			tickets[t] = true
		}
	})
	if codes[http.StatusCreated] != 1 || codes[http.StatusOK] != n-1 || len(tickets) != 1 {
		t.Fatalf("codes %v, %d distinct tickets; want one 201, %d × 200, one ticket", codes, len(tickets), n-1)
	}
	if got := queuetest.Of(t, e.rdb, "premiere").WaitingCount(); got != 1 {
		t.Fatalf("wait ZSET holds %d; want 1 ticket", got)
	}
	r := e.join("premiere", "Cookie", "wr_u="+tok)
	if r.code != http.StatusOK || !tickets[r.body["ticket"].(string)] {
		t.Fatalf("join by cookie wr_u: %d %s; want 200 with the account's ticket", r.code, r.raw)
	}
	other := e.join("premiere", "X-Waitroom-Account", e.token("fan-2"))
	if other.code != http.StatusCreated || tickets[other.body["ticket"].(string)] {
		t.Fatalf("another account: %d %s; want 201 with a place of its own", other.code, other.raw)
	}
}

// Refusals: a bad token is 401 invalid_account (whatever else the join
// carries, a live ticket included), a required event refuses a join
// without one (401 account_required), and neither makes a place.
func TestJoinAccountRefusals(t *testing.T) {
	e := setupAccounts(t)
	live := e.join("premiere")
	if live.code != http.StatusCreated {
		t.Fatalf("anonymous join: %d %s", live.code, live.raw)
	}
	other := testenv.Ed25519Key(t)
	forged, _ := account.Mint(other, "fan-1", "", time.Now(), time.Minute)
	expired, _ := account.Mint(e.site, "fan-1", "", time.Now().Add(-time.Hour), time.Minute)
	tooLong, _ := account.Mint(e.site, "fan-1", "", time.Now(), 3*time.Hour)
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "fan-1", "aud": "waitroom", "exp": time.Now().Add(time.Minute).Unix()}).SignedString([]byte("k"))
	otherEvent, _ := account.Mint(e.site, "fan-1", "premiere", time.Now(), time.Minute)
	tests := []struct {
		name, event string
		hdr         []string
		code        int
		err         string
	}{
		{"another key", "premiere", []string{"X-Waitroom-Account", forged}, 401, "invalid_account"},
		{"expired", "premiere", []string{"X-Waitroom-Account", expired}, 401, "invalid_account"},
		{"exp too far", "premiere", []string{"X-Waitroom-Account", tooLong}, 401, "invalid_account"},
		{"HS256", "premiere", []string{"X-Waitroom-Account", hs}, 401, "invalid_account"},
		{"garbage cookie", "premiere", []string{"Cookie", "wr_u=garbage"}, 401, "invalid_account"},
		{"bad token with a live ticket", "premiere", []string{"X-Waitroom-Account", forged, "X-Waitroom-Ticket", live.body["ticket"].(string)}, 401, "invalid_account"},
		{"required, none", "members", nil, 401, "account_required"},
		{"required, another event's token", "members", []string{"X-Waitroom-Account", otherEvent}, 401, "invalid_account"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.join(tt.event, tt.hdr...)
			if r.code != tt.code || r.body["error"] != tt.err {
				t.Fatalf("join: %d %s; want %d %s", r.code, r.raw, tt.code, tt.err)
			}
		})
	}
	for _, ev := range []string{"premiere", "members"} {
		st, err := e.line.Stats(context.Background(), ev)
		want := int64(0)
		if ev == "premiere" {
			want = 1
		}
		if err != nil || st.Joined != want {
			t.Errorf("%s: joined %d, %v; want %d (refusals make no place)", ev, st.Joined, err, want)
		}
	}
	if r := e.join("members", "X-Waitroom-Account", e.token("fan-1")); r.code != http.StatusCreated {
		t.Fatalf("required, with a token: %d %s; want 201", r.code, r.raw)
	}
}

// The pass of an account's place names the account (acct), and the fan's
// status polls, from any device, keep it.
func TestPassCarriesTheAccount(t *testing.T) {
	e := setupAccounts(t)
	r := e.join("premiere", "X-Waitroom-Account", e.token("fan-7"))
	if r.code != http.StatusCreated {
		t.Fatalf("join: %d %s", r.code, r.raw)
	}
	ticket := r.body["ticket"].(string)
	set := line.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
	var tok string
	for i := 0; i < 100 && tok == ""; i++ {
		if _, err := e.line.Tick(context.Background(), "premiere", set); err != nil {
			t.Fatal(err)
		}
		s := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, nil)
		if s.body["status"] == "admitted" {
			tok = s.body["accessToken"].(string)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tok == "" {
		t.Fatal("never admitted")
	}
	c, err := pass.NewStaticVerifier(e.priv.Public().(ed25519.PublicKey)).Verify(context.Background(), tok)
	if err != nil || c.Account != "fan-7" {
		t.Fatalf("pass claims %+v, %v; want acct fan-7", c, err)
	}
	again := e.join("premiere", "X-Waitroom-Account", e.token("fan-7"))
	if again.code != http.StatusOK || again.body["status"] != "admitted" || again.body["ticket"] != ticket {
		t.Fatalf("second device: %d %s; want 200 admitted with the same ticket", again.code, again.raw)
	}
}
