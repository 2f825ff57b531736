package pass_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// fuzzKey is the gateway's signing key of the fuzz target: fixed, so that
// the corpus's passes verify on every run.
var fuzzKey = ed25519.NewKeyFromSeed([]byte("pass-fuzz-key-seed-0123456789abc"))

// FuzzVerify: a pass (Authorization: Bearer, cookie wr_a_{event}) is the
// client's word at the gate and at the booking core. Whatever it holds,
// Verify never panics and refuses anything but an EdDSA pass of a known
// kid, iss "waitroom", aud "booking", unexpired, with sub, evt and iat,
// with ErrInvalid; an accepted one names a ticket and an event, and stops
// verifying once its signature changes. Passes are fuzzed as they come, and
// as headers and claims signed with the gateway's key.
func FuzzVerify(f *testing.F) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := pass.NewSigner(fuzzKey)
	v := pass.NewStaticVerifier(s.PublicKey())
	v.Now = func() time.Time { return now }
	good, err := s.Mint("1a.AAAAAAAAAAAAAAAAAAAAAA", "premiere", now, now.Add(10*time.Minute))
	if err != nil {
		f.Fatal(err)
	}
	acct, _ := s.MintFor("2b.BBBBBBBBBBBBBBBBBBBBBB", "live", "acct-42", now, now.Add(time.Minute))
	hdr := []byte(`{"alg":"EdDSA","kid":"` + s.KeyID() + `","typ":"JWT"}`)
	f.Add(good, hdr, []byte(`{"iss":"waitroom","aud":"booking","sub":"t","evt":"premiere","iat":1796119200,"exp":1796119800}`))
	f.Add(acct, hdr, []byte(`{"iss":"waitroom","aud":["booking"],"sub":"t","evt":"e","acct":"a","iat":1796119200.25,"exp":1796119800}`))
	f.Add("eyJhbGciOiJub25lIn0.e30.", []byte(`{"alg":"none"}`), []byte(`{}`))
	f.Add("Bearer x.y.z", []byte(`{"alg":"EdDSA","kid":7}`), []byte(`{"iss":"waitroom","aud":"booking","sub":"","evt":"","iat":null,"exp":"soon"}`))
	// The harness reaches acceptance: the seeds' own passes verify, as
	// tokens and as signed parts.
	for _, tok := range []string{good, acct, testenv.SignedJWT(fuzzKey, hdr, []byte(`{"iss":"waitroom","aud":"booking","sub":"t","evt":"premiere","iat":1796119200,"exp":1796119800}`))} {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			f.Fatalf("a seed pass does not verify: %v", err)
		}
	}
	f.Fuzz(func(t *testing.T, token string, header, claims []byte) {
		for _, tok := range []string{token, testenv.SignedJWT(fuzzKey, header, claims)} {
			c, err := v.Verify(context.Background(), tok)
			if err != nil {
				if !errors.Is(err, pass.ErrInvalid) {
					t.Fatalf("Verify(%q) = %v; want ErrInvalid", tok, err)
				}
				continue
			}
			if c.Ticket == "" || c.Event == "" || c.IssuedAt.IsZero() || c.ExpiresAt.Before(now.Add(-2*time.Second)) {
				t.Fatalf("Verify(%q) accepted %+v at %s", tok, c, now)
			}
			forged := []byte(tok)
			forged[len(forged)-2] ^= 0x04
			if _, err := v.Verify(context.Background(), string(forged)); err == nil && string(forged) != tok {
				t.Fatalf("a pass with its signature changed verifies: %q", forged)
			}
		}
	})
}
