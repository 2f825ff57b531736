package account_test

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

func sign(t *testing.T, m jwt.SigningMethod, k any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	site, other, rotated := testenv.Ed25519Key(t), testenv.Ed25519Key(t), testenv.Ed25519Key(t)
	v := account.NewVerifier([]ed25519.PublicKey{site.Public().(ed25519.PublicKey), rotated.Public().(ed25519.PublicKey)})
	v.Now = func() time.Time { return now }
	claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "fan-42", "aud": "waitroom", "iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix()}
		if edit != nil {
			edit(c)
		}
		return c
	}
	good, _ := account.Mint(site, "fan-42", "", now, 10*time.Minute)
	none := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil))
	pubPEM, _ := account.EncodePublicKeys(site.Public().(ed25519.PublicKey))
	tests := []struct {
		name, token, event string
		ok                 bool
	}{
		{"good", good, "premiere", true},
		{"good, second key of the file", sign(t, jwt.SigningMethodEdDSA, rotated, claims(nil)), "", true},
		{"good for its event", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { c["evt"] = "premiere" })), "premiere", true},
		{"exp exactly an hour ahead", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { c["exp"] = now.Add(time.Hour).Unix() })), "", true},
		{"other key", sign(t, jwt.SigningMethodEdDSA, other, claims(nil)), "", false},
		{"HS256 keyed with the public key", sign(t, jwt.SigningMethodHS256, []byte(pubPEM), claims(nil)), "", false},
		{"HS256 keyed with the raw public key", sign(t, jwt.SigningMethodHS256, []byte(site.Public().(ed25519.PublicKey)), claims(nil)), "", false},
		{"alg none", none, "", false},
		{"alg none, signature stripped", strings.TrimSuffix(good[:strings.LastIndex(good, ".")+1], "."), "", false},
		{"expired", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() })), "", false},
		{"no exp", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { delete(c, "exp") })), "", false},
		{"wrong aud", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { c["aud"] = "booking" })), "", false},
		{"no aud", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { delete(c, "aud") })), "", false},
		{"exp too far in the future", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { c["exp"] = now.Add(2 * time.Hour).Unix() })), "", false},
		{"not yet valid", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() })), "", false},
		{"no sub", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { delete(c, "sub") })), "", false},
		{"sub too long", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("a", 65) })), "", false},
		{"sub with a space", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { c["sub"] = "a b" })), "", false},
		{"another event", sign(t, jwt.SigningMethodEdDSA, site, claims(func(c jwt.MapClaims) { c["evt"] = "other" })), "premiere", false},
		{"garbage", "not.a.jwt", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(tt.token, tt.event)
			if tt.ok {
				if err != nil {
					t.Fatalf("Verify: %v; want ok", err)
				}
				if c.Account != "fan-42" {
					t.Errorf("account = %q; want fan-42", c.Account)
				}
				return
			}
			if !errors.Is(err, account.ErrInvalid) {
				t.Fatalf("Verify = %+v, %v; want ErrInvalid", c, err)
			}
		})
	}
}

func TestLoadKeys(t *testing.T) {
	a, b := testenv.Ed25519Key(t), testenv.Ed25519Key(t)
	pemBytes, err := account.EncodePublicKeys(a.Public().(ed25519.PublicKey), b.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.pem")
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := account.LoadKeys(path)
	if err != nil || len(keys) != 2 {
		t.Fatalf("LoadKeys = %d keys, %v; want 2", len(keys), err)
	}
	empty := filepath.Join(dir, "empty.pem")
	_ = os.WriteFile(empty, []byte("nothing"), 0o600)
	if _, err := account.LoadKeys(empty); err == nil {
		t.Error("LoadKeys of a file without keys: no error")
	}
}
