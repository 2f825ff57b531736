package rdb_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

var b36Script = rdb.NewLibrary("lua_test", rdb.Prelude, rdb.Base36).Script("b36", `
local out = {}
for i = 1, #ARGV do out[i] = b36(tonumber(ARGV[i])) end
return out
`)

// b36 writes what Go's strconv.FormatInt(n, 36) writes, on each side of
// every length its two-digit strings change at, and up to 2^53.
func TestBase36IsFormatInt(t *testing.T) {
	_, rc := testenv.Redis(t)
	c := rdb.New(rc)
	var ns []int64
	for p := int64(1); p > 0 && p <= 1<<53; p *= 36 {
		for _, n := range []int64{p - 1, p, p + 1, 2*p - 1, 35 * p} {
			if n > 0 && n <= 1<<53 {
				ns = append(ns, n)
			}
		}
	}
	for n := int64(1); n < 3000; n += 7 {
		ns = append(ns, n, n*1296+1295, n*1296*1296+1)
	}
	ns = append(ns, 1<<53, 1<<53-1, 1296*1296*1296-1, 1296*1296*1296)
	args := make([]any, len(ns))
	for i, n := range ns {
		args[i] = strconv.FormatInt(n, 10)
	}
	got, err := c.Run(context.Background(), rdb.Call{Script: b36Script, Keys: []string{}, Args: args}).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range ns {
		if want := strconv.FormatInt(n, 36); got[i] != want {
			t.Errorf("b36(%d) = %q; want %q", n, got[i], want)
		}
	}
}
