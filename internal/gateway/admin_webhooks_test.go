package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/webhook"
	"github.com/waitroom/waitroom/internal/webhook/webhooktest"
)

// bodies are the notifications recv took, in order, each read as JSON.
func bodies(recv *webhooktest.Receiver) []map[string]any {
	var out []map[string]any
	for _, d := range recv.Delivered("") {
		var m map[string]any
		_ = json.Unmarshal([]byte(d.Body), &m)
		out = append(out, m)
	}
	return out
}

// setupHooks is setupTokens with one webhook to a real receiver on
// loopback, and a sender of the outbox.
func setupHooks(t *testing.T) (*env, *webhooktest.Receiver, *webhook.Sender) {
	t.Helper()
	recv := webhooktest.New(t, nil)
	e := setupWith(t, 0, "", "", func(o *gateway.Options) {
		o.Config.Auth.AdminToken = adminToken
		o.Config.Auth.Tokens = scopeTokens()
		o.Config.Webhooks = []config.Webhook{{URL: recv.URL + "/hook", Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	})
	s := webhook.NewSender(webhook.NewStore(rdb.New(e.rdb)), webhook.SenderOptions{
		Endpoints: func() []webhook.Endpoint { return policy.Endpoints(e.cfg) },
		Events:    func() []string { return []string{"premiere", "other"} }})
	return e, recv, s
}

// An operator's PATCH is settings.changed, by the token's name, with each
// setting it named from the value in force before to the one after; the
// receiver gets it.
func TestSettingsChangedByANamedToken(t *testing.T) {
	e, recv, s := setupHooks(t)
	if got := e.admin(http.MethodPatch, "/api/v1/admin/events/premiere", `{"mode":"paused","maxActive":7}`, bearer(tokenOf("events-write"))...); got.code != http.StatusOK {
		t.Fatalf("PATCH: %d %s", got.code, got.raw)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(bodies(recv)) == 0 && time.Now().Before(deadline) {
		s.Round(context.Background())
	}
	b := bodies(recv)
	if len(b) != 1 || b[0]["type"] != webhook.SettingsChanged || b[0]["event"] != "premiere" {
		t.Fatalf("received %v; want premiere's settings.changed", b)
	}
	data := b[0]["data"].(map[string]any)
	changes := data["changes"].(map[string]any)
	mode, cap := changes["mode"].(map[string]any), changes["maxActive"].(map[string]any)
	if data["by"] != "events-write" || len(changes) != 2 || mode["from"] != "queue" || mode["to"] != "paused" || cap["to"] != float64(7) {
		t.Errorf("data = %v; want mode queue -> paused and maxActive -> 7, by events-write", data)
	}
}

// The delivery log: latest first, the token's events only; a bad limit is
// 400 naming it.
func TestTheDeliveryLog(t *testing.T) {
	e, recv, s := setupHooks(t)
	for _, ev := range []string{"other", "premiere"} {
		if got := e.admin(http.MethodPatch, "/api/v1/admin/events/"+ev, `{"maxActive":3}`); got.code != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", ev, got.code, got.raw)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); len(bodies(recv)) < 2 && time.Now().Before(deadline); {
		s.Round(context.Background())
	}
	got := e.admin(http.MethodGet, "/api/v1/admin/webhooks/deliveries", "", bearer(tokenOf("webhooks-read"))...)
	var log struct {
		Deliveries []map[string]any `json:"deliveries"`
	}
	if err := json.Unmarshal(got.raw, &log); err != nil || got.code != http.StatusOK || len(log.Deliveries) != 2 {
		t.Fatalf("log: %d %s; want two deliveries", got.code, got.raw)
	}
	first := log.Deliveries[0]
	if first["event"] != "premiere" || first["type"] != webhook.SettingsChanged || first["url"] != recv.URL+"/hook" || first["status"] != webhook.StatusDelivered || first["attempts"] != float64(1) {
		t.Errorf("latest delivery = %v; want premiere's settings.changed, delivered at once to the receiver", first)
	}
	if id, _ := first["id"].(string); len(id) < 5 || id[:4] != "msg_" {
		t.Errorf("id = %v; want msg_…", first["id"])
	}
	got = e.admin(http.MethodGet, "/api/v1/admin/webhooks/deliveries", "", bearer(tokenOf("premiere-only"))...)
	if err := json.Unmarshal(got.raw, &log); err != nil || len(log.Deliveries) != 1 || log.Deliveries[0]["event"] != "premiere" {
		t.Errorf("log for premiere-only: %s; want premiere's alone", got.raw)
	}
	if got := e.admin(http.MethodGet, "/api/v1/admin/webhooks/deliveries?limit=0", ""); got.code != http.StatusBadRequest || got.body["field"] != "limit" {
		t.Errorf("limit=0: %d %s; want 400 naming limit", got.code, got.raw)
	}
	if got := e.admin(http.MethodGet, "/api/v1/admin/webhooks/deliveries", "", bearer(tokenOf("events-read"))...); got.code != http.StatusForbidden {
		t.Errorf("events:read on the log: %d; want 403", got.code)
	}
}
