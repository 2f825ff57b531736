package queue

import (
	"context"
	"net/netip"
	"time"

	"github.com/waitroom/waitroom/internal/rdb"
)

// AllowJoin counts a join from addr against limit joins per calendar minute
// (config gateway.joins_per_ip_per_minute; 0 = no limit), shared by every
// gateway replica. It returns how long to wait when the limit is reached, 0
// when the join may go on. now is the caller's clock: the minute counted.
func (s *Store) AllowJoin(ctx context.Context, addr netip.Addr, limit int, now time.Time) (time.Duration, error) {
	return s.allowIn(ctx, "join limit", rdb.JoinLimitKey, addr, limit, now)
}

// AllowDownload counts a download of a published list (a lottery's or a
// selection's entries) from addr against limit per calendar minute, shared
// by every gateway replica, as AllowJoin counts joins: how long to wait
// when the limit is reached, 0 when the download may go on.
func (s *Store) AllowDownload(ctx context.Context, addr netip.Addr, limit int, now time.Time) (time.Duration, error) {
	return s.allowIn(ctx, "list limit", rdb.ListLimitKey, addr, limit, now)
}

// allowIn counts one more from addr in the minute of now, under the key
// keyOf names, against limit (0 = none).
func (s *Store) allowIn(ctx context.Context, what string, keyOf func(string, int64) string, addr netip.Addr, limit int, now time.Time) (time.Duration, error) {
	if limit <= 0 {
		return 0, nil
	}
	minute := now.Unix() / 60
	n, err := s.countIn(ctx, keyOf(addr.String(), minute), 2*time.Minute)
	if err != nil {
		return 0, rdb.Interpret(what, err)
	}
	if n > int64(limit) {
		return time.Unix((minute+1)*60, 0).Sub(now), nil
	}
	return 0, nil
}

// UndoJoin gives back a join AllowJoin counted for addr in the minute of now
// that bought no place because its proof of work was spent already or had
// expired (Store.JoinProved): a replayed proof must not use up the fan's
// address budget. A count whose minute is over is left alone.
func (s *Store) UndoJoin(ctx context.Context, addr netip.Addr, now time.Time) error {
	key := rdb.JoinLimitKey(addr.String(), now.Unix()/60)
	if err := s.c.Run(ctx, rdb.Call{Script: undoJoinScript, Keys: []string{key}}).Err(); err != nil {
		return rdb.Interpret("undo join", err)
	}
	return nil
}

// undoJoinScript takes one join off an address's count, never below 0 and
// never creating the key (a DECR would, with no expiry).
//
// KEYS: 1 the address's count of the minute
// Returns the count after it.
var undoJoinScript = lua.Script("undo_join", `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n > 0 then return redis.call('DECR', KEYS[1]) end
return 0
`)
