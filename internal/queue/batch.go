package queue

import (
	"context"
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
}

// call is one script call waiting for its pipeline.
type call struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
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
	b.once.Do(func() {
		for i := 0; i < senders; i++ {
			go b.send()
		}
	})
	c := &call{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	select {
	case b.in <- c:
	case <-ctx.Done():
		return errCmd(ctx, ctx.Err())
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		// The call may still run; its reply is dropped. Scripts of the line
		// are safe to have run without the caller knowing (a poll, a join
		// the fan will resume by its cookie).
		return errCmd(ctx, ctx.Err())
	}
}

// send is one sender: it lives as long as the process, as the Store does.
func (b *batcher) send() {
	batch := make([]*call, 0, maxBatch)
	for c := range b.in {
		batch = append(batch[:0], c)
	fill:
		for len(batch) < maxBatch {
			select {
			case c := <-b.in:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		b.exec(batch)
	}
}

func (b *batcher) exec(batch []*call) {
	// The pipeline's context: calls whose callers gave up are still sent
	// (cheap, harmless), so one impatient caller cannot fail the others.
	ctx := context.WithoutCancel(batch[0].ctx)
	_, _ = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range batch {
			c.cmd = c.script.EvalSha(ctx, p, c.keys, c.args...)
		}
		return nil
	})
	for _, c := range batch {
		// A Redis that restarted (or a new one) has no scripts cached:
		// EVAL loads it, as script.Run does.
		if isNoScript(c.cmd.Err()) {
			c.cmd = c.script.Run(ctx, b.rdb, c.keys, c.args...)
		}
		close(c.done)
	}
}

func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
