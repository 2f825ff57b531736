package localsvc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ClusterOptions shapes a private Redis Cluster.
type ClusterOptions struct {
	Dir string // one sub-folder per node is made in it
	// Masters is the number of master nodes (default 3). Fewer than 3
	// (which redis-cli --cluster create refuses) are assembled by hand, with
	// no replicas.
	Masters int
	// Replicas is the number of replicas of each master (default 0). With
	// replicas, a master that dies is replaced by one of its replicas after
	// cluster-node-timeout (2 s here): see Failover.
	Replicas int
}

// A cluster without replicas has nothing to fail over to: its
// cluster-node-timeout only decides when the other nodes call a node that
// has not answered their pings failing, and the whole cluster down
// (CLUSTERDOWN to every command) until it is heard again and the failure
// forgotten, seconds later. On a loaded machine a node running a long
// script (a tick letting 10,000 fans in took 3 s with load average 25 on
// two cores) goes unheard that long without anything being wrong: so such
// a cluster calls a node failing only after a minute. (A test that kills
// a node still finds its cluster not lent again: the pool pings every
// node.)
const (
	nodeTimeout            = 2 * time.Second
	nodeTimeoutNoFailovers = time.Minute
)

// Cluster is a running private Redis Cluster, every slot assigned and every
// node agreeing that the cluster is ok.
type Cluster struct {
	Nodes []*Redis
	// Masters are the first masters (redis-cli makes the first
	// Masters nodes the masters); after a failover, see MasterOf.
	Masters []*Redis
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
	if opts.Masters < 1 || (opts.Masters < 3 && opts.Replicas > 0) {
		return nil, fmt.Errorf("localsvc: a Redis Cluster of %d masters with %d replicas each cannot be made", opts.Masters, opts.Replicas)
	}
	// The nodes start together: a master only calls the cluster ok 2 s
	// after it started (Redis's CLUSTER_WRITABLE_DELAY), and those seconds
	// pass for all of them at once.
	timeout := nodeTimeout
	if opts.Replicas == 0 {
		timeout = nodeTimeoutNoFailovers
	}
	c := &Cluster{Nodes: make([]*Redis, opts.Masters*(1+opts.Replicas))}
	errs := make([]error, len(c.Nodes))
	var started sync.WaitGroup
	for i := range c.Nodes {
		started.Add(1)
		go func() {
			defer started.Done()
			c.Nodes[i], errs[i] = StartRedis(ctx, RedisOptions{Dir: filepath.Join(opts.Dir, fmt.Sprintf("node%d", i+1)), Cluster: true, NodeTimeout: timeout})
		}()
	}
	started.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Kill()
		return nil, err
	}
	if opts.Replicas > 0 {
		args := append([]string{"--cluster", "create"}, c.Addrs()...)
		args = append(args, "--cluster-replicas", strconv.Itoa(opts.Replicas), "--cluster-yes")
		cmd := exec.CommandContext(ctx, cli, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			c.Kill()
			return nil, fmt.Errorf("localsvc: redis-cli --cluster create: %v\n%s", err, out)
		}
	} else if err := c.assemble(); err != nil {
		// Masters alone are assembled by hand, as redis-cli would (which
		// refuses fewer than 3), without its one-second polls: the slots
		// split evenly, in order, and the first node meeting the others.
		c.Kill()
		return nil, err
	}
	c.Masters = c.Nodes[:opts.Masters]
	if err := c.waitOK(ctx); err != nil {
		c.Kill()
		return nil, err
	}
	if opts.Replicas > 0 {
		if err := c.waitReplicasLinked(ctx, opts.Masters*opts.Replicas); err != nil {
			c.Kill()
			return nil, err
		}
	}
	return c, nil
}

// assemble splits the slots evenly over the nodes, in order, and has
// every node meet every other (not only the first, whose gossip would
// take a second or more to introduce the rest).
func (c *Cluster) assemble() error {
	n := len(c.Nodes)
	for i, node := range c.Nodes {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if _, err := command(node.Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return fmt.Errorf("localsvc: CLUSTER ADDSLOTSRANGE on %s: %v", node.Addr, err)
		}
	}
	for i, a := range c.Nodes {
		for _, b := range c.Nodes[i+1:] {
			host, port, _ := strings.Cut(b.Addr, ":")
			if _, err := command(a.Addr, "CLUSTER", "MEET", host, port); err != nil {
				return fmt.Errorf("localsvc: CLUSTER MEET %s from %s: %v", b.Addr, a.Addr, err)
			}
		}
	}
	return nil
}

// waitReplicasLinked waits until n replicas report their link to their
// master up (the initial sync done): before that, a replica could not take
// over.
func (c *Cluster) waitReplicasLinked(ctx context.Context, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		up := 0
		for _, node := range c.Nodes {
			info, err := command(node.Addr, "INFO", "replication")
			if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") {
				up++
			}
		}
		if up == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("localsvc: %d of %d replicas linked after 30s", up, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Node is the cluster's node at addr, or nil.
func (c *Cluster) Node(addr string) *Redis {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// MasterOf is the address of the node serving slot as master now, as the
// live node at addr (any but a dead one) sees the cluster.
func (c *Cluster) MasterOf(addr string, slot int) (string, error) {
	nodes, err := command(addr, "CLUSTER", "NODES")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && slot >= a && slot <= b {
				host, _, _ := strings.Cut(f[1], "@")
				return host, nil
			}
		}
	}
	return "", fmt.Errorf("localsvc: no live master for slot %d in %s's view", slot, addr)
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
		if n != nil { // one that failed to start
			n.Kill()
		}
	}
}

// clusterInfo sends CLUSTER INFO and parses the reply into its key:value
// lines.
func clusterInfo(addr string) (map[string]string, error) {
	body, err := command(addr, "CLUSTER", "INFO")
	if err != nil {
		return nil, err
	}
	info := map[string]string{}
	for _, line := range strings.Split(body, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			info[k] = v
		}
	}
	return info, nil
}

// command sends one inline command and returns its bulk-string reply.
func command(addr string, args ...string) (string, error) {
	conn, err := dialTimeout(addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte(strings.Join(args, " ") + "\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if rest, ok := strings.CutPrefix(head, "+"); ok {
		return strings.TrimSpace(rest), nil // a simple string: +OK
	}
	if !strings.HasPrefix(head, "$") {
		return "", fmt.Errorf("%s: %s", args[0], strings.TrimSpace(head))
	}
	size, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || size < 0 {
		return "", fmt.Errorf("%s: bad reply %q", args[0], head)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	return string(body), nil
}
