package config_test

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/config"
)

func sha(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// withIntegrations is the valid config with the given auth.tokens and
// webhooks sections.
func withIntegrations(tokens, webhooks string) string {
	src := strings.Replace(valid, `auth: {ticket_secret: "0123456789abcdef0123456789abcdef"}`,
		"auth:\n  ticket_secret: \"0123456789abcdef0123456789abcdef\"\n  admin_token: \"the-admin-token-0123456789\"\n  tokens:\n"+tokens, 1)
	return src + "webhooks:\n" + webhooks
}

const (
	goodToken   = "    - {name: \"ops-bot\", sha256: \"" + "%s" + "\", scopes: [\"events:read\", \"tickets:end\"], events: [\"premiere\"]}\n"
	goodWebhook = "  - {url: \"https://hooks.example.com/waitroom\", secret: \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\", types: [\"sale.soldout\"]}\n"
)

func TestIntegrationsParse(t *testing.T) {
	c, err := config.Parse([]byte(withIntegrations(strings.Replace(goodToken, "%s", strings.ToUpper(sha("bot-token")), 1), goodWebhook)), noEnv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	tok := c.Auth.Tokens[0]
	if tok.Name != "ops-bot" || tok.SHA256 != sha("bot-token") || !slices.Equal(tok.Scopes, []string{"events:read", "tickets:end"}) || !slices.Equal(tok.Events, []string{"premiere"}) {
		t.Errorf("token = %+v; want ops-bot, its hash in lower case, two scopes, premiere", tok)
	}
	w := c.Webhooks[0]
	if w.URL != "https://hooks.example.com/waitroom" || len(w.Key()) != 24 || !slices.Equal(w.Types, []string{"sale.soldout"}) {
		t.Errorf("webhook = %+v (key %d bytes); want the url, a 24-byte key, sale.soldout", w, len(w.Key()))
	}

	// Who a bearer is: the admin token grants everything, a named token
	// its own, anything else nothing.
	for _, tc := range []struct {
		token, name string
		ok          bool
	}{
		{"the-admin-token-0123456789", config.ByAdmin, true},
		{"bot-token", "ops-bot", true},
		{"bot-token ", "", false},
		{"", "", false},
		{sha("bot-token"), "", false}, // the hash is not the token
	} {
		g, ok := c.Auth.Bearer(tc.token)
		if ok != tc.ok || g.Name != tc.name {
			t.Errorf("Bearer(%q) = %q, %t; want %q, %t", tc.token, g.Name, ok, tc.name, tc.ok)
		}
	}
	admin, _ := c.Auth.Bearer("the-admin-token-0123456789")
	bot, _ := c.Auth.Bearer("bot-token")
	for _, tc := range []struct {
		what string
		got  bool
		want bool
	}{
		{"admin has every scope", admin.Allows(config.ScopeWebhooksRead) && admin.Allows(config.ScopeWalletsWrite), true},
		{"admin covers every event and none", admin.Covers("live") && admin.Covers(""), true},
		{"bot has its scope", bot.Allows(config.ScopeTicketsEnd), true},
		{"bot lacks another", bot.Allows(config.ScopeEventsWrite), false},
		{"bot covers its event", bot.Covers("premiere"), true},
		{"bot not another", bot.Covers("live"), false},
		{"bot not the routes of no event", bot.Covers(""), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %t; want %t", tc.what, tc.got, tc.want)
		}
	}

	// The API is on with named tokens alone.
	off, err := config.Parse([]byte(valid), noEnv)
	if err != nil || off.Auth.OperatorsOn() {
		t.Fatalf("no token: OperatorsOn = %t (%v); want false", off.Auth.OperatorsOn(), err)
	}
	c.Auth.AdminToken = ""
	if !c.Auth.OperatorsOn() {
		t.Error("named tokens alone: OperatorsOn = false; want true")
	}
}

// Each bad token or webhook stops the config at start, named by its key;
// the token's and the secret's values are never quoted.
func TestIntegrationsRefused(t *testing.T) {
	tok := func(s string) string { return "    - " + s + "\n" }
	h := sha("bot-token")
	cases := []struct {
		name, tokens, webhooks, want string
	}{
		{"hash too short", tok(`{name: "a", sha256: "abc123", scopes: ["events:read"]}`), goodWebhook, "auth.tokens[0].sha256: must be the token's SHA-256 in hex, 64 characters"},
		{"hash not hex", tok(`{name: "a", sha256: "` + strings.Repeat("z", 64) + `", scopes: ["events:read"]}`), goodWebhook, "auth.tokens[0].sha256: must be"},
		{"the token itself", tok(`{name: "a", sha256: "bot-token", scopes: ["events:read"]}`), goodWebhook, "auth.tokens[0].sha256: must be"},
		{"the admin token's hash", tok(`{name: "a", sha256: "` + sha("the-admin-token-0123456789") + `", scopes: ["events:read"]}`), goodWebhook, "auth.tokens[0].sha256: is auth.admin_token's"},
		{"unknown scope", tok(`{name: "a", sha256: "` + h + `", scopes: ["events:read", "events:delete"]}`), goodWebhook, `auth.tokens[0].scopes[1]: "events:delete" is not a scope`},
		{"no scope", tok(`{name: "a", sha256: "` + h + `"}`), goodWebhook, "auth.tokens[0].scopes: must name at least one"},
		{"duplicate name", tok(`{name: "a", sha256: "`+h+`", scopes: ["events:read"]}`) + tok(`{name: "a", sha256: "`+sha("other")+`", scopes: ["events:read"]}`), goodWebhook, `auth.tokens[1].name: "a" duplicates auth.tokens[0].name`},
		{"duplicate hash", tok(`{name: "a", sha256: "`+h+`", scopes: ["events:read"]}`) + tok(`{name: "b", sha256: "`+h+`", scopes: ["events:read"]}`), goodWebhook, "auth.tokens[1].sha256: duplicates auth.tokens[0].sha256"},
		{"reserved name", tok(`{name: "config", sha256: "` + h + `", scopes: ["events:read"]}`), goodWebhook, `auth.tokens[0].name: "config" is reserved`},
		{"bad name", tok(`{name: "ops bot", sha256: "` + h + `", scopes: ["events:read"]}`), goodWebhook, `auth.tokens[0].name: "ops bot" must match`},
		{"unknown event", tok(`{name: "a", sha256: "` + h + `", scopes: ["events:read"], events: ["premiere", "matinee"]}`), goodWebhook, `auth.tokens[0].events[1]: "matinee" is not an event of this config`},
		{"no event", tok(`{name: "a", sha256: "` + h + `", scopes: ["events:read"], events: []}`), goodWebhook, "auth.tokens[0].events: names no event"},
		{"relative url", tok(`{name: "a", sha256: "` + h + `", scopes: ["events:read"]}`), `  - {url: "/hooks", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}` + "\n", "webhooks[0].url: must be an absolute http(s) URL"},
		{"secret without prefix", tok(`{name: "a", sha256: "` + h + `", scopes: ["events:read"]}`), `  - {url: "https://h.example", secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}` + "\n", "webhooks[0].secret: must be whsec_"},
		{"secret not base64", tok(`{name: "a", sha256: "` + h + `", scopes: ["events:read"]}`), `  - {url: "https://h.example", secret: "whsec_!!!"}` + "\n", "webhooks[0].secret: is not base64"},
		{"secret too short", tok(`{name: "a", sha256: "` + h + `", scopes: ["events:read"]}`), `  - {url: "https://h.example", secret: "whsec_c2hvcnQ="}` + "\n", "webhooks[0].secret: must hold 24 to 64 bytes, not 5"},
		{"unknown type", tok(`{name: "a", sha256: "` + h + `", scopes: ["events:read"]}`), `  - {url: "https://h.example", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", types: ["sale.opened", "sale.started"]}` + "\n", `webhooks[0].types[1]: "sale.started" is not a notification type`},
		{"duplicate url", tok(`{name: "a", sha256: "` + h + `", scopes: ["events:read"]}`), goodWebhook + goodWebhook, "webhooks[1].url: duplicates webhooks[0].url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(withIntegrations(tc.tokens, tc.webhooks)), noEnv)
			if err == nil {
				t.Fatalf("Parse accepted it; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %q; want it to contain %q", err, tc.want)
			}
			for _, secret := range []string{"bot-token", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "the-admin-token"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error quotes a secret: %q", err)
				}
			}
		})
	}
}
