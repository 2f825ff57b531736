package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
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
