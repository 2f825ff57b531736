package proof_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/proof"
)

var secret = []byte("proof-test-secret-0123456789abcdef")

func setup(t testing.TB, bits int) (*proof.Keeper, proof.Challenge, time.Time) {
	t.Helper()
	k := proof.NewKeeper(secret)
	now := time.Date(2036, 12, 1, 10, 0, 0, 0, time.UTC)
	ch, err := k.Issue("premiere", bits, now)
	if err != nil {
		t.Fatal(err)
	}
	return k, ch, now
}

func TestChallengeShape(t *testing.T) {
	_, ch, now := setup(t, 12)
	if len(ch.Token) != proof.ChallengeLen || proof.ChallengeLen != 63 {
		t.Fatalf("challenge %q is %d characters (ChallengeLen %d); want 63: challenge \":\" is one SHA-256 block", ch.Token, len(ch.Token), proof.ChallengeLen)
	}
	if strings.ContainsAny(ch.Token, ":+/=") {
		t.Errorf("challenge %q is not unpadded base64url", ch.Token)
	}
	if want := now.Add(2 * time.Minute); !ch.ExpiresAt.Equal(want) || ch.Bits != 12 {
		t.Errorf("expires %v bits %d; want %v and 12", ch.ExpiresAt, ch.Bits, want)
	}
	k := proof.NewKeeper(secret)
	seen := map[string]bool{}
	for range 1000 {
		c, err := k.Issue("premiere", 12, now)
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.Token] {
			t.Fatal("two challenges alike")
		}
		seen[c.Token] = true
	}
	for _, bits := range []int{0, -1, proof.MaxBits + 1} {
		if _, err := k.Issue("premiere", bits, now); err == nil {
			t.Errorf("Issue with bits %d: no error", bits)
		}
	}
}

func TestSolveAndVerify(t *testing.T) {
	for _, bits := range []int{1, 4, 8, 12, 16} {
		k, ch, now := setup(t, bits)
		nonce := proof.Solve(ch.Token, bits)
		sum := sha256.Sum256([]byte(ch.Token + ":" + nonce))
		if !proof.Meets(sum[:], bits) {
			t.Fatalf("bits %d: Solve gave %s, whose hash %x does not begin with %d zero bits", bits, nonce, sum, bits)
		}
		p, err := k.Verify("premiere", ch.Token+":"+nonce, bits, now.Add(119*time.Second))
		if err != nil {
			t.Fatalf("bits %d: Verify = %v", bits, err)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(ch.Token)
		if p.ID != base64.RawURLEncoding.EncodeToString(raw[10:26]) || !p.ExpiresAt.Equal(ch.ExpiresAt) || p.Bits != bits {
			t.Errorf("bits %d: proof %+v; want the challenge's id, expiry and bits", bits, p)
		}
	}
}

// The challenge is bound to its event, its expiry and its difficulty, and
// only a solving nonce passes.
func TestVerifyRefuses(t *testing.T) {
	k, ch, now := setup(t, 10)
	nonce := proof.Solve(ch.Token, 10)
	good := ch.Token + ":" + nonce
	other := proof.NewKeeper([]byte("another-deployment-secret-0123456789"))
	wrong := "0"
	for ; ; wrong += "0" { // a nonce that does not solve it
		s := sha256.Sum256([]byte(ch.Token + ":" + wrong))
		if !proof.Meets(s[:], 10) {
			break
		}
	}
	tests := []struct {
		name   string
		k      *proof.Keeper
		event  string
		header string
		bits   int
		at     time.Time
		want   error
	}{
		{"good", k, "premiere", good, 10, now, nil},
		{"easier than issued is fine", k, "premiere", good, 8, now, nil},
		{"missing", k, "premiere", "", 10, now, proof.ErrMissing},
		{"another event", k, "live", good, 10, now, proof.ErrForged},
		{"another secret", other, "premiere", good, 10, now, proof.ErrForged},
		{"expired, at the second", k, "premiere", good, 10, now.Add(2 * time.Minute), proof.ErrExpired},
		{"expired", k, "premiere", good, 10, now.Add(time.Hour), proof.ErrExpired},
		{"difficulty raised since", k, "premiere", good, 11, now, proof.ErrTooEasy},
		{"wrong nonce", k, "premiere", ch.Token + ":" + wrong, 10, now, proof.ErrUnsolved},
		{"no nonce", k, "premiere", ch.Token + ":", 10, now, proof.ErrMalformed},
		{"no colon", k, "premiere", ch.Token + nonce, 10, now, proof.ErrMalformed},
		{"nonce not decimal", k, "premiere", ch.Token + ":12a", 10, now, proof.ErrMalformed},
		{"nonce signed", k, "premiere", ch.Token + ":-1", 10, now, proof.ErrMalformed},
		{"nonce too long", k, "premiere", ch.Token + ":" + strings.Repeat("1", 21), 10, now, proof.ErrMalformed},
		{"challenge cut", k, "premiere", ch.Token[1:] + ":" + nonce, 10, now, proof.ErrMalformed},
		{"not base64url", k, "premiere", strings.Repeat("*", 63) + ":1", 10, now, proof.ErrMalformed},
		{"garbage", k, "premiere", "hello", 10, now, proof.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.k.Verify(tt.event, tt.header, tt.bits, tt.at)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v; want %v", err, tt.want)
			}
		})
	}
}

// Every byte of the challenge is covered by the tag: changing any one (its
// version, difficulty, expiry, id or tag) is refused before its content is
// believed.
func TestVerifyRefusesTampering(t *testing.T) {
	k, ch, now := setup(t, 4)
	raw, err := base64.RawURLEncoding.DecodeString(ch.Token)
	if err != nil || len(raw) != 47 {
		t.Fatalf("challenge decodes to %d bytes, %v", len(raw), err)
	}
	for i := range raw {
		for _, flip := range []byte{0x01, 0x80} {
			b := append([]byte(nil), raw...)
			b[i] ^= flip
			tok := base64.RawURLEncoding.EncodeToString(b)
			// Solved for its own bytes: only the tag can refuse it.
			header := tok + ":" + proof.Solve(tok, 4)
			if _, err := k.Verify("premiere", header, 1, now); !errors.Is(err, proof.ErrForged) {
				t.Fatalf("byte %d ^ %#x: Verify = %v; want ErrForged", i, flip, err)
			}
		}
	}
}

func TestMeets(t *testing.T) {
	tests := []struct {
		sum  []byte
		bits int
		want bool
	}{
		{[]byte{0xff}, 0, true},
		{[]byte{0x7f}, 1, true},
		{[]byte{0x80}, 1, false},
		{[]byte{0x00, 0x0f}, 12, true},
		{[]byte{0x00, 0x10}, 12, false},
		{[]byte{0x00, 0x00, 0x00, 0x0f}, 28, true},
		{[]byte{0x00, 0x00, 0x00, 0x10}, 28, false},
		{[]byte{0x00, 0x00}, 16, true},
		{[]byte{0x00, 0x00}, 17, false},
	}
	for _, tt := range tests {
		if got := proof.Meets(tt.sum, tt.bits); got != tt.want {
			t.Errorf("Meets(%x, %d) = %v; want %v", tt.sum, tt.bits, got, tt.want)
		}
	}
}

// BenchmarkVerify is what a join with proof costs the gateway before Redis:
// one HMAC and one SHA-256. BenchmarkIssue is what a 428 costs.
func BenchmarkVerify(b *testing.B) {
	k, ch, now := setup(b, 8)
	header := ch.Token + ":" + proof.Solve(ch.Token, 8)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Verify("premiere", header, 8, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyForged(b *testing.B) {
	k, ch, now := setup(b, 8)
	header := ch.Token + ":" + proof.Solve(ch.Token, 8)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Verify("live", header, 8, now); err == nil {
			b.Fatal("verified")
		}
	}
}

func BenchmarkIssue(b *testing.B) {
	k, _, now := setup(b, 8)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Issue("premiere", 16, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSolve16 solves fresh challenges of 16 bits as a Go client
// does, on one core: ns/op is one place's work, hashes/s what a bot's core
// gets through.
func BenchmarkSolve16(b *testing.B) {
	k, _, now := setup(b, 16)
	var tries uint64
	for b.Loop() {
		ch, err := k.Issue("premiere", 16, now)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := strconv.ParseUint(proof.Solve(ch.Token, 16), 10, 64)
		tries += n + 1
	}
	b.ReportMetric(float64(tries)/b.Elapsed().Seconds(), "hashes/s")
}
