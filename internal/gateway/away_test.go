package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/rdb"
)

func (e *accountEnv) tokenWithEmail(acct, email string) string {
	e.t.Helper()
	tok, err := account.MintWithEmail(e.site, acct, "", email, time.Now(), 10*time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// Stepping away: only with a token the origin site signed that carries an
// email, for the place of that very account. Every refusal answers the
// contract's code and changes nothing in Redis (no note, the place not
// kept); the one that succeeds is 202, no-store, and names the address.
func TestStepAwayRoute(t *testing.T) {
	e := setupAccountsWith(t, accountsYAML+`notify: {smtp_url: "smtp://127.0.0.1:2525"}`+"\n")
	alice := e.tokenWithEmail("alice", "alice@example.test")
	r := e.join("premiere", "X-Waitroom-Account", alice)
	if r.code != http.StatusCreated {
		t.Fatalf("join: %d %s", r.code, r.raw)
	}
	ticket := r.body["ticket"].(string)
	anon := e.join("premiere").body["ticket"].(string)
	away := func(ticket string, hdr ...string) resp {
		return e.do(http.MethodPost, "/api/v1/events/premiere/tickets/"+ticket+"/away", nil, hdr...)
	}
	for _, c := range []struct {
		name   string
		ticket string
		hdr    []string
		code   int
		err    string
	}{
		{"no account token", ticket, nil, 403, "no_email"},
		{"a token without email", ticket, []string{"X-Waitroom-Account", e.token("alice")}, 403, "no_email"},
		{"a token whose email is no address", ticket, []string{"X-Waitroom-Account", e.tokenWithEmail("alice", "Alice <alice@example.test>")}, 403, "no_email"},
		{"a token whose email smuggles a header", ticket, []string{"X-Waitroom-Account", e.tokenWithEmail("alice", "a@example.test\r\nBcc: x@example.test")}, 403, "no_email"},
		{"a token not signed by the origin site", ticket, []string{"X-Waitroom-Account", "not-a-token"}, 401, "invalid_account"},
		{"another account's token", ticket, []string{"X-Waitroom-Account", e.tokenWithEmail("mallory", "mallory@example.test")}, 403, "not_your_place"},
		{"a place of no account", anon, []string{"X-Waitroom-Account", alice}, 403, "not_your_place"},
		{"a forged ticket", ticket[:len(ticket)-3] + "AAA", []string{"X-Waitroom-Account", alice}, 400, "invalid_ticket"},
		{"an unknown event", ticket, []string{"X-Waitroom-Account", alice}, 404, "unknown_event"},
	} {
		var got resp
		if c.name == "an unknown event" {
			got = e.do(http.MethodPost, "/api/v1/events/nope/tickets/"+c.ticket+"/away", nil, c.hdr...)
		} else {
			got = away(c.ticket, c.hdr...)
		}
		if got.code != c.code || got.body["error"] != c.err {
			t.Errorf("%s: %d %s; want %d %s", c.name, got.code, got.raw, c.code, c.err)
		}
	}
	if n, _ := e.rdb.HLen(context.Background(), rdb.KeysOf("premiere").Away).Result(); n != 0 {
		t.Fatalf("%d away notes after the refusals; want none", n)
	}
	// By cookie wr_u, as the page sends it: 202, the address signed.
	got := away(ticket, "Cookie", "wr_u="+alice, "Accept-Language", "ko-KR,ko;q=0.9")
	if got.code != http.StatusAccepted || got.body["status"] != "away" || got.body["email"] != "alice@example.test" {
		t.Fatalf("step away: %d %s; want 202 away alice@example.test", got.code, got.raw)
	}
	if cc := got.hdr.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q; want no-store", cc)
	}
	note, _ := e.rdb.HGet(context.Background(), rdb.KeysOf("premiere").Away, strings.Split(e.mustID("premiere", ticket), " ")[0]).Result()
	if !strings.HasPrefix(note, "ko alice@example.test ") || strings.Contains(note, ticket) {
		t.Errorf("away note %q; want it in Korean, for alice@example.test, without the ticket", note)
	}
	// A room that sends no email has no such route.
	plain := setupAccounts(t)
	theirs := plain.tokenWithEmail("alice", "alice@example.test")
	r = plain.join("premiere", "X-Waitroom-Account", theirs)
	if got := plain.do(http.MethodPost, "/api/v1/events/premiere/tickets/"+r.body["ticket"].(string)+"/away", nil, "X-Waitroom-Account", theirs); got.code != http.StatusNotFound {
		t.Errorf("without notify.smtp_url: %d %s; want 404", got.code, got.raw)
	}
}
