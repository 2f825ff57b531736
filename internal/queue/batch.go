package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/redis/go-redis/v9"
)

// batcher pipelines the scripts of concurrent requests: each request hands
// its script call to a small pool of senders, and a sender takes every call
// that is waiting at that moment and sends them all in one pipeline. Under
// load this cuts the network round trips and system calls per request
// several times over (the gateway's largest cost was the write and read of
// one EVALSHA per poll); a lone request goes out at once, with no added
// wait. Each script still runs atomically on its own; only the transport is
// shared.
type batcher struct {
	rdb  rediser
	in   chan *call
	once sync.Once

	// replicas > 0: a durable call is answered only once that many
	// replicas of its master have it (WAIT, see durable.go).
	replicas int
	links    replicaLinks
}

// call is one script call waiting for its pipeline.
type call struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}

	// merge marks a mergeable call (startMerged): args are header shared
	// arguments, then one item; calls of one batch with the same script,
	// keys and header go to Redis as one script call with all their items,
	// whose reply has one element per item.
	merge  bool
	header int
	// head: a merged script's reply begins with this many elements that
	// every item shares (what the script read once for all), then has
	// one element per item; the call gets its own as its reply, and the
	// head in shared.
	head   int
	shared []any

	// durable: with batcher.replicas > 0, the call's writes are on that
	// many replicas before it is answered (a fan is told of them).
	durable bool
}

const (
	senders  = 4   // pipelines in flight at once
	maxBatch = 128 // calls in one pipeline
)

func newBatcher(rdb rediser) *batcher {
	return &batcher{rdb: rdb, in: make(chan *call, senders*maxBatch)}
}

// run runs script through the next pipeline and returns its reply, as
// script.Run would.
func (b *batcher) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return b.start(ctx, script, keys, args...).wait()
}

// start hands the call to the next pipeline and returns at once: several
// calls started together go out in the same round trip (to different
// shards: at once), and each is waited for with wait.
func (b *batcher) start(ctx context.Context, script *redis.Script, keys []string, args ...any) *call {
	return b.submit(&call{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})})
}

// startMerged starts a mergeable call: args are header shared arguments
// followed by one item's own. Concurrent calls with the same script, keys
// and header are sent as one call carrying all their items (the script
// loops over them and replies with one element per item), so many small
// requests to one shard cost Redis one command, not one each: the sharded
// line's cross-shard counts and its global join step (shards.go). The
// call's reply is its item's element.
func (b *batcher) startMerged(ctx context.Context, script *redis.Script, keys []string, header int, args ...any) *call {
	return b.startMergedHead(ctx, script, keys, header, 0, args...)
}

// startMergedHead is startMerged for a script whose reply begins with head
// shared elements (call.head).
func (b *batcher) startMergedHead(ctx context.Context, script *redis.Script, keys []string, header, head int, args ...any) *call {
	return b.submit(&call{ctx: ctx, script: script, keys: keys, args: args, merge: true, header: header, head: head, done: make(chan struct{})})
}

func (b *batcher) submit(c *call) *call {
	b.once.Do(func() {
		for i := 0; i < senders; i++ {
			go b.send()
		}
	})
	// A send that need not wait selects on nothing else: the request's
	// context is shared by the requests of a moment (the gateway's budget),
	// and every select on it takes its lock.
	select {
	case b.in <- c:
		return c
	default:
	}
	select {
	case b.in <- c:
	case <-c.ctx.Done():
		c.cmd = errCmd(c.ctx, c.ctx.Err())
		close(c.done)
	}
	return c
}

// wait returns the call's reply, or the error of its context ending first.
func (c *call) wait() *redis.Cmd {
	select {
	case <-c.done:
		return c.cmd
	case <-c.ctx.Done():
		// The call may still run; its reply is dropped. Scripts of the line
		// are safe to have run without the caller knowing (a poll, a join
		// the fan will resume by its cookie).
		return errCmd(c.ctx, c.ctx.Err())
	}
}

// send is one sender: it lives as long as the process, as the Store does.
func (b *batcher) send() {
	batch := make([]*call, 0, maxBatch)
	last := 0 // calls in the previous batch
	for c := range b.in {
		batch = append(batch[:0], c)
		if last > 1 {
			// Under load (the last batch was not alone), let the requests
			// already running hand in their calls first: one yield, a few
			// microseconds, and the batch grows (polls at 1,000
			// connections: 60 to a pipeline instead of 45). A lone request
			// is never held.
			runtime.Gosched()
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case c := <-b.in:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		last = len(batch)
		b.exec(batch)
	}
}

func (b *batcher) exec(batch []*call) {
	// The pipeline's context: calls whose callers gave up are still sent
	// (cheap, harmless), so one impatient caller cannot fail the others.
	ctx := context.WithoutCancel(batch[0].ctx)
	sends := merge(batch)
	plain := sends
	if b.replicas > 0 {
		var durable []merged
		plain, durable = splitDurable(sends)
		if len(durable) > 0 {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.execDurable(ctx, durable)
			}()
			defer wg.Wait()
		}
	}
	if len(plain) > 0 {
		_, _ = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range plain {
				c.cmd = c.script.EvalSha(ctx, p, c.keys, c.args...)
			}
			return nil
		})
	}
	for _, c := range plain {
		// A Redis that restarted (or a new one) has no scripts cached:
		// EVAL loads it, as script.Run does.
		if isNoScript(c.cmd.Err()) {
			c.cmd = c.script.Run(ctx, b.rdb, c.keys, c.args...)
		}
	}
	answer(plain)
}

// answer hands every call that sends carry its reply.
func answer(sends []merged) {
	for _, m := range sends {
		if len(m.items) > 0 {
			m.split()
		} else {
			close(m.done)
		}
	}
}

// merged is a call as sent: a plain call, or (items set) the mergeable
// calls it carries for one script, keys and header.
type merged struct {
	*call
	items []*call
}

// merge groups the batch's mergeable calls; plain calls go as they are.
func merge(batch []*call) []merged {
	out := make([]merged, 0, len(batch))
	for _, c := range batch {
		if !c.merge {
			out = append(out, merged{call: c})
			continue
		}
		if i := groupOf(out, c); i >= 0 {
			m := &out[i]
			if m.call == m.items[0] {
				// A second item: the call sent becomes one of its own.
				first := m.call
				m.call = &call{ctx: first.ctx, script: first.script, keys: first.keys, args: append([]any(nil), first.args...), durable: first.durable, head: first.head}
			}
			m.args = append(m.args, c.args[c.header:]...)
			m.items = append(m.items, c)
			continue
		}
		// Alone so far, the call goes as it is (a script of one item).
		out = append(out, merged{call: c, items: []*call{c}})
	}
	return out
}

// groupOf is the index of the merged call of out that c joins, or -1:
// calls merge when script, keys, header and durability are the same. A
// batch holds few groups (one per event and script, mostly), so a scan
// costs less than building a key per call.
func groupOf(out []merged, c *call) int {
	for i := range out {
		m := &out[i]
		if len(m.items) > 0 && sameGroup(m.items[0], c) {
			return i
		}
	}
	return -1
}

func sameGroup(a, b *call) bool {
	if a.script != b.script || a.durable != b.durable || a.header != b.header || a.head != b.head || len(a.keys) != len(b.keys) {
		return false
	}
	for i := range a.keys {
		if a.keys[i] != b.keys[i] {
			return false
		}
	}
	for i := range a.header {
		if !sameArg(a.args[i], b.args[i]) {
			return false
		}
	}
	return true
}

// sameArg: header arguments are strings and numbers; anything else never
// merges (comparing it with == could panic).
func sameArg(a, b any) bool {
	switch a.(type) {
	case string, int, int64, float64, bool:
		return a == b
	}
	return false
}

// split hands each merged item its element of the reply (and the head the
// items share).
func (m merged) split() {
	v, err := m.cmd.Slice()
	head := m.items[0].head
	if err == nil && len(v) != head+len(m.items) {
		err = fmt.Errorf("merged reply has %d elements for %d items and a head of %d", len(v), len(m.items), head)
	}
	if c := m.items[0]; len(m.items) == 1 && c == m.call {
		// Sent as it is: its reply is unwrapped in place.
		if err == nil {
			c.shared = v[:head:head]
			c.cmd.SetVal(v[head])
		} else {
			c.cmd.SetErr(err)
		}
		close(c.done)
		return
	}
	for i, c := range m.items {
		c.cmd = redis.NewCmd(c.ctx)
		if err != nil {
			c.cmd.SetErr(err)
		} else {
			c.shared = v[:head:head]
			c.cmd.SetVal(v[head+i])
		}
		close(c.done)
	}
}

func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
