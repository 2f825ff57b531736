package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
)

// Always on (DESIGN.md): an auto event lets a join straight through while
// there is room, answering it as passthrough does, and says "auto".

// setupAuto is a gateway whose event premiere is in mode auto with a cap
// of capped; more edits the options further.
func setupAuto(t testing.TB, capped int, gatewayKeys string, more ...func(*gateway.Options)) *env {
	t.Helper()
	return setupWith(t, 0, gatewayKeys, "", func(o *gateway.Options) {
		ev := &o.Config.Events[0]
		ev.Mode = config.ModeAuto
		ev.Admission.MaxActive = &capped
		for _, f := range more {
			f(o)
		}
	})
}

func TestAutoJoin(t *testing.T) {
	e := setupAuto(t, 2, "")
	through := testutil.ToFloat64(gateway.StraightThrough.WithLabelValues("premiere"))
	issued := testutil.ToFloat64(gateway.TicketsIssued.WithLabelValues("premiere"))
	if r := e.do(http.MethodGet, "/api/v1/events/premiere", nil); r.body["state"] != "auto" || r.body["waiting"] != 0.0 {
		t.Fatalf("the event: %s; want state auto, nobody waiting", r.raw)
	}
	for i := range 2 {
		r := e.join("premiere")
		if r.code != http.StatusCreated || r.body["status"] != "admitted" || r.body["accessToken"] == nil || r.body["expiresAt"] == nil || r.body["ticket"] == nil {
			t.Fatalf("join %d of an auto event with room: %d %s; want 201 admitted with a ticket, accessToken and expiresAt", i+1, r.code, r.raw)
		}
		if setCookieLine(r, "wr_a_premiere") == "" {
			t.Errorf("join %d: no pass cookie (%q)", i+1, r.hdr.Values("Set-Cookie"))
		}
	}
	r := e.join("premiere")
	if r.code != http.StatusCreated || r.body["status"] != "waiting" || r.body["position"] != 1.0 {
		t.Fatalf("a join at the cap: %d %s; want 201 waiting at 1", r.code, r.raw)
	}
	if r := e.do(http.MethodGet, "/api/v1/events/premiere", nil); r.body["state"] != "auto" || r.body["waiting"] != 1.0 || r.body["active"] != 2.0 {
		t.Errorf("the event with a line: %s; want state auto, 1 waiting (a line formed), 2 active", r.raw)
	}
	if got := testutil.ToFloat64(gateway.StraightThrough.WithLabelValues("premiere")) - through; got != 2 {
		t.Errorf("waitroom_straight_through_total went up by %v; want 2", got)
	}
	if got := testutil.ToFloat64(gateway.TicketsIssued.WithLabelValues("premiere")) - issued; got != 3 {
		t.Errorf("waitroom_tickets_issued_total went up by %v; want 3 (straight through or not)", got)
	}
	// The report: straightThrough apart, admitted counting them too; its
	// page names them in every language.
	rep := e.do(http.MethodGet, "/api/v1/events/premiere/report", nil)
	if rep.code != http.StatusOK || rep.body["straightThrough"] != 2.0 || rep.body["admitted"] != 2.0 || rep.body["joined"] != 3.0 {
		t.Errorf("report: %d %s; want 3 joined, 2 admitted, 2 of them straight through", rep.code, rep.raw)
	}
	var minutes float64
	rate, _ := rep.body["admittedPerSecond"].(map[string]any)
	perMinute, _ := rate["perMinute"].([]any)
	for _, m := range perMinute {
		n, _ := m.(map[string]any)["straightThrough"].(float64)
		minutes += n
	}
	if minutes != 2 {
		t.Errorf("the report's minutes count %v straight through; want 2", minutes)
	}
	for _, lang := range []string{"en", "ja", "ko"} {
		body := string(e.do(http.MethodGet, "/e/premiere/report", nil, "Accept-Language", lang).raw)
		if !strings.Contains(body, `id="report-straight-through">2<`) || strings.Contains(body, "⟦") {
			t.Errorf("report page in %s does not show the 2 let straight through in its words", lang)
		}
	}
}

// An operator may put an event in auto (and the event says so).
func TestAdminPatchAuto(t *testing.T) {
	e := setupAdmin(t, adminToken)
	got := e.admin(http.MethodPatch, "/api/v1/admin/events/premiere", `{"mode": "auto"}`)
	if got.code != 200 || got.body["mode"] != "auto" {
		t.Fatalf("PATCH mode auto: %d %s; want 200 mode auto", got.code, got.raw)
	}
}
