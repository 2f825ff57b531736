package rdb

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// merge groups calls of one script, keys and header, and sends a call
// alone as it is; a header argument that cannot be compared never merges.
func TestMergeGroups(t *testing.T) {
	ctx := context.Background()
	keys := []string{KeysOf("e").Wait}
	mk := func(header ...any) *Pending {
		return &Pending{ctx: ctx, script: testScript, keys: keys, args: append(header, "item"), merge: true, header: len(header)}
	}
	a, b, c := mk("queue", int64(5)), mk("queue", int64(5)), mk("queue", int64(6))
	d, e := mk([]byte("x")), mk([]byte("x"))
	out := merge([]*Pending{a, b, c, d, e})
	if len(out) != 4 {
		t.Fatalf("%d calls sent; want 4 (a+b, c, d, e)", len(out))
	}
	if len(out[0].items) != 2 || out[0].Pending == a || len(out[0].args) != 4 {
		t.Errorf("a and b: %d items, args %v; want one call of its own carrying both", len(out[0].items), out[0].args)
	}
	for i, alone := range []*Pending{c, d, e} {
		if m := out[i+1]; m.Pending != alone || len(m.items) != 1 {
			t.Errorf("call %d: not sent as it is", i+1)
		}
	}
}

// split hands each item of a merged call its element of the reply and the
// head they share; a reply of the wrong length is an error for every item,
// never another item's answer.
func TestSplitHead(t *testing.T) {
	ctx := context.Background()
	mk := func() *Pending {
		return &Pending{ctx: ctx, script: testScript, args: []any{"h", "item"}, merge: true, header: 1, head: 2, done: make(chan struct{})}
	}
	a, b := mk(), mk()
	m := merge([]*Pending{a, b})[0]
	m.cmd = redis.NewCmd(ctx)
	m.cmd.SetVal([]any{"now", "rate", int64(7), int64(8)})
	m.split()
	for i, c := range []*Pending{a, b} {
		<-c.done
		if v, err := c.cmd.Result(); err != nil || v != int64(7+i) || len(c.shared) != 2 || c.shared[0] != "now" {
			t.Errorf("item %d: %v, %v, head %v; want %d and [now rate]", i, v, err, c.shared, 7+i)
		}
	}

	lone := mk()
	m = merge([]*Pending{lone})[0]
	m.cmd = redis.NewCmd(ctx)
	m.cmd.SetVal([]any{"now", "rate", int64(9)})
	m.split()
	if v, err := lone.cmd.Result(); err != nil || v != int64(9) || len(lone.shared) != 2 {
		t.Errorf("a lone call: %v, %v, head %v; want 9 and the head", v, err, lone.shared)
	}

	a, b = mk(), mk()
	m = merge([]*Pending{a, b})[0]
	m.cmd = redis.NewCmd(ctx)
	m.cmd.SetVal([]any{"now", "rate", int64(7)}) // one element short
	m.split()
	for i, c := range []*Pending{a, b} {
		if err := c.cmd.Err(); err == nil {
			t.Errorf("item %d of a short reply: no error", i)
		}
	}
}

var testScript = NewLibrary("batch_internal_test").Script("one", `return 1`)
