package pass

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Fixed claims of the access pass.
const (
	Issuer   = "waitroom"
	Audience = "booking"
)

// The audiences of the passes of a site behind the room (forward auth):
// each is refused where another is asked for, so the booking core never
// takes a site's pass, nor a site a booking pass or a return token.
const (
	// AudienceSite is the pass a site behind the room keeps in its cookie
	// wr_fa_{event}, good while its ticket is active.
	AudienceSite = "site"
	// AudienceReturn is the one-use token (wr_token) that the room adds to
	// the fan's way back to the site, for the site's pass.
	AudienceReturn = "forward-auth"
)

// ErrInvalid is returned for any pass that does not verify: bad signature,
// wrong algorithm, audience or issuer, expired, unknown key, malformed. The
// reason is wrapped for logs; callers answer all of them the same way.
var ErrInvalid = errors.New("pass: invalid access token")

// Claims is what a verified pass tells.
type Claims struct {
	Ticket    string // sub: the ticket id
	Event     string // evt
	Account   string // acct: the fan's account ("" = none)
	ID        string // jti: a return token's own id ("" for the passes)
	IssuedAt  time.Time
	ExpiresAt time.Time
}

type jwtClaims struct {
	Event   string `json:"evt"`
	Account string `json:"acct,omitempty"`
	jwt.RegisteredClaims
}

// Signer mints passes with the gateway's Ed25519 key.
type Signer struct {
	priv ed25519.PrivateKey
	kid  string
	jwks []byte
}

// NewSigner returns a Signer for priv.
func NewSigner(priv ed25519.PrivateKey) *Signer {
	pub := priv.Public().(ed25519.PublicKey)
	s := &Signer{priv: priv, kid: KeyID(pub)}
	s.jwks, _ = json.Marshal(jwkSet{Keys: []jwk{{
		Kty: "OKP", Crv: "Ed25519", Alg: "EdDSA", Use: "sig", Kid: s.kid,
		X: base64.RawURLEncoding.EncodeToString(pub),
	}}})
	return s
}

// PublicKey is the signer's public key.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// KeyID is the kid the signer puts in every header.
func (s *Signer) KeyID() string { return s.kid }

// Mint signs a pass for ticketID of event, valid until exp. aud is written
// as the single string "booking", the form every verifier understands.
func (s *Signer) Mint(ticketID, event string, iat, exp time.Time) (string, error) {
	return s.MintFor(ticketID, event, "", iat, exp)
}

// MintFor is Mint for a ticket of account (claim acct; none when "").
func (s *Signer) MintFor(ticketID, event, account string, iat, exp time.Time) (string, error) {
	c := claimsOf(Audience, ticketID, event, iat, exp)
	if account != "" {
		c["acct"] = account
	}
	return s.sign(c)
}

// MintSite signs the pass of a site behind the room (aud "site") for
// ticketID of event, valid until exp (the end of the ticket's window).
func (s *Signer) MintSite(ticketID, event string, iat, exp time.Time) (string, error) {
	return s.sign(claimsOf(AudienceSite, ticketID, event, iat, exp))
}

// MintReturn signs a return token (aud "forward-auth") for ticketID of
// event, valid until exp, with the id jti that spends it.
func (s *Signer) MintReturn(ticketID, event, jti string, iat, exp time.Time) (string, error) {
	c := claimsOf(AudienceReturn, ticketID, event, iat, exp)
	c["jti"] = jti
	return s.sign(c)
}

func claimsOf(aud, ticketID, event string, iat, exp time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss": Issuer,
		"aud": aud,
		"sub": ticketID,
		"evt": event,
		"iat": iat.Unix(),
		"exp": exp.Unix(),
	}
}

func (s *Signer) sign(c jwt.MapClaims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = s.kid
	return t.SignedString(s.priv)
}

// JWKS is the JSON Web Key Set publishing the signer's public key.
func (s *Signer) JWKS() []byte { return s.jwks }

type jwkSet struct {
	Keys []jwk `json:"keys"`
}

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
	Kid string `json:"kid"`
	X   string `json:"x"`
}

// Verifier checks passes: EdDSA only, iss, aud, exp, and a known kid.
type Verifier struct {
	mu   sync.RWMutex
	keys map[string]ed25519.PublicKey

	// JWKS source; empty for a static verifier.
	url         string
	client      *http.Client
	lastFetch   time.Time
	minInterval time.Duration
	fetchMu     sync.Mutex

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

// leeway is how far past its exp a token is still taken (clocks differ).
const leeway = 2 * time.Second

func newVerifier(aud string) *Verifier {
	v := &Verifier{keys: map[string]ed25519.PublicKey{}, minInterval: 5 * time.Second}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithAudience(aud),
		jwt.WithIssuer(Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	)
	return v
}

// NewStaticVerifier trusts exactly pub, for access passes (aud "booking").
func NewStaticVerifier(pub ed25519.PublicKey) *Verifier {
	return NewStaticVerifierFor(pub, Audience)
}

// NewStaticVerifierFor trusts exactly pub, for tokens of audience aud
// (Audience, AudienceSite or AudienceReturn) and no other.
func NewStaticVerifierFor(pub ed25519.PublicKey, aud string) *Verifier {
	v := newVerifier(aud)
	v.keys[KeyID(pub)] = pub
	return v
}

// NewJWKSVerifier fetches keys from url (the gateway's JWKS) on first use and
// again when a pass names an unknown kid (key rotation), at most once per 5s.
func NewJWKSVerifier(url string, client *http.Client) *Verifier {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	v := newVerifier(Audience)
	v.url, v.client = url, client
	return v
}

// Verify checks token and returns its claims, or an error wrapping ErrInvalid
// (or a fetch error when the JWKS cannot be read at all).
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	var c jwtClaims
	_, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errors.New("no kid")
		}
		return v.key(ctx, kid)
	})
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Subject == "" || c.Event == "" || c.IssuedAt == nil {
		return Claims{}, fmt.Errorf("%w: missing sub, evt or iat", ErrInvalid)
	}
	return Claims{Ticket: c.Subject, Event: c.Event, Account: c.Account, ID: c.ID, IssuedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time}, nil
}

func (v *Verifier) key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	v.mu.RLock()
	k, ok := v.keys[kid]
	v.mu.RUnlock()
	if ok {
		return k, nil
	}
	if v.url == "" {
		return nil, errors.New("unknown kid")
	}
	if err := v.refresh(ctx); err != nil {
		return nil, err
	}
	v.mu.RLock()
	k, ok = v.keys[kid]
	v.mu.RUnlock()
	if !ok {
		return nil, errors.New("unknown kid")
	}
	return k, nil
}

// refresh re-reads the JWKS, at most once per minInterval however many
// passes with unknown kids arrive (forged kids must not DoS the gateway).
func (v *Verifier) refresh(ctx context.Context) error {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	if !v.lastFetch.IsZero() && v.now().Sub(v.lastFetch) < v.minInterval {
		return nil
	}
	v.lastFetch = v.now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url, nil)
	if err != nil {
		return err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("pass: fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pass: fetch jwks: status %d", resp.StatusCode)
	}
	var set jwkSet
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("pass: jwks: %w", err)
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			continue
		}
		keys[k.Kid] = ed25519.PublicKey(x)
	}
	v.mu.Lock()
	v.keys = keys
	v.mu.Unlock()
	return nil
}
