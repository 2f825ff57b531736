package rdb

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// The pages ReadList reads: LRANGEs of listPage elements, listPipeline of
// them per round trip.
const (
	listPage     = 10_000
	listPipeline = 8
)

// ReadList reads the first n elements of the list at key, in pages of
// LRANGE pipelined together (a million elements in a hundred pages, a dozen
// round trips), handing each page to each in order.
func (c *Client) ReadList(ctx context.Context, key string, n int64, each func(page []string)) error {
	for from := int64(0); from < n; {
		var cmds []*redis.StringSliceCmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < listPipeline && from < n; i++ {
				to := min(from+listPage, n) - 1
				cmds = append(cmds, p.LRange(ctx, key, from, to))
				from = to + 1
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, cmd := range cmds {
			each(cmd.Val())
		}
	}
	return nil
}
