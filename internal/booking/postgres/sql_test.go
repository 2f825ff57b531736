package postgres

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestHoldSeatsIsHoldWithoutBlocks: sqlHoldSeats must decide, read and
// write exactly as sqlHold does for a hold that asks for no GA place. It is
// sqlHold with the blocks' CTEs (avail, places) and the conditions and
// answers that read them cut out, and the blocks' parameters ($10, $11)
// taken out of the numbering; an edit of one statement that the other does
// not follow fails here.
func TestHoldSeatsIsHoldWithoutBlocks(t *testing.T) {
	want := sqlHold
	cut := func(from, to string) {
		t.Helper()
		i := strings.Index(want, from)
		j := strings.Index(want, to)
		if i < 0 || j < i {
			t.Fatalf("sqlHold has no %q before %q any more: update this test and sqlHoldSeats", from, to)
		}
		want = want[:i] + want[j:]
	}
	replace := func(old, new string) {
		t.Helper()
		if strings.Count(want, old) != 1 {
			t.Fatalf("sqlHold has %d of %q; want 1: update this test and sqlHoldSeats", strings.Count(want, old), old)
		}
		want = strings.Replace(want, old, new, 1)
	}
	cut("), avail AS (", "), ok AS (")
	cut("), places AS (", "), refused AS (")
	replace("\n           AND (SELECT count(*) FROM avail) = cardinality($10::text[])", "")
	replace("\n           AND NOT EXISTS (SELECT 1 FROM avail WHERE want > left_)", "")
	replace("\n       (SELECT count(*) FROM avail),\n       (SELECT min(code) FROM avail WHERE want > left_),",
		"\n       0::bigint, NULL::text,")
	var stray []string
	want = regexp.MustCompile(`\$\d+`).ReplaceAllStringFunc(want, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		switch {
		case n == 10 || n == 11:
			stray = append(stray, p)
		case n > 11:
			n -= 2
		}
		return "$" + strconv.Itoa(n)
	})
	if len(stray) > 0 {
		t.Errorf("sqlHold without its blocks still reads the blocks' parameters %v", stray)
	}
	if sqlHoldSeats != want {
		t.Errorf("sqlHoldSeats is not sqlHold without its blocks.\ngot:\n%s\nwant:\n%s", sqlHoldSeats, want)
	}
}
