// Package account is the fan's account as the origin site vouches for it:
// the short-lived EdDSA JWT the site where fans log in signs (aud
// "waitroom", sub = the account id, exp at most an hour ahead, optional evt),
// and its verification against the site's Ed25519 public keys
// (auth.account_keys_file, one PEM block per key, so a key can be rotated
// by listing the old and the new one for a while).
//
// Only EdDSA is accepted: the algorithm is pinned, so neither HS256 signed
// with a public key nor alg "none" ever verifies. The gateway verifies the
// token at join; from then on the account travels inside the signed ticket
// and the access pass (claim acct), never again as the fan's word.
package account

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Audience is the aud every account token must carry.
const Audience = "waitroom"

// MaxTTL is how far ahead an account token's exp may be: a token is a
// login's short-lived proof, not a credential to keep.
const MaxTTL = time.Hour

// leeway absorbs the clock skew between the origin site and the gateway.
const leeway = 5 * time.Second

// ErrInvalid is any token that does not verify: malformed, another
// algorithm, an unknown key, wrong audience, expired, exp too far ahead,
// missing or malformed sub, another event. The reason is wrapped for logs;
// the gateway answers every one 401 invalid_account.
var ErrInvalid = errors.New("account: invalid account token")

// idPattern is an account id: 1..64 characters an origin site's user ids
// are made of. Bounded so the signed ticket that carries it stays small.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9._:@+-]{1,64}$`)

// ValidID reports whether id is a well-formed account id.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Claims is what a verified account token tells.
type Claims struct {
	Account string // sub
	Event   string // evt; "" = any event
	// Email is the email claim, as the origin site signed it ("" = none):
	// the only address the room ever emails for this account (the away
	// route checks its form).
	Email     string
	ExpiresAt time.Time
}

type jwtClaims struct {
	Event string `json:"evt,omitempty"`
	Email string `json:"email,omitempty"`
	jwt.RegisteredClaims
}

// Verifier checks account tokens against the origin site's keys.
type Verifier struct {
	keys   []ed25519.PublicKey
	parser *jwt.Parser

	// Now is the verifier's clock (nil = time.Now); set it before use.
	Now func() time.Time
}

func (v *Verifier) now() time.Time {
	if v.Now == nil {
		return time.Now()
	}
	return v.Now()
}

// NewVerifier trusts keys.
func NewVerifier(keys []ed25519.PublicKey) *Verifier {
	v := &Verifier{keys: keys}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	)
	return v
}

// Verify checks token and, when event is not "", that it is good for event
// (no evt, or that one). Any failure wraps ErrInvalid.
func (v *Verifier) Verify(token, event string) (Claims, error) {
	if len(token) > 4096 {
		return Claims{}, fmt.Errorf("%w: token too long", ErrInvalid)
	}
	var last error
	// An origin site has a key or two: each is tried (no kid needed).
	for _, k := range v.keys {
		var c jwtClaims
		_, err := v.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return k, nil })
		if err != nil {
			last = err
			if errors.Is(err, jwt.ErrTokenSignatureInvalid) {
				continue // perhaps the next key
			}
			break // the same for every key
		}
		switch {
		case !ValidID(c.Subject):
			return Claims{}, fmt.Errorf("%w: sub must be 1..64 of [A-Za-z0-9._:@+-]", ErrInvalid)
		case c.ExpiresAt.Time.After(v.now().Add(MaxTTL + leeway)):
			return Claims{}, fmt.Errorf("%w: exp more than %s ahead", ErrInvalid, MaxTTL)
		case event != "" && c.Event != "" && c.Event != event:
			return Claims{}, fmt.Errorf("%w: token is for event %q", ErrInvalid, c.Event)
		}
		return Claims{Account: c.Subject, Event: c.Event, Email: c.Email, ExpiresAt: c.ExpiresAt.Time}, nil
	}
	if last == nil {
		last = errors.New("no keys")
	}
	return Claims{}, fmt.Errorf("%w: %v", ErrInvalid, last)
}

// LoadKeys reads every Ed25519 public key (PKIX "PUBLIC KEY" PEM blocks) of
// the file at path; it must hold at least one, and nothing else.
func LoadKeys(path string) ([]ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("account keys: %w", err)
	}
	var keys []ed25519.PublicKey
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("account keys %s: %w", path, err)
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("account keys %s: not an Ed25519 key (%T)", path, k)
		}
		keys = append(keys, ek)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("account keys %s: no PUBLIC KEY block", path)
	}
	return keys, nil
}

// EncodePublicKeys is the PEM file LoadKeys reads.
func EncodePublicKeys(keys ...ed25519.PublicKey) ([]byte, error) {
	var out []byte
	for _, k := range keys {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return nil, err
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	return out, nil
}

// Mint signs an account token as an origin site does (the demo's origin
// helper and tests): sub account, aud "waitroom", exp now + ttl, and evt
// when event is not "".
func Mint(priv ed25519.PrivateKey, account, event string, now time.Time, ttl time.Duration) (string, error) {
	return MintWithEmail(priv, account, event, "", now, ttl)
}

// MintWithEmail is Mint with an email claim ("" = none).
func MintWithEmail(priv ed25519.PrivateKey, account, event, email string, now time.Time, ttl time.Duration) (string, error) {
	c := jwtClaims{Event: event, Email: email, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   account,
		Audience:  jwt.ClaimStrings{Audience},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(priv)
}
