package testenv

import (
	"runtime"
	"sync/atomic"
	"time"
)

// HeapPeak collects garbage, then samples the Go heap every 10 ms until the
// returned stop, which gives the largest HeapAlloc seen: what a step a
// benchmark times adds to its process at the worst (MB-heap-peak).
func HeapPeak() (stop func() uint64) {
	runtime.GC()
	var peak atomic.Uint64
	stopSampling := Repeat(func() time.Duration { return 10 * time.Millisecond }, func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak.Store(max(peak.Load(), m.HeapAlloc))
	})
	return func() uint64 {
		stopSampling()
		return peak.Load()
	}
}
