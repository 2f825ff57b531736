package rdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// leases is the leases' function library.
var leases = NewLibrary("lease")

// A lease is a key holding its holder's id, with an expiry: one process at
// a time does a piece of work (a draw, a selection, a top-up), and another
// takes it up once the lease lapses (its holder died).

// takeLeaseScript takes a lease for its caller: free, or its own already
// (then renewed).
//
// KEYS: 1 lease
// ARGV: 1 the caller's id, 2 how long (ms)
// Returns 1 if the caller holds it now, else 0.
var takeLeaseScript = leases.Script("take_lease", `
local h = redis.call('GET', KEYS[1])
if h and h ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// ReleaseScript gives a lease back if its caller still holds it.
//
// KEYS: 1 lease
// ARGV: 1 the caller's id
var ReleaseScript = leases.Script("release", `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// TakeLease takes the lease key for owner for ttl (or renews it); false
// when another holds it.
func (c *Client) TakeLease(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	ok, err := c.Run(ctx, Call{Script: takeLeaseScript, Keys: []string{key}, Args: []any{owner, ttl.Milliseconds()}}).Bool()
	return ok, Interpret("lease", err)
}

// ReleaseLease gives the lease key back if owner holds it. It runs even
// once ctx is done (a lease given back lets another take the work up at
// once, rather than when it lapses).
func (c *Client) ReleaseLease(ctx context.Context, key, owner string) error {
	err := c.Run(context.WithoutCancel(ctx), Call{Script: ReleaseScript, Keys: []string{key}, Args: []any{owner}}).Err()
	return Interpret("lease", err)
}

// NewOwner is a fresh holder's id for leases and claims: prefix and 16
// random hex digits, so that no two processes (or two workers of one)
// hold under the same name.
func NewOwner(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
