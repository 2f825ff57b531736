package pass

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Cache is a Verifier that remembers the tokens it took, by their exact
// text, until they expire: the same token shown again is taken without its
// signature checked again. A site's pass comes with every request of its
// fan, and its Ed25519 check was most of what forward auth cost a request
// (docs/EDGE.md, "Forward auth"). Only what verified is kept, so a token
// differing by one byte is checked in full; what the token cannot say (a
// leave, a revocation) is the caller's to ask, every time.
//
// The cache keeps its own copy of each token it takes: a caller's string
// may share its bytes with a buffer the caller reuses (fiber's c.Cookies
// is the request's own bytes, which the connection's next request
// overwrites), and a key that changed under the map would answer one
// token with another's claims.
type Cache struct {
	v   *Verifier
	max int

	mu   sync.RWMutex
	took map[string]Claims
}

// NewCache is a Cache over v, holding at most max tokens.
func NewCache(v *Verifier, max int) *Cache {
	return &Cache{v: v, max: max, took: make(map[string]Claims)}
}

// Verify is v.Verify, answered from memory for a token taken before and
// not expired since (by the verifier's clock and leeway).
func (c *Cache) Verify(ctx context.Context, token string) (Claims, error) {
	now := c.v.now()
	c.mu.RLock()
	claims, ok := c.took[token]
	c.mu.RUnlock()
	if ok && now.Before(claims.ExpiresAt.Add(leeway)) {
		return claims, nil
	}
	claims, err := c.v.Verify(ctx, token)
	if err != nil {
		return claims, err
	}
	c.mu.Lock()
	if len(c.took) >= c.max {
		c.evict(now)
	}
	c.took[strings.Clone(token)] = claims
	c.mu.Unlock()
	return claims, nil
}

// evict drops the expired tokens, and if that frees too little, about
// half of the rest (a map's order is as good as any: a token dropped is
// only checked once more). Called with mu held.
func (c *Cache) evict(now time.Time) {
	for tok, claims := range c.took {
		if !now.Before(claims.ExpiresAt.Add(leeway)) {
			delete(c.took, tok)
		}
	}
	for tok := range c.took {
		if len(c.took) < c.max/2 {
			break
		}
		delete(c.took, tok)
	}
}
