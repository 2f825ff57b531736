package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/gateway/web"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// shopEvent is an event in the demo shop's own look (its page folder,
// configs/pages/shop, as make run's "drop" has it), added to the browser
// scenarios' stack. It starts paused: the test sets it moving once the
// fan's page shows its place.
const shopEvent = `  - id: "shop"
    name: "Sneaker drop"
    mode: "paused" # the shop's
    admission: {admit_per_second: 1, max_active: 50, abandon_after: "10m"}
    page: {dir: %q}
    showtimes:
      - {id: 56, title: "Drop 10:00", starts_at: "2036-12-08T10:00:00+09:00", rows: 5, seats_per_row: 10, price_cents: 9000}
`

// shopEvents is shopEvent with the demo's page folder.
func shopEvents(t *testing.T) string {
	return fmt.Sprintf(shopEvent, filepath.Join(testenv.Repo(t), "configs", "pages", "shop"))
}

// joinShop puts n fans in the shop's line through the API.
func joinShop(t *testing.T, s *stack.Stack, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		res, err := http.Post(s.Gateway+"/api/v1/events/shop/tickets", "application/json", nil)
		if err != nil || res.StatusCode != http.StatusCreated {
			t.Fatalf("join the shop's line: %v %v", err, res)
		}
		res.Body.Close()
	}
}

// wearsTheShopsLook fails the test unless the page is the demo shop's:
// its header in its colour (its stylesheet, from its assets, applied
// under the CSP), its logo loaded, its words (lang's), and the room's
// live region in it.
func wearsTheShopsLook(t *testing.T, ctx context.Context, lang, what string) {
	t.Helper()
	var got struct {
		Header  string `json:"header"`
		Logo    bool   `json:"logo"`
		Tagline string `json:"tagline"`
		Live    bool   `json:"live"`
	}
	run(t, ctx, 5*time.Second, "read the look of "+what, chromedp.Evaluate(`(() => {
		const h = document.querySelector('header.shop-header');
		const logo = document.querySelector('.shop-brand img');
		return {
			header: h ? getComputedStyle(h).backgroundColor : '',
			logo: !!logo && logo.complete && logo.naturalWidth > 0,
			tagline: (document.querySelector('.shop-tagline') || {}).textContent || '',
			live: !!document.querySelector('main#main #live'),
		};
	})()`, &got))
	look, err := web.LoadLook(filepath.Join(testenv.Repo(t), "configs", "pages", "shop"))
	if err != nil {
		t.Fatal(err)
	}
	want := look.Locale(lang).T("shop.tagline")
	if got.Header != "rgb(27, 94, 32)" || !got.Logo || strings.TrimSpace(got.Tagline) != want || !got.Live {
		t.Errorf("%s: header %q, logo loaded %v, tagline %q, live region %v; want the shop's green, its logo, %q, and the room's live region",
			what, got.Header, got.Logo, got.Tagline, got.Live, want)
	}
	wordsOK(t, ctx, lang, what)
}

// positionsWhile reads the fan's place as the page shows it, by polling
// the DOM (which works with JavaScript off and across the page's own
// reloads), until done is true; it returns the places seen, in order.
func positionsWhile(t *testing.T, ctx context.Context, timeout time.Duration, what, done string) []int {
	t.Helper()
	var seen []int
	deadline := time.Now().Add(timeout)
	for {
		var got struct {
			Done bool   `json:"done"`
			Pos  string `json:"pos"`
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := chromedp.Run(c, chromedp.Evaluate(`({done: !!(`+done+`), pos: (document.querySelector('#status') && /waiting|next/.test(document.querySelector('#status').dataset.status) && document.querySelector('#position')) ? document.querySelector('#position').textContent.trim() : ''})`, &got))
		cancel()
		if err == nil {
			if n, err := strconv.Atoi(strings.ReplaceAll(got.Pos, ",", "")); err == nil && n > 0 && (len(seen) == 0 || seen[len(seen)-1] != n) {
				seen = append(seen, n)
			}
			if got.Done {
				return seen
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %v (%v); places seen %v", what, timeout, err, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fell reports whether places shows the fan's place falling.
func fell(places []int) bool {
	for i := 1; i < len(places); i++ {
		if places[i] < places[0] {
			return true
		}
	}
	return false
}

// theShopsOwnLook is the demo's custom page in a phone's Chromium, on the
// browser scenarios' stack: a fan waits in the shop's look (its words laid
// over the room's by the script too), sees its place fall, is let in and
// moves on to the seat map; then a fan without JavaScript does the same by
// the page's own refresh. axe finds nothing on any of its pages (but the
// refresh the contract asks of the page without JavaScript: see the
// "without JavaScript" scenario).
func theShopsOwnLook(t *testing.T, s *stack.Stack, shots *shooter) {
	// With JavaScript: fans ahead while the line is paused, so that the
	// place has somewhere to fall however long the page takes.
	joinShop(t, s, 6)
	fan := fanTab(t)
	run(t, fan, 30*time.Second, "open the shop's waiting room", phone(), chromedp.Navigate(s.Gateway+"/e/shop"))
	// "Updated …" is the script's (the server writes "This page updates
	// itself…"): the script drew the paused line's place.
	waitEval(t, fan, 30*time.Second, "waiting in the shop's look", `document.querySelector('#status') && document.querySelector('#status').dataset.status === 'waiting' && document.querySelector('#position').textContent.trim() === '7' && /^Updated/.test(document.querySelector('#updated').textContent)`)
	wearsTheShopsLook(t, fan, "en", "the shop's waiting room")
	// It wrote the status in the shop's words, not the room's.
	if st := text(t, fan, "#status"); st != "You're in the queue for the drop" {
		t.Errorf("the script's status %q; want the shop's words", st)
	}
	fitsScreen(t, fan, "the shop's waiting room on a phone")
	checkA11yAll(t, fan, "the shop's waiting room")
	shots.shot(fan, "shop-waiting")
	run(t, fan, 5*time.Second, "watch the place", chromedp.Evaluate(`(() => {
		const el = document.querySelector('#position');
		const seen = () => {
			const list = JSON.parse(sessionStorage.getItem('e2e-positions') || '[]');
			list.push(Number(el.textContent.trim().replace(/,/g, '')));
			sessionStorage.setItem('e2e-positions', JSON.stringify(list));
		};
		seen();
		new MutationObserver(seen).observe(el, {childList: true, characterData: true, subtree: true});
		return true;
	})()`, nil))
	// The line moves now, two a second.
	s.EditConfig(t, func(c string) string {
		c = strings.Replace(c, `mode: "paused" # the shop's`, `mode: "queue" # the shop's`, 1)
		return strings.Replace(c, `admit_per_second: 1, max_active: 50`, `admit_per_second: 2, max_active: 50`, 1)
	})
	waitEval(t, fan, 60*time.Second, "let in and moved on to the seat map", `location.pathname === '/e/shop/book' && document.readyState === 'complete' && document.querySelector('[data-seat="A1"]') !== null`)
	var seenJSON string
	run(t, fan, 5*time.Second, "read the places seen", chromedp.Evaluate(`sessionStorage.getItem('e2e-positions') || '[]'`, &seenJSON))
	var seen []int
	_ = json.Unmarshal([]byte(seenJSON), &seen)
	if !fell(seen) {
		t.Errorf("places shown while waiting: %v; want one below 7 before the turn", seen)
	}
	t.Logf("places shown with JavaScript: %v", seen)
	if errs := consoleOf(fan).list(); len(errs) > 0 {
		t.Errorf("the shop's pages reported errors (a CSP violation among them?): %q", errs)
	}

	// Without JavaScript, in Japanese, another fan in the same browser (its
	// cookies and storage gone): joined by the shop's form, the page
	// refreshing itself as the line moves (fifteen ahead, two a second:
	// time for axe and for a few refreshes).
	nojs := fan
	run(t, nojs, 10*time.Second, "another fan", chromedp.Evaluate(`localStorage.clear(), sessionStorage.clear()`, nil), network.ClearBrowserCookies())
	run(t, nojs, 20*time.Second, "the shop without JavaScript", emulation.SetScriptExecutionDisabled(true),
		chromedp.Navigate(s.Gateway+"/e/shop?lang=ja"),
		chromedp.WaitVisible(`form[action="/e/shop/join"] button`, chromedp.ByQuery),
	)
	wearsTheShopsLook(t, nojs, "ja", "the shop without JavaScript, before joining")
	checkA11yAllNoJS(t, nojs, "the shop without JavaScript, before joining")
	joinShop(t, s, 15)
	run(t, nojs, 20*time.Second, "join by the shop's form", chromedp.Click(`form[action="/e/shop/join"] button`, chromedp.ByQuery))
	places := positionsWhile(t, nojs, 20*time.Second, "in the shop's line without JavaScript", `document.querySelector('meta[http-equiv="refresh"]') !== null`)
	wearsTheShopsLook(t, nojs, "ja", "the shop's line without JavaScript")
	// The refresh the contract asks of this page is what axe's meta-refresh
	// rule refuses (see TestBrowserFanPages, "without JavaScript"): the
	// rest of it, checked in full.
	checkA11yAllNoJS(t, nojs, "the shop's line without JavaScript", "meta-refresh")
	shots.shot(nojs, "shop-nojs-waiting")
	for _, p := range positionsWhile(t, nojs, 90*time.Second, "the fan's turn without JavaScript", `document.querySelector('#status') && document.querySelector('#status').dataset.status === 'admitted'`) {
		if p != places[len(places)-1] {
			places = append(places, p)
		}
	}
	if !fell(places) {
		t.Errorf("places shown without JavaScript: %v; want the place falling before the turn", places)
	}
	t.Logf("places shown without JavaScript: %v", places)
	run(t, nojs, 10*time.Second, "the turn", chromedp.WaitVisible(`#to-booking`, chromedp.ByQuery))
	wearsTheShopsLook(t, nojs, "ja", "the shop's turn without JavaScript")
	checkA11yAllNoJS(t, nojs, "the shop's turn without JavaScript")
	shots.shot(nojs, "shop-nojs-turn")
	run(t, nojs, 20*time.Second, "on to the seat map", chromedp.Click(`#to-booking`, chromedp.ByQuery))
	waitEval(t, nojs, 20*time.Second, "at the booking page", `location.pathname === '/e/shop/book'`)
}
