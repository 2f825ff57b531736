package postgres

import (
	"strconv"
	"strings"
	"testing"
)

// TestHoldSeatsNamesNoBlock: sqlHoldSeats, made from sqlHold by
// withoutBlocks, names no table of the GA blocks (so its generic plan locks
// none of their partitions) and reads exactly the 14 parameters Hold sends
// it, each at least once; sqlHold keeps its blocks. TestHoldPrunes runs both
// against PostgreSQL.
func TestHoldSeatsNamesNoBlock(t *testing.T) {
	for _, name := range []string{"ga_blocks", "ga_places", "avail"} {
		if strings.Contains(sqlHoldSeats, name) {
			t.Errorf("sqlHoldSeats names %s", name)
		}
		if !strings.Contains(sqlHold, name) {
			t.Errorf("sqlHold no longer names %s", name)
		}
	}
	used := map[int]bool{}
	for _, p := range param.FindAllString(sqlHoldSeats, -1) {
		n, _ := strconv.Atoi(p[1:])
		used[n] = true
	}
	for n := 1; n <= 14; n++ {
		if !used[n] {
			t.Errorf("sqlHoldSeats does not read $%d", n)
		}
	}
	if len(used) != 14 {
		t.Errorf("sqlHoldSeats reads %d parameters; want 14", len(used))
	}
}

// TestWithoutBlocksFindsEveryCut: a hold's statement without a part
// withoutBlocks cuts stops it (and so the package, at start) rather than
// giving a statement that still reads the blocks.
func TestWithoutBlocksFindsEveryCut(t *testing.T) {
	for _, q := range []string{
		"SELECT 1",
		strings.Replace(sqlHold, "), places AS (", "), placed AS (", 1),
		strings.Replace(sqlHold, "\n           AND NOT EXISTS (SELECT 1 FROM avail WHERE want > left_)", "", 1),
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("withoutBlocks took a statement without one of its parts:\n%.200s", q)
				}
			}()
			withoutBlocks(q)
		}()
	}
}
