// Package pass is the access pass: the short-lived EdDSA (Ed25519) JWT the
// gateway mints when a ticket is admitted, the JWKS that publishes its public
// key, and the verifier the booking core and the gateway use to check it.
//
// Only EdDSA is accepted (the algorithm is pinned), with iss "waitroom",
// aud "booking", sub = ticket id, evt = event id and exp = the end of the
// ticket's active window. A site behind the room (forward auth) gets passes
// of its own, aud "site", and the way back to it carries a one-use return
// token, aud "forward-auth" with a jti: a verifier takes one audience only.
package pass

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LoadPrivateKey reads an Ed25519 private key in PKCS#8 PEM.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	return loadKey[ed25519.PrivateKey](path, "signing key", x509.ParsePKCS8PrivateKey)
}

// LoadPublicKey reads an Ed25519 public key in PKIX PEM.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	return loadKey[ed25519.PublicKey](path, "public key", x509.ParsePKIXPublicKey)
}

// loadKey reads the one PEM block of the file at path and parses it into
// a key of type K; what names the key in errors.
func loadKey[K any](path, what string, parse func([]byte) (any, error)) (K, error) {
	var zero K
	b, err := os.ReadFile(path)
	if err != nil {
		return zero, fmt.Errorf("pass: %s: %w", what, err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return zero, fmt.Errorf("pass: %s %s: no PEM block", what, path)
	}
	k, err := parse(blk.Bytes)
	if err != nil {
		return zero, fmt.Errorf("pass: %s %s: %w", what, path, err)
	}
	ek, ok := k.(K)
	if !ok {
		return zero, fmt.Errorf("pass: %s %s: not an Ed25519 key (%T)", what, path, k)
	}
	return ek, nil
}

// EnsureKeyFile creates a new Ed25519 private key at path (PKCS#8 PEM, mode
// 0600) unless a file is already there. It reports whether it created one.
func EnsureKeyFile(path string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return false, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return true, os.WriteFile(path, b, 0o600)
}

// KeyID names a public key: the first 16 bytes of its SHA-256, base64url.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}
