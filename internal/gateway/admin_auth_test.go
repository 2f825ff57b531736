package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
)

// The operators' named tokens of these tests: one per scope, every event;
// and "premiere-only", every scope but for premiere alone.
func tokenOf(name string) string { return "token-of-" + name + "-0123456789abcdef" }

func scopeTokens() []config.Token {
	var out []config.Token
	for _, s := range config.Scopes {
		name := strings.ReplaceAll(s, ":", "-")
		sum := sha256.Sum256([]byte(tokenOf(name)))
		out = append(out, config.Token{Name: name, SHA256: hex.EncodeToString(sum[:]), Scopes: []string{s}})
	}
	sum := sha256.Sum256([]byte(tokenOf("premiere-only")))
	return append(out, config.Token{Name: "premiere-only", SHA256: hex.EncodeToString(sum[:]), Scopes: config.Scopes, Events: []string{"premiere"}})
}

// setupTokens is setup with the named tokens and admin_token set to admin
// ("" = none: the named tokens alone turn the API on).
func setupTokens(t *testing.T, admin string) *env {
	t.Helper()
	return setupWith(t, 0, "", "", func(o *gateway.Options) {
		o.Config.Auth.AdminToken = admin
		o.Config.Auth.Tokens = scopeTokens()
	})
}

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// scopedRoutes are the operators' routes with the scope each needs; EVENT
// stands for the event asked about, and a route without it is of no event
// (a read of every event, or a wallet's credit).
var scopedRoutes = []struct{ method, path, body, scope string }{
	{http.MethodGet, "/api/v1/admin/events", "", config.ScopeEventsRead},
	{http.MethodGet, "/api/v1/admin/audit", "", config.ScopeEventsRead},
	{http.MethodGet, "/api/v1/admin/events/EVENT/history", "", config.ScopeEventsRead},
	{http.MethodGet, "/api/v1/admin/events/EVENT/preview?state=waiting&lang=en", "", config.ScopeEventsRead},
	{http.MethodGet, "/api/v1/admin/events/EVENT/codes", "", config.ScopeEventsRead},
	{http.MethodPatch, "/api/v1/admin/events/EVENT", `{"admitPerSecond": 5}`, config.ScopeEventsWrite},
	{http.MethodDelete, "/api/v1/admin/events/EVENT/tickets/1.AAAAAAAAAAAAAAAAAAAAAA", "", config.ScopeTicketsEnd},
	{http.MethodPost, "/api/v1/admin/events/EVENT/codes", `{"count": 1}`, config.ScopeCodesWrite},
	{http.MethodPost, "/api/v1/admin/wallets/fan-1/credits", `{"points": 1, "reference": "r-1"}`, config.ScopeWalletsWrite},
	{http.MethodGet, "/api/v1/admin/webhooks/deliveries", "", config.ScopeWebhooksRead},
}

// Each scope allowed and refused on each route: a token holding the
// route's scope gets through (whatever the route then answers), any other
// is 403 forbidden naming the scope; the token limited to premiere gets
// through on premiere's routes and on the reads of every event, and is
// refused on another event's and on the wallets' (no event's, so every
// event's). Every answer past the token says what the token may do.
func TestEachScopeOnEachRoute(t *testing.T) {
	e := setupTokens(t, adminToken)
	tokens := append(scopeTokens(), config.Token{Name: config.ByAdmin, Scopes: config.Scopes})
	for _, r := range scopedRoutes {
		for _, event := range []string{"premiere", "other"} {
			path := strings.ReplaceAll(r.path, "EVENT", event)
			ofEvent := strings.Contains(r.path, "EVENT")
			if !ofEvent && event == "other" {
				continue
			}
			for _, tok := range tokens {
				token := tokenOf(tok.Name)
				if tok.Name == config.ByAdmin {
					token = adminToken
				}
				holds := false
				for _, s := range tok.Scopes {
					holds = holds || s == r.scope
				}
				covers := tok.Events == nil || (ofEvent && event == "premiere") || (!ofEvent && r.scope != config.ScopeWalletsWrite)
				t.Run(tok.Name+" "+r.method+" "+path, func(t *testing.T) {
					got := e.admin(r.method, path, r.body, bearer(token)...)
					if got.hdr.Get("X-Waitroom-Token-Name") != tok.Name {
						t.Errorf("X-Waitroom-Token-Name = %q; want %q", got.hdr.Get("X-Waitroom-Token-Name"), tok.Name)
					}
					switch {
					case holds && covers:
						if got.code == http.StatusUnauthorized || got.code == http.StatusForbidden {
							t.Errorf("got %d %s; want through", got.code, got.raw)
						}
					default:
						msg, _ := got.body["message"].(string)
						if got.code != http.StatusForbidden || got.body["error"] != "forbidden" || !strings.Contains(msg, r.scope) {
							t.Errorf("got %d %s; want 403 forbidden naming %s", got.code, got.raw, r.scope)
						}
					}
				})
			}
		}
	}
	if n := e.upstream.hits.Load(); n != 2 {
		t.Errorf("%d credits reached the booking core; want 2 (admin's and wallets-write's)", n)
	}
	if got := e.upstream.lastAuth.Load(); got != "Bearer "+tokenOf("wallets-write") && got != "Bearer "+adminToken {
		t.Errorf("the credit was forwarded with %q; want the operator's own token", got)
	}
}

// A refused token changes nothing: no override, no audit entry.
func TestForbiddenChangesNothing(t *testing.T) {
	e := setupTokens(t, "")
	for _, tok := range []string{tokenOf("events-read"), tokenOf("premiere-only")} {
		if got := e.admin(http.MethodPatch, "/api/v1/admin/events/other", `{"mode":"paused"}`, bearer(tok)...); got.code != http.StatusForbidden {
			t.Fatalf("PATCH other: %d %s; want 403", got.code, got.raw)
		}
	}
	if ovs, _ := e.ops.Overrides(context.Background(), "other"); len(ovs) != 0 {
		t.Errorf("refused PATCHes left overrides %v", ovs)
	}
	if log, _ := e.ops.AuditLog(context.Background(), 10); len(log) != 0 {
		t.Errorf("refused PATCHes left audit entries %v", log)
	}
}

// The named tokens alone turn the API and the page on; without any token
// both are 404; a wrong token is 401 as ever.
func TestTokensAloneTurnTheAPIOn(t *testing.T) {
	e := setupTokens(t, "")
	if got := e.admin(http.MethodGet, "/api/v1/admin/events", "", bearer(tokenOf("events-read"))...); got.code != http.StatusOK {
		t.Errorf("named token, no admin_token: %d %s; want 200", got.code, got.raw)
	}
	if got := e.do(http.MethodGet, "/admin", nil); got.code != http.StatusOK {
		t.Errorf("the page with named tokens only: %d; want 200", got.code)
	}
	if got := e.admin(http.MethodGet, "/api/v1/admin/events", "", bearer("not-a-token-0123456789abcdef")...); got.code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d; want 401", got.code)
	}
	if got := e.admin(http.MethodGet, "/api/v1/admin/events", "", bearer(adminToken)...); got.code != http.StatusUnauthorized {
		t.Errorf("admin_token not configured but shown: %d; want 401", got.code)
	}
	off := setupAdmin(t, "")
	if got := off.admin(http.MethodGet, "/api/v1/admin/events", "", bearer(tokenOf("events-read"))...); got.code != http.StatusNotFound {
		t.Errorf("no token configured: %d; want 404", got.code)
	}
}

// A token of some events reads those only: the events' list and the audit
// hold nothing of another event; the headers say its scopes and events.
func TestATokenOfOneEventReadsItsOwn(t *testing.T) {
	e := setupTokens(t, adminToken)
	for _, ev := range []string{"premiere", "other"} {
		if got := e.admin(http.MethodPatch, "/api/v1/admin/events/"+ev, `{"maxActive": 7}`); got.code != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", ev, got.code, got.raw)
		}
	}
	got := e.admin(http.MethodGet, "/api/v1/admin/events", "", bearer(tokenOf("premiere-only"))...)
	events, _ := got.body["events"].([]any)
	if len(events) != 1 || events[0].(map[string]any)["id"] != "premiere" {
		t.Errorf("events for premiere-only: %s; want premiere alone", got.raw)
	}
	if s, ev := got.hdr.Get("X-Waitroom-Token-Scopes"), got.hdr.Get("X-Waitroom-Token-Events"); s != strings.Join(config.Scopes, " ") || ev != "premiere" {
		t.Errorf("headers say scopes %q, events %q; want every scope, premiere", s, ev)
	}
	got = e.admin(http.MethodGet, "/api/v1/admin/audit", "", bearer(tokenOf("premiere-only"))...)
	entries, _ := got.body["entries"].([]any)
	if len(entries) != 1 || entries[0].(map[string]any)["event"] != "premiere" {
		t.Errorf("audit for premiere-only: %s; want premiere's entry alone", got.raw)
	}
	if got := e.admin(http.MethodGet, "/api/v1/admin/events", "", bearer(tokenOf("events-read"))...); got.hdr.Get("X-Waitroom-Token-Events") != "*" {
		t.Errorf("a token of every event: X-Waitroom-Token-Events = %q; want *", got.hdr.Get("X-Waitroom-Token-Events"))
	}
}

// The audit names who made each change: the named token, "admin" for
// admin_token.
func TestTheAuditNamesTheToken(t *testing.T) {
	e := setupTokens(t, adminToken)
	if got := e.admin(http.MethodPatch, "/api/v1/admin/events/premiere", `{"mode":"paused"}`, bearer(tokenOf("events-write"))...); got.code != http.StatusOK {
		t.Fatalf("PATCH by events-write: %d %s", got.code, got.raw)
	}
	if got := e.admin(http.MethodDelete, "/api/v1/admin/events/premiere/tickets/1.AAAAAAAAAAAAAAAAAAAAAA", "", bearer(tokenOf("tickets-end"))...); got.code != http.StatusNoContent && got.code != http.StatusNotFound {
		t.Fatalf("DELETE by tickets-end: %d %s", got.code, got.raw)
	}
	if got := e.admin(http.MethodPatch, "/api/v1/admin/events/premiere", `{"mode":null}`); got.code != http.StatusOK {
		t.Fatalf("PATCH by admin: %d %s", got.code, got.raw)
	}
	got := e.admin(http.MethodGet, "/api/v1/admin/audit", "")
	entries, _ := got.body["entries"].([]any)
	var by []string
	for _, x := range entries {
		by = append(by, x.(map[string]any)["by"].(string))
	}
	want := []string{"admin", "tickets-end", "events-write"}
	if len(entries) == 2 { // the ticket was unknown: no revocation to audit
		want = []string{"admin", "events-write"}
	}
	if strings.Join(by, ",") != strings.Join(want, ",") {
		t.Errorf("audit by = %v; want %v (newest first)\n%s", by, want, got.raw)
	}
}
