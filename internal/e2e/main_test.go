package e2e_test

import (
	"flag"
	"os"
	"testing"
)

// scenariosAtOnce is how many parallel scenarios run side by side when
// go test is not told (-parallel): most of a scenario's time is spent
// waiting (for a tick, a window, a hold to lapse, a browser), so the
// package used about two-thirds of one core with two at a time. Three at a
// time, beside the race detector's packages, made the machine late for
// scenarios that still lean on timing (doc.go, "Parallel scenarios"), so
// two, whatever the machine's cores.
const scenariosAtOnce = "2"

func TestMain(m *testing.M) {
	flag.Parse()
	told := false
	flag.Visit(func(f *flag.Flag) { told = told || f.Name == "test.parallel" })
	if !told {
		if err := flag.Set("test.parallel", scenariosAtOnce); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
