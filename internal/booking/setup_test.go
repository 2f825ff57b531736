package booking_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/booking/postgres"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// The catalog every test sells:
// showtime 42 (event premiere): 10 rows × 30 = 300 reserved seats;
// showtime 43 (event live): 5 × 30 seats plus FLOOR (250) and BALCONY (40);
// showtime 44 (event tiny): 2 × 5 seats plus PIT (4): a sale that sells out.
func testCatalog() *booking.Catalog {
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	return booking.NewCatalog([]booking.Event{
		{ID: "premiere", Showtimes: []booking.Showtime{
			{ID: 42, Title: "Premiere", StartsAt: at("2026-12-01T19:00:00Z"), Rows: 10, SeatsPerRow: 30, PriceCents: 1500},
		}},
		{ID: "live", Showtimes: []booking.Showtime{
			{ID: 43, Title: "Live", StartsAt: at("2026-12-02T20:00:00Z"), Rows: 5, SeatsPerRow: 30, PriceCents: 6000,
				Blocks: []booking.GABlock{{Code: "FLOOR", Capacity: 250, PriceCents: 4500}, {Code: "BALCONY", Capacity: 40, PriceCents: 3000}}},
		}},
		{ID: "tiny", Showtimes: []booking.Showtime{
			{ID: 44, Title: "Tiny", StartsAt: at("2026-12-03T20:00:00Z"), Rows: 2, SeatsPerRow: 5, PriceCents: 1000,
				Blocks: []booking.GABlock{{Code: "PIT", Capacity: 4, PriceCents: 500}}},
		}},
	})
}

// testSettings are the booking rules of every test (the config's defaults,
// but for the secret).
func testSettings() booking.Settings {
	return booking.Settings{
		HoldTTL: 10 * time.Minute, SessionTTL: 8 * time.Minute, ReconcileAfter: 15 * time.Minute,
		MaxSeatsPerHold: 8, HoldsPerMinute: 5, HoldAttemptsPerMinute: 20, ReholdCooldown: 10 * time.Minute,
		Currency: "USD", ReturnURL: "http://gateway.test",
	}
}

// testPaymentSecret signs the callbacks of every test.
const testPaymentSecret = "test-payment-secret-0123456789abcdef"

// testAdminToken guards the operators' routes of every test.
const testAdminToken = "test-admin-token-0123456789"

// testTicketSecret keys the tickets of the waiting rooms some tests wire in.
const testTicketSecret = "test-ticket-secret-0123456789abcdef"

var (
	premiere = booking.Pass{Event: "premiere"}
	live     = booking.Pass{Event: "live"}
)

func fan(p booking.Pass, customer string) booking.Pass { p.Customer = customer; return p }

type env struct {
	t      testing.TB
	cat    *booking.Catalog
	set    booking.Settings
	pool   *pgxpool.Pool
	store  *postgres.Store
	sim    *payment.Simulator
	svc    *booking.Service
	srv    *httptest.Server
	api    *booking.Handler
	signer *pass.Signer
	log    *slog.Logger
	// The waiting room's line on a private Redis: the booking core asks it
	// whether a pass's ticket is still active.
	redis *localsvc.Redis
	rdb   *redis.Client
	line  *queue.Store
	inv   *booking.Inventory // with the inventory option (setupInventory)
}

// options are what a test may change before setup builds its env.
type options struct {
	set *booking.Settings
	sim *payment.SimulatorConfig
	// provider, when set, stands between the service and the simulator
	// (e.g. a provider that keeps answering PENDING).
	provider func(*payment.Simulator) payment.Provider
	// inventory, when set, has the service tell the line what is left
	// (setupInventory), through the handler's own breaker of Redis, as
	// `booking serve` builds them.
	inventory bool
}

type option func(*options)

// setup gives a test a migrated, seeded private database, the service on it,
// a payment simulator that sends no callback (Manual) unless an option says
// otherwise, its sessions in the same database on a pool of its own (as
// `booking serve` has it), and the HTTP API and the simulator's hosted page
// on a local server.
func setup(t testing.TB, opts ...option) *env {
	t.Helper()
	cat, set := testCatalog(), testSettings()
	simCfg := payment.SimulatorConfig{Outcome: "succeed", Manual: true, Secret: []byte(testPaymentSecret), Tick: 10 * time.Millisecond}
	o := options{set: &set, sim: &simCfg}
	for _, f := range opts {
		f(&o)
	}
	pool, url := testenv.Pool(t, "booking", postgres.Open, postgres.Migrate)
	simPool, err := postgres.OpenPool(context.Background(), url, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(simPool.Close)
	store := postgres.New(pool)
	if _, err := store.Seed(context.Background(), cat.Events()); err != nil {
		t.Fatalf("seed: %v", err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	e := &env{t: t, cat: cat, set: set, pool: pool, store: store, log: log}
	e.redis, e.rdb = testenv.Redis(t)
	e.line = queue.NewStore(e.rdb, []byte(testTicketSecret))

	priv := testenv.Ed25519Key(t)
	e.signer = pass.NewSigner(priv)
	verifier := pass.NewStaticVerifier(e.signer.PublicKey())

	// The server must exist before the simulator knows its callback URL.
	var handler http.Handler
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	simCfg.CallbackURL = e.srv.URL + "/api/v1/booking/payments/callback"
	simCfg.PageURL = e.srv.URL
	e.sim = payment.NewSimulator(simCfg, postgres.NewSessions(simPool), nil, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.sim.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var provider payment.Provider = e.sim
	if o.provider != nil {
		provider = o.provider(e.sim)
	}
	e.svc = booking.NewService(store, provider, cat, set, log)
	if o.inventory {
		e.inv = booking.NewInventory(e.line, store, []string{"premiere", "live", "tiny"}, log)
		e.svc.WithInventory(e.inv)
	}
	mux := http.NewServeMux()
	e.api = booking.NewHandler(e.svc, booking.PassAuth(verifier), e.line, store.Ping, log).WithOperators(func(tok string) bool { return tok == testAdminToken })
	// The handler follows the line's ends beside it, as `booking serve`
	// runs it.
	following := make(chan struct{})
	go func() { defer close(following); e.api.Follow(ctx) }()
	t.Cleanup(func() { cancel(); <-following })
	mux.Handle("/", e.api)
	mux.Handle("/pay/", e.sim.Handler())
	handler = mux
	return e
}

func withSettings(f func(*booking.Settings)) option {
	return func(o *options) { f(o.set) }
}

func withSimulator(f func(*payment.SimulatorConfig)) option {
	return func(o *options) { f(o.sim) }
}

func withProvider(wrap func(*payment.Simulator) payment.Provider) option {
	return func(o *options) { o.provider = wrap }
}

func (e *env) ctx() context.Context { return context.Background() }

// admit gives a fan a place in event's line, admitted at once (the event in
// passthrough mode), for account ("" = none), and returns its pass and its
// signed ticket (to leave with).
func (e *env) admit(event, account string) (booking.Pass, line.Ticket) {
	e.t.Helper()
	r, err := e.line.JoinWith(e.ctx(), event, admitAtOnce, line.JoinOptions{Account: account})
	if err != nil || r.State != line.Admitted {
		e.t.Fatalf("join %s: %+v, %v; want admitted at once", event, r, err)
	}
	return booking.NewPass(r.ID, account, event), r.Ticket
}

// admitAtOnce are the settings of the events the tests admit fans to.
var admitAtOnce = line.Settings{Mode: line.ModePassthrough, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}

// q reads one value from the database.
func (e *env) q(dst any, sql string, args ...any) {
	e.t.Helper()
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(dst); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// lapse moves a hold's expiry a minute into the past: time moves, nobody
// sleeps.
func (e *env) lapse(holdID string) {
	e.t.Helper()
	e.exec(`UPDATE seats SET hold_expires_at = now() - interval '1 minute' WHERE hold_id = $1 AND status = 'HELD'`, holdID)
	e.exec(`UPDATE ga_places SET expires_at = now() - interval '1 minute' WHERE hold_id = $1`, holdID)
	e.exec(`UPDATE holds SET expires_at = now() - interval '1 minute', created_at = created_at - interval '1 hour' WHERE id = $1`, holdID)
}

// snapshot is the state of every deciding table, to prove a refused request
// changed nothing.
func (e *env) snapshot() string {
	e.t.Helper()
	var s string
	e.q(&s, `SELECT concat_ws('|',
	  (SELECT string_agg(concat_ws(',', showtime_id, seat_code, status, hold_id, booking_id, hold_expires_at), ';' ORDER BY showtime_id, seat_code) FROM seats),
	  (SELECT string_agg(concat_ws(',', id, status, expires_at), ';' ORDER BY id) FROM holds),
	  (SELECT string_agg(concat_ws(',', hold_id, block_code, places, status), ';' ORDER BY hold_id, block_code) FROM ga_places),
	  (SELECT string_agg(concat_ws(',', id, status), ';' ORDER BY id) FROM bookings),
	  (SELECT string_agg(concat_ws(',', payment_id, status), ';' ORDER BY payment_id) FROM payments),
	  (SELECT count(*) FROM refunds), (SELECT count(*) FROM outbox), (SELECT capacity::text FROM ga_blocks WHERE code = 'FLOOR'),
	  (SELECT string_agg(concat_ws(',', account_id, balance), ';' ORDER BY account_id) FROM wallets),
	  (SELECT count(*) FROM wallet_ledger),
	  (SELECT string_agg(concat_ws(',', payment_id, status), ';' ORDER BY payment_id) FROM payment_sessions))`)
	return s
}

// mint signs p's pass, valid for ten minutes.
func (e *env) mint(p booking.Pass) (string, error) {
	now := time.Now()
	if p.Ticket == "" {
		return e.signer.Mint(p.Customer, p.Event, now, now.Add(10*time.Minute))
	}
	return e.signer.MintFor(p.Ticket, p.Event, p.Account, now, now.Add(10*time.Minute))
}

// call makes one API request as p (no Authorization header when p.Customer
// is empty) and decodes the JSON answer into a map.
func (e *env) call(p booking.Pass, method, path string, body any, hdr map[string]string) (int, map[string]any, http.Header) {
	e.t.Helper()
	code, out, h, err := e.do(p, method, path, body, hdr)
	if err != nil {
		e.t.Fatal(err)
	}
	return code, out, h
}

// do is call for any goroutine: it returns what went wrong instead of
// failing the test.
func (e *env) do(p booking.Pass, method, path string, body any, hdr map[string]string) (int, map[string]any, http.Header, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if p.Customer != "" {
		tok, err := e.mint(p)
		if err != nil {
			return 0, nil, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return resp.StatusCode, nil, resp.Header, fmt.Errorf("%s %s: body %q is not a JSON object", method, path, raw)
		}
	}
	return resp.StatusCode, out, resp.Header, nil
}

// seatCodes lists n seats of showtime 42 in map order from the first.
func seatCodes(rows, perRow int) []string {
	var out []string
	for r := range rows {
		for n := 1; n <= perRow; n++ {
			out = append(out, fmt.Sprintf("%c%d", 'A'+r, n))
		}
	}
	return out
}
