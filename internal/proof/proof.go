// Package proof is the proof of work a client pays for a new place in line
// (DESIGN.md, "Proof of work at join"). The gateway hands out a challenge
// bound to the event; the client finds a nonce (decimal digits) such that
// SHA-256(challenge ":" nonce) begins with bits zero bits, about 2^bits
// hashes of work, and joins again with both. Checking it costs the gateway
// one HMAC and one SHA-256, and no Redis: a challenge is stateless, signed
// with a key derived from the ticket secret. That it is spent only once is
// the line's business (queue.Store.JoinProved), since only Redis is shared
// by every gateway replica.
package proof

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync"
	"time"
)

// A challenge is base64url(payload ‖ tag), where
//
//	payload = version(1) ‖ bits(1) ‖ expiresAt unix ms (8, big-endian) ‖ id(16)
//	tag     = HMAC-SHA256(key, "waitroom-proof\x00" ‖ event ‖ "\x00" ‖ payload)[:21]
//	key     = HMAC-SHA256(ticket_secret, "waitroom join proof key v1")
//
// The id's 16 bytes come from crypto/rand: it is what the line records as
// spent. The tag binds the challenge to its event, its expiry and its
// difficulty, so none can be changed or carried to another event. The key is
// derived from the ticket secret under its own label: a challenge's tag can
// never pass as a ticket's, nor the other way round.
//
// 26 + 21 = 47 bytes make exactly 63 characters of base64url, so that
// challenge ":" is one SHA-256 block: a solver hashes that block once and
// each nonce after it costs one compression, in a fan's browser as in a
// bot's server (21 bytes, 168 bits, is still more tag than the 128 bits
// RFC 2104 §5 asks of a truncated HMAC).
const (
	version    = 1
	idLen      = 16
	tagLen     = 21
	payloadLen = 1 + 1 + 8 + idLen
	rawLen     = payloadLen + tagLen
	// ChallengeLen is the length of every challenge.
	ChallengeLen = (rawLen*8 + 5) / 6
	// maxNonceLen bounds the nonce: 20 digits hold every uint64, far more
	// tries than any difficulty up to MaxBits needs.
	maxNonceLen = 20
)

// TTL is how long a challenge is good for.
const TTL = 2 * time.Minute

// MaxBits is the highest difficulty (config admission.join_proof_bits):
// 2^28 hashes are minutes of a phone's time already.
const MaxBits = 28

// Errors of Verify. A client that gets one is handed a fresh challenge.
var (
	// ErrMissing: no proof at all.
	ErrMissing = errors.New("proof: missing")
	// ErrMalformed: not "<challenge>:<decimal nonce>", or not a challenge.
	ErrMalformed = errors.New("proof: malformed")
	// ErrForged: the tag is wrong: forged, altered, another event's, or
	// another deployment's (another secret).
	ErrForged = errors.New("proof: challenge not issued for this event")
	// ErrExpired: the challenge is older than TTL.
	ErrExpired = errors.New("proof: challenge expired")
	// ErrTooEasy: the challenge asks fewer bits than the event does now
	// (the difficulty was raised since it was issued).
	ErrTooEasy = errors.New("proof: challenge easier than the event asks")
	// ErrUnsolved: the nonce does not solve the challenge.
	ErrUnsolved = errors.New("proof: nonce does not solve the challenge")
)

// Challenge is what a client without a valid proof is told.
type Challenge struct {
	Token     string
	Bits      int
	ExpiresAt time.Time
}

// Proof is a verified proof: its challenge's id, to be spent once, and when
// it expires (after which nobody may spend it).
type Proof struct {
	ID        string // base64url of the challenge's 16 random bytes
	ExpiresAt time.Time
	Bits      int
}

var b64 = base64.RawURLEncoding.Strict()

// Keeper issues and verifies the challenges of one deployment.
type Keeper struct {
	key  []byte
	macs sync.Pool // keyed HMAC states: hmac.New hashes the key's pads again on every call
}

// NewKeeper derives the challenges' key from ticketSecret (config
// auth.ticket_secret).
func NewKeeper(ticketSecret []byte) *Keeper {
	m := hmac.New(sha256.New, ticketSecret)
	m.Write([]byte("waitroom join proof key v1"))
	return &Keeper{key: m.Sum(nil)}
}

func (k *Keeper) tag(event string, payload []byte) []byte {
	m, _ := k.macs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, k.key)
	}
	m.Reset()
	var msg [128]byte // one Write, and no allocation for an event id of up to 64 bytes
	b := append(append(append(append(msg[:0], "waitroom-proof\x00"...), event...), 0), payload...)
	m.Write(b)
	var sum [sha256.Size]byte
	out := m.Sum(sum[:0])[:tagLen]
	k.macs.Put(m)
	return out
}

// Issue makes a challenge of bits (1..MaxBits) for event, good until now + TTL.
func (k *Keeper) Issue(event string, bits int, now time.Time) (Challenge, error) {
	if bits < 1 || bits > MaxBits {
		return Challenge{}, fmt.Errorf("proof: bits %d out of 1..%d", bits, MaxBits)
	}
	exp := now.Add(TTL).Truncate(time.Millisecond)
	b := make([]byte, payloadLen, rawLen)
	b[0], b[1] = version, byte(bits)
	binary.BigEndian.PutUint64(b[2:10], uint64(exp.UnixMilli()))
	if _, err := rand.Read(b[10:payloadLen]); err != nil {
		return Challenge{}, fmt.Errorf("proof: %w", err)
	}
	b = append(b, k.tag(event, b)...)
	return Challenge{Token: b64.EncodeToString(b), Bits: bits, ExpiresAt: exp}, nil
}

// Verify checks header ("<challenge>:<nonce>", as the client sent it) for a
// new place in event, which asks bits now: a challenge of this event
// (tag checked in constant time before anything in it is believed), not
// expired at now, at least as hard as bits, and solved by the nonce. It
// costs one HMAC and one SHA-256 and touches nothing else; it cannot know
// whether the proof was spent already.
func (k *Keeper) Verify(event, header string, bits int, now time.Time) (Proof, error) {
	if header == "" {
		return Proof{}, ErrMissing
	}
	if len(header) < ChallengeLen+2 || len(header) > ChallengeLen+1+maxNonceLen || header[ChallengeLen] != ':' {
		return Proof{}, ErrMalformed
	}
	nonce := header[ChallengeLen+1:]
	for i := 0; i < len(nonce); i++ {
		if nonce[i] < '0' || nonce[i] > '9' {
			return Proof{}, ErrMalformed
		}
	}
	var raw [rawLen + 2]byte // decoding 63 characters needs room for 47⅜ bytes
	n, err := b64.Decode(raw[:], []byte(header[:ChallengeLen]))
	if err != nil || n != rawLen {
		return Proof{}, ErrMalformed
	}
	payload, tag := raw[:payloadLen], raw[payloadLen:rawLen]
	if !hmac.Equal(tag, k.tag(event, payload)) {
		return Proof{}, ErrForged
	}
	if payload[0] != version {
		return Proof{}, ErrMalformed
	}
	got := int(payload[1])
	exp := time.UnixMilli(int64(binary.BigEndian.Uint64(payload[2:10])))
	switch {
	case !now.Before(exp):
		return Proof{}, ErrExpired
	case got < bits:
		return Proof{}, ErrTooEasy
	}
	var h [ChallengeLen + 1 + maxNonceLen]byte
	sum := sha256.Sum256(h[:copy(h[:], header)])
	if !Meets(sum[:], got) {
		return Proof{}, ErrUnsolved
	}
	return Proof{ID: b64.EncodeToString(payload[10:payloadLen]), ExpiresAt: exp, Bits: got}, nil
}

// Meets reports whether sum begins with bits zero bits.
func Meets(sum []byte, bits int) bool {
	for _, b := range sum {
		switch {
		case bits <= 0:
			return true
		case bits < 8:
			return b>>(8-bits) == 0
		case b != 0:
			return false
		}
		bits -= 8
	}
	return bits <= 0
}

// Solve finds the smallest nonce that solves challenge at bits, as a client
// does: challenge ":" is hashed once (one block when the challenge is
// ChallengeLen long) and each try starts again from that state and hashes
// only its nonce (about 120 ns a try on one core of the machine the figures
// in docs/OPERATIONS.md come from). It is what the tests, the benchmarks
// and a Go client use; the fans' pages run the same search in JavaScript
// (the SDK's solveProof, gateway/web/sdk/waitroom.js).
func Solve(challenge string, bits int) string {
	h := sha256.New()
	h.Write([]byte(challenge + ":"))
	state, _ := h.(encoding.BinaryMarshaler).MarshalBinary()
	restore := h.(encoding.BinaryUnmarshaler)
	var (
		digits []byte
		sum    [sha256.Size]byte
	)
	for n := uint64(0); ; n++ {
		digits = strconv.AppendUint(digits[:0], n, 10)
		_ = restore.UnmarshalBinary(state) // the state it marshalled itself
		h.Write(digits)
		if Meets(h.Sum(sum[:0]), bits) {
			return string(digits)
		}
	}
}
