package pass_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

func TestVerifyRejects(t *testing.T) {
	priv := testenv.Ed25519Key(t)
	s := pass.NewSigner(priv)
	v := pass.NewStaticVerifier(s.PublicKey())
	now := time.Now()
	good, err := s.Mint("t1", "premiere", now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := v.Verify(context.Background(), good); err != nil || c.Ticket != "t1" || c.Event != "premiere" {
		t.Fatalf("good pass: got %+v, %v; want t1/premiere, nil", c, err)
	}

	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims, kid string) string {
		tok := jwt.NewWithClaims(method, claims)
		if kid != "" {
			tok.Header["kid"] = kid
		}
		str, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return str
	}
	base := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": "waitroom", "aud": "booking", "sub": "t1", "evt": "premiere",
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
	}
	with := func(k string, v any) jwt.MapClaims {
		c := base()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	pub := []byte(priv.Public().(ed25519.PublicKey))
	other := testenv.Ed25519Key(t)
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"waitroom","aud":"booking","sub":"t2","evt":"premiere","iat":1,"exp":9999999999}`)) + "." + parts[2]
	none := sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, base(), s.KeyID())

	cases := []struct{ name, token string }{
		{"empty", ""},
		{"garbage", "not.a.jwt"},
		{"alg none", none},
		{"HS256 keyed with the public key", sign(jwt.SigningMethodHS256, pub, base(), s.KeyID())},
		{"tampered payload", tampered},
		{"signed by another key, same kid", sign(jwt.SigningMethodEdDSA, other, base(), s.KeyID())},
		{"unknown kid", sign(jwt.SigningMethodEdDSA, priv, base(), "nope")},
		{"no kid", sign(jwt.SigningMethodEdDSA, priv, base(), "")},
		{"expired", sign(jwt.SigningMethodEdDSA, priv, with("exp", now.Add(-time.Minute).Unix()), s.KeyID())},
		{"no exp", sign(jwt.SigningMethodEdDSA, priv, with("exp", nil), s.KeyID())},
		{"wrong audience", sign(jwt.SigningMethodEdDSA, priv, with("aud", "gateway"), s.KeyID())},
		{"wrong issuer", sign(jwt.SigningMethodEdDSA, priv, with("iss", "evil"), s.KeyID())},
		{"no event", sign(jwt.SigningMethodEdDSA, priv, with("evt", nil), s.KeyID())},
		{"no subject", sign(jwt.SigningMethodEdDSA, priv, with("sub", nil), s.KeyID())},
		{"issued in the future", sign(jwt.SigningMethodEdDSA, priv, with("iat", now.Add(time.Hour).Unix()), s.KeyID())},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(context.Background(), tc.token)
			if !errors.Is(err, pass.ErrInvalid) {
				t.Fatalf("Verify: got %v; want ErrInvalid", err)
			}
		})
	}
}

func TestJWKSVerifierFollowsKeyRotation(t *testing.T) {
	current := pass.NewSigner(testenv.Ed25519Key(t))
	var fetches atomic.Int32
	var serving atomic.Pointer[pass.Signer]
	serving.Store(current)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(serving.Load().JWKS())
	}))
	defer srv.Close()

	v := pass.NewJWKSVerifier(srv.URL, nil)
	clock := time.Now()
	v.Now = func() time.Time { return clock }
	mint := func(s *pass.Signer) string {
		tok, err := s.Mint("t", "e", clock, clock.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if _, err := v.Verify(context.Background(), mint(current)); err != nil {
		t.Fatalf("first verify: %v", err)
	}
	if _, err := v.Verify(context.Background(), mint(current)); err != nil || fetches.Load() != 1 {
		t.Fatalf("second verify: err %v, fetches %d; want nil, 1 (keys are cached)", err, fetches.Load())
	}
	// Rotation: the new kid is unknown, one refetch finds it.
	rotated := pass.NewSigner(testenv.Ed25519Key(t))
	serving.Store(rotated)
	clock = clock.Add(10 * time.Second)
	if _, err := v.Verify(context.Background(), mint(rotated)); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	// A flood of unknown kids does not refetch more than once per interval.
	before := fetches.Load()
	forger := pass.NewSigner(testenv.Ed25519Key(t))
	for i := 0; i < 50; i++ {
		if _, err := v.Verify(context.Background(), mint(forger)); !errors.Is(err, pass.ErrInvalid) {
			t.Fatalf("forged kid: %v; want ErrInvalid", err)
		}
	}
	if got := fetches.Load() - before; got > 1 {
		t.Fatalf("unknown-kid flood caused %d fetches; want at most 1", got)
	}
}

func TestKeyFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.pem")
	made, err := pass.EnsureKeyFile(path)
	if err != nil || !made {
		t.Fatalf("EnsureKeyFile: %v, %v; want true, nil", made, err)
	}
	if made, _ := pass.EnsureKeyFile(path); made {
		t.Fatal("EnsureKeyFile overwrote an existing key")
	}
	priv, err := pass.LoadPrivateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	s := pass.NewSigner(priv)
	tok, _ := s.Mint("t", "e", time.Now(), time.Now().Add(time.Minute))
	if _, err := pass.NewStaticVerifier(priv.Public().(ed25519.PublicKey)).Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
}
