package queue

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
)

// A site behind the room (forward auth): the fan came from a page of a
// site that the event guards, and goes back there once admitted, with a
// one-use return token that the site's proxy trades for the site's pass.
// The line keeps the way back with the ticket (so the status of any device
// of the fan's gives it), and the spent tokens.

// ErrTokenSpent: the return token was traded for a pass already.
var ErrTokenSpent = errors.New("queue: return token spent already")

// SetReturn keeps returnURL as the way back of the fan who holds ticket, for
// ttl: a later one replaces it. A ticket that is not authentic is
// ErrInvalidTicket, before any Redis call.
func (s *Store) SetReturn(ctx context.Context, event, ticket, returnURL string, ttl time.Duration) error {
	t, err := s.decode(event, ticket)
	if err != nil {
		return err
	}
	return rdb.Interpret("set return", s.c.Set(ctx, rdb.ReturnKey(event, t.id()), returnURL, ttl).Err())
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

// SpendReturn trades the return token jti of ticket id for the end of its
// active window, in one step: the token is spent only if the ticket is
// active, and only once (ErrTokenSpent after that). active is false, and
// nothing spent, when the ticket is no longer active. keep is how long the
// token is remembered as spent: longer than it is valid.
func (s *Store) SpendReturn(ctx context.Context, event, id, jti string, keep time.Duration) (until time.Time, active bool, err error) {
	if !idPattern.MatchString(id) || !jtiPattern.MatchString(jti) {
		return time.Time{}, false, nil
	}
	exp, err := s.c.Run(ctx, rdb.Call{Script: spendReturnScript, Keys: []string{rdb.KeysOf(event).Active, rdb.SpentKey(event, jti)},
		Args: []any{id, keep.Milliseconds()}}).Int64()
	switch {
	case err != nil:
		return time.Time{}, false, rdb.Interpret("spend return", err)
	case exp < 0:
		return time.Time{}, false, ErrTokenSpent
	case exp == 0:
		return time.Time{}, false, nil
	}
	return msToTime(exp), true, nil
}

// spendReturnScript spends a return token if its ticket is active.
//
// KEYS: 1 active, 2 the token's spent mark (SpentKey)
// ARGV: 1 ticket id, 2 how long the mark stays (ms)
// Returns the ticket's expiry (ms) once spent, 0 when the ticket is not
// active (nothing spent), -1 when the token was spent already.
var spendReturnScript = redis.NewScript(rdb.Prelude + `
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local now = clock()
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not exp or exp <= now then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return exp
`)
