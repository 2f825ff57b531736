package e2e_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/presale/presaletest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// presaleSite is the origin site of a presale scenario: its key signs the
// fans' account tokens, the stack trusts its public half.
type presaleSite struct {
	priv ed25519.PrivateKey
	file string
}

func newPresaleSite(t *testing.T) *presaleSite {
	priv, file := testenv.OriginSite(t)
	return &presaleSite{priv: priv, file: file}
}

func (p *presaleSite) token(t *testing.T, acct string) string {
	tok, err := account.Mint(p.priv, acct, "", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// presaleEvent is a presale event of these scenarios in the config's words:
// registration open from an hour ago until closes, the sale opening at
// opens; plan holds selected, group_size and window, showtime its one
// showtime.
func presaleEvent(id, name string, opens, closes time.Time, plan, showtime string) string {
	return fmt.Sprintf(`  - id: %q
    name: %q
    opens_at: %q
    admission: {admit_per_second: 200, max_active: 300, access_ttl: "5m", abandon_after: "60s"}
    presale: {registration_opens_at: %q, registration_closes_at: %q, %s}
    showtimes:
      - %s
`, id, name, opens.Format(time.RFC3339), time.Now().Add(-time.Hour).Format(time.RFC3339), closes.Format(time.RFC3339), plan, showtime)
}

// timeMove is a time of the config moved: its key, the time it holds and
// the one it gets.
type timeMove struct {
	key     string
	was, at time.Time
}

// reloadTimes moves times of the stack's config, all in one live reload.
func reloadTimes(t *testing.T, s *stack.Stack, moves ...timeMove) {
	t.Helper()
	s.EditConfig(t, func(c string) string {
		for _, m := range moves {
			c = strings.Replace(c, fmt.Sprintf("%s: %q", m.key, m.was.Format(time.RFC3339)), fmt.Sprintf("%s: %q", m.key, m.at.Format(time.RFC3339)), 1)
		}
		return c
	})
}

// checkSelection reads event's published list and checks the selection sel
// (GET …/selection) against it from what both publish alone
// (presaletest.CheckDraw); it returns the list, one id per rank.
func checkSelection(t *testing.T, base, event string, sel map[string]any) []string {
	t.Helper()
	res, err := http.Get(base + "/api/v1/events/" + event + "/selection/entries")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("selection entries: %d %s", res.StatusCode, raw)
	}
	seed, _ := sel["seed"].(string)
	commitment, _ := sel["commitment"].(string)
	digest, _ := sel["entriesDigest"].(string)
	if err := presaletest.CheckDraw(seed, commitment, digest, raw); err != nil {
		t.Fatalf("the selection published: %v", err)
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

// An admitter SIGKILLed while it draws a presale's selection of 300,000
// registrations (its lease held, nothing published) is taken over by the
// other admitter once the lease lapses: the selection it publishes is
// whole, recomputable from what it publishes, and each account's rank is
// its registration's place in the list.
func TestSelectionSurvivesAnAdmitterKilledMidDraw(t *testing.T) {
	t.Parallel() // most of it is the dead admitter's lease running out
	site := newPresaleSite(t)
	later := time.Now().Add(time.Hour).Truncate(time.Second)
	events := presaleEvent("crash", "Crash presale", later.Add(time.Hour), later, "selected: 1000, group_size: 500, window: \"1h\"",
		`{id: 72, title: "Crash 19:00", starts_at: "2036-12-03T19:00:00+09:00", rows: 5, seats_per_row: 10, price_cents: 1500}`)
	s := stack.Start(t, stack.Options{Events: events, Tick: "200ms", Admitters: 2, AccountKeysFile: site.file})
	ctx := context.Background()
	k := rdb.KeysOf("crash")
	mustWait(t, "the selection committed", 10*time.Second, func() bool { return s.RDB.HExists(ctx, k.Presale, "commitment").Val() })
	const n = 300_000
	if err := presaletest.Register(ctx, s.RDB, "crash", n); err != nil {
		t.Fatal(err)
	}
	// The close, brought forward to two seconds from now (a live reload).
	closes := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	reloadTimes(t, s, timeMove{"registration_closes_at", later, closes})

	// The draw begins at the close, under a lease that names the admitter
	// drawing ("host/pid/…"): that one is killed a moment into it.
	var owner string
	for deadline := time.Until(closes) + 10*time.Second; owner == ""; time.Sleep(2 * time.Millisecond) {
		if deadline -= 2 * time.Millisecond; deadline < 0 {
			t.Fatal("no admitter took the draw's lease after the close")
		}
		owner = s.RDB.Get(ctx, k.PresaleDrawing).Val()
	}
	parts := strings.Split(owner, "/")
	victim := ""
	for _, name := range []string{"admitter", "admitter2"} {
		if len(parts) == 3 && fmt.Sprint(s.Proc(name).Pid()) == parts[1] {
			victim = name
		}
	}
	if victim == "" {
		t.Fatalf("the lease's owner %q is neither admitter", owner)
	}
	time.Sleep(100 * time.Millisecond)
	s.Kill(victim)
	killed := time.Now()
	if s.RDB.HExists(ctx, k.Presale, "drawn").Val() {
		t.Fatal("the selection was published before the kill: the draw ended too soon to be killed in the middle")
	}

	fan := &apiFan{t: t, base: s.Gateway}
	var sel map[string]any
	mustWait(t, "the selection published by the other admitter", time.Minute, func() bool {
		code, out := fan.do(http.MethodGet, "/api/v1/events/crash/selection", nil, nil)
		sel = out
		return code == http.StatusOK && sel["seed"] != nil
	})
	t.Logf("the admitter drawing (%s) killed; the selection published by the other %s later", victim, time.Since(killed).Round(100*time.Millisecond))
	if owner := s.RDB.Get(ctx, k.PresaleDrawing).Val(); owner != "" {
		t.Errorf("the lease still held by %q after the selection was published", owner)
	}
	ids := checkSelection(t, s.Gateway, "crash", sel)
	if len(ids) != n || sel["entries"] != float64(n) {
		t.Fatalf("the selection lists %d, says %v; want %d", len(ids), sel["entries"], n)
	}
	// Each account's rank, read as its fan reads it, is its registration's
	// place in the list: across the list, the ranks the killed admitter may
	// have written half of.
	for _, seq := range []int{1, 2, n / 3, n / 2, n - 1, n} {
		code, reg := fan.do(http.MethodGet, "/api/v1/events/crash/registrations/me", nil, map[string]string{"X-Waitroom-Account": site.token(t, presaletest.Account(seq))})
		rank := int(num(reg["rank"]))
		if code != http.StatusOK || rank < 1 || rank > n || ids[rank-1] != reg["registrationId"] {
			t.Fatalf("%s: %d %v; the list has %q at that rank", presaletest.Account(seq), code, reg, ids[max(min(rank, n), 1)-1])
		}
	}
}

// A presale through the real binaries and a browser: 300 accounts register
// by API and one in Chromium (the page's form); the admitter draws the
// selection at the close (recomputable from what it publishes: the digest
// of the list); 200 are invited in two windows of 100; the first group's
// fans come in their window (a browser among them: the register page's
// countdown, its join button, the booking page) and buy; a second group's
// fan is told its window, a waitlisted one is refused; when the first
// window closes, the invitations it left unused go to the wait list (a
// top-up), whose first fan then joins; and the report's figures are what
// happened.
func TestPresaleSale(t *testing.T) {
	t.Parallel()
	site := newPresaleSite(t)
	// Registration is open for an hour at first; once everyone registered,
	// the operator brings the close to seconds away (a live reload).
	laterClose, laterOpen := time.Now().Add(time.Hour).Truncate(time.Second), time.Now().Add(2*time.Hour).Truncate(time.Second)
	closes, opens := laterClose, laterOpen
	// A window must hold what the test does in it on a loaded machine: in
	// the first, eleven joins, ten buyers let in, holding and paying, and
	// the relay's news of their bookings reaching the line; in the second, the top-up seen and its first fan's join. The
	// test waits on the windows' state (the answers, the report), never on
	// a clock, so a longer window costs only the wait for the first one to
	// close.
	const window = 30 * time.Second
	events := presaleEvent("presale", "Presale night", opens, closes, fmt.Sprintf("selected: 200, group_size: 100, window: %q", window),
		`{id: 52, title: "Presale 19:00", starts_at: "2036-12-01T19:00:00+09:00", rows: 10, seats_per_row: 30, price_cents: 1500}`)
	s := stack.Start(t, stack.Options{Events: events, Tick: "200ms", AccountKeysFile: site.file,
		Booking: `  payment: {secret: "stack-payment-secret-0123456789abcdef", simulator: {enabled: true, outcome: "succeed", delay: "200ms"}}`})
	base := s.Gateway
	call := func(method, path, acct string) (int, map[string]any) {
		t.Helper()
		hdr := map[string]string{}
		if acct != "" {
			hdr["X-Waitroom-Account"] = site.token(t, acct)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code, raw, _, err := sendAsAFan(ctx, base, method, path, "", hdr, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return code, out
	}

	// 300 accounts register at once, by API.
	accounts := make([]string, 300)
	var wg sync.WaitGroup
	errs := make(chan string, len(accounts))
	for i := range accounts {
		accounts[i] = fmt.Sprintf("fan-%03d", i)
		wg.Add(1)
		go func(acct string) {
			defer wg.Done()
			hdr := map[string]string{"X-Waitroom-Account": site.token(t, acct)}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			code, raw, again, err := sendAsAFan(ctx, base, http.MethodPost, "/api/v1/events/presale/registrations", "", hdr, nil)
			if err != nil || code != http.StatusCreated && !(again && code == http.StatusOK) {
				errs <- fmt.Sprintf("%s: %d %s %v", acct, code, raw, err)
			}
		}(accounts[i])
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("registration: %s", e)
	}

	// One more in a browser, through the register page's form.
	actx := browser(t)
	fan := tab(t, actx)
	setAccount := func(acct string) {
		t.Helper()
		run(t, fan, 10*time.Second, "sign in as "+acct, network.Enable(), chromedp.ActionFunc(func(ctx context.Context) error {
			return network.SetCookie("wr_u", site.token(t, acct)).WithURL(base).WithPath("/").Do(ctx)
		}))
	}
	setAccount("browser-fan")
	run(t, fan, 30*time.Second, "register in the browser",
		chromedp.Navigate(base+"/e/presale/register"),
		chromedp.WaitVisible(`#register-submit`, chromedp.ByQuery),
		chromedp.Click(`#register-submit`, chromedp.ByQuery),
		chromedp.WaitVisible(`#register-withdraw`, chromedp.ByQuery),
	)
	if st := text(t, fan, "#register-status"); !strings.Contains(st, "You are registered.") {
		t.Fatalf("register page after registering: %q", st)
	}
	wordsOK(t, fan, "en", "the register page")
	checkA11y(t, fan, "the register page")

	// An insider reads every key and value of Redis before the close
	// (third round): see insiderLearnedNothing below.
	before := readEverything(t, s)

	// The close, brought forward by the operator; the gateway and the
	// admitter follow the file.
	closes = time.Now().Add(4 * time.Second).Truncate(time.Second).Add(time.Second)
	opens = closes.Add(3 * time.Second)
	reloadTimes(t, s, timeMove{"registration_closes_at", laterClose, closes}, timeMove{"opens_at", laterOpen, opens})

	// The selection, drawn at the close.
	var sel map[string]any
	mustWait(t, "the selection drawn", time.Until(closes)+time.Minute, func() bool {
		_, sel = call(http.MethodGet, "/api/v1/events/presale/selection", "")
		return sel["seed"] != nil
	})
	ids := checkSelection(t, base, "presale", sel)
	insiderLearnedNothing(t, before, sel, "presale", draw.Selection, []byte(strings.Join(ids, "\n")+"\n"))
	if len(ids) != 301 || sel["entries"] != float64(301) {
		t.Fatalf("selection: %d listed, %v", len(ids), sel)
	}
	byRank := map[int]string{}
	for _, a := range append(slices.Clone(accounts), "browser-fan") {
		code, r := call(http.MethodGet, "/api/v1/events/presale/registrations/me", a)
		rank := int(num(r["rank"]))
		if code != 200 || rank < 1 || rank > 301 || byRank[rank] != "" || ids[rank-1] != r["registrationId"] {
			t.Fatalf("%s: %d %v", a, code, r)
		}
		if want := map[bool]string{true: "selected", false: "waitlisted"}[rank <= 200]; r["status"] != want {
			t.Fatalf("%s at rank %d: %v, want %s", a, rank, r["status"], want)
		}
		byRank[rank] = a
	}

	// Before the first window: the browser's fan (rank 1's account) sees its
	// window and the countdown.
	setAccount(byRank[1])
	run(t, fan, 20*time.Second, "the selected fan's register page",
		chromedp.Navigate(base+"/e/presale/register"),
		chromedp.WaitVisible(`#register-window`, chromedp.ByQuery),
	)
	if st := text(t, fan, "#register-status"); !strings.Contains(st, "selected") {
		t.Fatalf("rank 1's register page: %q", st)
	}
	if code, r := call(http.MethodPost, "/api/v1/events/presale/tickets", byRank[150]); code != 403 || r["error"] != "window_not_open" ||
		r["windowOpensAt"] != opens.Add(window).UTC().Format(time.RFC3339) {
		t.Fatalf("rank 150 before its window: %d %v", code, r)
	}
	if code, r := call(http.MethodPost, "/api/v1/events/presale/tickets", byRank[250]); code != 403 || r["error"] != "not_invited" {
		t.Fatalf("rank 250 (waitlisted): %d %v", code, r)
	}

	// The first window: the page shows the join button at its first
	// second; the fan presses it, and ten fans of the first group join by
	// API at once (the window gates the joins, so they come first); then
	// each is let in, holds a seat and pays.
	run(t, fan, 30*time.Second, "the join button at the window's opening",
		chromedp.WaitVisible(`#register-join`, chromedp.ByQuery),
		chromedp.Click(`#register-join`, chromedp.ByQuery),
	)
	buyers := make([]*apiFan, 10)
	joinErrs := make(chan string, len(buyers))
	for i := range buyers {
		rank := i + 2
		f := &apiFan{t: t, base: base, event: "presale"}
		buyers[i] = f
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(context.Background(), opens.Add(window))
			defer cancel()
			code, raw, again, err := sendAsAFan(ctx, base, http.MethodPost, "/api/v1/events/presale/tickets", "",
				map[string]string{"X-Waitroom-Account": site.token(t, byRank[rank])}, nil)
			var out map[string]any
			_ = json.Unmarshal(raw, &out)
			tk, _ := out["ticket"].(string)
			if err != nil || code != http.StatusCreated && !(again && code == http.StatusOK) || tk == "" {
				joinErrs <- fmt.Sprintf("rank %d in its window: %d %s %v", rank, code, raw, err)
				return
			}
			f.ticket = tk
		})
	}
	wg.Wait()
	close(joinErrs)
	for e := range joinErrs {
		t.Fatal(e)
	}
	// The form's answer, the waiting room, then the booking page: the page
	// navigates under our feet, so a poll cut short is tried again.
	mustWait(t, "the browser's fan on the booking page", 40*time.Second, func() bool {
		c, cancel := context.WithTimeout(fan, 5*time.Second)
		defer cancel()
		return chromedp.Run(c, chromedp.Poll(`location.pathname === '/e/presale/book' && document.readyState === 'complete'`, nil),
			chromedp.WaitVisible(`[data-seat="C5"]`, chromedp.ByQuery)) == nil
	})
	// The ten buy side by side, as fans do (one after the other, a loaded
	// machine took most of the window over them).
	showtime := showtimeOf(t, base, "presale")
	bctx, cancel := context.WithDeadline(context.Background(), opens.Add(window).Add(time.Minute))
	defer cancel()
	buyErrs := make(chan error, len(buyers))
	for i, f := range buyers {
		wg.Go(func() { buyErrs <- buy(bctx, base, "presale", f.ticket, fmt.Sprintf("A%d", i+2), showtime) })
	}
	wg.Wait()
	close(buyErrs)
	for err := range buyErrs {
		if err != nil {
			t.Fatalf("a buyer of the first window: %v", err)
		}
	}
	boughtBy := time.Now()
	// An invitation buys once: a buyer back in its window, once its sale
	// has freed its place, is refused (until then its join resumes the
	// place it bought with), and still after the booking core's relay.
	// Only inside the window: after it, the window's refusal comes first.
	firstCloses := opens.Add(window)
	// At the sale: the booking core's inventory frees a buyer's place as
	// its hold is sold, and notes the account's purchase in the same step
	// (queue's giveScript), before the relay's news. So once the place has
	// left the active set, the very first join is refused: a 201 would be
	// a second place for an invitation that bought.
	buyerID, err := stack.TicketID("presale", buyers[0].ticket)
	if err != nil {
		t.Fatal(err)
	}
	mustWait(t, "the sale freeing a buyer's place", time.Until(firstCloses), func() bool {
		return s.RDB.ZScore(context.Background(), rdb.KeysOf("presale").Active, buyerID).Err() == redis.Nil
	})
	db := s.DB(context.Background())
	var unrelayed int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&unrelayed); err != nil {
		t.Fatal(err)
	}
	if code, r := call(http.MethodPost, "/api/v1/events/presale/tickets", byRank[2]); code != http.StatusForbidden || r["error"] != "invitation_used" {
		t.Fatalf("a buyer joins again once the sale freed its place (%d bookings not relayed yet): %d %v; want 403 invitation_used (a 201 is a second place for an invitation that bought)",
			unrelayed, code, r)
	}
	t.Logf("a buyer's join refused invitation_used once the sale freed its place, %d bookings not relayed yet", unrelayed)
	// Then the relay's news: every confirmed booking's outbox row
	// published, which the relay marks once it has completed the places
	// and noted the accounts' purchases (again: it changes nothing).
	mustWait(t, "the relay's news of the bookings", time.Until(firstCloses), func() bool {
		var pending int
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&pending)
		return err == nil && pending == 0
	})
	var again map[string]any
	if _, ok := waitFor(time.Until(firstCloses), func() bool {
		code, r := call(http.MethodPost, "/api/v1/events/presale/tickets", byRank[2])
		if code != http.StatusOK && code != http.StatusForbidden {
			t.Fatalf("a buyer joins again after the relay's news: %d %v; want 403 invitation_used (a 201 is a second place for an invitation that bought)", code, r)
		}
		again = r
		return code == http.StatusForbidden && r["error"] == "invitation_used"
	}); !ok {
		t.Fatalf("a buyer's join not refused invitation_used by its window's end (the buyers were done %v into the %v window); its last answer %v",
			boughtBy.Sub(opens).Round(100*time.Millisecond), window, again)
	}
	t.Logf("the first window (%v): the buyers done %v into it, a buyer's join refused invitation_used %v into it",
		window, boughtBy.Sub(opens).Round(100*time.Millisecond), time.Since(opens).Round(100*time.Millisecond))

	// The first window closes: its unused invitations go to the wait list.
	var rep map[string]any
	mustWait(t, "the first window's top-up", time.Until(firstCloses)+time.Minute, func() bool {
		_, rep = call(http.MethodGet, "/api/v1/events/presale/report", "")
		return num(rep["toppedUp"]) > 0
	})
	topped := int(num(rep["toppedUp"]))
	// 89 unused (100 less the browser's fan and the ten buyers); the places
	// left were 300 − 10 sold − the browser's live fan − 100 invitations of
	// the second group out: 189. If a buyer's booking had not reached the
	// line by the close, one invitation fewer was unused.
	if topped > 89 || (boughtBy.Before(firstCloses) && topped != 89) {
		t.Fatalf("topped up %d, want 89 (unused) at most", topped)
	}
	if rep["registrations"] != float64(301) || rep["selected"] != float64(200) || num(rep["invited"]) != float64(200+topped) {
		t.Fatalf("report: %v", rep)
	}
	code, r := call(http.MethodGet, "/api/v1/events/presale/registrations/me", byRank[201])
	if code != 200 || r["status"] != "selected" || r["windowOpensAt"] != opens.Add(window).UTC().Format(time.RFC3339) {
		t.Fatalf("rank 201 after the top-up: %d %v", code, r)
	}
	if code, r := call(http.MethodPost, "/api/v1/events/presale/tickets", byRank[201]); code != http.StatusCreated {
		t.Fatalf("rank 201 (topped up) joins: %d %v", code, r)
	}
	_, rep = call(http.MethodGet, "/api/v1/events/presale/report", "")
	if rep["joined"] != float64(12) || num(rep["admitted"]) < 11 {
		t.Fatalf("report after the top-up's first join: %v", rep)
	}
}

// buy is one buyer of a presale's window, in a goroutine of its own: let in
// (polling as the page does), it holds seat, checks out, pays on the
// provider's page and follows its booking until it is confirmed. It
// returns what went wrong, if anything.
func buy(ctx context.Context, base, event, ticket, seat string, showtime int64) error {
	send := func(method, path, pass string, hdr map[string]string, body any) (int, map[string]any, error) {
		code, raw, _, err := sendAsAFan(ctx, base, method, path, pass, hdr, body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return code, out, err
	}
	wait := func(d time.Duration) error {
		if !pause(ctx, nil, d) {
			return ctx.Err()
		}
		return nil
	}
	var pass string
	for pass == "" {
		code, st, err := send(http.MethodGet, "/api/v1/events/"+event+"/tickets/"+ticket, "", nil, nil)
		switch {
		case err != nil:
			return fmt.Errorf("%s's status: %w", seat, err)
		case code != http.StatusOK:
			return fmt.Errorf("%s's status: %d %v", seat, code, st)
		case st["status"] == "admitted":
			pass, _ = st["accessToken"].(string)
		default:
			if err := wait(200 * time.Millisecond); err != nil {
				return fmt.Errorf("%s never admitted: %w", seat, err)
			}
		}
	}
	code, h, err := send(http.MethodPost, fmt.Sprintf("/api/v1/booking/showtimes/%d/holds", showtime), pass, nil, map[string]any{"seats": []string{seat}})
	holdID, _ := h["holdId"].(string)
	if err != nil || code != http.StatusCreated || holdID == "" {
		return fmt.Errorf("hold %s: %d %v %v", seat, code, h, err)
	}
	code, co, err := send(http.MethodPost, "/api/v1/booking/holds/"+holdID+"/checkout", pass, map[string]string{"Idempotency-Key": "buy-" + holdID}, nil)
	bookingID, _ := co["bookingId"].(string)
	paymentURL, _ := co["paymentUrl"].(string)
	if err != nil || code != http.StatusCreated || bookingID == "" || !strings.HasPrefix(paymentURL, "http") {
		return fmt.Errorf("checkout of %s: %d %v %v", seat, code, co, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, paymentURL, strings.NewReader(url.Values{"action": {"pay"}, "outcome": {"succeed"}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Do(req)
	if err != nil {
		return fmt.Errorf("pay for %s: %w", seat, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("pay for %s: %d; want 303", seat, res.StatusCode)
	}
	for {
		code, b, err := send(http.MethodGet, "/api/v1/booking/bookings/"+bookingID, pass, nil, nil)
		if err == nil && code == http.StatusOK && b["status"] == "CONFIRMED" {
			return nil
		}
		if err := wait(100 * time.Millisecond); err != nil {
			return fmt.Errorf("%s's booking never confirmed (last %d %v): %w", seat, code, b, err)
		}
	}
}

// sendAsAFan is sendJSON as a fan's client sends: a 503 (the gateway could
// not get its answer within its own bounds, as on a loaded machine) is sent
// again after its Retry-After, until ctx ends; again says it was.
func sendAsAFan(ctx context.Context, base, method, path, pass string, hdr map[string]string, body any) (code int, raw []byte, again bool, err error) {
	for {
		code, h, raw, err := sendJSON(ctx, http.DefaultClient, base, method, path, pass, hdr, body)
		if err != nil || code != http.StatusServiceUnavailable || !pause(ctx, h, time.Second) {
			return code, raw, again, err
		}
		again = true
	}
}
