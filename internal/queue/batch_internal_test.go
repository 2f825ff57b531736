package queue

import (
	"context"
	"testing"
)

// merge groups calls of one script, keys and header, and sends a call
// alone as it is; a header argument that cannot be compared never merges.
func TestMergeGroups(t *testing.T) {
	ctx := context.Background()
	keys := []string{"wr:{e}:wait"}
	mk := func(header ...any) *call {
		return &call{ctx: ctx, script: statusScript, keys: keys, args: append(header, "item"), merge: true, header: len(header)}
	}
	a, b, c := mk("queue", int64(5)), mk("queue", int64(5)), mk("queue", int64(6))
	d, e := mk([]byte("x")), mk([]byte("x"))
	out := merge([]*call{a, b, c, d, e})
	if len(out) != 4 {
		t.Fatalf("%d calls sent; want 4 (a+b, c, d, e)", len(out))
	}
	if len(out[0].items) != 2 || out[0].call == a || len(out[0].args) != 4 {
		t.Errorf("a and b: %d items, args %v; want one call of its own carrying both", len(out[0].items), out[0].args)
	}
	for i, alone := range []*call{c, d, e} {
		if m := out[i+1]; m.call != alone || len(m.items) != 1 {
			t.Errorf("call %d: not sent as it is", i+1)
		}
	}
}
