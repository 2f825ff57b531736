package proof_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/proof"
)

// signChallenge is a challenge of event with payload (cut or padded to its
// 26 bytes), tagged as the challenge's documented format says (proof.go): so
// that the fuzzer's payloads reach what Verify reads behind the tag.
func signChallenge(event string, payload []byte) string {
	p := make([]byte, 26)
	copy(p, payload)
	key := hmac.New(sha256.New, secret)
	key.Write([]byte("waitroom join proof key v1"))
	m := hmac.New(sha256.New, key.Sum(nil))
	m.Write([]byte("waitroom-proof\x00" + event + "\x00"))
	m.Write(p)
	return base64.RawURLEncoding.EncodeToString(append(p, m.Sum(nil)[:21]...))
}

var proofID = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// FuzzVerify: the X-Waitroom-Proof header is the client's word. Whatever it
// holds, Verify never panics and refuses anything but a solved, unexpired,
// hard enough challenge of this event with one of its errors; an accepted
// proof names a challenge id and a difficulty of at least what was asked,
// and is refused for another event. The fuzzer's challenges are also
// tagged with the right key, so that what lies behind the tag is fuzzed too.
// Seeded with solved challenges and the malformed shapes of proof_test.go.
func FuzzVerify(f *testing.F) {
	k := proof.NewKeeper(secret)
	now := time.Date(2036, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, bits := range []int{1, 4, 8} {
		ch, err := k.Issue("premiere", bits, now)
		if err != nil {
			f.Fatal(err)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(ch.Token)
		// The harness reaches acceptance: the seed verifies, as issued and
		// tagged again.
		for _, c := range []string{ch.Token, signChallenge("premiere", raw[:26])} {
			if _, err := k.Verify("premiere", c+":"+proof.Solve(c, bits), bits, now); err != nil {
				f.Fatalf("a solved seed challenge: %v", err)
			}
		}
		f.Add("premiere", ch.Token+":"+proof.Solve(ch.Token, bits), uint8(bits), raw[:26], proof.Solve(ch.Token, bits))
	}
	f.Add("premiere", "", uint8(1), []byte{1, 1}, "0")
	f.Add("premiere", "abc:123", uint8(1), []byte{2}, "x")
	f.Add("live", "????????????????????????????????????????????????????????????????:1", uint8(28), []byte{}, "99999999999999999999")
	errs := []error{proof.ErrMissing, proof.ErrMalformed, proof.ErrForged, proof.ErrExpired, proof.ErrTooEasy, proof.ErrUnsolved}
	f.Fuzz(func(t *testing.T, event, header string, bits uint8, payload []byte, nonce string) {
		want := int(bits%proof.MaxBits) + 1
		for _, h := range []string{header, signChallenge(event, payload) + ":" + nonce} {
			p, err := k.Verify(event, h, want, now)
			if err != nil {
				known := false
				for _, e := range errs {
					known = known || errors.Is(err, e)
				}
				if !known {
					t.Fatalf("Verify(%q, %q) = %v; want one of the package's errors", event, h, err)
				}
				continue
			}
			// The expiry is the issuer's word: any time after now (a challenge
			// tagged with the right key is the gateway's own; corpus 3e608d64…
			// carries one 110 million years ahead).
			if !proofID.MatchString(p.ID) || p.Bits < want || !p.ExpiresAt.After(now) {
				t.Fatalf("Verify(%q, %q) accepted %+v (asked %d bits at %s)", event, h, p, want, now)
			}
			if _, err := k.Verify(event+"x", h, want, now); !errors.Is(err, proof.ErrForged) {
				t.Fatalf("a proof of %q shown for %q: %v; want ErrForged", event, event+"x", err)
			}
		}
	})
}
