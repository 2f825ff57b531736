package pass_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// Each kind of token is good for its own audience only: a site's pass is
// no booking pass, a return token is neither, and a booking pass opens no
// site.
func TestAudiencesAreKeptApart(t *testing.T) {
	s := pass.NewSigner(testenv.Ed25519Key(t))
	pub := s.PublicKey()
	now := time.Now()
	exp := now.Add(time.Minute)
	booking, err := s.Mint("t1", "premiere", now, exp)
	if err != nil {
		t.Fatal(err)
	}
	site, err := s.MintSite("t1", "premiere", now, exp)
	if err != nil {
		t.Fatal(err)
	}
	ret, err := s.MintReturn("t1", "premiere", "j1", now, exp)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{pass.Audience: booking, pass.AudienceSite: site, pass.AudienceReturn: ret}
	for _, aud := range []string{pass.Audience, pass.AudienceSite, pass.AudienceReturn} {
		v := pass.NewStaticVerifierFor(pub, aud)
		for kind, tok := range tokens {
			c, err := v.Verify(context.Background(), tok)
			if kind == aud {
				if err != nil || c.Ticket != "t1" || c.Event != "premiere" {
					t.Errorf("verifier of %q, its own token: %+v, %v; want t1/premiere", aud, c, err)
				}
				if want := map[string]string{pass.AudienceReturn: "j1"}[aud]; c.ID != want {
					t.Errorf("verifier of %q: jti %q; want %q", aud, c.ID, want)
				}
				continue
			}
			if !errors.Is(err, pass.ErrInvalid) {
				t.Errorf("verifier of %q took a token of %q: %+v, %v", aud, kind, c, err)
			}
		}
	}
	if _, err := pass.NewStaticVerifier(pub).Verify(context.Background(), site); !errors.Is(err, pass.ErrInvalid) {
		t.Errorf("the booking verifier took a site's pass: %v", err)
	}
}

// The cache takes again what the verifier took, and only that: a token
// differing by a byte, or one past its exp (and the leeway), is checked in
// full and refused; however many tokens come, it keeps at most its size.
func TestCacheTakesOnlyWhatVerified(t *testing.T) {
	s := pass.NewSigner(testenv.Ed25519Key(t))
	v := pass.NewStaticVerifierFor(s.PublicKey(), pass.AudienceSite)
	now := time.Now()
	v.Now = func() time.Time { return now }
	c := pass.NewCache(v, 4)
	tok, err := s.MintSite("t1", "premiere", now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if cl, err := c.Verify(context.Background(), tok); err != nil || cl.Ticket != "t1" {
			t.Fatalf("cached verify = %+v, %v; want t1", cl, err)
		}
	}
	forged := tok[:len(tok)-2] + map[bool]string{true: "AA", false: "BB"}[tok[len(tok)-2:] != "AA"]
	if _, err := c.Verify(context.Background(), forged); !errors.Is(err, pass.ErrInvalid) {
		t.Errorf("a token one byte off a cached one: %v; want ErrInvalid", err)
	}
	now = now.Add(time.Minute + 3*time.Second)
	if _, err := c.Verify(context.Background(), tok); !errors.Is(err, pass.ErrInvalid) {
		t.Errorf("a cached token past its exp: %v; want ErrInvalid", err)
	}
	for i := range 20 {
		tok, _ := s.MintSite(fmt.Sprint("t", i), "premiere", now, now.Add(time.Minute))
		if _, err := c.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		if n := pass.CacheLen(c); n > 4 {
			t.Fatalf("the cache holds %d tokens; want at most 4", n)
		}
	}
}
