package webhook_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/platform/backoff"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
	"github.com/waitroom/waitroom/internal/webhook"
	"github.com/waitroom/waitroom/internal/webhook/webhooktest"
)

// A secret as the config gives it, and its key.
const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func key(t *testing.T, s string) []byte {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type env struct {
	t     *testing.T
	rc    redis.UniversalClient
	store *webhook.Store
	line  *queue.Store
	recv  *webhooktest.Receiver
	hooks []webhook.Endpoint
	event []string
}

func setup(t *testing.T, answer func(path string, n int) int, paths ...string) *env {
	t.Helper()
	_, rc := testenv.Redis(t)
	e := &env{t: t, rc: rc, store: webhook.NewStore(rdb.New(rc)), line: queue.NewStore(rc, []byte("webhook-test-ticket-secret-0123456789")),
		recv: webhooktest.New(t, answer), event: []string{"premiere", "matinee"}}
	for _, p := range paths {
		e.hooks = append(e.hooks, webhook.Endpoint{URL: e.recv.URL + p, Key: key(t, secret)})
	}
	return e
}

// sender is a sender of e's outbox with short waits (the tests move
// through retries without sleeping a minute).
func (e *env) sender(o webhook.SenderOptions) *webhook.Sender {
	o.Endpoints = func() []webhook.Endpoint { return e.hooks }
	o.Events = func() []string { return e.event }
	if o.Backoff == (backoff.Policy{}) {
		o.Backoff = backoff.Policy{First: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	return webhook.NewSender(e.store, o)
}

// until runs rounds of s until ok, or fails the test after a deadline.
func (e *env) until(s *webhook.Sender, what string, ok func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			e.t.Fatalf("never: %s", what)
		}
		s.Round(context.Background())
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) changed(event, by string, to int) webhook.Moment {
	return webhook.Moment{Type: webhook.SettingsChanged, Event: event, Key: by + " maxActive " + string(rune('0'+to)),
		Data: webhook.SettingsData{Changes: map[string]webhook.Change{"maxActive": {From: 5, To: to}}, By: by}}
}

func (e *env) enqueue(m webhook.Moment) int {
	e.t.Helper()
	n, err := e.store.Enqueue(context.Background(), e.hooks, m)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) log(limit int) []webhook.Delivery {
	e.t.Helper()
	urls := map[string]string{}
	for _, h := range e.hooks {
		urls[h.ID()] = h.URL
	}
	d, err := e.store.Deliveries(context.Background(), e.event, urls, limit)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// swhVersion is the npm standardwebhooks the signatures are checked with:
// the specification's own JavaScript library, a test-only dependency.
const swhVersion = "1.3.0"

const verifyJS = `
const { Webhook } = require(process.argv[2]);
let input = '';
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => {
  const out = JSON.parse(input).map((m) => {
    try {
      const payload = new Webhook(m.secret).verify(m.body, m.headers);
      return payload && payload.type ? '' : 'no payload';
    } catch (e) {
      return String((e && e.message) || e);
    }
  });
  process.stdout.write(JSON.stringify(out));
});
`

// verify checks each request's signature with the standardwebhooks
// library under Node, and returns its verdict per request ("" = valid).
func verify(t *testing.T, secret string, got []webhooktest.Delivery) []string {
	t.Helper()
	dir, err := localsvc.NPMPackage("standardwebhooks", swhVersion)
	if err != nil {
		t.Fatal(err)
	}
	node, err := localsvc.Ensure("node", "nodejs")
	if err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(t.TempDir(), "verify.js")
	if err := os.WriteFile(js, []byte(verifyJS), 0o644); err != nil {
		t.Fatal(err)
	}
	type signed struct {
		webhooktest.Delivery
		Secret string `json:"secret"`
	}
	msgs := make([]signed, len(got))
	for i, g := range got {
		msgs[i] = signed{g, secret}
	}
	in, _ := json.Marshal(msgs)
	cmd := exec.Command(node, js, filepath.Join(dir, "node_modules", "standardwebhooks"))
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v %s", err, out)
	}
	var verdicts []string
	if err := json.Unmarshal(out, &verdicts); err != nil {
		t.Fatalf("node said %s: %v", out, err)
	}
	return verdicts
}

// Every delivery is signed as the Standard Webhooks specification says:
// the specification's own library (npm standardwebhooks, under Node)
// verifies each, and refuses one whose body or secret differs. The body is
// {"type","event","at" (RFC 3339),"data"}.
func TestDeliveriesVerifyWithTheStandardWebhooksLibrary(t *testing.T) {
	e := setup(t, nil, "/hook")
	e.enqueue(e.changed("premiere", "ops-bot", 7))
	if err := e.line.SyncInventory(context.Background(), "matinee", 0, line.Snapshot{Free: 0}); err != nil {
		t.Fatal(err)
	}
	made, err := e.store.Observe(context.Background(), e.hooks, webhook.View{Event: "matinee", Values: map[string]any{"mode": "queue"}, Mode: "queue"})
	if err != nil || len(made) != 1 || made[0] != webhook.SaleSoldOut {
		t.Fatalf("Observe a sold-out sale = %v, %v; want sale.soldout", made, err)
	}
	s := e.sender(webhook.SenderOptions{})
	e.until(s, "two deliveries", func() bool { return len(e.recv.Delivered("/hook")) == 2 })
	got := e.recv.Delivered("/hook")
	for i, v := range verify(t, secret, got) {
		if v != "" {
			t.Errorf("delivery %d (%s) does not verify: %s", i, got[i].Body, v)
		}
	}
	byType := map[string]webhooktest.Delivery{}
	for _, g := range got {
		byType[g.Payload.Type] = g
		if _, err := time.Parse(time.RFC3339, g.Payload.At); err != nil || g.Headers["content-type"] != "application/json" || !strings.HasPrefix(g.Headers["webhook-id"], "msg_") {
			t.Errorf("delivery %s: at %q (%v), content-type %q, id %q", g.Body, g.Payload.At, err, g.Headers["content-type"], g.Headers["webhook-id"])
		}
	}
	var settings webhook.SettingsData
	if g := byType[webhook.SettingsChanged]; g.Payload.Event != "premiere" || json.Unmarshal(g.Payload.Data, &settings) != nil || settings.By != "ops-bot" || settings.Changes["maxActive"].To != float64(7) {
		t.Errorf("settings.changed = %s; want premiere's maxActive to 7 by ops-bot", g.Body)
	}
	if g := byType[webhook.SaleSoldOut]; g.Payload.Event != "matinee" || !strings.Contains(string(g.Payload.Data), `"state":"soldout"`) {
		t.Errorf("sale.soldout = %s; want matinee's, state soldout", g.Body)
	}
	// The verifier is real: a changed body or another secret fails.
	bad := []webhooktest.Delivery{got[0], got[1]}
	bad[0].Body = strings.Replace(bad[0].Body, `"type"`, ` "type"`, 1)
	if v := verify(t, secret, bad[:1]); v[0] == "" {
		t.Error("a body changed by a space verified")
	}
	if v := verify(t, "whsec_"+base64.StdEncoding.EncodeToString([]byte("another-secret-of-24-bytes")), bad[1:]); v[0] == "" {
		t.Error("another secret verified")
	}
	for _, d := range e.log(10) {
		if d.Status != webhook.StatusDelivered || d.Attempts != 1 || d.URL != e.recv.URL+"/hook" {
			t.Errorf("log: %+v; want delivered in one attempt to the receiver", d)
		}
	}
}

// A receiver that answers 500 gets the same delivery again (same
// webhook-id), after a backoff, until it answers 2xx; the log counts the
// attempts.
func TestRetriedAfter500(t *testing.T) {
	e := setup(t, func(_ string, n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	}, "/flaky")
	e.enqueue(e.changed("premiere", "admin", 9))
	s := e.sender(webhook.SenderOptions{})
	e.until(s, "delivered after two 500s", func() bool { return len(e.recv.Delivered("/flaky")) == 1 })
	if n := e.recv.Requests("/flaky"); n != 3 {
		t.Errorf("%d requests; want 3 (two 500s, then 204)", n)
	}
	d := e.log(10)
	if len(d) != 1 || d[0].Status != webhook.StatusDelivered || d[0].Attempts != 3 || d[0].Type != webhook.SettingsChanged {
		t.Errorf("log = %+v; want one settings.changed delivered at the third attempt", d)
	}
	if d[0].ID != e.recv.Delivered("/flaky")[0].Headers["webhook-id"] {
		t.Errorf("webhook-id %q; want the log's id %q", e.recv.Delivered("/flaky")[0].Headers["webhook-id"], d[0].ID)
	}
}

// A delivery still failing after the retry window is given up: failed.
func TestGivenUpAfterTheWindow(t *testing.T) {
	e := setup(t, func(string, int) int { return http.StatusBadGateway }, "/down")
	e.enqueue(e.changed("premiere", "admin", 3))
	s := e.sender(webhook.SenderOptions{Window: 300 * time.Millisecond})
	e.until(s, "given up", func() bool { d := e.log(1); return len(d) == 1 && d[0].Status == webhook.StatusFailed })
	if d := e.log(1)[0]; d.Attempts < 2 || d.Error != "HTTP 502" {
		t.Errorf("log = %+v; want several attempts, the last error HTTP 502", d)
	}
}

// A receiver that answers 410 Gone gets that delivery no more, nor any
// other (the log says gone) while another receiver goes on; once the
// config stops naming it (Forget) and names it again, or names it with
// another secret, it receives again.
func TestGoneAfter410(t *testing.T) {
	e := setup(t, func(path string, _ int) int {
		if path == "/gone" {
			return http.StatusGone
		}
		return http.StatusOK
	}, "/gone", "/fine")
	s := e.sender(webhook.SenderOptions{})
	e.enqueue(e.changed("premiere", "a", 1))
	e.until(s, "410 answered", func() bool { return e.recv.Requests("/gone") == 1 && len(e.recv.Delivered("/fine")) == 1 })
	e.enqueue(e.changed("premiere", "a", 2))
	e.enqueue(e.changed("matinee", "a", 3))
	e.until(s, "the others delivered", func() bool { return len(e.recv.Delivered("/fine")) == 3 })
	e.until(s, "the others to /gone settled", func() bool {
		n := 0
		for _, d := range e.log(10) {
			if strings.HasSuffix(d.URL, "/gone") && d.Status == webhook.StatusGone {
				n++
			}
		}
		return n == 3
	})
	if n := e.recv.Requests("/gone"); n != 1 {
		t.Fatalf("/gone got %d requests; want the one it answered 410 to", n)
	}
	// The config names it again (a reload that removed and re-added it).
	if err := e.store.Forget(context.Background(), []string{e.hooks[0].Identity()}); err != nil {
		t.Fatal(err)
	}
	e.recv.Answer(nil)
	e.enqueue(e.changed("premiere", "a", 4))
	e.until(s, "named again, it receives", func() bool { return len(e.recv.Delivered("/gone")) == 1 })

	// Gone again, then named with another secret: a new identity.
	e.recv.Answer(func(path string, _ int) int {
		if path == "/gone" {
			return http.StatusGone
		}
		return http.StatusOK
	})
	e.enqueue(e.changed("premiere", "a", 5))
	e.until(s, "gone again", func() bool { return e.recv.Requests("/gone") == 3 })
	e.hooks[0].Key = key(t, "whsec_"+base64.StdEncoding.EncodeToString([]byte("a-new-secret-of-24-bytes")))
	e.recv.Answer(nil)
	e.enqueue(e.changed("premiere", "a", 6))
	e.until(s, "a new secret, it receives", func() bool { return len(e.recv.Delivered("/gone")) == 2 })
}

// Deliveries of one event reach a receiver in the order their moments
// were made, each waiting for the earlier ones (a failing first holds the
// rest back); another event's are not held back by it.
func TestInOrderPerEvent(t *testing.T) {
	var mu sync.Mutex
	failing := true
	e := setup(t, nil, "/ordered")
	var ms []webhook.Moment
	for i := 1; i <= 4; i++ {
		m := e.changed("premiere", "a", i)
		ms = append(ms, m)
		e.enqueue(m)
	}
	e.enqueue(e.changed("matinee", "a", 9))
	// The receiver fails premiere's first until told otherwise.
	e.recv.Config.Handler = wrap(e.recv.Config.Handler, func(r *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("webhook-id") == ms[0].ID() && failing {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	s := e.sender(webhook.SenderOptions{})
	e.until(s, "matinee's delivered while premiere's first fails", func() bool {
		d := e.recv.Delivered("/ordered")
		return len(d) == 1 && d[0].Payload.Event == "matinee"
	})
	for i := 0; i < 5; i++ {
		s.Round(context.Background())
	}
	if d := e.recv.Delivered("/ordered"); len(d) != 1 {
		t.Fatalf("premiere's later moments overtook its first: %d delivered", len(d))
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	e.until(s, "premiere's four", func() bool { return len(e.recv.Delivered("/ordered")) == 5 })
	for i, d := range e.recv.Delivered("/ordered")[1:] {
		if id := d.Headers["webhook-id"]; id != ms[i].ID() {
			t.Errorf("premiere's delivery %d is %s; want %s (in the order made)", i, id, ms[i].ID())
		}
	}
}

// wrap answers code when answer says one, else lets h answer.
func wrap(h http.Handler, answer func(*http.Request) int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := answer(r); code != 0 {
			w.WriteHeader(code)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// One moment is one delivery: the same moment queued by many at once is
// queued once; and many observers of one sold-out sale make one
// sale.soldout between them.
func TestOneMomentOneDeliveryRaced(t *testing.T) {
	e := setup(t, nil, "/once")
	m := e.changed("premiere", "ops-bot", 8)
	made := make([]int, 32)
	testenv.Race(len(made), func(i int) { made[i] = e.enqueue(m) })
	total := 0
	for _, n := range made {
		total += n
	}
	if err := e.line.SyncInventory(context.Background(), "matinee", 0, line.Snapshot{Free: 0}); err != nil {
		t.Fatal(err)
	}
	soldouts := make([][]string, 32)
	testenv.Race(len(soldouts), func(i int) {
		soldouts[i], _ = e.store.Observe(context.Background(), e.hooks, webhook.View{Event: "matinee", Values: map[string]any{"mode": "queue"}, Mode: "queue"})
	})
	n := 0
	for _, s := range soldouts {
		n += len(s)
	}
	if total != 1 || n != 1 {
		t.Fatalf("deliveries made: %d of one moment queued 32 times, %d moments of 32 observers; want 1 and 1", total, n)
	}
	if d := e.log(10); len(d) != 2 {
		t.Fatalf("log = %+v; want two deliveries", d)
	}
}

// Two senders at once never make the same delivery at once: each
// delivery reaches the receiver once (a slow receiver, every delivery
// answered 200 at its first attempt).
func TestTwoSendersNeverTheSameAtOnce(t *testing.T) {
	e := setup(t, nil, "/slow")
	e.recv.Config.Handler = wrap(e.recv.Config.Handler, func(*http.Request) int { time.Sleep(30 * time.Millisecond); return 0 })
	for i := 1; i <= 6; i++ {
		e.enqueue(e.changed(e.event[i%2], "a", i))
	}
	a, b := e.sender(webhook.SenderOptions{}), e.sender(webhook.SenderOptions{})
	deadline := time.Now().Add(20 * time.Second)
	for len(e.recv.Delivered("/slow")) < 6 && time.Now().Before(deadline) {
		testenv.Race(4, func(i int) {
			if i%2 == 0 {
				a.Round(context.Background())
			} else {
				b.Round(context.Background())
			}
		})
	}
	seen := map[string]int{}
	for _, d := range e.recv.Delivered("/slow") {
		seen[d.Headers["webhook-id"]]++
	}
	if len(seen) != 6 || e.recv.Requests("/slow") != 6 {
		t.Fatalf("%d distinct deliveries in %d requests (%v); want 6 in 6", len(seen), e.recv.Requests("/slow"), seen)
	}
}

// The log is the latest deliveries first, bounded per event.
func TestTheLogIsLatestFirstAndBounded(t *testing.T) {
	e := setup(t, nil, "/log")
	e.store.Keep = 3
	s := e.sender(webhook.SenderOptions{})
	var ms []webhook.Moment
	for i := 1; i <= 5; i++ {
		m := e.changed("premiere", "a", i)
		ms = append(ms, m)
		e.enqueue(m)
		e.until(s, "delivered", func() bool { return len(e.recv.Delivered("/log")) == i })
	}
	e.enqueue(e.changed("premiere", "a", 6)) // trims past the bound
	d := e.log(100)
	if len(d) != 3 || d[0].ID != e.changed("premiere", "a", 6).ID() || d[1].ID != ms[4].ID() || d[2].ID != ms[3].ID() {
		t.Fatalf("log = %+v; want the latest three, latest first", d)
	}
	if d[0].Status != webhook.StatusPending {
		t.Errorf("the newest: %s; want pending", d[0].Status)
	}
}
