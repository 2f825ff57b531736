package config

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// The integrations' sections (DESIGN.md, "Integrations"): the operators'
// named tokens (auth.tokens) and the webhooks. Each validates itself, as
// the other sections do (validate.go).

// Token is one named operators' token: the token itself is never in the
// file, its SHA-256 is (hex, as `printf %s "$TOKEN" | sha256sum` prints
// it).
type Token struct {
	// Name names the token in the audit ("by") and on the operators'
	// page: [A-Za-z0-9._-]{1,64}, not one of the reserved names.
	Name   string `yaml:"name"`
	SHA256 string `yaml:"sha256"`
	// Scopes are what the token may do (Scope*).
	Scopes []string `yaml:"scopes"`
	// Events limits the token to these events; nil (the key left out) is
	// every event.
	Events []string `yaml:"events"`
}

// The operators' scopes (DESIGN.md, "Operators' tokens").
const (
	ScopeEventsRead   = "events:read"   // GET the events, their history, previews and codes' counts, the audit
	ScopeEventsWrite  = "events:write"  // PATCH mode, rate, cap
	ScopeTicketsEnd   = "tickets:end"   // DELETE a ticket
	ScopeCodesWrite   = "codes:write"   // POST access codes
	ScopeWalletsWrite = "wallets:write" // POST a wallet's credits
	ScopeWebhooksRead = "webhooks:read" // GET the webhooks' delivery log
)

// Scopes lists every scope, in the order the operators' page shows them.
var Scopes = []string{ScopeEventsRead, ScopeEventsWrite, ScopeTicketsEnd, ScopeCodesWrite, ScopeWalletsWrite, ScopeWebhooksRead}

// Who the audit names besides a token: auth.admin_token's changes, a
// config reload's, the adaptive admitter's. No token may take these names.
const (
	ByAdmin    = "admin"
	ByConfig   = "config"
	ByAdaptive = "adaptive"
)

var tokenNamePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Grant is what a bearer of the operators' API may do.
type Grant struct {
	Name   string   // the token's name; ByAdmin for auth.admin_token
	Scopes []string // every scope for auth.admin_token
	Events []string // nil = every event
}

// Allows reports whether the grant holds scope.
func (g Grant) Allows(scope string) bool { return slices.Contains(g.Scopes, scope) }

// Covers reports whether the grant reaches event; "" asks for every event
// at once (a route of no event, such as a wallet's credit), which only a
// grant of every event reaches.
func (g Grant) Covers(event string) bool {
	return g.Events == nil || (event != "" && slices.Contains(g.Events, event))
}

// OperatorsOn reports whether the operators' API is on: an admin_token,
// or at least one named token.
func (a *Auth) OperatorsOn() bool { return a.AdminToken != "" || len(a.Tokens) > 0 }

// Bearer finds what token grants: auth.admin_token (every scope, every
// event) or the named token whose SHA-256 it has. The token is hashed,
// then compared with every hash in constant time (no early exit), so
// neither a token's bytes nor which one matched leak by timing.
func (a *Auth) Bearer(token string) (Grant, bool) {
	if token == "" {
		return Grant{}, false
	}
	got := sha256.Sum256([]byte(token))
	var out Grant
	found := 0
	if a.AdminToken != "" {
		want := sha256.Sum256([]byte(a.AdminToken))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			out, found = Grant{Name: ByAdmin, Scopes: Scopes}, 1
		}
	}
	for _, t := range a.Tokens {
		want, err := hex.DecodeString(t.SHA256)
		if err == nil && subtle.ConstantTimeCompare(got[:], want) == 1 && found == 0 {
			out, found = Grant{Name: t.Name, Scopes: t.Scopes, Events: t.Events}, 1
		}
	}
	return out, found == 1
}

// validateTokens checks auth.tokens against the events the config names.
func (a *Auth) validateTokens(v *problems, events map[string]int) {
	names := map[string]int{}
	hashes := map[string]int{}
	var admin string
	if a.AdminToken != "" {
		sum := sha256.Sum256([]byte(a.AdminToken))
		admin = hex.EncodeToString(sum[:])
	}
	for i := range a.Tokens {
		t := &a.Tokens[i]
		k := fmt.Sprintf("auth.tokens[%d]", i)
		switch {
		case !tokenNamePattern.MatchString(t.Name):
			v.add(k+".name", "%q must match [A-Za-z0-9._-]{1,64}", t.Name)
		case t.Name == ByAdmin || t.Name == ByConfig || t.Name == ByAdaptive:
			v.add(k+".name", "%q is reserved (the audit names admin_token, a reload and the adaptive admitter so)", t.Name)
		default:
			if j, dup := names[t.Name]; dup {
				v.add(k+".name", "%q duplicates auth.tokens[%d].name", t.Name, j)
			}
			names[t.Name] = i
		}
		t.SHA256 = strings.ToLower(t.SHA256)
		if b, err := hex.DecodeString(t.SHA256); err != nil || len(b) != sha256.Size {
			v.add(k+".sha256", "must be the token's SHA-256 in hex, 64 characters (printf %%s \"$TOKEN\" | sha256sum), never the token itself")
		} else if t.SHA256 == admin {
			v.add(k+".sha256", "is auth.admin_token's: a named token must be a token of its own")
		} else if j, dup := hashes[t.SHA256]; dup {
			v.add(k+".sha256", "duplicates auth.tokens[%d].sha256: one token, one name", j)
		} else {
			hashes[t.SHA256] = i
		}
		if len(t.Scopes) == 0 {
			v.add(k+".scopes", "must name at least one of %s", strings.Join(Scopes, ", "))
		}
		for j, s := range t.Scopes {
			if !slices.Contains(Scopes, s) {
				v.add(fmt.Sprintf("%s.scopes[%d]", k, j), "%q is not a scope (%s)", s, strings.Join(Scopes, ", "))
			}
		}
		if t.Events != nil && len(t.Events) == 0 {
			v.add(k+".events", "names no event: list some, or leave the key out for every event")
		}
		for j, e := range t.Events {
			if _, ok := events[e]; !ok {
				v.add(fmt.Sprintf("%s.events[%d]", k, j), "%q is not an event of this config", e)
			}
		}
	}
}

// Webhook is one receiver of the room's notifications.
type Webhook struct {
	// URL is where they are POSTed (absolute http(s)).
	URL string `yaml:"url"`
	// Secret is the signing key, whsec_<base64> of 24 to 64 random bytes
	// (the Standard Webhooks form).
	Secret string `yaml:"secret"`
	// Types are the notifications it wants (WebhookTypes); nil (the key
	// left out) is every type.
	Types []string `yaml:"types"`
}

// WebhookTypes are the notifications' types (DESIGN.md, "Webhooks").
var WebhookTypes = []string{
	"sale.opened", "sale.paused", "sale.resumed", "sale.closed", "sale.soldout",
	"line.formed", "line.cleared", "lottery.drawn", "selection.drawn",
	"settings.changed", "booking.degraded", "booking.recovered",
}

// WebhookSecretPrefix starts every webhook secret.
const WebhookSecretPrefix = "whsec_"

// Key is the webhook's signing key: the bytes its secret's base64 holds.
func (w Webhook) Key() []byte {
	b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(w.Secret, WebhookSecretPrefix))
	return b
}

// Bounds of a webhook's key, as the Standard Webhooks specification puts
// them.
const (
	MinWebhookKeyBytes = 24
	MaxWebhookKeyBytes = 64
)

// validateWebhooks checks the webhooks section.
func validateWebhooks(v *problems, hooks []Webhook) {
	urls := map[string]int{}
	for i, w := range hooks {
		k := fmt.Sprintf("webhooks[%d]", i)
		u, err := url.Parse(w.URL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			v.add(k+".url", "must be an absolute http(s) URL")
		case u.Fragment != "":
			v.add(k+".url", "must have no fragment")
		default:
			if j, dup := urls[w.URL]; dup {
				v.add(k+".url", "duplicates webhooks[%d].url (one receiver, one entry: list its types there)", j)
			}
			urls[w.URL] = i
		}
		// The secret is never quoted in a message.
		if !strings.HasPrefix(w.Secret, WebhookSecretPrefix) {
			v.add(k+".secret", "must be whsec_ followed by the base64 of %d to %d random bytes (e.g. whsec_$(head -c 32 /dev/urandom | base64))", MinWebhookKeyBytes, MaxWebhookKeyBytes)
		} else if b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(w.Secret, WebhookSecretPrefix)); err != nil {
			v.add(k+".secret", "is not base64 after whsec_")
		} else if len(b) < MinWebhookKeyBytes || len(b) > MaxWebhookKeyBytes {
			v.add(k+".secret", "must hold %d to %d bytes, not %d", MinWebhookKeyBytes, MaxWebhookKeyBytes, len(b))
		}
		if w.Types != nil && len(w.Types) == 0 {
			v.add(k+".types", "names no type: list some, or leave the key out for every type")
		}
		for j, t := range w.Types {
			if !slices.Contains(WebhookTypes, t) {
				v.add(fmt.Sprintf("%s.types[%d]", k, j), "%q is not a notification type (%s)", t, strings.Join(WebhookTypes, ", "))
			}
		}
	}
}
