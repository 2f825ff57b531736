package localsvc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RedisOptions shapes a private redis-server.
type RedisOptions struct {
	Dir  string // data and log folder; created if missing
	Port int    // 0 = a free one
	// AOF turns on the append-only file with fsync every second, as in
	// production; otherwise nothing is persisted.
	AOF bool
	// Cluster starts the node with cluster mode enabled and no slots: a
	// node for StartCluster to join, or for a caller to assign slots to.
	Cluster bool
	// NodeTimeout is the cluster node's cluster-node-timeout: how long a
	// node may go unheard before the others call it failing (default 2 s).
	NodeTimeout time.Duration
}

// Redis is a running private redis-server.
type Redis struct {
	Addr string
	opts RedisOptions
	bin  string
	p    *proc
}

// StartRedis starts redis-server and waits until it answers.
func StartRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	bin, err := Ensure("redis-server", "redis-server")
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("localsvc: RedisOptions.Dir is required")
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	if opts.Port != 0 {
		r := &Redis{opts: opts, bin: bin, Addr: "127.0.0.1:" + strconv.Itoa(opts.Port)}
		return r, r.start(ctx)
	}
	// A free port can be taken by someone else between our check and
	// redis-server's bind (tests start many servers at once), and a cluster
	// node also binds port+10000 for its bus: try a few ports.
	for attempt := 0; ; attempt++ {
		if opts.Port, err = freeRedisPort(opts.Cluster); err != nil {
			return nil, err
		}
		r := &Redis{opts: opts, bin: bin, Addr: "127.0.0.1:" + strconv.Itoa(opts.Port)}
		err = r.start(ctx)
		if err == nil || attempt == 7 || !strings.Contains(err.Error(), "Address already in use") {
			return r, err
		}
	}
}

// freeRedisPort picks a free port; for a cluster node, one whose bus port
// (port+10000) exists and is free too.
func freeRedisPort(cluster bool) (int, error) {
	for i := 0; i < 100; i++ {
		p, err := FreePort()
		if err != nil {
			return 0, err
		}
		if !cluster {
			return p, nil
		}
		if p+10000 > 65535 {
			continue
		}
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("localsvc: no free port pair for a cluster node")
}

func (r *Redis) start(ctx context.Context) error {
	o := r.opts
	args := []string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(o.Port),
		"--dir", o.Dir, "--save", "", "--daemonize", "no",
		"--protected-mode", "yes", "--loglevel", "warning",
		"--maxclients", "20000",
		// A script running longer than this makes the server answer every
		// other command BUSY until it ends. A script of the tests (a tick
		// letting 10,000 fans in) took 3 s on a loaded machine, where
		// Redis's 5 s are no sign of a wedged script: 30 s are.
		// (lua-time-limit is busy-reply-threshold's older name, which
		// every Redis takes.)
		"--lua-time-limit", "30000",
	}
	if o.AOF {
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if o.Cluster {
		timeout := o.NodeTimeout
		if timeout == 0 {
			timeout = 2 * time.Second
		}
		args = append(args, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(o.Dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(timeout.Milliseconds(), 10))
	}
	logPath := filepath.Join(o.Dir, "redis.log")
	p, err := startProc(exec.Command(r.bin, args...), logPath)
	if err != nil {
		return fmt.Errorf("localsvc: start redis: %w", err)
	}
	r.p = p
	if err := waitFor(ctx, p, logPath, func() bool { return redisPing(r.Addr) }); err != nil {
		p.stop(syscall.SIGKILL, 0)
		return fmt.Errorf("localsvc: redis on %s: %w", r.Addr, err)
	}
	return nil
}

// URL is the redis:// URL of the server (database 0).
func (r *Redis) URL() string { return "redis://" + r.Addr + "/0" }

// Stop shuts the server down (SIGTERM, then SIGKILL after 5s).
func (r *Redis) Stop() { r.p.stop(syscall.SIGTERM, 5*time.Second) }

// Kill kills the server at once, as a crash would.
func (r *Redis) Kill() { r.p.stop(syscall.SIGKILL, 0) }

// Pause stops the server's process (SIGSTOP) without closing its
// connections, as a stalled machine would; Resume lets it go on.
func (r *Redis) Pause() error { return r.p.cmd.Process.Signal(syscall.SIGSTOP) }

// Pid is the server's process id (to pin it to a core with taskset).
func (r *Redis) Pid() int { return r.p.cmd.Process.Pid }

// Resume continues a paused server (SIGCONT).
func (r *Redis) Resume() error { return r.p.cmd.Process.Signal(syscall.SIGCONT) }

// Restart starts the server again on the same port and data folder.
func (r *Redis) Restart(ctx context.Context) error {
	r.Stop()
	return r.start(ctx)
}

// Start starts a stopped server again on the same port and data folder.
func (r *Redis) Start(ctx context.Context) error {
	if r.p != nil && r.p.running() {
		return nil
	}
	return r.start(ctx)
}

// redisPing speaks just enough RESP to know the server answers.
func redisPing(addr string) bool {
	c, err := dialTimeout(addr)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	return n >= 5 && string(buf[:5]) == "+PONG"
}
