package account_test

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/account"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// fuzzKey is the origin site's key of the fuzz target: fixed, so that the
// corpus's tokens verify on every run.
var fuzzKey = ed25519.NewKeyFromSeed([]byte("account-fuzz-key-seed-0123456789"))

// FuzzVerify: an account token (X-Waitroom-Account, cookie wr_u) is the
// client's word. Whatever it holds, Verify never panics and refuses
// anything but an EdDSA token of the site's key, aud "waitroom", a
// well-formed sub, unexpired and at most an hour ahead, for this event, with
// ErrInvalid; an accepted one says exactly that. Tokens are fuzzed as they
// come, and as headers and claims signed with the site's key.
func FuzzVerify(f *testing.F) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := account.NewVerifier([]ed25519.PublicKey{fuzzKey.Public().(ed25519.PublicKey)})
	v.Now = func() time.Time { return now }
	good, err := account.Mint(fuzzKey, "acct-42", "premiere", now, 30*time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	anyEvent, _ := account.Mint(fuzzKey, "user@example.com", "", now, time.Hour)
	eddsa := []byte(`{"alg":"EdDSA","typ":"JWT"}`)
	f.Add(good, "premiere", eddsa, []byte(`{"sub":"acct-42","aud":"waitroom","exp":1796121000,"evt":"premiere"}`))
	f.Add(anyEvent, "live", eddsa, []byte(`{"sub":"a","aud":["x","waitroom"],"exp":1796121000.5}`))
	f.Add("eyJhbGciOiJub25lIn0.e30.", "premiere", []byte(`{"alg":"none"}`), []byte(`{"sub":"a","aud":"waitroom","exp":1796119200}`))
	f.Add("a.b.c", "", []byte(`{"alg":"HS256"}`), []byte(`{"sub":"","aud":"waitroom","exp":99999999999}`))
	// The harness reaches acceptance: the seeds' own tokens verify, as
	// tokens and as signed parts.
	for _, tok := range []string{good, anyEvent, testenv.SignedJWT(fuzzKey, eddsa, []byte(`{"sub":"acct-42","aud":"waitroom","exp":1796121000,"evt":"premiere"}`))} {
		if _, err := v.Verify(tok, "premiere"); err != nil {
			f.Fatalf("a seed token does not verify: %v", err)
		}
	}
	f.Fuzz(func(t *testing.T, token, event string, header, claims []byte) {
		for _, tok := range []string{token, testenv.SignedJWT(fuzzKey, header, claims)} {
			c, err := v.Verify(tok, event)
			if err != nil {
				if !errors.Is(err, account.ErrInvalid) {
					t.Fatalf("Verify(%q) = %v; want ErrInvalid", tok, err)
				}
				continue
			}
			switch {
			case !account.ValidID(c.Account):
				t.Fatalf("Verify(%q) accepted account %q", tok, c.Account)
			case c.ExpiresAt.Before(now.Add(-5*time.Second)) || c.ExpiresAt.After(now.Add(account.MaxTTL+5*time.Second)):
				t.Fatalf("Verify(%q) accepted exp %s at %s", tok, c.ExpiresAt, now)
			case event != "" && c.Event != "" && c.Event != event:
				t.Fatalf("Verify(%q, %q) accepted a token of event %q", tok, event, c.Event)
			}
		}
	})
}
