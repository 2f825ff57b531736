package localsvc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ClusterOptions shapes a private Redis Cluster.
type ClusterOptions struct {
	Dir string // one sub-folder per node is made in it
	// Masters is the number of master nodes (default 3, the least
	// redis-cli --cluster create accepts). The cluster has no replicas: it
	// is for showing that events spread over shards, not for failover.
	Masters int
}

// Cluster is a running private Redis Cluster of masters only, every slot
// assigned and every node agreeing that the cluster is ok.
type Cluster struct {
	Nodes []*Redis
}

// StartCluster starts opts.Masters cluster-enabled redis-servers on free
// loopback ports, joins them with redis-cli --cluster create and waits until
// CLUSTER INFO says cluster_state:ok, with every slot assigned and every
// node known, on every node: a client that connects afterwards sees the
// final slot map from whichever node it asks.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	cli, err := Ensure("redis-cli", "redis-tools")
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("localsvc: ClusterOptions.Dir is required")
	}
	if opts.Masters == 0 {
		opts.Masters = 3
	}
	if opts.Masters < 3 {
		return nil, fmt.Errorf("localsvc: a Redis Cluster needs at least 3 masters, not %d", opts.Masters)
	}
	c := &Cluster{}
	for i := range opts.Masters {
		n, err := StartRedis(ctx, RedisOptions{Dir: filepath.Join(opts.Dir, fmt.Sprintf("node%d", i+1)), Cluster: true})
		if err != nil {
			c.Kill()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.Kill()
		return nil, fmt.Errorf("localsvc: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(ctx); err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
}

// waitOK polls CLUSTER INFO on every node until all say the cluster is ok.
func (c *Cluster) waitOK(ctx context.Context) error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_ok":       "16384",
		"cluster_known_nodes":    strconv.Itoa(len(c.Nodes)),
		"cluster_slots_pfail":    "0",
		"cluster_slots_fail":     "0",
		"cluster_slots_assigned": "16384",
	}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		ok := true
		for _, n := range c.Nodes {
			info, err := clusterInfo(n.Addr)
			if err != nil {
				ok, last = false, fmt.Sprintf("%s: %v", n.Addr, err)
				break
			}
			for k, v := range want {
				if info[k] != v {
					ok, last = false, fmt.Sprintf("%s: %s=%q, want %q", n.Addr, k, info[k], v)
					break
				}
			}
			if !ok {
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("localsvc: redis cluster not ok after 30s (%s)", last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addrs are the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Seeds is the comma-separated seed list that config redis.url takes for a
// cluster (queue.NewClient makes a cluster client of it).
func (c *Cluster) Seeds() string { return strings.Join(c.Addrs(), ",") }

// Stop shuts every node down.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// Kill kills every node at once.
func (c *Cluster) Kill() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// clusterInfo sends CLUSTER INFO and parses the bulk-string reply into its
// key:value lines.
func clusterInfo(addr string) (map[string]string, error) {
	conn, err := dialTimeout(addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("CLUSTER INFO\r\n")); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(head, "$") {
		return nil, fmt.Errorf("CLUSTER INFO: %s", strings.TrimSpace(head))
	}
	size, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || size < 0 {
		return nil, fmt.Errorf("CLUSTER INFO: bad reply %q", head)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	info := map[string]string{}
	for _, line := range strings.Split(string(body), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			info[k] = v
		}
	}
	return info, nil
}
