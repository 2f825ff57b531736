package rdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durable writes (config redis.wait_replicas; docs/RELIABILITY.md,
// "Redis fails over"). Redis replicates asynchronously: a master that dies
// may take with it writes it had acknowledged, and the replica promoted in
// its place never had them. With WaitReplicas(n), the writes a fan is told
// of (Call.Told: a join's place, an admission, the claim of a place) are
// answered only once n replicas of their master have them: each pipeline of such calls to
// one master ends with WAIT n on the same connection, which waits for every
// write before it. A WAIT that times out fails its calls with
// ErrUnavailable: the fan is told to retry, and what was written stays
// (a place nobody polls is abandoned; an admission is finished by the next
// tick from what survived).
//
// What is not made durable is repaired from elsewhere: the inventory from
// PostgreSQL by the booking core's sync, a poll's abandon deadline by the
// next poll, a leave by the abandon deadline.

// waitTimeout bounds a WAIT: a replica that lags longer than this fails
// the write (503) rather than holding the fan.
const waitTimeout = time.Second

func splitDurable(sends []merged) (plain, durable []merged) {
	for _, m := range sends {
		if m.durable {
			durable = append(durable, m)
		} else {
			plain = append(plain, m)
		}
	}
	return plain, durable
}

// execDurable runs sends on their masters, each master's share in one
// pipeline ended by WAIT, and answers them.
func (b *batcher) execDurable(ctx context.Context, sends []merged) {
	groups := map[*redis.Client][]merged{}
	for _, m := range sends {
		node, err := b.masterFor(ctx, m.keys[0])
		if err != nil {
			m.cmd = errCmd(ctx, Interpret("durable write", err))
			answer([]merged{m})
			continue
		}
		groups[node] = append(groups[node], m)
	}
	var wg sync.WaitGroup
	for node, ms := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.waited(ctx, node, ms)
			for _, m := range ms {
				answer([]merged{m})
			}
		}()
	}
	wg.Wait()
}

// waited runs ms on node, then WAIT; a library node did not have is loaded
// and its calls are sent again.
func (b *batcher) waited(ctx context.Context, node *redis.Client, ms []merged) {
	// WAIT for no more replicas than the master has: WAIT itself would
	// block its whole timeout on a master left alone (its replica promoted
	// in a failover), on every write.
	want := min(int64(b.replicas), b.links.of(ctx, node))
	var acked *redis.Cmd
	run := func(ms []merged) {
		_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, m := range ms {
				m.cmd = m.script.fcall(ctx, p, m.keys, m.args)
			}
			if want > 0 {
				acked = p.Do(ctx, "WAIT", want, waitTimeout.Milliseconds())
			}
			return nil
		})
	}
	run(ms)
	if again := reloaded(ctx, node, ms); len(again) > 0 {
		run(again)
	}
	if want == 0 {
		// A master with no replica left (its own was promoted in a
		// failover, the old master not back yet) serves alone, as a single
		// master would, rather than refuse every sale it holds.
		return
	}
	n, err := acked.Int64()
	if err == nil && (n >= want || n >= b.links.refresh(ctx, node)) {
		// On as many replicas as asked, or as the master has now (one
		// went away since the count was taken).
		return
	}
	if cc, ok := b.rdb.(*redis.ClusterClient); ok && err != nil {
		cc.ReloadState(ctx) // the master may have changed: look again
	}
	fail := fmt.Errorf("%w: written, but on %d of %d replicas within %v (%v)", ErrUnavailable, n, want, waitTimeout, err)
	for _, m := range ms {
		if m.cmd.Err() == nil {
			m.cmd = errCmd(ctx, fail)
		}
	}
}

// replicaLinks caches how many replicas each master has connected, read
// at most once a second per master (INFO replication), and again at once
// when a WAIT falls short.
type replicaLinks struct {
	mu    sync.Mutex
	nodes map[*redis.Client]linkCount
}

type linkCount struct {
	n  int64
	at time.Time // by the wall clock: only the count's age is read
}

func (l *replicaLinks) of(ctx context.Context, node *redis.Client) int64 {
	l.mu.Lock()
	c, ok := l.nodes[node]
	l.mu.Unlock()
	if ok && time.Since(c.at) < time.Second {
		return c.n
	}
	return l.refresh(ctx, node)
}

func (l *replicaLinks) refresh(ctx context.Context, node *redis.Client) int64 {
	n := connectedReplicas(ctx, node)
	l.mu.Lock()
	if l.nodes == nil {
		l.nodes = map[*redis.Client]linkCount{}
	}
	l.nodes[node] = linkCount{n, time.Now()}
	l.mu.Unlock()
	return n
}

// connectedReplicas is how many replicas node has connected now (when
// unknown, more than any WAIT can get).
func connectedReplicas(ctx context.Context, node *redis.Client) int64 {
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		return 1 << 30
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "connected_slaves:"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return 1 << 30
}

// masterFor is the client of the master that serves key.
func (b *batcher) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := b.rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("rdb: durable writes need a *redis.Client or a *redis.ClusterClient, not %T", b.rdb)
}
