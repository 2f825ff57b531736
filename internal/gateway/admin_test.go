package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/policy"
)

const adminToken = "operator-token-0123456789"

// setupAdmin is setup with auth.admin_token set to token ("" = the API off).
func setupAdmin(t *testing.T, token string) *env {
	t.Helper()
	return setupWith(t, 0, "", "", func(o *gateway.Options) { o.Config.Auth.AdminToken = token })
}

func (e *env) admin(method, path, body string, hdr ...string) resp {
	e.t.Helper()
	if hdr == nil {
		hdr = []string{"Authorization", "Bearer " + adminToken}
	}
	if body == "" {
		return e.do(method, path, nil, hdr...)
	}
	return e.do(method, path, strings.NewReader(body), hdr...)
}

// adminRoutes are the operators' routes, each with a request that is good
// once authorised.
var adminRoutes = []struct{ method, path, body string }{
	{http.MethodGet, "/api/v1/admin/events", ""},
	{http.MethodPatch, "/api/v1/admin/events/premiere", `{"admitPerSecond": 5}`},
	{http.MethodDelete, "/api/v1/admin/events/premiere/tickets/1.AAAAAAAAAAAAAAAAAAAAAA", ""},
	{http.MethodGet, "/api/v1/admin/events/premiere/history", ""},
	{http.MethodGet, "/api/v1/admin/events/premiere/preview?state=waiting&lang=en", ""},
	{http.MethodGet, "/api/v1/admin/audit", ""},
}

// Every operators' route: 401 without the token or with a wrong one (and
// nothing changes), through with it; 404 for all of them and the page
// while admin_token is empty.
func TestAdminAuth(t *testing.T) {
	e := setupAdmin(t, adminToken)
	for _, r := range adminRoutes {
		for _, a := range []struct {
			name string
			hdr  []string
			want int
		}{
			{"none", []string{"X-None", "1"}, http.StatusUnauthorized},
			{"wrong", []string{"Authorization", "Bearer " + adminToken + "x"}, http.StatusUnauthorized},
			{"prefix", []string{"Authorization", "Bearer " + adminToken[:10]}, http.StatusUnauthorized},
			{"basic", []string{"Authorization", "Basic " + adminToken}, http.StatusUnauthorized},
			{"empty bearer", []string{"Authorization", "Bearer "}, http.StatusUnauthorized},
		} {
			t.Run(r.method+" "+r.path+"/"+a.name, func(t *testing.T) {
				got := e.admin(r.method, r.path, r.body, a.hdr...)
				if got.code != a.want || got.body["error"] != "unauthorized" {
					t.Errorf("got %d %s; want %d unauthorized", got.code, got.raw, a.want)
				}
			})
		}
	}
	if ovs, _ := e.ops.Overrides(context.Background(), "premiere"); len(ovs) != 0 {
		t.Errorf("refused requests left overrides %v", ovs)
	}
	if log, _ := e.ops.AuditLog(context.Background(), 10); len(log) != 0 {
		t.Errorf("refused requests left audit entries %v", log)
	}
	for _, r := range adminRoutes {
		got := e.admin(r.method, r.path, r.body)
		if want := map[string]int{http.MethodGet: 200, http.MethodPatch: 200, http.MethodDelete: 404}[r.method]; got.code != want {
			t.Errorf("%s %s with the token: %d %s; want %d", r.method, r.path, got.code, got.raw, want)
		}
	}
	if got := e.do(http.MethodGet, "/admin", nil); got.code != 200 || !strings.Contains(string(got.raw), `id="token"`) || !strings.Contains(got.hdr.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("GET /admin: %d %q", got.code, got.hdr)
	}

	off := setupAdmin(t, "")
	for _, r := range append(adminRoutes, struct{ method, path, body string }{http.MethodGet, "/admin", ""}) {
		for _, hdr := range [][]string{nil, {"X-None", "1"}} {
			if got := off.admin(r.method, r.path, r.body, hdr...); got.code != http.StatusNotFound {
				t.Errorf("API off: %s %s = %d %s; want 404", r.method, r.path, got.code, got.raw)
			}
		}
	}
}

// A bad PATCH is 400 naming the field, and nothing changes.
func TestAdminPatchValidation(t *testing.T) {
	e := setupAdmin(t, adminToken)
	for _, tt := range []struct{ name, body, field string }{
		{"not json", `{`, "body"},
		{"not an object", `[1]`, "body"},
		{"empty", `{}`, "body"},
		{"two objects", `{"mode":"paused"} {}`, "body"},
		{"a brace after", `{"mode":"paused"}}`, "body"},
		{"a bracket after", `{"mode":"paused"} ]`, "body"},
		{"unknown key", `{"admitPerSecond": 5, "speed": 2}`, "speed"},
		{"unknown key null", `{"speed": null}`, "speed"},
		{"bad mode", `{"mode": "open"}`, "mode"},
		{"mode number", `{"mode": 1}`, "mode"},
		{"zero rate", `{"admitPerSecond": 0}`, "admitPerSecond"},
		{"negative rate", `{"admitPerSecond": -1}`, "admitPerSecond"},
		{"huge rate", `{"admitPerSecond": 1e7}`, "admitPerSecond"},
		{"rate string", `{"admitPerSecond": "5"}`, "admitPerSecond"},
		{"fractional cap", `{"maxActive": 2.5}`, "maxActive"},
		{"zero cap", `{"maxActive": 0}`, "maxActive"},
		{"huge cap", `{"maxActive": 1e12}`, "maxActive"},
		{"good and bad", `{"mode": "paused", "maxActive": -3}`, "maxActive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := e.admin(http.MethodPatch, "/api/v1/admin/events/premiere", tt.body)
			if got.code != http.StatusBadRequest || got.body["error"] != "invalid_request" || got.body["field"] != tt.field ||
				!strings.HasPrefix(fmt.Sprint(got.body["message"]), tt.field+":") {
				t.Errorf("got %d %s; want 400 invalid_request naming %s", got.code, got.raw, tt.field)
			}
		})
	}
	if got := e.admin(http.MethodPatch, "/api/v1/admin/events/nope", `{"mode":"paused"}`); got.code != 404 || got.body["error"] != "unknown_event" {
		t.Errorf("unknown event: %d %s", got.code, got.raw)
	}
	if ovs, _ := e.ops.Overrides(context.Background(), "premiere"); len(ovs) != 0 {
		t.Errorf("bad requests left overrides %v", ovs)
	}
	if log, _ := e.ops.AuditLog(context.Background(), 10); len(log) != 0 {
		t.Errorf("bad requests left audit entries %v", log)
	}
	for _, q := range []string{"0", "-1", "x", "1001"} {
		if got := e.admin(http.MethodGet, "/api/v1/admin/audit?limit="+q, ""); got.code != 400 || got.body["field"] != "limit" {
			t.Errorf("audit?limit=%s: %d %s; want 400 naming limit", q, got.code, got.raw)
		}
	}
}

// A PATCH keeps the overrides in Redis (with the config's value they
// replace), answers the settings in force with their sources, is in the
// event list and the audit; null hands a key back to the config.
func TestAdminPatch(t *testing.T) {
	e := setupAdmin(t, adminToken)
	ctx := context.Background()
	got := e.admin(http.MethodPatch, "/api/v1/admin/events/premiere", `{"mode": "paused", "admitPerSecond": 12.5, "maxActive": 40}`)
	if got.code != 200 || got.body["mode"] != "paused" || got.body["admitPerSecond"] != 12.5 || got.body["maxActive"] != 40.0 {
		t.Fatalf("PATCH: %d %s", got.code, got.raw)
	}
	if src := fmt.Sprint(got.body["sources"]); src != "map[admitPerSecond:api maxActive:api mode:api]" {
		t.Errorf("sources %s", src)
	}
	ovs, err := e.ops.Overrides(ctx, "premiere")
	if err != nil || ovs[operators.FieldAdmitPerSecond].Value != "12.5" || ovs[operators.FieldAdmitPerSecond].Base != "100" ||
		ovs[operators.FieldMaxActive].Value != "40" || ovs[operators.FieldMode].Base != "queue" {
		t.Fatalf("overrides in Redis %+v, %v", ovs, err)
	}
	list := e.admin(http.MethodGet, "/api/v1/admin/events", "")
	evs, _ := list.body["events"].([]any)
	if len(evs) != 4 {
		t.Fatalf("events: %s", list.raw)
	}
	first := evs[0].(map[string]any)
	for k, want := range map[string]any{"id": "premiere", "state": "paused", "mode": "paused", "admitPerSecond": 12.5, "maxActive": 40.0, "waiting": 0.0, "active": 0.0, "abandoned": 0.0, "adaptive": false} {
		if first[k] != want {
			t.Errorf("events[0].%s = %v; want %v", k, first[k], want)
		}
	}
	if other := evs[1].(map[string]any); fmt.Sprint(other["sources"]) != "map[admitPerSecond:config maxActive:config mode:config]" || other["admitPerSecond"] != 100.0 {
		t.Errorf("the other event: %v", other)
	}
	// The public event route tells the same.
	if pub := e.do(http.MethodGet, "/api/v1/events/premiere", nil); pub.body["state"] != "paused" || pub.body["admitPerSecond"] != 12.5 {
		t.Errorf("public event route: %s", pub.raw)
	}
	back := e.admin(http.MethodPatch, "/api/v1/admin/events/premiere", `{"admitPerSecond": null}`)
	if back.code != 200 || back.body["admitPerSecond"] != 100.0 || back.body["mode"] != "paused" {
		t.Errorf("null rate: %d %s; want the config's 100, still paused", back.code, back.raw)
	}
	log, _ := e.ops.AuditLog(ctx, 10)
	var changes []string
	for _, a := range log {
		if a.Source != policy.SourceAPI || a.Event != "premiere" {
			t.Errorf("audit entry %+v", a)
		}
		changes = append(changes, a.Change)
	}
	if want := "[admitPerSecond 12.5 -> 100 (the config's) maxActive 100 -> 40 admitPerSecond 100 -> 12.5 mode queue -> paused]"; fmt.Sprint(changes) != want {
		t.Errorf("audit %v; want %s", changes, want)
	}
	a := e.admin(http.MethodGet, "/api/v1/admin/audit?limit=2", "")
	if entries, _ := a.body["entries"].([]any); a.code != 200 || len(entries) != 2 || entries[0].(map[string]any)["change"] != changes[0] {
		t.Errorf("GET audit: %d %s", a.code, a.raw)
	}
}

// Revoking an admitted ticket takes its place at once: its pass is refused
// at the gate from the next request, its poll is expired; a waiting one
// leaves the line; a second revoke is 404, a malformed id 400.
func TestAdminRevoke(t *testing.T) {
	e := setupAdmin(t, adminToken)
	ctx := context.Background()
	ticket, token := e.admit("premiere")
	id := e.idOf("premiere", ticket)
	bearer := []string{"Authorization", "Bearer " + token}
	if got := e.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, bearer...); got.code != 200 {
		t.Fatalf("gate before: %d %s", got.code, got.raw)
	}
	hits := e.upstream.hits.Load()
	if got := e.admin(http.MethodDelete, "/api/v1/admin/events/premiere/tickets/"+id, ""); got.code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", got.code, got.raw)
	}
	if got := e.do(http.MethodGet, "/api/v1/booking/showtimes/42/seats", nil, bearer...); got.code != 401 || got.body["error"] != "admission_required" {
		t.Errorf("gate after revoke: %d %s; want 401 admission_required", got.code, got.raw)
	}
	if n := e.upstream.hits.Load(); n != hits {
		t.Errorf("the revoked pass reached the booking core %d times", n-hits)
	}
	if got := e.do(http.MethodGet, "/api/v1/events/premiere/tickets/"+ticket, nil); got.code != http.StatusGone {
		t.Errorf("poll after revoke: %d %s; want 410", got.code, got.raw)
	}
	if got := e.admin(http.MethodDelete, "/api/v1/admin/events/premiere/tickets/"+id, ""); got.code != 404 || got.body["error"] != "unknown_ticket" {
		t.Errorf("second revoke: %d %s; want 404 unknown_ticket", got.code, got.raw)
	}
	w := e.join("premiere", "X-Forwarded-For", "")
	wid := e.idOf("premiere", w.body["ticket"].(string))
	if got := e.admin(http.MethodDelete, "/api/v1/admin/events/premiere/tickets/"+wid, ""); got.code != 204 {
		t.Errorf("revoke waiting: %d %s", got.code, got.raw)
	}
	if c, _ := e.line.Counts(ctx, "premiere"); c.Waiting != 0 || c.Active != 0 {
		t.Errorf("counts after both revoked: %+v", c)
	}
	for _, bad := range []string{"nope", "1.short", ticket} {
		if got := e.admin(http.MethodDelete, "/api/v1/admin/events/premiere/tickets/"+bad, ""); got.code != 400 || got.body["field"] != "ticketId" {
			t.Errorf("revoke %q: %d %s; want 400 naming ticketId", bad, got.code, got.raw)
		}
	}
	if got := e.admin(http.MethodDelete, "/api/v1/admin/events/nope/tickets/"+id, ""); got.code != 404 || got.body["error"] != "unknown_event" {
		t.Errorf("revoke of an unknown event: %d %s", got.code, got.raw)
	}
	log, _ := e.ops.AuditLog(ctx, 10)
	if len(log) != 2 || log[1].Change != "ticket "+id+" revoked" || log[1].Source != "api" {
		t.Errorf("audit %+v; want the two revocations", log)
	}
}

// The history the page charts: samples every 2 s, admitted per second
// between them.
func TestAdminHistory(t *testing.T) {
	e := setupAdmin(t, adminToken)
	for range 3 {
		e.join("premiere", "X-Forwarded-For", "")
	}
	time.Sleep(4500 * time.Millisecond)
	got := e.admin(http.MethodGet, "/api/v1/admin/events/premiere/history", "")
	pts, _ := got.body["points"].([]any)
	if got.code != 200 || len(pts) < 2 || got.body["everySeconds"] != 2.0 {
		t.Fatalf("history: %d %s", got.code, got.raw)
	}
	last := pts[len(pts)-1].(map[string]any)
	if last["waiting"] != 3.0 || last["admittedPerSecond"] != 0.0 {
		t.Errorf("last point %v; want 3 waiting, 0 admitted/s", last)
	}
}
