package rdb

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
	rdb  Cmdable
	in   chan *Pending
	once sync.Once

	// replicas > 0: a told call is answered only once that many replicas
	// of its master have it (WAIT, see durable.go).
	replicas int
	links    replicaLinks
}

// Call is one run of a script.
type Call struct {
	Script *Script
	Keys   []string
	Args   []any

	// Merge marks a mergeable call: Args are Header shared arguments, then
	// one item's own. Concurrent calls with the same script, keys and
	// header are sent as one script call carrying all their items (the
	// script loops over them and replies with one element per item), so
	// many small requests of one event cost Redis one command, not one
	// each. The call's reply is its item's element.
	Merge  bool
	Header int
	// Head: a merged script's reply begins with this many elements that
	// every item shares (what the script read once for all), then has one
	// element per item; the call gets its own as its reply, and the head
	// from Pending.Head.
	Head int

	// Told: a fan is told of the call's writes, so with WaitReplicas(n) it
	// is answered only once n replicas of its master have them.
	Told bool
}

// Pending is a call on its way: several started together go out in the
// same round trip (to different shards: at once), each waited for with
// Wait.
type Pending struct {
	ctx    context.Context
	script *Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}

	merge  bool
	header int
	head   int
	shared []any

	// durable: told, with batcher.replicas > 0.
	durable bool
}

const (
	senders  = 4   // pipelines in flight at once
	maxBatch = 128 // calls in one pipeline
)

func newBatcher(rdb Cmdable) *batcher {
	return &batcher{rdb: rdb, in: make(chan *Pending, senders*maxBatch)}
}

// Start hands the call to the next pipeline and returns at once.
func (c *Client) Start(ctx context.Context, call Call) *Pending {
	b := c.batch
	return b.submit(&Pending{ctx: ctx, script: call.Script, keys: call.Keys, args: call.Args,
		merge: call.Merge, header: call.Header, head: call.Head, durable: call.Told && b.replicas > 0,
		done: make(chan struct{})})
}

// Run runs the call through the next pipeline and returns its reply, as
// script.Run would.
func (c *Client) Run(ctx context.Context, call Call) *redis.Cmd {
	return c.Start(ctx, call).Wait()
}

// WaitReplicas makes told calls wait for n replicas (0: none, the
// default). Call it before use.
func (c *Client) WaitReplicas(n int) { c.batch.replicas = n }

func (b *batcher) submit(c *Pending) *Pending {
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

// Wait returns the call's reply, or the error of its context ending first.
func (c *Pending) Wait() *redis.Cmd {
	select {
	case <-c.done:
		return c.cmd
	case <-c.ctx.Done():
		// A call already sent may still run; its reply is dropped. Scripts
		// of the line are safe to have run without the caller knowing (a
		// poll; a join, whose place nobody polls is abandoned at its
		// deadline). One still waiting for a sender is not sent
		// (dropAbandoned).
		return errCmd(c.ctx, c.ctx.Err())
	}
}

// Head is the merged reply's head (Call.Head), once Wait returned.
func (c *Pending) Head() []any { return c.shared }

// send is one sender: it lives as long as the process, as the Client does.
func (b *batcher) send() {
	batch := make([]*Pending, 0, maxBatch)
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
		if batch = dropAbandoned(batch); len(batch) > 0 {
			b.exec(batch)
		}
	}
}

// dropAbandoned answers the calls whose callers gave up while they waited
// for a sender, and returns the others, to send: such a caller told its
// fan 503 already, and a join run after that would make a place nobody was
// told of (an orphan that holds an admission until its abandon deadline; a
// Redis that stalls, or a network partition, piles them up:
// docs/RELIABILITY.md, "Network faults"). A call already sent cannot be
// taken back; it runs without its caller (Pending.Wait).
func dropAbandoned(batch []*Pending) []*Pending {
	kept := batch[:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.cmd = errCmd(c.ctx, err)
			close(c.done)
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

func (b *batcher) exec(batch []*Pending) {
	// The pipeline's context: a caller that gives up once its call is on
	// its way does not take the others' with it.
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
		b.pipeline(ctx, b.rdb, plain)
	}
	answer(plain)
}

// pipeline runs sends through p in one pipeline. A function Redis lacks
// (function.go) has its library loaded, and its calls are sent once more.
func (b *batcher) pipeline(ctx context.Context, p Cmdable, sends []merged) {
	run := func(sends []merged) {
		_, _ = p.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for _, c := range sends {
				c.cmd = c.script.fcall(ctx, pipe, c.keys, c.args)
			}
			return nil
		})
	}
	run(sends)
	if again := reloaded(ctx, p, sends); len(again) > 0 {
		run(again)
	}
}

// reloaded loads, once each, the libraries whose functions sends found
// missing on p, and returns the calls to send again; a call whose library
// would not load is answered with that error.
func reloaded(ctx context.Context, p Cmdable, sends []merged) []merged {
	var again []merged
	loaded := map[*Library]error{}
	for _, c := range sends {
		if !isNoFunction(c.cmd.Err()) {
			continue
		}
		l := c.script.lib
		err, done := loaded[l]
		if !done {
			err = load(ctx, p, l)
			loaded[l] = err
		}
		if err != nil {
			c.cmd = errCmd(ctx, err)
			continue
		}
		again = append(again, c)
	}
	return again
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
	*Pending
	items []*Pending
}

// merge groups the batch's mergeable calls; plain calls go as they are.
func merge(batch []*Pending) []merged {
	out := make([]merged, 0, len(batch))
	for _, c := range batch {
		if !c.merge {
			out = append(out, merged{Pending: c})
			continue
		}
		if i := groupOf(out, c); i >= 0 {
			m := &out[i]
			if m.Pending == m.items[0] {
				// A second item: the call sent becomes one of its own.
				first := m.Pending
				m.Pending = &Pending{ctx: first.ctx, script: first.script, keys: first.keys, args: append([]any(nil), first.args...), durable: first.durable, head: first.head}
			}
			m.args = append(m.args, c.args[c.header:]...)
			m.items = append(m.items, c)
			continue
		}
		// Alone so far, the call goes as it is (a script of one item).
		out = append(out, merged{Pending: c, items: []*Pending{c}})
	}
	return out
}

// groupOf is the index of the merged call of out that c joins, or -1:
// calls merge when script, keys, header and durability are the same. A
// batch holds few groups (one per event and script, mostly), so a scan
// costs less than building a key per call.
func groupOf(out []merged, c *Pending) int {
	for i := range out {
		m := &out[i]
		if len(m.items) > 0 && sameGroup(m.items[0], c) {
			return i
		}
	}
	return -1
}

func sameGroup(a, b *Pending) bool {
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
	if c := m.items[0]; len(m.items) == 1 && c == m.Pending {
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
