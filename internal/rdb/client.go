package rdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/platform/metrics"
)

// ErrUnavailable: Redis cannot serve right now (down, restarting, loading,
// a cluster failing over, the network to it cut). The caller answers 503
// and the client retries; every error of this package that is one wraps
// it (Interpret). It is the line's own word (line.ErrUnavailable): every
// store over this client says it so, and the services ask for it by that
// name without knowing Redis.
var ErrUnavailable = line.ErrUnavailable

// Cmdable is what waitroom needs of a go-redis client: a single node
// (*redis.Client) and a Cluster (*redis.ClusterClient) both satisfy it, so
// every script and command runs unchanged on either.
type Cmdable interface {
	redis.Scripter
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FunctionLoadReplace(ctx context.Context, code string) *redis.StringCmd
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	HMGet(ctx context.Context, key string, fields ...string) *redis.SliceCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	HDel(ctx context.Context, key string, fields ...string) *redis.IntCmd
	XRevRangeN(ctx context.Context, stream, start, stop string, count int64) *redis.XMessageSliceCmd
	XRangeN(ctx context.Context, stream, start, stop string, count int64) *redis.XMessageSliceCmd
	HGet(ctx context.Context, key, field string) *redis.StringCmd
	ZRem(ctx context.Context, key string, members ...any) *redis.IntCmd
	SScan(ctx context.Context, key string, cursor uint64, match string, count int64) *redis.ScanCmd
	SAdd(ctx context.Context, key string, members ...any) *redis.IntCmd
	SIsMember(ctx context.Context, key string, member any) *redis.BoolCmd
	Time(ctx context.Context) *redis.TimeCmd
	HScan(ctx context.Context, key string, cursor uint64, match string, count int64) *redis.ScanCmd
	HLen(ctx context.Context, key string) *redis.IntCmd
	HSet(ctx context.Context, key string, values ...any) *redis.IntCmd
	LRange(ctx context.Context, key string, start, stop int64) *redis.StringSliceCmd
	BitField(ctx context.Context, key string, values ...any) *redis.IntSliceCmd
	ZRevRangeWithScores(ctx context.Context, key string, start, stop int64) *redis.ZSliceCmd
	Ping(ctx context.Context) *redis.StatusCmd
}

// Client is waitroom's Redis: plain commands and pipelines (Cmdable), and
// every script run one way (Start, Run): through a small pool of senders
// that pipeline the calls of concurrent requests, merge the mergeable ones,
// and wait for replicas where a fan is told of the writes (batch.go,
// durable.go).
type Client struct {
	Cmdable
	batch *batcher
	close func() error
}

// poolSize is the connections per Redis node: go-redis's default (10 per
// CPU) makes a busy gateway's requests queue for a connection; a redis://
// URL's pool_size= still wins.
const poolSize = 128

// Open connects to Redis as config redis.url names it: a redis:// (or
// rediss://) URL is a single node; a comma-separated list of host:port seeds
// is a Redis Cluster. service labels the Redis metrics of this process;
// told calls wait for waitReplicas replicas (config redis.wait_replicas; see
// WaitReplicas). Close the Client when done.
func Open(url, service string, waitReplicas int) (*Client, error) {
	c, err := newClient(url)
	if err != nil {
		return nil, err
	}
	c.AddHook(metricsHook{service: service})
	out := New(c)
	out.close = c.Close
	out.WaitReplicas(waitReplicas)
	// Our function libraries, loaded before the first call needs them (in
	// the background: a process starts while Redis is away too, and a call
	// that finds its function missing loads its library itself).
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = out.Load(ctx)
	}()
	return out, nil
}

// New is a Client over c, which the caller owns (tests; processes Open).
func New(c Cmdable) *Client {
	return &Client{Cmdable: c, batch: newBatcher(c)}
}

// Close closes the client Open made (a no-op for New's).
func (c *Client) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// Ping reports whether Redis answers (readiness).
func (c *Client) Ping(ctx context.Context) error {
	return Interpret("ping", c.Cmdable.Ping(ctx).Err())
}

func newClient(url string) (redis.UniversalClient, error) {
	url = strings.TrimSpace(url)
	if url == "" {
		return nil, fmt.Errorf("rdb: empty redis url")
	}
	if strings.Contains(url, "://") {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("rdb: redis url: %w", err)
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
		return nil, fmt.Errorf("rdb: redis url %q names no cluster seed", url)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: poolSize})
	c.AddHook(reloadHook{c})
	return c, nil
}

// reloadHook makes a cluster client look at the slot map again as soon as
// a node fails it. go-redis reloads the map on a MOVED reply, and otherwise
// once a minute: a master that died cannot send MOVED, so without this the
// client would go on asking the dead master for up to a minute after its
// replica took over (docs/RELIABILITY.md, "Redis fails over"). A reload is
// one CLUSTER SLOTS, and go-redis runs at most one at a time.
type reloadHook struct{ c *redis.ClusterClient }

func (h reloadHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			h.c.ReloadState(ctx)
		}
		return conn, err
	}
}

func (h reloadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadHook) check(ctx context.Context, err error) {
	if err != nil && isOutage(err) && !errors.Is(err, context.Canceled) {
		h.c.ReloadState(ctx)
	}
}

// Interpret is the one place Redis errors are translated: an outage
// becomes ErrUnavailable (with the cause kept in the text), anything else is
// returned as it is, a bug to log; op names what failed.
func Interpret(op string, err error) error {
	if err == nil {
		return nil
	}
	if isOutage(err) {
		return fmt.Errorf("%s: %w: %v", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isOutage tells a Redis that cannot serve now from a request or a script
// that is wrong.
func isOutage(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, ErrUnavailable) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var re redis.Error
	if errors.As(err, &re) {
		// Errors Redis itself answers while it cannot serve: loading its
		// data, a cluster without a master for the slot, a replica, a
		// script running past busy-reply-threshold (BUSY, until it ends or
		// is killed; not BUSYKEY, a RESTORE's own refusal).
		msg := re.Error()
		for _, p := range []string{"LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "READONLY", "BUSY "} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	// go-redis reports a few transport failures as plain errors.
	msg := err.Error()
	for _, p := range []string{"connection refused", "connection reset", "broken pipe", "i/o timeout"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// metricsHook measures every command and pipeline of the client.
type metricsHook struct{ service string }

func (h metricsHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			metrics.RedisFailed(h.service)
		}
		return c, err
	}
}

func (h metricsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.done(start, err)
		return err
	}
}

func (h metricsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		h.done(start, err)
		return err
	}
}

func (h metricsHook) done(start time.Time, err error) {
	metrics.ObserveRedis(h.service, time.Since(start))
	if err != nil && !errors.Is(err, redis.Nil) && !isNoFunction(err) {
		metrics.RedisFailed(h.service)
	}
}
