package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// mutantEnv runs TestCheckerCatchesADoubleSale (it builds a broken booking
// core and runs a sale on it: not part of make test).
const mutantEnv = "WAITROOM_MUTANT"

// The hold without its WHERE on status: the two conditions that let a hold
// lock and take only seats that are AVAILABLE or whose hold lapsed
// (internal/booking/postgres/sql.go, sqlHold's locked and taken; the
// statement for holds of seats alone, sqlHoldSeats, is made from it).
var holdWithoutWhere = []string{
	"\n       AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= statement_timestamp()))\n       AND NOT EXISTS",
	"\n       AND (s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= statement_timestamp()))\n    RETURNING s.seat_code",
}

// A deliberately broken build shows that the linearizability checker would
// catch a double sale. The test copies this tree, takes the WHERE on status
// out of the hold's statement in the copy (never in the tree itself), builds
// the binaries from it, and runs a sale on them in which a quarter of the
// fans pick any seat, not only those shown free. The checker must find the
// history not linearizable and print the smallest counter-example; the
// database is asked too how many seats it sold twice. Run it with
//
//	WAITROOM_MUTANT=1 go test -count=1 -run TestCheckerCatchesADoubleSale -v ./internal/e2e
//
// (docs/RELIABILITY.md reports a run).
func TestCheckerCatchesADoubleSale(t *testing.T) {
	if os.Getenv(mutantEnv) == "" {
		t.Skip("set " + mutantEnv + "=1 to build the broken hold and run a sale on it")
	}
	bin := mutantBinaries(t, "internal/booking/postgres/sql.go", holdWithoutWhere)
	ctx := context.Background()
	const rate, maxActive = 40, 60
	d := startDrill(t, stack.Options{Bin: bin, Events: drillEventsOf(rate, maxActive, 4, 10)}, rate, maxActive)
	d.hist, d.anySeat = newHistory(), 0.25
	r := d.sale(60, 2*time.Second, 40*time.Second)
	out := r.wait()

	db, err := pgx.Connect(ctx, d.s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var soldTwice int64
	if err := db.QueryRow(ctx, sqlSoldTwice).Scan(&soldTwice); err != nil {
		t.Fatal(err)
	}
	checked, counter, err := linearizable(d.hist.operations(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if counter == "" {
		t.Fatalf("the broken hold's %d seat operations passed as linearizable (seats sold twice: %d; outcomes %v)", checked, soldTwice, out)
	}
	t.Logf("SUMMARY mutant (hold without its WHERE on status): %d seat operations, not linearizable; seats in two CONFIRMED bookings: %d; outcomes %v; the smallest counter-example:\n%s",
		checked, soldTwice, out, counter)
}

// mutantBinaries builds the gateway, admitter and booking from a copy of
// this tree in which file has each of cut taken out (wherever it occurs),
// and returns their folder. It fails the test if a cut is not found (the
// mutant no longer matches the code).
func mutantBinaries(t *testing.T, file string, cut []string) string {
	t.Helper()
	root := testenv.Repo(t)
	dir := t.TempDir()
	for _, p := range []string{"go.mod", "go.sum", "cmd", "internal"} {
		if out, err := exec.Command("cp", "-r", filepath.Join(root, p), dir).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v\n%s", p, err, out)
		}
	}
	path := filepath.Join(dir, file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for _, c := range cut {
		if !strings.Contains(src, c) {
			t.Fatalf("the mutant's cut is not in %s any more:\n%s", file, c)
		}
		keep := c[strings.LastIndex(c, "\n"):]
		src = strings.ReplaceAll(src, c, keep)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	cmd := exec.Command("go", "build", "-o", bin+"/", "./cmd/gateway", "./cmd/admitter", "./cmd/booking")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the mutant: %v\n%s", err, out)
	}
	return bin
}
