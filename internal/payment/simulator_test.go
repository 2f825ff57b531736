package payment_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/booking/postgres"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// receiver is the booking core's callback route as the simulator sees it:
// it counts what arrives and answers fail (a status code) while fail > 0.
type receiver struct {
	mu   sync.Mutex
	got  []payment.Callback
	fail atomic.Int32
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if !payment.Verify([]byte(secret), body, req.Header.Get(payment.SignatureHeader)) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.fail.Load() > 0 {
		r.fail.Add(-1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var cb payment.Callback
	_ = json.Unmarshal(body, &cb)
	r.mu.Lock()
	r.got = append(r.got, cb)
	r.mu.Unlock()
}

func (r *receiver) callbacks() []payment.Callback {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]payment.Callback(nil), r.got...)
}

const secret = "sim-test-secret-0123456789abcdefghij"

type env struct {
	t     *testing.T
	clock *testenv.Clock // the simulator's time, moved by the test
	store *postgres.Sessions
	sim   *payment.Simulator
	page  *httptest.Server
	recv  *receiver
	cfg   payment.SimulatorConfig
}

// setup gives a test a simulator on a private database (the real store:
// booking/postgres.Sessions), its hosted page on a local server, and a
// callback receiver; f edits the config first.
func setup(t *testing.T, f func(*payment.SimulatorConfig)) *env {
	t.Helper()
	pool, _ := testenv.Pool(t, "booking", postgres.Open, postgres.Migrate)
	e := &env{t: t, clock: testenv.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)), store: postgres.NewSessions(pool), recv: &receiver{}}
	cb := httptest.NewServer(e.recv)
	t.Cleanup(cb.Close)
	var h http.Handler
	e.page = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(e.page.Close)
	e.cfg = payment.SimulatorConfig{Outcome: "succeed", Delay: time.Second, LateBy: 2 * time.Minute, CallbackURL: cb.URL,
		Secret: []byte(secret), PageURL: e.page.URL, Now: e.clock.Now}
	if f != nil {
		f(&e.cfg)
	}
	e.sim = e.restart()
	h = e.sim.Handler()
	return e
}

// restart is a new simulator on the same store: the booking core started
// again.
func (e *env) restart() *payment.Simulator {
	return payment.NewSimulator(e.cfg, e.store, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)))
}

func (e *env) ctx() context.Context { return context.Background() }

func (e *env) open(key string) payment.Session {
	e.t.Helper()
	s, err := e.sim.CreateSession(e.ctx(), payment.SessionRequest{
		IdempotencyKey: key, Reference: key, AmountCents: 3900, Currency: "USD", Description: "Premiere 19:00: C5, C6",
		TTL: 8 * time.Minute, ReturnURL: "http://gateway.test/e/premiere/book?booking=" + key,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (e *env) get(u string) (int, string, http.Header) {
	e.t.Helper()
	res, err := http.Get(u)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

func (e *env) post(u string, form url.Values) (int, string) {
	e.t.Helper()
	res, err := noRedirects.PostForm(u, form)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Location")
}

func (e *env) status(id string) payment.Status {
	e.t.Helper()
	st, err := e.sim.Status(e.ctx(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) deliver() {
	e.t.Helper()
	if err := e.sim.DeliverOnce(e.ctx()); err != nil {
		e.t.Fatal(err)
	}
}

// One key opens one session, however many ask at once, and a restarted
// simulator still knows it, its decision and its refund.
func TestSessionsAreKeptAndIdempotent(t *testing.T) {
	e := setup(t, func(c *payment.SimulatorConfig) { c.Delay = 0 })
	got := make([]payment.Session, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = e.open("booking-1") }()
	}
	wg.Wait()
	for i, s := range got {
		if s != got[0] {
			t.Fatalf("request %d got %+v; request 0 %+v", i, s, got[0])
		}
	}
	if want := e.page.URL + "/pay/" + got[0].PaymentID; got[0].URL != want || !got[0].ExpiresAt.Equal(e.clock.Now().Add(8*time.Minute)) {
		t.Fatalf("session %+v; want URL %s, expiry in 8 minutes", got[0], want)
	}
	if e.status(got[0].PaymentID) != payment.Pending {
		t.Fatal("a new session is not PENDING")
	}
	id := got[0].PaymentID
	if _, ok, err := e.sim.Decide(e.ctx(), id, payment.ChoiceSucceed); !ok || err != nil {
		t.Fatalf("decide: %v %v", ok, err)
	}
	if err := e.sim.Refund(e.ctx(), id); err != nil {
		t.Fatal(err)
	}
	again := e.restart()
	if st, err := again.Status(e.ctx(), id); st != payment.Succeeded || err != nil || !again.Refunded(e.ctx(), id) {
		t.Fatalf("after a restart: %s %v, refunded %v; want SUCCEEDED, refunded", st, err, again.Refunded(e.ctx(), id))
	}
	if _, err := again.Status(e.ctx(), "pay_nothing"); err == nil || !strings.Contains(err.Error(), payment.ErrUnknownPayment.Error()) {
		t.Fatalf("unknown payment: %v; want ErrUnknownPayment", err)
	}
	if s := e.open("booking-1"); s != got[0] {
		t.Fatalf("the key again after a decision: %+v; want the same session", s)
	}
}

// The hosted page: what is at stake, Pay and Cancel, the configured outcome
// offered first; each press decides once and sends the fan back.
func TestHostedPage(t *testing.T) {
	e := setup(t, func(c *payment.SimulatorConfig) { c.Drop, c.Delay = true, 0 })
	s := e.open("b-pay")
	code, page, hdr := e.get(s.URL)
	if code != 200 {
		t.Fatalf("GET %s: %d", s.URL, code)
	}
	for _, want := range []string{`lang="en"`, "$39.00", "Premiere 19:00: C5, C6", `id="sim-pay"`, `id="sim-cancel"`,
		`value="never" checked`, `action="/pay/` + s.PaymentID + `"`, `href="http://gateway.test/e/premiere/book?booking=b-pay"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, `id="pay-late"`) {
		t.Error("a session in time is told it is late")
	}
	for _, want := range []string{"default-src 'none'", "style-src 'self'", "form-action 'self' http://gateway.test;", "frame-ancestors 'none'"} {
		if !strings.Contains(hdr.Get("Content-Security-Policy"), want) {
			t.Errorf("CSP %q lacks %s", hdr.Get("Content-Security-Policy"), want)
		}
	}
	if code, _, hdr := e.get(e.page.URL + "/pay/sim.css"); code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/css") {
		t.Errorf("style: %d %s", code, hdr.Get("Content-Type"))
	}

	tests := []struct {
		name   string
		form   url.Values
		code   int
		status payment.Status
		words  string
	}{
		{"no action", url.Values{"outcome": {"succeed"}}, 400, payment.Pending, "Pay"},
		{"pay", url.Values{"action": {"pay"}, "outcome": {"succeed"}}, 303, payment.Succeeded, "Payment received"},
		{"cancel", url.Values{"action": {"cancel"}}, 303, payment.Failed, "Payment cancelled"},
		{"declined", url.Values{"action": {"pay"}, "outcome": {"fail"}}, 303, payment.Failed, "Payment declined"},
		{"an unknown outcome is the configured one", url.Values{"action": {"pay"}, "outcome": {"maybe"}}, 303, payment.Succeeded, "Payment received"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := e.open("b-" + tt.name)
			code, to := e.post(s.URL, tt.form)
			if code != tt.code {
				t.Fatalf("POST: %d; want %d", code, tt.code)
			}
			if code == 303 && to != "http://gateway.test/e/premiere/book?booking=b-"+tt.name {
				t.Fatalf("sent to %q; want the return URL", to)
			}
			if st := e.status(s.PaymentID); st != tt.status {
				t.Fatalf("status %s; want %s", st, tt.status)
			}
			if _, page, _ := e.get(s.URL); !strings.Contains(page, tt.words) {
				t.Fatalf("the page after: %s; want %q", page, tt.words)
			}
			// A second press changes nothing and shows the page.
			if code == 303 {
				if _, to := e.post(s.URL, url.Values{"action": {"cancel"}}); to != "/pay/"+s.PaymentID || e.status(s.PaymentID) != tt.status {
					t.Fatalf("second press: sent to %q, status %s; want the page, %s", to, e.status(s.PaymentID), tt.status)
				}
			}
		})
	}
	if code, page, _ := e.get(e.page.URL + "/pay/pay_unknown"); code != 404 || !strings.Contains(page, "No such payment") {
		t.Errorf("unknown payment: %d", code)
	}
	// Drop: a decided payment sends no callback.
	e.clock.Add(time.Hour)
	e.deliver()
	if got := e.recv.callbacks(); len(got) != 0 {
		t.Errorf("callbacks with drop: %v", got)
	}
}

// Past its end a session's page still takes a payment (the booking core
// refunds it), until the booking core asks about it: then an open one
// expires, FAILED, and its page says so.
func TestSessionEnd(t *testing.T) {
	e := setup(t, func(c *payment.SimulatorConfig) { c.Delay = 0 })
	late, asked := e.open("late"), e.open("asked")
	e.clock.Add(9 * time.Minute)
	if _, page, _ := e.get(late.URL); !strings.Contains(page, `id="pay-late"`) || !strings.Contains(page, `id="sim-pay"`) {
		t.Fatalf("a late page: %s; want the note and Pay", page)
	}
	if code, _ := e.post(late.URL, url.Values{"action": {"pay"}, "outcome": {"succeed"}}); code != 303 || e.status(late.PaymentID) != payment.Succeeded {
		t.Fatalf("pay late: %d %s; want 303 SUCCEEDED", code, e.status(late.PaymentID))
	}
	if st := e.status(asked.PaymentID); st != payment.Failed {
		t.Fatalf("asked after its end: %s; want FAILED", st)
	}
	if _, to := e.post(asked.URL, url.Values{"action": {"pay"}}); to != "/pay/"+asked.PaymentID || e.status(asked.PaymentID) != payment.Failed {
		t.Fatalf("pay after it expired: sent to %q, %s", to, e.status(asked.PaymentID))
	}
	if _, page, _ := e.get(asked.URL); !strings.Contains(page, "This payment has expired") {
		t.Fatalf("expired page: %s", page)
	}
	e.clock.Add(time.Minute)
	e.deliver()
	if got := e.recv.callbacks(); len(got) != 1 || got[0] != (payment.Callback{PaymentID: late.PaymentID, Status: payment.Succeeded}) {
		t.Fatalf("callbacks %v; want the late payment's SUCCEEDED alone (an expiry sends none)", got)
	}
}

// When each payment is settled and its callback comes: delay after the
// decision (PENDING until then), twice, late (after the session's end and
// LateBy), never; auto_pay decides by itself.
func TestCallbackTiming(t *testing.T) {
	tests := []struct {
		name   string
		cfg    func(*payment.SimulatorConfig)
		choice payment.Choice
		at     []time.Duration // after the decision, when each is due
		status payment.Status
	}{
		{"succeed", nil, payment.ChoiceSucceed, []time.Duration{time.Second}, payment.Succeeded},
		{"fail", nil, payment.ChoiceFail, []time.Duration{time.Second}, payment.Failed},
		{"cancel", nil, payment.ChoiceCancel, []time.Duration{time.Second}, payment.Failed},
		{"twice", nil, payment.ChoiceTwice, []time.Duration{time.Second, time.Second}, payment.Succeeded},
		{"duplicate in the config", func(c *payment.SimulatorConfig) { c.Duplicate = true }, payment.ChoiceSucceed, []time.Duration{time.Second, time.Second}, payment.Succeeded},
		{"late: the session's end and LateBy", nil, payment.ChoiceLate, []time.Duration{10 * time.Minute}, payment.Succeeded},
		{"never", nil, payment.ChoiceNever, nil, payment.Succeeded},
		{"auto_pay", func(c *payment.SimulatorConfig) { c.AutoPay, c.Outcome = true, "fail" }, "", []time.Duration{time.Second}, payment.Failed},
		{"manual: no callback", func(c *payment.SimulatorConfig) { c.Manual = true }, payment.ChoiceSucceed, nil, payment.Succeeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tt.cfg)
			s := e.open("k")
			if tt.choice != "" {
				if _, ok, err := e.sim.Decide(e.ctx(), s.PaymentID, tt.choice); !ok || err != nil {
					t.Fatalf("decide: %v %v", ok, err)
				}
			}
			var elapsed time.Duration
			for i, at := range tt.at {
				e.clock.Add(at - elapsed - time.Millisecond)
				e.deliver()
				if n := len(e.recv.callbacks()); n != i {
					t.Fatalf("%d callbacks before %s; want %d", n, at, i)
				}
				if st := e.status(s.PaymentID); i == 0 && st != payment.Pending {
					t.Fatalf("status before it is settled: %s; want PENDING", st)
				}
				e.clock.Add(time.Millisecond)
				e.deliver()
				if got := e.recv.callbacks(); len(got) != i+1 || got[i].Status != tt.status {
					t.Fatalf("callbacks at %s: %v; want %d, %s", at, got, i+1, tt.status)
				}
				elapsed = at
			}
			e.clock.Add(time.Hour)
			e.deliver()
			if n := len(e.recv.callbacks()); n != len(tt.at) {
				t.Fatalf("%d callbacks in all; want %d", n, len(tt.at))
			}
			if st := e.status(s.PaymentID); st != tt.status {
				t.Fatalf("status %s; want %s", st, tt.status)
			}
		})
	}
}

// A callback the booking core does not take is tried again with back-off,
// also by a simulator started again, and given up after eight attempts.
func TestCallbackRetries(t *testing.T) {
	e := setup(t, func(c *payment.SimulatorConfig) { c.Delay = 0 })
	s := e.open("retry")
	e.recv.fail.Store(2)
	e.sim.Decide(e.ctx(), s.PaymentID, payment.ChoiceSucceed)
	e.deliver() // refused: again in 200 ms
	e.clock.Add(100 * time.Millisecond)
	e.sim = e.restart()
	e.deliver()
	if e.recv.fail.Load() != 1 {
		t.Fatal("retried before its back-off")
	}
	e.clock.Add(100 * time.Millisecond)
	e.deliver() // refused again: in 400 ms
	e.clock.Add(400 * time.Millisecond)
	e.deliver()
	if got := e.recv.callbacks(); len(got) != 1 {
		t.Fatalf("after two refusals: %v; want the callback through", got)
	}

	gone := e.open("gone")
	e.recv.fail.Store(100)
	e.sim.Decide(e.ctx(), gone.PaymentID, payment.ChoiceSucceed)
	for range 12 {
		e.deliver()
		e.clock.Add(time.Minute)
	}
	if left := 100 - e.recv.fail.Load(); left != 8 {
		t.Fatalf("%d attempts; want 8, then given up", left)
	}
}

func TestFormatAmount(t *testing.T) {
	tests := []struct {
		minor    int64
		currency string
		want     string
	}{
		{3900, "USD", "$39.00"},
		{123456789, "EUR", "€1,234,567.89"},
		{5, "GBP", "£0.05"},
		{1500, "JPY", "¥1,500"},
		{45000, "KRW", "₩45,000"},
		{1250, "CHF", "CHF 12.50"},
	}
	for _, tt := range tests {
		if got := payment.FormatAmount(tt.minor, tt.currency); got != tt.want {
			t.Errorf("FormatAmount(%d, %s) = %q; want %q", tt.minor, tt.currency, got, tt.want)
		}
	}
}
