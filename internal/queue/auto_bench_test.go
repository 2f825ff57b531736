package queue_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// BenchmarkAutoJoin is what Redis spends on a join of an auto event
// (DESIGN.md, "Always on"), side by side in one run: let straight through
// (nobody waits, room under the cap, a token in the bucket: the place made
// active and claimed in the join's step), made to wait in the line that
// formed (the cap full), and a queue event's join for reference; each on a
// private Redis of its own, from 8×GOMAXPROCS goroutines (the joins of a
// moment share one FCALL, as at the gateway). It reports Redis's
// main-thread CPU per join (redis-cpu-µs/op) and, from INFO commandstats
// reset before each, the FCALLs' time per join (redis-usec/op: a FCALL's
// usec holds the commands its function runs; they are listed apart too, and
// not counted again) with the FCALL's usec_per_call and FCALLs per join; and
// it checks that every join was of its kind. Three rounds of the three
// (straight, queued, queue, straight#01, …). docs/PERFORMANCE.md has the
// figures:
//
//	go test ./internal/queue -run '^$' -bench BenchmarkAutoJoin -benchtime 20000x
func BenchmarkAutoJoin(b *testing.B) {
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average at the start: %s", strings.TrimSpace(string(load)))
	}
	straight, queued := open(), open()
	straight.Mode, queued.Mode = line.ModeAuto, line.ModeAuto
	straight.AdmitPerSecond, straight.MaxActive = 1e9, 1<<30
	queued.MaxActive = 1
	cases := []struct {
		name  string
		set   line.Settings
		first []line.State // joins made before the clock starts: the line formed
		want  line.State
	}{
		{"straight", straight, nil, line.Admitted},
		{"queued", queued, []line.State{line.Admitted, line.Waiting}, line.Waiting},
		{"queue", open(), nil, line.Waiting},
	}
	// Three rounds of the three, one after the other, so that what else
	// loads the machine weighs on each kind alike.
	for round := range 3 * len(cases) {
		c := cases[round%len(cases)]
		b.Run(c.name, func(b *testing.B) {
			e := setup(b)
			ctx := context.Background()
			for _, want := range c.first {
				if r := join(b, e.store, c.set); r.State != want {
					b.Fatalf("%s: a first join %s; want %s", c.name, r.State, want)
				}
			}
			if err := e.rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			benchRedis(b, e, func(int) error {
				r, err := e.store.Join(ctx, event, c.set)
				if err == nil && r.State != c.want {
					b.Errorf("%s: a join %s; want %s", c.name, r.State, c.want)
				}
				return err
			})
			stats := testenv.RedisCommandStats(b, e.rdb)
			fcall := stats["fcall"]
			if fcall.Calls == 0 {
				b.Fatalf("no FCALL in INFO commandstats: %v", stats)
			}
			b.ReportMetric(fcall.Usec/float64(b.N), "redis-usec/op")
			b.ReportMetric(fcall.Usec/float64(fcall.Calls), "fcall-usec/call")
			b.ReportMetric(float64(fcall.Calls)/float64(b.N), "fcall/op")
		})
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average at the end: %s", strings.TrimSpace(string(load)))
	}
}
