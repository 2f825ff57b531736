package queue

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// A site behind the room (forward auth): the fan came from a page of a
// site that the event guards, and goes back there once admitted, with a
// one-use return token that the site's proxy trades for the site's pass.
// The line keeps the way back with the ticket (so the status of any device
// of the fan's gives it), and the spent tokens.

// SetReturn keeps returnURL as the way back of the fan whose ticket has id
// (Ticket.ID, of a ticket the caller parsed), for ttl: a later one
// replaces it. A malformed id is ErrInvalidTicket, before any Redis call.
func (s *Store) SetReturn(ctx context.Context, event, id, returnURL string, ttl time.Duration) error {
	if !idPattern.MatchString(id) {
		return line.ErrInvalidTicket
	}
	return rdb.Interpret("set return", s.c.Set(ctx, rdb.ReturnKey(event, id), returnURL, ttl).Err())
}

// Return is the way back kept for the ticket id (Status.ID), "" when none.
func (s *Store) Return(ctx context.Context, event, id string) (string, error) {
	if !idPattern.MatchString(id) {
		return "", nil
	}
	v, err := s.c.Get(ctx, rdb.ReturnKey(event, id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, rdb.Interpret("return", err)
}

// AddSitePort keeps hostport ("<host>:<port>", lower case) as a port the
// site of event is served on: its proxy named it, in X-Forwarded-Host,
// when forward auth sent a fan to the room. A way back may then name it.
func (s *Store) AddSitePort(ctx context.Context, event, hostport string) error {
	return rdb.Interpret("add site port", s.c.SAdd(ctx, rdb.SitePortsKey(event), hostport).Err())
}

// SitePort reports whether AddSitePort kept hostport for event.
func (s *Store) SitePort(ctx context.Context, event, hostport string) (bool, error) {
	ok, err := s.c.SIsMember(ctx, rdb.SitePortsKey(event), hostport).Result()
	return ok, rdb.Interpret("site port", err)
}

// SpendReturn trades the return token jti of ticket id for the end of its
// active window, in one step: the token is spent only if the ticket is
// active, and only once (ErrTokenSpent after that). active is false, and
// nothing spent, when the ticket is no longer active. keep is how long the
// token is remembered as spent: longer than it is valid.
//
// A trade is the fan at the site (DESIGN.md, "A fan on the site is a fan
// present"): it claims the place as a poll of the room would (claimLua),
// so that a place let in but not yet claimed runs its whole window, ttl
// (the event's access_ttl), from now, and is never dropped at its abandon
// deadline while its fan browses the site, which polls nothing. One write
// per place: every later page is the pass's, which writes nothing.
func (s *Store) SpendReturn(ctx context.Context, event, id, jti string, keep, ttl time.Duration) (until time.Time, active bool, err error) {
	if !idPattern.MatchString(id) || !jtiPattern.MatchString(jti) {
		return time.Time{}, false, nil
	}
	k := rdb.KeysOf(event)
	exp, err := s.c.Run(ctx, rdb.Call{Script: spendReturnScript, Keys: []string{k.Active, rdb.SpentKey(event, jti), k.Claims, k.Stats},
		Args: []any{id, keep.Milliseconds(), ttl.Milliseconds()}}).Int64()
	switch {
	case err != nil:
		return time.Time{}, false, rdb.Interpret("spend return", err)
	case exp < 0:
		return time.Time{}, false, line.ErrTokenSpent
	case exp == 0:
		return time.Time{}, false, nil
	}
	return msToTime(exp), true, nil
}

// spendReturnScript spends a return token if its ticket is active, and
// claims the ticket's place (claimLua) if no look claimed it yet.
//
// KEYS: 1 active, 2 the token's spent mark (SpentKey), 3 claims, 4 stats
// ARGV: 1 ticket id, 2 how long the mark stays (ms), 3 access_ttl ms
// Returns the ticket's expiry (ms) once spent (and the place claimed), 0
// when the ticket is not active (nothing spent), -1 when the token was
// spent already.
var spendReturnScript = lua.Script("spend_return", `
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local now, now_s = clock()
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not exp or exp <= now then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
exp = claim(KEYS[1], KEYS[3], KEYS[4], ARGV[1], now, now_s, exp, tonumber(ARGV[3]))
return exp
`)
