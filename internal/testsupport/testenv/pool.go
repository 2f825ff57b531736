package testenv

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
)

// A Redis server costs a test binary a process start, a cluster seconds
// more (each master waits out Redis's writable delay, then the nodes
// agree); emptying one costs a few commands. So a test's private server is
// one no other running test holds, emptied since the last test that held
// it: the pool below lends it for the test and takes it back at the test's
// end only if the test left it as it found it (running, nobody connected
// to it any more, its configuration and, for a cluster, every node's view
// of the layout unchanged); then it is emptied (FLUSHALL, SCRIPT FLUSH,
// FUNCTION FLUSH, CONFIG RESETSTAT, SLOWLOG RESET). Otherwise (a test
// killed, paused or failed over a node, or left a client connected) it is
// killed and the next test gets a new one. The idle servers live as long
// as the test binary (they get SIGKILL with it, as every localsvc child).
var pool struct {
	mu       sync.Mutex
	root     string
	seq      int
	redis    []*pooledRedis
	clusters map[localsvc.ClusterOptions][]*pooledCluster
}

// pooledRedis is a single server of the pool and what it looked like when
// it started.
type pooledRedis struct {
	srv    *localsvc.Redis
	dir    string
	config map[string]string
}

// pooledCluster is a cluster of the pool, its shape, and every node's
// configuration and view of the layout when it started.
type pooledCluster struct {
	c       *localsvc.Cluster
	dir     string
	shape   localsvc.ClusterOptions
	configs []map[string]string
	layout  string
}

// poolDir is a new folder for a pooled server, under the test binary's
// own root (the servers outlive the test that started them, so not its
// temp folder). Roots that test binaries no longer running left behind
// are removed at the first.
func poolDir() (string, error) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.root == "" {
		old, _ := filepath.Glob(filepath.Join(os.TempDir(), "wr-pool-*"))
		for _, d := range old {
			pid, err := os.ReadFile(filepath.Join(d, "pid"))
			if n, _ := strconv.Atoi(string(pid)); err == nil && n > 0 {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", n)); err == nil {
					continue // its test binary still runs
				}
			}
			_ = os.RemoveAll(d)
		}
		root, err := os.MkdirTemp("", "wr-pool-")
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(root, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return "", err
		}
		pool.root = root
	}
	pool.seq++
	return filepath.Join(pool.root, strconv.Itoa(pool.seq)), nil
}

// leaseRedis lends t a single redis-server of the pool, or starts one.
func leaseRedis(t testing.TB) *localsvc.Redis {
	t.Helper()
	pool.mu.Lock()
	var p *pooledRedis
	if n := len(pool.redis); n > 0 {
		p, pool.redis = pool.redis[n-1], pool.redis[:n-1]
	}
	pool.mu.Unlock()
	if p == nil {
		dir, err := poolDir()
		if err != nil {
			t.Fatalf("testenv: redis: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv, err := localsvc.StartRedis(ctx, localsvc.RedisOptions{Dir: dir})
		if err != nil {
			_ = os.RemoveAll(dir)
			t.Fatalf("testenv: redis: %v", err)
		}
		p = &pooledRedis{srv: srv, dir: dir}
		if p.config, err = configOf(ctx, srv.Addr); err != nil {
			p.discard()
			t.Fatalf("testenv: redis: %v", err)
		}
	}
	t.Cleanup(func() {
		if err := p.reset(); err != nil {
			t.Logf("testenv: redis %s not reused: %v", p.srv.Addr, err)
			p.discard()
			return
		}
		pool.mu.Lock()
		pool.redis = append(pool.redis, p)
		pool.mu.Unlock()
	})
	return p.srv
}

func (p *pooledRedis) discard() { p.srv.Kill(); _ = os.RemoveAll(p.dir) }

// reset empties the server if the test left it as it was.
func (p *pooledRedis) reset() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := unchanged(ctx, p.srv.Addr, p.config); err != nil {
		return err
	}
	return empty(ctx, p.srv.Addr, true)
}

// leaseCluster lends t a cluster of the pool shaped as opts (Dir unset),
// or starts one.
func leaseCluster(t testing.TB, opts localsvc.ClusterOptions) *localsvc.Cluster {
	t.Helper()
	if opts.Masters == 0 {
		opts.Masters = 3
	}
	pool.mu.Lock()
	var p *pooledCluster
	if n := len(pool.clusters[opts]); n > 0 {
		p, pool.clusters[opts] = pool.clusters[opts][n-1], pool.clusters[opts][:n-1]
	}
	pool.mu.Unlock()
	if p == nil {
		p = startPooledCluster(t, opts)
	}
	t.Cleanup(func() {
		if err := p.reset(); err != nil {
			t.Logf("testenv: redis cluster %s not reused: %v", p.c.Seeds(), err)
			p.discard()
			return
		}
		pool.mu.Lock()
		if pool.clusters == nil {
			pool.clusters = map[localsvc.ClusterOptions][]*pooledCluster{}
		}
		pool.clusters[opts] = append(pool.clusters[opts], p)
		pool.mu.Unlock()
	})
	return p.c
}

func startPooledCluster(t testing.TB, opts localsvc.ClusterOptions) *pooledCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last error
	// A cluster that does not come up (its nodes never all agreeing, on a
	// machine too loaded for the gossip) is replaced once by a new one on
	// new ports.
	for attempt := 0; attempt < 2; attempt++ {
		dir, err := poolDir()
		if err != nil {
			t.Fatalf("testenv: redis cluster: %v", err)
		}
		o := opts
		o.Dir = dir
		c, err := localsvc.StartCluster(ctx, o)
		if err != nil {
			_ = os.RemoveAll(dir)
			last = err
			continue
		}
		p := &pooledCluster{c: c, dir: dir, shape: opts}
		if err := p.snapshot(ctx); err != nil {
			p.discard()
			last = err
			continue
		}
		return p
	}
	t.Fatalf("testenv: redis cluster: %v", last)
	return nil
}

// snapshot notes every node's configuration and the layout.
func (p *pooledCluster) snapshot(ctx context.Context) error {
	p.configs = make([]map[string]string, len(p.c.Nodes))
	for i, n := range p.c.Nodes {
		cfg, err := configOf(ctx, n.Addr)
		if err != nil {
			return err
		}
		p.configs[i] = cfg
	}
	l, err := layoutOf(ctx, p.c.Nodes[0].Addr)
	p.layout = l
	return err
}

func (p *pooledCluster) discard() { p.c.Kill(); _ = os.RemoveAll(p.dir) }

// reset empties the cluster if the test left it as it was: every node up,
// nobody connected, its configuration unchanged, every node seeing the
// layout it had at the start (no failover, no failing node).
func (p *pooledCluster) reset() error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, n := range p.c.Nodes {
		if err := unchanged(ctx, n.Addr, p.configs[i]); err != nil {
			return err
		}
		l, err := layoutOf(ctx, n.Addr)
		if err != nil {
			return err
		}
		if l != p.layout {
			return fmt.Errorf("%s sees the layout\n%s\nnot\n%s", n.Addr, l, p.layout)
		}
	}
	for _, n := range p.c.Nodes[:p.shape.Masters] {
		if err := empty(ctx, n.Addr, true); err != nil {
			return err
		}
	}
	// Replicas follow their masters' FLUSHALL and FUNCTION FLUSH; the
	// script cache and the statistics are each node's own.
	for _, n := range p.c.Nodes[p.shape.Masters:] {
		if err := empty(ctx, n.Addr, false); err != nil {
			return err
		}
		if err := waitEmpty(ctx, n.Addr); err != nil {
			return err
		}
	}
	return nil
}

// client is a one-connection client of addr for the pool's own commands.
func client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
}

// configOf is the server's whole CONFIG GET *.
func configOf(ctx context.Context, addr string) (map[string]string, error) {
	c := client(addr)
	defer c.Close()
	return c.ConfigGet(ctx, "*").Result()
}

// unchanged reports why the server at addr is not as it started: down,
// someone still connected to it, or its configuration changed.
func unchanged(ctx context.Context, addr string, config map[string]string) error {
	c := client(addr)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return err
	}
	me, err := c.ClientID(ctx).Result()
	if err != nil {
		return err
	}
	// The test's clients closed their connections in its cleanups: the
	// server may take a moment to see them gone.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		others, err := connected(ctx, c, me)
		if err != nil {
			return err
		}
		if len(others) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still connected: %s", strings.Join(others, "; "))
		}
	}
	now, err := c.ConfigGet(ctx, "*").Result()
	if err != nil {
		return err
	}
	if !maps.Equal(now, config) {
		var diff []string
		for k, v := range now {
			if config[k] != v {
				diff = append(diff, fmt.Sprintf("%s %q (was %q)", k, v, config[k]))
			}
		}
		slices.Sort(diff)
		return fmt.Errorf("configuration changed: %s", strings.Join(diff, ", "))
	}
	return nil
}

// connected lists the clients of the server other than me (a replica's
// link to its master, or a master's to its replica, is not a client).
func connected(ctx context.Context, c *redis.Client, me int64) ([]string, error) {
	var out []string
	for _, typ := range []string{"normal", "pubsub"} {
		list, err := c.Do(ctx, "CLIENT", "LIST", "TYPE", typ).Text()
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			if line == "" || strings.HasPrefix(line, "id="+strconv.FormatInt(me, 10)+" ") {
				continue
			}
			out = append(out, line)
		}
	}
	return out, nil
}

// empty takes away what the last test left on the server: its keys and
// functions (master, on a master only), its script cache, its statistics
// and slow log.
func empty(ctx context.Context, addr string, master bool) error {
	c := client(addr)
	defer c.Close()
	var cmds [][]any
	if master {
		cmds = append(cmds, []any{"FLUSHALL", "SYNC"}, []any{"FUNCTION", "FLUSH", "SYNC"})
	}
	cmds = append(cmds, []any{"SCRIPT", "FLUSH", "SYNC"}, []any{"CONFIG", "RESETSTAT"}, []any{"SLOWLOG", "RESET"})
	for _, cmd := range cmds {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			return fmt.Errorf("%v: %w", cmd, err)
		}
	}
	return nil
}

// waitEmpty waits until a replica has followed its master's flushes.
func waitEmpty(ctx context.Context, addr string) error {
	c := client(addr)
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		keys, err := c.DBSize(ctx).Result()
		if err != nil {
			return err
		}
		fns, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result()
		if err != nil {
			return err
		}
		if keys == 0 && len(fns) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s still holds %d keys and %d libraries", addr, keys, len(fns))
		}
	}
}

// layoutOf is the cluster as the node at addr sees it, one line per node
// (id, address, role, master, slots), sorted; an error if any node is
// failing, unreachable or still being met.
func layoutOf(ctx context.Context, addr string) (string, error) {
	c := client(addr)
	defer c.Close()
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return "", err
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return "", fmt.Errorf("CLUSTER NODES line %q", line)
		}
		var role string
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "master", "slave":
				role = flag
			case "fail", "fail?", "handshake", "noaddr":
				return "", fmt.Errorf("%s sees node %s %s", addr, f[1], f[2])
			}
		}
		if f[7] != "connected" {
			return "", fmt.Errorf("%s sees node %s %s", addr, f[1], f[7])
		}
		lines = append(lines, strings.Join(append([]string{f[0], f[1], role, f[3]}, f[8:]...), " "))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}
