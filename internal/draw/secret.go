package draw

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// The seed is derived, never stored before the draw (DESIGN.md, Fair play,
// third round): Redis keeps the commitment and a random nonce, and the seed
// is HMAC-SHA256(auth.draw_secret, "waitroom draw\n" ‖ event ‖ "\n" ‖ kind
// ‖ "\n" ‖ nonce). One who reads Redis, its AOF or a backup before the draw
// has the nonce but not the secret, so not the seed; the processes that
// commit (a gateway, an admitter) and the one that draws (an admitter) have
// the secret from the config. Once drawn, the seed and the nonce are
// published; the secret never is, and need not be: the commitment,
// SHA-256(seed), binds the seed, whatever made it.

// Kind is what a draw decides, one of the words its seed is derived with.
type Kind string

const (
	Lottery   Kind = "lottery"   // the pre-queue's order at opening
	Selection Kind = "selection" // the presale's ranks at the close
)

// NonceSize is the nonce's length in bytes.
const NonceSize = 16

// ErrNoSecret: a draw to commit or make, and no auth.draw_secret (the
// config's validation stops a process whose events need one).
var ErrNoSecret = errors.New("draw: no draw secret (auth.draw_secret)")

// Secret is auth.draw_secret: it keys every draw's seed.
type Secret []byte

// Seed is the seed of event's draw of kind with nonce.
func (s Secret) Seed(event string, kind Kind, nonce []byte) ([]byte, error) {
	if len(s) == 0 {
		return nil, ErrNoSecret
	}
	m := hmac.New(sha256.New, s)
	m.Write([]byte("waitroom draw\n" + event + "\n" + string(kind) + "\n"))
	m.Write(nonce)
	return m.Sum(nil), nil
}

// Commit draws a nonce (crypto/rand) and the commitment of the seed it
// gives, SHA-256(seed), both hex: what a step script commits if nobody has.
func (s Secret) Commit(event string, kind Kind) (nonceHex, commitmentHex string, err error) {
	var nonce [NonceSize]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", "", fmt.Errorf("draw: nonce: %w", err)
	}
	seed, err := s.Seed(event, kind, nonce[:])
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(nonce[:]), hex.EncodeToString(sum[:]), nil
}

// SeedOf is the seed of the committed draw st (of event and kind), checked
// against its commitment: a secret changed since the commitment would draw
// with a seed nobody can verify, so it draws nothing.
func (s Secret) SeedOf(event string, kind Kind, st Step) ([]byte, error) {
	if len(st.Nonce) != NonceSize {
		return nil, fmt.Errorf("draw: %s of %s: no nonce committed", kind, event)
	}
	seed, err := s.Seed(event, kind, st.Nonce)
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(seed); hex.EncodeToString(sum[:]) != st.Commitment {
		return nil, fmt.Errorf("draw: %s of %s: the seed from auth.draw_secret and the nonce does not match the commitment (the secret changed since it was committed?)", kind, event)
	}
	return seed, nil
}
