package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"testing"
)

// Ed25519Key is a new Ed25519 private key: a gateway's pass signing key, or
// an origin site's account key, of this test's own.
func Ed25519Key(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return priv
}

// SignedJWT is a compact JWT of header and claims as they are (any bytes:
// a fuzzer's), signed with key (EdDSA), so that what a verifier makes of
// them is reached past the signature, at its header's and claims' checks.
func SignedJWT(key ed25519.PrivateKey, header, claims []byte) string {
	in := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	return in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(in)))
}
