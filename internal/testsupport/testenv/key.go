package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/waitroom/waitroom/internal/account"
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

// OriginSite is an origin site's signing key for its fans' account tokens
// (account.Mint) and the file of its public half, as
// auth.account_keys_file names it; the file goes with the test.
func OriginSite(tb testing.TB) (ed25519.PrivateKey, string) {
	tb.Helper()
	priv := Ed25519Key(tb)
	pub, err := account.EncodePublicKeys(priv.Public().(ed25519.PublicKey))
	if err != nil {
		tb.Fatal(err)
	}
	file := filepath.Join(tb.TempDir(), "origin.pem")
	if err := os.WriteFile(file, pub, 0o600); err != nil {
		tb.Fatal(err)
	}
	return priv, file
}
