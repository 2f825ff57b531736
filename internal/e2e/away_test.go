package e2e_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// awayEvents: a sale that starts paused (the test lets it in with the
// operators' API), whose silent fans are dropped after 2 s, and whose away
// places, once let in, wait 20 s for their claim.
const awayEvents = `  - id: "premiere"
    name: "Premiere night"
    venue: "Shinjuku Hall 3"
    mode: "paused"
    admission: {admit_per_second: 50, max_active: 100, access_ttl: "5m", abandon_after: "2s", away_claim_within: "20s"}
    showtimes:
      - {id: 42, title: "Premiere 19:00", starts_at: "2036-12-01T19:00:00+09:00", rows: 5, seats_per_row: 10, price_cents: 1500}
`

// awayRoom is a stack with accounts (an origin site's key), a real SMTP
// server the admitters send to, and three admitters.
type awayRoom struct {
	*stack.Stack
	t    *testing.T
	site ed25519.PrivateKey
	sink *mailsink.Sink
}

func startAwayRoom(t *testing.T) *awayRoom {
	t.Helper()
	sink, err := mailsink.Start(mailsink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	site := newPresaleSite(t) // an origin site: its key signs, the stack trusts it
	s := stack.Start(t, stack.Options{Events: awayEvents, Admitters: 3, AdminToken: opsToken, AccountKeysFile: site.file,
		Notify: fmt.Sprintf(`{smtp_url: %q, from: "waitroom <noreply@example.com>", timeout: "1s"}`, "smtp://"+sink.Addr)})
	return &awayRoom{Stack: s, t: t, site: site.priv, sink: sink}
}

func (r *awayRoom) token(acct string) string {
	r.t.Helper()
	tok, err := account.MintWithEmail(r.site, acct, "", acct+"@example.test", time.Now(), 30*time.Minute)
	if err != nil {
		r.t.Fatal(err)
	}
	return tok
}

func (r *awayRoom) call(method, path, tok string) (int, map[string]any) {
	r.t.Helper()
	var hdr map[string]string
	if tok != "" {
		hdr = map[string]string{"X-Waitroom-Account": tok}
	}
	code, _, raw, err := sendJSON(context.Background(), http.DefaultClient, r.Gateway, method, path, "", hdr, nil)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return code, out
}

func (r *awayRoom) mode(m string) {
	r.t.Helper()
	if code, out := admin(r.t, r.Gateway, http.MethodPatch, "/api/v1/admin/events/premiere", map[string]any{"mode": m}); code != 200 {
		r.t.Fatalf("mode %s: %d %v", m, code, out)
	}
}

var linkRE = regexp.MustCompile(`https?://\S+/e/premiere\?t=[A-Za-z0-9_%-]+`)

// forgeTicket changes one character of a ticket, always to a different one.
func forgeTicket(ticket string) string {
	c := byte('x')
	if ticket[20] == c {
		c = 'y'
	}
	return ticket[:20] + string(c) + ticket[21:]
}

// link is the place's link an email carries.
func link(t *testing.T, m mailsink.Message) string {
	t.Helper()
	l := linkRE.FindString(m.Text)
	if l == "" || !strings.Contains(m.HTML, `href="`+l+`"`) {
		t.Fatalf("email %q carries no link to a place in both parts:\n%s", m.Subject, m.Text)
	}
	return l
}

// Away from the page, end to end, on the real binaries and a real SMTP
// server: fans step away (refusals change nothing), their places outlive
// abandon_after while a silent fan's does not; three admitters race to let
// them in and email them while the one that sends is killed mid-send: each
// fan gets exactly one email, in its language, with its link; the link's
// first look starts the access window, and the places never claimed lapse,
// counted abandoned.
func TestAwayEmailedOnceWhileAdmittersRaceAndOneDies(t *testing.T) {
	t.Parallel() // its own stack; see doc.go, "Parallel scenarios"
	r := startAwayRoom(t)
	ctx := context.Background()
	fans := []string{"a1", "a2", "a3", "a4", "a5"}
	tickets := map[string]string{}
	for _, f := range fans {
		code, out := r.call(http.MethodPost, "/api/v1/events/premiere/tickets", r.token(f))
		if code != http.StatusCreated {
			t.Fatalf("join %s: %d %v", f, code, out)
		}
		tickets[f] = out["ticket"].(string)
	}
	code, out := r.call(http.MethodPost, "/api/v1/events/premiere/tickets", "")
	if code != http.StatusCreated {
		t.Fatalf("silent fan's join: %d %v", code, out)
	}
	silent := out["ticket"].(string)
	// Refusals first: no token, another account's, a forged ticket.
	for _, c := range []struct {
		ticket, tok string
		code        int
	}{{tickets["a1"], "", 403}, {tickets["a1"], r.token("a2"), 403}, {forgeTicket(tickets["a1"]), r.token("a1"), 400}} {
		if got, out := r.call(http.MethodPost, "/api/v1/events/premiere/tickets/"+c.ticket+"/away", c.tok); got != c.code {
			t.Errorf("refused step away: %d %v; want %d", got, out, c.code)
		}
	}
	if n := r.RDB.HLen(ctx, rdb.KeysOf("premiere").Away).Val(); n != 0 {
		t.Fatalf("%d away notes after refusals; want 0", n)
	}
	for _, f := range fans {
		if code, out := r.call(http.MethodPost, "/api/v1/events/premiere/tickets/"+tickets[f]+"/away", r.token(f)); code != http.StatusAccepted {
			t.Fatalf("%s steps away: %d %v", f, code, out)
		}
	}
	// Far past abandon_after (2 s): nobody polls. The silent fan's deadline
	// is its join + pollAfter (< 1.5 s) + 2 s, rounded up to the second, and
	// passed only once that second is over: at most 5.5 s after its join.
	time.Sleep(8 * time.Second)

	// The first email to reach the server is held there, mid-send, while
	// the admitter that sends it is killed.
	held, release := r.sink.Hold()
	defer release()
	r.mode("queue")
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no email reached the SMTP server")
	}
	owner := r.RDB.Get(ctx, rdb.SenderLease).Val()
	killed := ""
	for _, name := range []string{"admitter", "admitter2", "admitter3"} {
		if owner != "" && strings.Contains(r.Log(name), owner) {
			killed = name
		}
	}
	if killed == "" {
		t.Fatalf("no admitter holds the sender's lease %q", owner)
	}
	r.Kill(killed)
	release()
	t.Logf("killed %s (sender %s) mid-send", killed, owner)

	wctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if _, err := r.sink.Wait(wctx, "", len(fans)); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, f := range fans {
		got := r.sink.For(f + "@example.test")
		if len(got) != 1 {
			t.Fatalf("%s got %d emails; want exactly 1", f, len(got))
		}
		m := got[0]
		ids[m.MessageID] = true
		if !strings.Contains(m.Subject, "Premiere night") || !strings.Contains(link(t, m), tickets[f][:20]) {
			t.Errorf("%s's email: %q, link %q", f, m.Subject, link(t, m))
		}
	}
	if len(ids) != len(fans) {
		t.Errorf("%d distinct Message-IDs for %d fans", len(ids), len(fans))
	}
	if code, _ := r.call(http.MethodGet, "/api/v1/events/premiere/tickets/"+silent, ""); code != http.StatusGone {
		t.Errorf("the silent fan's place: %d; want 410 (dropped as abandoned)", code)
	}

	// a1 opens its link: its window is access_ttl (5m) from then, far past
	// the 20 s its place waited for the claim.
	l := link(t, r.sink.For("a1@example.test")[0])
	ticket := l[strings.Index(l, "?t=")+3:]
	code, out = r.call(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, "")
	if code != 200 || out["status"] != "admitted" {
		t.Fatalf("a1's claim: %d %v", code, out)
	}
	if until, _ := time.Parse(time.RFC3339, out["expiresAt"].(string)); time.Until(until) < 4*time.Minute {
		t.Errorf("a1's window ends %v; want access_ttl (5m) from the claim", until)
	}
	// Nobody got a second copy meanwhile.
	for _, f := range fans {
		if got := r.sink.For(f + "@example.test"); len(got) != 1 {
			t.Errorf("%s got %d emails; want still 1", f, len(got))
		}
	}
	// The other four never come: they lapse after 20 s, counted abandoned.
	deadline := time.Now().Add(30 * time.Second)
	for r.RDB.HGet(ctx, rdb.KeysOf("premiere").Stats, "away_lapsed").Val() != "4" && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
	}
	st := r.RDB.HMGet(ctx, rdb.KeysOf("premiere").Stats, "joined", "admitted", "abandoned", "left", "away", "away_admitted", "away_claimed", "away_lapsed").Val()
	want := []any{"6", "1", "5", nil, "5", "5", "1", "4"}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Errorf("books (joined admitted abandoned left away away_admitted away_claimed away_lapsed) %v; want %v", st, want)
	}
	for _, f := range fans[1:] {
		if code, _ := r.call(http.MethodGet, "/api/v1/events/premiere/tickets/"+tickets[f], ""); code != http.StatusGone {
			t.Errorf("%s's unclaimed place: %d; want 410", f, code)
		}
	}
}

// A fan in a real browser: logged in at the origin site (its token, with
// its email, in cookie wr_u), it joins, steps away ("Leave and email me")
// and closes the page. The email arrives; its link, opened in another
// browser on a phone, takes the place, lands admitted, and books.
func TestBrowserAwayFanComesBackByEmail(t *testing.T) {
	t.Parallel()
	r := startAwayRoom(t)
	shots := &shooter{t: t, dir: screenshotDir(t)}
	tok := r.token("chika")

	desk := fanTab(t)
	run(t, desk, 30*time.Second, "log in and open the waiting room",
		chromedp.ActionFunc(func(ctx context.Context) error {
			return network.SetCookie("wr_u", tok).WithDomain("127.0.0.1").WithPath("/").WithHTTPOnly(true).Do(ctx)
		}),
		chromedp.Navigate(r.Gateway+"/e/premiere"),
		chromedp.Poll(`document.querySelector('#status') && ['waiting', 'next'].includes(document.querySelector('#status').dataset.status)`, nil),
	)
	// The page, reloaded, offers to leave and be emailed (the server draws
	// it for a fan whose token carries an email).
	run(t, desk, 20*time.Second, "see the offer",
		chromedp.Navigate(r.Gateway+"/e/premiere"),
		chromedp.WaitVisible(`#away-button`, chromedp.ByQuery),
	)
	if what := text(t, desk, "#away-what"); !strings.Contains(what, "chika@example.test") || !strings.Contains(what, "within 20 seconds") {
		t.Errorf("the offer says %q; want the address and how long the place waits", what)
	}
	shots.shot(desk, "away-offer")
	wordsOK(t, desk, "en", "the waiting room with the offer")
	run(t, desk, 10*time.Second, "leave and be emailed", chromedp.Click(`#away-button`, chromedp.ByQuery))
	waitEval(t, desk, 20*time.Second, "the page says the fan is away", `document.querySelector('#status') && document.querySelector('#status').dataset.status === 'away'`)
	if done := text(t, desk, "#away-done"); !strings.Contains(done, "chika@example.test") {
		t.Errorf("the page says %q; want the address the email goes to", done)
	}
	shots.shot(desk, "away-done")
	checkA11y(t, desk, "the page after stepping away")
	run(t, desk, 5*time.Second, "close the page", chromedp.Navigate("about:blank"))

	r.mode("queue")
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := r.sink.Wait(wctx, "chika@example.test", 1)
	if err != nil {
		t.Fatal(err)
	}
	l := link(t, got[0])
	t.Logf("email %q, link %s", got[0].Subject, l)

	// Another browser, a phone: the link takes the place and moves on to
	// booking, admitted.
	ph := fanTab(t)
	run(t, ph, 10*time.Second, "a phone", phone())
	run(t, ph, 30*time.Second, "open the emailed link", chromedp.Navigate(l))
	waitBookPage(t, ph, "the link lands admitted, on the seat map")
	shots.shot(ph, "away-back-on-phone")
	run(t, ph, 10*time.Second, "pick C5",
		chromedp.Click(`[data-seat="C5"]`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('[data-seat="C5"]').dataset.state === 'mine'`, nil),
	)
	run(t, ph, 10*time.Second, "hold",
		chromedp.Click(`#hold`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('main').dataset.phase === 'held'`, nil),
	)
	run(t, ph, 10*time.Second, "pay", chromedp.Click(`#pay`, chromedp.ByQuery))
	atProvider(t, ph, r.Booking)
	backFromProvider(t, ph, "premiere", "#sim-pay")
	run(t, ph, 30*time.Second, "see the booking confirmed",
		chromedp.Poll(`(() => { const b = document.querySelector('#booking-status'); return b && /CONFIRMED/.test(b.textContent + ' ' + (b.dataset.status || '')); })()`, nil),
	)
	shots.shot(ph, "away-booked")
}
