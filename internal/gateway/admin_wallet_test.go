package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/gateway"
)

// The operators' credit: off (404) without auth.admin_token, 401 for a
// wrong or missing token (nothing forwarded), and with the token forwarded
// to the booking core's credit route bearing it.
func TestAdminWalletCredit(t *testing.T) {
	const path = "/api/v1/admin/wallets/fan-1/credits"
	const token = "s3cret-admin-token-0123456789"
	body := func() *strings.Reader { return strings.NewReader(`{"points":100,"reference":"order-1"}`) }

	off := setup(t, 0)
	if r := off.do(http.MethodPost, path, body(), "Authorization", "Bearer anything"); r.code != http.StatusNotFound {
		t.Fatalf("admin token empty: %d %s; want 404", r.code, r.raw)
	}

	e := setupWith(t, 0, "", "", func(o *gateway.Options) { o.Config.Auth.AdminToken = token })
	for _, tt := range []struct {
		name string
		hdr  []string
	}{
		{"missing", nil},
		{"wrong", []string{"Authorization", "Bearer " + token[:len(token)-1] + "X"}},
		{"prefix of it", []string{"Authorization", "Bearer s3cret"}},
		{"not bearer", []string{"Authorization", "Basic " + token}},
	} {
		if r := e.do(http.MethodPost, path, body(), tt.hdr...); r.code != http.StatusUnauthorized {
			t.Errorf("%s token: %d %s; want 401", tt.name, r.code, r.raw)
		}
	}
	if n := e.upstream.hits.Load(); n != 0 {
		t.Fatalf("%d refused credits reached the booking core; want none", n)
	}
	if r := e.do(http.MethodPost, "/api/v1/admin/wallets/bad%20id/credits", body(), "Authorization", "Bearer "+token); r.code != http.StatusBadRequest {
		t.Errorf("bad account id: %d; want 400", r.code)
	}
	r := e.do(http.MethodPost, path, body(), "Authorization", "Bearer "+token)
	if r.code != http.StatusOK || r.body["path"] != "/api/v1/booking/admin/wallets/fan-1/credits" {
		t.Fatalf("credit: %d %s; want forwarded to the booking core's credit route", r.code, r.raw)
	}
	if got := e.upstream.lastAuth.Load(); got != "Bearer "+token {
		t.Errorf("forwarded with Authorization %q; want the operators' token", got)
	}
	// Fans never reach the booking core's operators' routes through the gate.
	if r := e.do(http.MethodPost, "/api/v1/booking/admin/wallets/fan-1/credits", body(), "Authorization", "Bearer "+token); r.code != http.StatusNotFound {
		t.Errorf("booking admin route through the gate: %d; want 404", r.code)
	}
}
