package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/rdb"
)

const presaleYAML = `
auth: {ticket_secret: "gateway-test-secret-0123456789abcdef", draw_secret: "gateway-draw-secret-0123456789abcdef", account_keys_file: %%q, admin_token: "admin-token-0123456789abcdef"}
gateway: {booking_url: "%%s", joins_per_ip_per_minute: 0}
booking: {payment: {secret: "gateway-test-payment-secret-0123456789"}}
events:
  - id: "tour"
    opens_at: %q
    admission: {admit_per_second: 100, max_active: 100}
    presale: {registration_opens_at: %q, registration_closes_at: %q, selected: 2, group_size: 1, window: "1m"}
    showtimes: [{id: 42, title: "T", starts_at: "2026-12-31T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "club"
    admission: {admit_per_second: 100, max_active: 100, codes: "required"}
    showtimes: [{id: 43, title: "U", starts_at: "2026-12-31T19:00:00Z", rows: 2, seats_per_row: 2}]
`

// The presale's routes through the gateway, in the contract's words:
// registration (201 then 200, one id; 401 without an account; withdraw 204
// then 404 not_registered; 409 registration_closed after the close), the
// selection (commitment before, seed and list after), the join's gate (403
// not_invited, 403 window_not_open with the fan's window), the operators'
// codes (bad requests 400 and nothing made) and the join's code (403
// code_required, 403 invalid_code, 201, 409 code_used; header or form
// field), and the report's figures.
func TestPresaleRoutes(t *testing.T) {
	closes := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	opens := closes.Add(time.Hour)
	yaml := fmt.Sprintf(presaleYAML, opens.Format(time.RFC3339), time.Now().Add(-time.Hour).Format(time.RFC3339), closes.Format(time.RFC3339))
	e := setupAccountsWith(t, yaml)
	acct := func(a string) []string { return []string{"X-Waitroom-Account", e.token(a)} }
	reg := "/api/v1/events/tour/registrations"

	if r := e.do(http.MethodPost, reg, nil); r.code != 401 || r.body["error"] != "account_required" {
		t.Fatalf("register without an account: %d %s", r.code, r.raw)
	}
	if r := e.do(http.MethodPost, reg, nil, "X-Waitroom-Account", "forged"); r.code != 401 || r.body["error"] != "invalid_account" {
		t.Fatalf("register with a forged token: %d %s", r.code, r.raw)
	}
	first := e.do(http.MethodPost, reg, nil, acct("alice")...)
	if first.code != 201 || first.body["status"] != "registered" || first.body["registrationId"] == "" {
		t.Fatalf("register: %d %s", first.code, first.raw)
	}
	if r := e.do(http.MethodPost, reg, nil, acct("alice")...); r.code != 200 || r.body["registrationId"] != first.body["registrationId"] {
		t.Fatalf("register again: %d %s, want 200 and %v", r.code, r.raw, first.body["registrationId"])
	}
	if r := e.do(http.MethodGet, reg+"/me", nil, acct("alice")...); r.code != 200 || r.body["status"] != "registered" || r.body["rank"] != nil {
		t.Fatalf("status: %d %s", r.code, r.raw)
	}
	e.do(http.MethodPost, reg, nil, acct("bob")...)
	e.do(http.MethodPost, reg, nil, acct("carol")...)
	e.do(http.MethodPost, reg, nil, acct("dave")...)
	if r := e.do(http.MethodDelete, reg+"/me", nil, acct("dave")...); r.code != 204 {
		t.Fatalf("withdraw: %d %s", r.code, r.raw)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if r := e.do(m, reg+"/me", nil, acct("dave")...); r.code != 404 || r.body["error"] != "not_registered" {
			t.Fatalf("%s after withdrawing: %d %s", m, r.code, r.raw)
		}
	}
	// Three registrations per account, withdrawals included: the fourth
	// is 429 rate_limited, for good (no Retry-After), and makes nothing.
	for range 2 {
		if r := e.do(http.MethodPost, reg, nil, acct("erin")...); r.code != 201 {
			t.Fatalf("erin registers: %d %s", r.code, r.raw)
		}
		e.do(http.MethodDelete, reg+"/me", nil, acct("erin")...)
	}
	if r := e.do(http.MethodPost, reg, nil, acct("erin")...); r.code != 201 {
		t.Fatalf("erin's third registration: %d %s", r.code, r.raw)
	}
	e.do(http.MethodDelete, reg+"/me", nil, acct("erin")...)
	if r := e.do(http.MethodPost, reg, nil, acct("erin")...); r.code != 429 || r.body["error"] != "rate_limited" || r.hdr.Get("Retry-After") != "" {
		t.Fatalf("erin's fourth registration: %d %v %s; want 429 rate_limited without Retry-After", r.code, r.hdr, r.raw)
	}
	if r := e.do(http.MethodGet, reg+"/me", nil, acct("erin")...); r.code != 404 {
		t.Fatalf("erin after the refusal: %d %s; want 404 not_registered", r.code, r.raw)
	}
	// The register page, without JavaScript: its forms, in three languages.
	page := func(a, lang string) string {
		t.Helper()
		r := e.do(http.MethodGet, "/e/tour/register?lang="+lang, nil, "Cookie", "wr_u="+e.token(a)+"; wr_lang="+lang)
		if r.code == http.StatusSeeOther {
			r = e.do(http.MethodGet, "/e/tour/register", nil, "Cookie", "wr_u="+e.token(a)+"; wr_lang="+lang)
		}
		if r.code != 200 || strings.Contains(string(r.raw), "⟦") {
			t.Fatalf("register page (%s, %s): %d %s", a, lang, r.code, r.raw)
		}
		return string(r.raw)
	}
	for lang, word := range map[string]string{"en": "You are not registered.", "ja": "まだ登録していません。", "ko": "아직 등록하지 않았습니다."} {
		if body := page("frank", lang); !strings.Contains(body, word) || !strings.Contains(body, `id="register-submit"`) {
			t.Fatalf("register page for frank in %s lacks %q or the form", lang, word)
		}
	}
	form := func(a, action string) resp {
		return e.do(http.MethodPost, "/e/tour/register", strings.NewReader("action="+action), "Content-Type", "application/x-www-form-urlencoded",
			"Sec-Fetch-Site", "same-origin", "Cookie", "wr_u="+e.token(a))
	}
	if r := form("frank", "register"); r.code != 303 || r.hdr.Get("Location") != "/e/tour/register?n=registered" {
		t.Fatalf("register form: %d %v", r.code, r.hdr)
	}
	if body := page("frank", "en"); !strings.Contains(body, "You are registered.") || !strings.Contains(body, `id="register-withdraw"`) {
		t.Fatalf("register page after registering: %s", body)
	}
	if r := form("frank", "withdraw"); r.code != 303 || r.hdr.Get("Location") != "/e/tour/register?n=withdrawn" {
		t.Fatalf("withdraw form: %d %v", r.code, r.hdr)
	}
	if r := e.do(http.MethodPost, "/e/tour/register", strings.NewReader("action=register"), "Content-Type", "application/x-www-form-urlencoded",
		"Sec-Fetch-Site", "cross-site", "Cookie", "wr_u="+e.token("frank")); r.code != 403 {
		t.Fatalf("another site's register form: %d", r.code)
	}

	sel := e.do(http.MethodGet, "/api/v1/events/tour/selection", nil)
	if sel.code != 200 || sel.body["commitment"] == nil || sel.body["seed"] != nil {
		t.Fatalf("selection before the close: %d %s", sel.code, sel.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/events/tour/selection/entries", nil); r.code != 409 || r.body["error"] != "not_drawn" {
		t.Fatalf("entries before the draw: %d %s", r.code, r.raw)
	}
	if r := e.join("tour"); r.code != 401 || r.body["error"] != "account_required" {
		t.Fatalf("join without an account: %d %s", r.code, r.raw)
	}
	if r := e.join("tour", acct("alice")...); r.code != 403 || r.body["error"] != "not_invited" {
		t.Fatalf("join before the selection: %d %s", r.code, r.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/events/club/selection", nil); r.code != 404 || r.body["error"] != "no_presale" {
		t.Fatalf("selection of a sale without a presale: %d %s", r.code, r.raw)
	}

	// The admitter draws at the close.
	time.Sleep(time.Until(closes) + 10*time.Millisecond)
	ev, _ := e.cfg.Event("tour")
	admitter := presale.New(rdb.New(e.rdb), e.line, []byte(e.cfg.Auth.TicketSecret), "admitter").WithDrawSecret([]byte(e.cfg.Auth.DrawSecret))
	if err := admitter.Step(context.Background(), "tour", policy.PlanFor(*ev)); err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodPost, reg, nil, acct("erin")...); r.code != 409 || r.body["error"] != "registration_closed" {
		t.Fatalf("register after the close: %d %s", r.code, r.raw)
	}
	sel = e.do(http.MethodGet, "/api/v1/events/tour/selection", nil)
	// Every registration made is an entry, the withdrawn ones too (dave's,
	// frank's and erin's three): 8.
	if sel.body["seed"] == nil || sel.body["nonce"] == nil || sel.body["entries"] != float64(8) || sel.body["commitment"] != sel.body["commitment"] {
		t.Fatalf("selection after the draw: %s", sel.raw)
	}
	list := e.do(http.MethodGet, "/api/v1/events/tour/selection/entries", nil)
	if list.code != 200 || strings.Count(string(list.raw), "\n") != 8 || strings.Contains(string(list.raw), "alice") {
		t.Fatalf("entries: %d %q", list.code, list.raw)
	}
	// Anyone checks it as the docs say, the withdrawn entries among them.
	checkDrawAsTheDocsSay(t, e.env, "tour", "selection", strings.Fields(string(list.raw))[0])
	// A published list: immutable, with its ETag (transparency.go).
	if etag := list.hdr.Get("ETag"); etag == "" || list.hdr.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Errorf("the selection's entries: ETag %q, Cache-Control %q; want an ETag, immutable", etag, list.hdr.Get("Cache-Control"))
	} else if r := e.do(http.MethodGet, "/api/v1/events/tour/selection/entries", nil, "If-None-Match", etag); r.code != http.StatusNotModified {
		t.Errorf("the selection's entries with their ETag: %d; want 304", r.code)
	}
	selected, invited := 0, 0 // ranks 1 and 2 are invited; a withdrawn one's is skipped
	for _, a := range []string{"alice", "bob", "carol"} {
		r := e.do(http.MethodGet, reg+"/me", nil, acct(a)...)
		if rank, _ := r.body["rank"].(float64); rank >= 1 && rank <= 2 {
			invited++
		}
		switch r.body["status"] {
		case "selected":
			selected++
			if r.body["windowOpensAt"] == nil || r.body["rank"].(float64) > 2 {
				t.Fatalf("%s selected: %s", a, r.raw)
			}
			if body := page(a, "ja"); !strings.Contains(body, "当選しました") || !strings.Contains(body, `id="register-countdown"`) {
				t.Fatalf("%s's register page (selected): %s", a, body)
			}
			j := e.join("tour", acct(a)...)
			if j.code != 403 || j.body["error"] != "window_not_open" || j.body["windowOpensAt"] != r.body["windowOpensAt"] {
				t.Fatalf("%s joins before its window: %d %s (its window %v)", a, j.code, j.raw, r.body["windowOpensAt"])
			}
		case "waitlisted":
			if body := page(a, "ko"); !strings.Contains(body, "대기자 명단") {
				t.Fatalf("%s's register page (waitlisted): %s", a, body)
			}
			if j := e.join("tour", acct(a)...); j.code != 403 || j.body["error"] != "not_invited" {
				t.Fatalf("%s (waitlisted) joins: %d %s", a, j.code, j.raw)
			}
		default:
			t.Fatalf("%s: %s", a, r.raw)
		}
	}
	if selected != invited {
		t.Fatalf("%d selected, want %d (alice, bob and carol at ranks 1 and 2)", selected, invited)
	}

	// The operators' previews of the presale's pages, inert.
	admin := []string{"Authorization", "Bearer admin-token-0123456789abcdef"}
	for _, pv := range []struct{ state, lang, want string }{
		{"registration", "ko", `id="register-submit"`}, {"selected", "ja", "当選しました"},
		{"waitlisted", "en", "You are on the wait list."}, {"not_invited", "en", "This presale is for invited fans"},
	} {
		r := e.do(http.MethodGet, "/api/v1/admin/events/tour/preview?state="+pv.state+"&lang="+pv.lang, nil, admin...)
		if r.code != 200 || !strings.Contains(string(r.raw), pv.want) || strings.Contains(string(r.raw), "<script") || strings.Contains(string(r.raw), "⟦") {
			t.Fatalf("preview %s/%s: %d %s", pv.state, pv.lang, r.code, r.raw)
		}
	}

	// Access codes.
	codes := "/api/v1/admin/events/club/codes"
	if r := e.do(http.MethodPost, codes, strings.NewReader(`{"count":1}`)); r.code != 401 {
		t.Fatalf("codes without the admin token: %d", r.code)
	}
	for _, bad := range []string{`{}`, `{"count":0}`, `{"count":1,"codes":["A"]}`, `{"count":10001}`, `{"codes":["ok","no!"]}`,
		`{"codes":[""]}`, `{"count":1,"uses":0}`, `{"count":1,"bogus":1}`, `[1]`, `{"codes":["` + strings.Repeat("A", 65) + `"]}`} {
		if r := e.do(http.MethodPost, codes, strings.NewReader(bad), admin...); r.code != 400 || r.body["error"] != "invalid_request" {
			t.Fatalf("codes %s: %d %s", bad, r.code, r.raw)
		}
	}
	made := e.do(http.MethodPost, codes, strings.NewReader(`{"count":2,"uses":1}`), admin...)
	if made.code != 201 || len(made.body["codes"].([]any)) != 2 {
		t.Fatalf("codes: %d %s", made.code, made.raw)
	}
	if r := e.do(http.MethodPost, codes, strings.NewReader(`{"codes":["FANCLUB-2026"],"uses":5}`), admin...); r.code != 201 {
		t.Fatalf("given codes: %d %s", r.code, r.raw)
	}
	if r := e.do(http.MethodGet, codes, nil, admin...); r.code != 200 || r.body["codes"] != float64(3) || r.body["uses"] != float64(7) || r.body["used"] != float64(0) {
		t.Fatalf("code counts: %s", r.raw)
	}
	code := made.body["codes"].([]any)[0].(string)
	if r := e.join("club"); r.code != 403 || r.body["error"] != "code_required" {
		t.Fatalf("join without a code: %d %s", r.code, r.raw)
	}
	if r := e.join("club", "X-Waitroom-Code", "WRONG-CODE"); r.code != 403 || r.body["error"] != "invalid_code" {
		t.Fatalf("join with a wrong code: %d %s", r.code, r.raw)
	}
	if r := e.join("club", "X-Waitroom-Code", strings.ToLower(code)); r.code != 201 {
		t.Fatalf("join with a code: %d %s", r.code, r.raw)
	}
	if r := e.join("club", "X-Waitroom-Code", code); r.code != 409 || r.body["error"] != "code_used" {
		t.Fatalf("join with the used code: %d %s", r.code, r.raw)
	}
	codeForm := url.Values{"code": {"fanclub 2026"}}.Encode()
	if r := e.do(http.MethodPost, "/api/v1/events/club/tickets", strings.NewReader(codeForm), "Content-Type", "application/x-www-form-urlencoded"); r.code != 201 {
		t.Fatalf("join with the code as a form field: %d %s", r.code, r.raw)
	}
	rep := e.do(http.MethodGet, "/api/v1/events/club/report", nil)
	if rep.body["codesUsed"] != float64(2) {
		t.Fatalf("club's report: %s", rep.raw)
	}
	rep = e.do(http.MethodGet, "/api/v1/events/tour/report", nil)
	if rep.body["registrations"] != float64(3) || rep.body["selected"] != float64(2) || rep.body["invited"] != float64(2) || rep.body["toppedUp"] != float64(0) {
		t.Fatalf("tour's report: %s", rep.raw)
	}
}
