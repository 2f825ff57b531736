package pass_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

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

// siteCache is a cache of size site passes over a verifier whose clock
// the test holds, and the signer of the passes it takes.
func siteCache(t *testing.T, size int) (*pass.Signer, *pass.Cache, *testenv.Clock) {
	s := pass.NewSigner(testenv.Ed25519Key(t))
	v := pass.NewStaticVerifierFor(s.PublicKey(), pass.AudienceSite)
	clk := testenv.NewClock(time.Now())
	v.Now = clk.Now
	return s, pass.NewCache(v, size), clk
}

// The cache takes again what the verifier took, and only that: a token
// differing by a byte, or one past its exp (and the leeway), is checked in
// full and refused; however many tokens come, it keeps at most its size.
func TestCacheTakesOnlyWhatVerified(t *testing.T) {
	s, c, clk := siteCache(t, 4)
	now := clk.Now()
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
	clk.Add(time.Minute + 3*time.Second)
	now = clk.Now()
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

// The cache keeps its own copy of every token it takes. A caller's string
// may share its bytes with a buffer the caller reuses (fiber's c.Cookies
// is the request's own bytes, which the connection's next request
// overwrites): a key that changes under the map would answer one fan's
// pass with another fan's claims.
func TestCacheKeepsItsOwnCopyOfEachToken(t *testing.T) {
	s, c, clk := siteCache(t, 100)
	now := clk.Now()
	ctx := context.Background()
	a, errA := s.MintSite("ticket-a", "premiere", now, now.Add(time.Minute))
	b, errB := s.MintSite("ticket-b", "premiere", now, now.Add(time.Minute))
	if errA != nil || errB != nil || len(a) != len(b) {
		t.Fatalf("two passes of one length: %v %v, %d and %d bytes", errA, errB, len(a), len(b))
	}
	// The request's buffer, holding a's pass, then the next request's, b's.
	buf := []byte(a)
	if cl, err := c.Verify(ctx, unsafe.String(&buf[0], len(buf))); err != nil || cl.Ticket != "ticket-a" {
		t.Fatalf("a's pass: %+v, %v; want ticket-a", cl, err)
	}
	copy(buf, b)
	for _, tt := range []struct{ tok, want string }{{b, "ticket-b"}, {a, "ticket-a"}, {b, "ticket-b"}} {
		if cl, err := c.Verify(ctx, tt.tok); err != nil || cl.Ticket != tt.want {
			t.Errorf("a pass of %s after the buffer was reused: %+v, %v; want its own claims", tt.want, cl, err)
		}
	}
}
