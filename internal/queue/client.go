package queue

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// poolSize is the connections per Redis node: go-redis's default (10 per
// CPU) makes a busy gateway's requests queue for a connection; a redis://
// URL's pool_size= still wins.
const poolSize = 128

// NewClient builds the Redis client every process uses from config redis.url:
// a redis:// (or rediss://) URL gives a single-node client; a comma-separated
// list of host:port seeds gives a Redis Cluster client. Both satisfy
// redis.UniversalClient, so the scripts run unchanged on either.
func NewClient(url string) (redis.UniversalClient, error) {
	url = strings.TrimSpace(url)
	if url == "" {
		return nil, fmt.Errorf("queue: empty redis url")
	}
	if strings.Contains(url, "://") {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("queue: redis url: %w", err)
		}
		if !strings.Contains(url, "pool_size=") {
			opt.PoolSize = poolSize
		}
		return redis.NewClient(opt), nil
	}
	var addrs []string
	for _, a := range strings.Split(url, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("queue: redis url %q names no cluster seed", url)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: poolSize}), nil
}
