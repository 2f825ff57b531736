// Package periodic runs a background job again and again until its context
// ends: the sweeps, relays, senders and refreshers of every process. It
// imports nothing of ours, so that the domain's own jobs (notify's sender,
// the payment simulator's callbacks, the webhooks' sender) run the same
// way as the services' without reaching up to the runner
// (platform/service) and the config it reads.
package periodic

import (
	"context"
	"time"
)

// Run runs pass at once, then again each time next() has passed (read
// after every pass: a reloaded interval acts at once), until ctx ends. A
// pass is never cut short by the next one.
func Run(ctx context.Context, next func() time.Duration, pass func(context.Context)) {
	for {
		pass(ctx)
		t := time.NewTimer(next())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Every is a fixed interval for Run.
func Every(d time.Duration) func() time.Duration { return func() time.Duration { return d } }
