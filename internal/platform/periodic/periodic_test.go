package periodic_test

import (
	"context"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/platform/periodic"
)

// A job runs at once, then after each interval next() gives, read after
// every pass, until its context ends; a pass is never cut short.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var passes, asked int
	intervals := []time.Duration{time.Millisecond, 2 * time.Millisecond, time.Hour}
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic.Run(ctx, func() time.Duration { asked++; return intervals[asked-1] }, func(ctx context.Context) {
			passes++
			if passes == 3 {
				cancel() // the third pass ends the job: it finishes, and no fourth starts
			}
			if ctx.Err() != nil && passes != 3 {
				t.Errorf("pass %d began with its context ended", passes)
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return once its context ended")
	}
	if passes != 3 || asked != 3 {
		t.Errorf("%d passes, the interval asked %d times; want 3 and 3 (one at once, one after each interval)", passes, asked)
	}
	if got := periodic.Every(time.Second)(); got != time.Second {
		t.Errorf("Every(1s)() = %v; want 1s", got)
	}
}
