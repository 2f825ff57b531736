package queue

import (
	"context"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"
)

// AllowJoin counts a join from addr against limit joins per calendar minute
// (config gateway.joins_per_ip_per_minute; 0 = no limit), shared by every
// gateway replica. It returns how long to wait when the limit is reached, 0
// when the join may go on. now is the caller's clock: the minute counted.
func (s *Store) AllowJoin(ctx context.Context, addr netip.Addr, limit int, now time.Time) (time.Duration, error) {
	if limit <= 0 {
		return 0, nil
	}
	minute := now.Unix() / 60
	key := joinLimitKey(addr.String(), minute)
	var incr *redis.IntCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.Incr(ctx, key)
		p.Expire(ctx, key, 2*time.Minute)
		return nil
	}); err != nil {
		return 0, interpretError("join limit", err)
	}
	if incr.Val() > int64(limit) {
		return time.Unix((minute+1)*60, 0).Sub(now), nil
	}
	return 0, nil
}
