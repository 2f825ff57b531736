package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
)

// cookieOf reads a Set-Cookie's value ("" when the answer sets none).
func cookieOf(r resp, name string) string {
	for _, c := range (&http.Response{Header: r.hdr}).Cookies() {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

func TestPagesSpeakTheFansLanguage(t *testing.T) {
	e := setup(t, 0)
	tests := []struct {
		name     string
		hdr      []string
		wantLang string
		wantWord string
	}{
		{"default", nil, "en", "Tickets on sale"},
		{"Accept-Language ja", []string{"Accept-Language", "ja-JP,ja;q=0.9,en;q=0.5"}, "ja", "販売中のチケット"},
		{"Accept-Language ko", []string{"Accept-Language", "ko-KR"}, "ko", "판매 중인 티켓"},
		{"the cookie wins", []string{"Accept-Language", "ja", "Cookie", "wr_lang=ko"}, "ko", "판매 중인 티켓"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(http.MethodGet, "/", nil, tt.hdr...)
			if r.code != 200 || !strings.Contains(string(r.raw), `<html lang="`+tt.wantLang+`">`) || !strings.Contains(string(r.raw), tt.wantWord) {
				t.Fatalf("GET /: %d, want <html lang=%q> with %q:\n%.400s", r.code, tt.wantLang, tt.wantWord, r.raw)
			}
		})
	}
	// ?lang= switches, keeps the choice in wr_lang and drops itself from the URL.
	r := e.do(http.MethodGet, "/e/premiere?lang=ja&from=3", nil)
	if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/e/premiere?from=3" || cookieOf(r, "wr_lang") != "ja" {
		t.Fatalf("switch: %d Location %q wr_lang %q; want 303 /e/premiere?from=3 and ja", r.code, r.hdr.Get("Location"), cookieOf(r, "wr_lang"))
	}
}

func TestIndexIsRenderedByTheServer(t *testing.T) {
	e := setup(t, 0)
	e.join("premiere")
	r := e.do(http.MethodGet, "/", nil)
	body := string(r.raw)
	for _, want := range []string{`data-event="premiere"`, "1 person waiting", "Tue, Dec 1, 2026, 19:00", `data-event="shut"`, "This sale has ended."} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	if strings.Contains(body, "Loading events") {
		t.Error("the list still waits for a script")
	}
}

// TestRoomWithoutJavaScript: join by form post, see the place in the HTML
// with a refresh, be told it is your turn, leave after being asked.
func TestRoomWithoutJavaScript(t *testing.T) {
	e := setup(t, 0)
	// Another site's form post is refused.
	if r := e.do(http.MethodPost, "/e/premiere/join", nil, "Sec-Fetch-Site", "cross-site"); r.code != http.StatusForbidden {
		t.Fatalf("cross-site join: %d; want 403", r.code)
	}
	r := e.do(http.MethodPost, "/e/premiere/join", nil, "Sec-Fetch-Site", "same-origin", "Origin", "http://example.com")
	if r.code != http.StatusSeeOther || !strings.HasPrefix(r.hdr.Get("Location"), "/e/premiere?from=") {
		t.Fatalf("join form: %d Location %q; want 303 to the room", r.code, r.hdr.Get("Location"))
	}
	ticket := cookieOf(r, "wr_t_premiere")
	if ticket == "" {
		t.Fatal("join form set no ticket cookie")
	}
	cookie := "wr_t_premiere=" + ticket
	room := e.do(http.MethodGet, r.hdr.Get("Location"), nil, "Cookie", cookie)
	body := string(room.raw)
	for _, want := range []string{`data-status="next"`, `<dd id="position">1</dd>`, `http-equiv="refresh" content="`, `?t=` + url.QueryEscape(ticket), `/e/premiere/qr.svg`} {
		if !strings.Contains(body, want) {
			t.Errorf("the room lacks %q", want)
		}
	}
	qr := e.do(http.MethodGet, "/e/premiere/qr.svg", nil, "Cookie", cookie)
	if qr.code != 200 || qr.hdr.Get("Content-Type") != "image/svg+xml" || !strings.Contains(string(qr.raw), "<path") {
		t.Errorf("qr: %d %q", qr.code, qr.hdr.Get("Content-Type"))
	}
	if r := e.do(http.MethodGet, "/e/premiere/qr.svg", nil); r.code != 404 {
		t.Errorf("qr without a ticket: %d; want 404", r.code)
	}

	// Admitted: the page says so, without figures, and hands out the pass.
	set := line.Settings{Mode: "queue", AdmitPerSecond: 1000, MaxActive: 1000, AccessTTL: 10 * time.Minute, AbandonAfter: time.Minute}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := e.line.Tick(context.Background(), "premiere", set); err != nil {
			t.Fatal(err)
		}
		if room = e.do(http.MethodGet, "/e/premiere", nil, "Cookie", cookie); strings.Contains(string(room.raw), `data-status="admitted"`) {
			break
		}
	}
	if body := string(room.raw); !strings.Contains(body, `data-status="admitted"`) || strings.Contains(body, "http-equiv") || cookieOf(room, "wr_a_premiere") == "" {
		t.Errorf("admitted room: status admitted %v, refresh %v, pass cookie %q", strings.Contains(body, `data-status="admitted"`), strings.Contains(body, "http-equiv"), cookieOf(room, "wr_a_premiere"))
	}

	// Leaving asks first, then takes the place away.
	if r := e.do(http.MethodGet, "/e/premiere/leave", nil, "Cookie", cookie); r.code != 200 || !strings.Contains(string(r.raw), "You will lose your place.") {
		t.Errorf("leave page: %d", r.code)
	}
	r = e.do(http.MethodPost, "/e/premiere/leave", nil, "Cookie", cookie, "Sec-Fetch-Site", "same-origin")
	if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/e/premiere?left=1" {
		t.Fatalf("leave form: %d %q", r.code, r.hdr.Get("Location"))
	}
	if st := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, nil); st.code != http.StatusGone {
		t.Errorf("status after leaving: %d; want 410", st.code)
	}
	if left := string(e.do(http.MethodGet, "/e/premiere?left=1", nil).raw); !strings.Contains(left, `data-status="left"`) || strings.Contains(left, "You keep your place") {
		t.Error("the page after leaving does not say the place is gone")
	}
}

// TestTakeover: /e/{event}?t=<ticket> on another device sets that ticket's
// cookie, so the same place goes on there.
func TestTakeover(t *testing.T) {
	e := setup(t, 0)
	j := e.join("premiere")
	ticket := j.body["ticket"].(string)
	r := e.do(http.MethodGet, "/e/premiere?t="+url.QueryEscape(ticket)+"&from=7", nil)
	if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/e/premiere?moved=1&from=7" || cookieOf(r, "wr_t_premiere") != ticket {
		t.Fatalf("takeover: %d Location %q cookie set %v", r.code, r.hdr.Get("Location"), cookieOf(r, "wr_t_premiere") == ticket)
	}
	again := e.join("premiere", "Cookie", "wr_t_premiere="+ticket)
	if again.code != http.StatusOK || again.body["ticket"] != ticket {
		t.Fatalf("join on the second device: %d, same ticket %v; want 200 with the same place", again.code, again.body["ticket"] == ticket)
	}
	if r := e.do(http.MethodGet, "/e/premiere?t=forged", nil); r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/e/premiere?e=invalid_link" || cookieOf(r, "wr_t_premiere") != "" {
		t.Errorf("forged takeover: %d %q", r.code, r.hdr.Get("Location"))
	}
}

func TestUnknownEventPage(t *testing.T) {
	e := setup(t, 0)
	r := e.do(http.MethodGet, "/e/nope", nil, "Accept-Language", "ko")
	if r.code != 404 || !strings.Contains(string(r.raw), "이벤트를 찾을 수 없습니다") {
		t.Errorf("unknown event page: %d %.200s", r.code, r.raw)
	}
}

// Pages that carry a ticket are never stored: the waiting room, booking
// and report pages, and every answer with a ticket or a pass in it (its
// body or its Set-Cookie), whatever the fan's state.
func TestTicketsAreNeverStored(t *testing.T) {
	e := setup(t, 0)
	joined := e.join("premiere")
	if joined.code != http.StatusCreated {
		t.Fatalf("join: %d %s", joined.code, joined.raw)
	}
	waiting := "wr_t_premiere=" + joined.body["ticket"].(string)
	ticket, token := e.admit("premiere")
	admitted := "wr_t_premiere=" + ticket
	passCookie := "wr_a_premiere=" + token
	jf := e.do(http.MethodPost, "/e/premiere/join", nil, "Sec-Fetch-Site", "same-origin")
	if cookieOf(jf, "wr_t_premiere") == "" {
		t.Fatalf("join form: %d, no ticket cookie", jf.code)
	}
	tests := []struct {
		name, method, path string
		hdr                []string
		code               int
	}{
		{"join", http.MethodPost, "/api/v1/events/premiere/tickets", nil, http.StatusCreated},
		{"join resumed", http.MethodPost, "/api/v1/events/premiere/tickets", []string{"Cookie", waiting}, http.StatusOK},
		{"status waiting", http.MethodGet, "/api/v1/events/premiere/tickets/" + joined.body["ticket"].(string), nil, http.StatusOK},
		{"status admitted", http.MethodGet, "/api/v1/events/premiere/tickets/" + ticket, nil, http.StatusOK},
		{"join form", http.MethodPost, "/e/premiere/join", []string{"Sec-Fetch-Site", "same-origin"}, http.StatusSeeOther},
		{"waiting room, no ticket", http.MethodGet, "/e/premiere", nil, http.StatusOK},
		{"waiting room, waiting", http.MethodGet, "/e/premiere", []string{"Cookie", waiting}, http.StatusOK},
		{"waiting room, admitted", http.MethodGet, "/e/premiere", []string{"Cookie", admitted}, http.StatusOK},
		{"place taken over by link", http.MethodGet, "/e/premiere?t=" + url.QueryEscape(ticket), nil, http.StatusSeeOther},
		{"QR code", http.MethodGet, "/e/premiere/qr.svg", []string{"Cookie", waiting}, http.StatusOK},
		{"booking page", http.MethodGet, "/e/premiere/book", []string{"Cookie", admitted + "; " + passCookie}, http.StatusOK},
		{"booking page, no pass", http.MethodGet, "/e/premiere/book", nil, http.StatusOK},
		{"leave page", http.MethodGet, "/e/premiere/leave", []string{"Cookie", waiting}, http.StatusOK},
		{"report page", http.MethodGet, "/e/premiere/report", []string{"Cookie", admitted}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, nil, tt.hdr...)
			if r.code != tt.code {
				t.Fatalf("%s %s: %d %.300s; want %d", tt.method, tt.path, r.code, r.raw, tt.code)
			}
			if got := r.hdr.Values("Cache-Control"); len(got) != 1 || got[0] != "no-store" {
				t.Errorf("%s %s: Cache-Control %q; want no-store", tt.method, tt.path, got)
			}
		})
	}
}

// fromAnotherSite are the headers of a link followed from another site's
// page: fetch metadata saying so, or, from a browser without it, an Origin
// or a Referer of another host. The pages that change a fan's place ask
// first then.
var fromAnotherSite = []siteHeaders{
	{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}},
	{"Origin of another host", []string{"Origin", "https://evil.example"}},
	{"Referer of another host", []string{"Referer", "https://evil.example/free-tickets"}},
}

// siteHeaders are a request's headers (name, value, …) that say where it
// comes from.
type siteHeaders struct {
	name string
	hdr  []string
}

// A place moves only with its fan's consent: /e/{event}?t=<ticket> from
// another site, while the browser holds a live ticket of the event,
// replaces nothing and asks, in the fan's language, whether to replace
// place N with place M; the answer is a same-site form post. Same-site, or
// with no live ticket to lose, the link moves the place at once.
func TestPlaceMovesOnlyWithConsent(t *testing.T) {
	e := setup(t, 0)
	ticketOf := func() string {
		t.Helper()
		r := e.join("premiere")
		if r.code != http.StatusCreated {
			t.Fatalf("join: %d %s", r.code, r.raw)
		}
		return r.body["ticket"].(string)
	}
	ticketOf()
	theirs := ticketOf() // place 2: the link's
	ticketOf()
	mine := ticketOf() // place 4: the fan's, in its cookie
	link := "/e/premiere?t=" + url.QueryEscape(theirs) + "&from=2"
	cookie := "wr_t_premiere=" + mine

	t.Run("from another site, the fan is asked", func(t *testing.T) {
		for _, tt := range append(slices.Clone(fromAnotherSite),
			siteHeaders{"Sec-Fetch-Site same-site (a sibling host)", []string{"Sec-Fetch-Site", "same-site"}},
			siteHeaders{"Referer of another host, fetch metadata says none", []string{"Sec-Fetch-Site", "none", "Referer", "http://evil.example/"}},
			siteHeaders{"cross-site, Referer ours", []string{"Sec-Fetch-Site", "cross-site", "Referer", "http://example.com/e/premiere"}},
		) {
			t.Run(tt.name, func(t *testing.T) {
				r := e.do(http.MethodGet, link, nil, append([]string{"Cookie", cookie}, tt.hdr...)...)
				body := string(r.raw)
				if r.code != http.StatusOK || !strings.Contains(body, "Replace your place 4 with place 2?") {
					t.Fatalf("cross-site link: %d; want 200 asking to replace place 4 with place 2:\n%.800s", r.code, body)
				}
				if c := cookieOf(r, "wr_t_premiere"); c != "" {
					t.Fatalf("the link set the ticket cookie to %q while asking", c)
				}
				for _, want := range []string{`<form method="post" action="/e/premiere/move"`, `name="t" value="` + theirs + `"`, `name="from" value="2"`, `id="move-yes"`, `id="move-no"`} {
					if !strings.Contains(body, want) {
						t.Errorf("the question lacks %s", want)
					}
				}
				if strings.Contains(body, "room.js") {
					t.Error("the question loads room.js, which would drop the fan's stored ticket")
				}
				if got := r.hdr.Get("Cache-Control"); got != "no-store" {
					t.Errorf("Cache-Control %q; want no-store (the page carries a ticket)", got)
				}
			})
		}
		for _, tt := range []struct{ lang, want string }{
			{"ja", "今の順番（4番目）を、このリンクの順番（2番目）に置き換えますか？"},
			{"ko", "지금 순번(4번째)을 이 링크의 순번(2번째)으로 바꿀까요?"},
		} {
			r := e.do(http.MethodGet, link, nil, "Cookie", cookie, "Sec-Fetch-Site", "cross-site", "Accept-Language", tt.lang)
			if r.code != http.StatusOK || !strings.Contains(string(r.raw), `<html lang="`+tt.lang+`">`) || !strings.Contains(string(r.raw), tt.want) {
				t.Errorf("the question in %s: %d; want %q:\n%.800s", tt.lang, r.code, tt.want, r.raw)
			}
		}
		// Nothing changed: the fan's place is where it was.
		room := e.do(http.MethodGet, "/e/premiere", nil, "Cookie", cookie)
		if !strings.Contains(string(room.raw), `<dd id="position">4</dd>`) {
			t.Errorf("after the question the fan's room shows no place 4:\n%.600s", room.raw)
		}
	})

	t.Run("the answer is a same-site form post", func(t *testing.T) {
		post := func(hdr ...string) resp {
			req := httptest.NewRequest(http.MethodPost, "/e/premiere/move", strings.NewReader("t="+url.QueryEscape(theirs)+"&from=2"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Cookie", cookie)
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			res, err := e.srv.App().Test(req, 5000)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			return resp{code: res.StatusCode, hdr: res.Header, raw: raw}
		}
		if r := post("Sec-Fetch-Site", "cross-site"); r.code != http.StatusForbidden || cookieOf(r, "wr_t_premiere") != "" {
			t.Fatalf("cross-site post: %d, cookie %q; want 403 and nothing set", r.code, cookieOf(r, "wr_t_premiere"))
		}
		if r := post("Sec-Fetch-Site", "same-origin", "Origin", "https://evil.example"); r.code != http.StatusForbidden {
			t.Fatalf("post with another site's Origin: %d; want 403", r.code)
		}
		r := post("Sec-Fetch-Site", "same-origin", "Origin", "http://example.com")
		if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/e/premiere?moved=1&from=2" || cookieOf(r, "wr_t_premiere") != theirs {
			t.Fatalf("same-site post: %d Location %q, cookie is the link's %v; want 303 to ?moved=1&from=2 with the link's ticket",
				r.code, r.hdr.Get("Location"), cookieOf(r, "wr_t_premiere") == theirs)
		}
		if got := r.hdr.Get("Cache-Control"); got != "no-store" {
			t.Errorf("Cache-Control %q; want no-store", got)
		}
	})

	t.Run("same-site, or nothing to lose, it moves at once", func(t *testing.T) {
		gone := ticketOf()
		if l := e.do(http.MethodDelete, "/api/v1/events/premiere/tickets/"+gone, nil); l.code != http.StatusNoContent {
			t.Fatalf("leave: %d", l.code)
		}
		for _, tt := range []struct {
			name string
			hdr  []string
		}{
			{"same-origin, live ticket", []string{"Cookie", cookie, "Sec-Fetch-Site", "same-origin", "Referer", "http://example.com/e/premiere"}},
			{"typed or scanned, live ticket", []string{"Cookie", cookie, "Sec-Fetch-Site", "none"}},
			{"no fetch metadata, live ticket", []string{"Cookie", cookie}},
			{"cross-site, no ticket", []string{"Sec-Fetch-Site", "cross-site", "Referer", "https://mail.example/"}},
			{"cross-site, a ticket that ended", []string{"Cookie", "wr_t_premiere=" + gone, "Sec-Fetch-Site", "cross-site"}},
			{"cross-site, a forged ticket", []string{"Cookie", "wr_t_premiere=forged", "Sec-Fetch-Site", "cross-site"}},
			{"cross-site, the link's own ticket", []string{"Cookie", "wr_t_premiere=" + theirs, "Sec-Fetch-Site", "cross-site"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				r := e.do(http.MethodGet, link, nil, tt.hdr...)
				if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/e/premiere?moved=1&from=2" || cookieOf(r, "wr_t_premiere") != theirs {
					t.Fatalf("%d Location %q, cookie is the link's %v; want 303 to ?moved=1&from=2 with the link's ticket",
						r.code, r.hdr.Get("Location"), cookieOf(r, "wr_t_premiere") == theirs)
				}
			})
		}
	})

	// The page after a move tells room.js to drop the ticket it kept only
	// when the move was the gateway's own redirect from this site: a link
	// to ?moved=1 from elsewhere makes it drop nothing.
	t.Run("room.js drops its stored ticket only after a move of this site", func(t *testing.T) {
		moved := "/e/premiere?moved=1&from=2"
		if r := e.do(http.MethodGet, moved, nil, "Cookie", "wr_t_premiere="+theirs, "Sec-Fetch-Site", "same-origin"); !strings.Contains(string(r.raw), `data-moved="true"`) {
			t.Errorf("same-site ?moved=1: no data-moved; want room.js told to follow the moved ticket")
		}
		for _, hdr := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Referer", "https://evil.example/"}} {
			if r := e.do(http.MethodGet, moved, nil, append([]string{"Cookie", cookie}, hdr...)...); r.code != http.StatusOK || strings.Contains(string(r.raw), `data-moved`) {
				t.Errorf("?moved=1 from another site (%v): %d, data-moved %v; want 200 and none", hdr, r.code, strings.Contains(string(r.raw), `data-moved`))
			}
		}
	})
}
