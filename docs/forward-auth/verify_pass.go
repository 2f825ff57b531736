//go:build ignore

// An origin behind the room may check the fan's pass itself (the cookie
// wr_fa_<event>) against the room's public keys, with any JOSE library;
// this one uses github.com/golang-jwt/jwt/v5. The pass says the fan was
// admitted when it was made; only forward auth sees a revocation or a
// leave at once.
//
//	go run verify_pass.go https://tickets.example.com/.well-known/jwks.json "$PASS"
package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/golang-jwt/jwt/v5"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: verify_pass JWKS_URL PASS")
		os.Exit(2)
	}
	keys, err := fetchKeys(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var claims struct {
		Event string `json:"evt"`
		jwt.RegisteredClaims
	}
	_, err = jwt.ParseWithClaims(os.Args[2], &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if k, ok := keys[kid]; ok {
			return k, nil
		}
		return nil, fmt.Errorf("unknown key %q", kid)
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer("waitroom"), jwt.WithAudience("site"), jwt.WithExpirationRequired())
	if err != nil {
		fmt.Fprintln(os.Stderr, "refused:", err)
		os.Exit(1)
	}
	fmt.Printf("event %s ticket %s until %s\n", claims.Event, claims.Subject, claims.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))
}

// fetchKeys reads the room's JWKS: its Ed25519 keys by kid.
func fetchKeys(url string) (map[string]ed25519.PublicKey, error) {
	res, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var set struct {
		Keys []struct{ Kty, Crv, Kid, X string }
	}
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		return nil, err
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if k.Kty == "OKP" && k.Crv == "Ed25519" && err == nil && len(x) == ed25519.PublicKeySize {
			keys[k.Kid] = x
		}
	}
	return keys, nil
}
