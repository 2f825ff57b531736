package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/policy"
)

// overlay reads ev's overrides and puts them in force on set. An override
// the config file overtook (its key was edited since) is dropped here, by
// exactly one replica, which tells the audit.
func (a *Admitter) overlay(ctx context.Context, ev config.Event, set line.Settings) (line.Settings, error) {
	ovs, err := a.ops.Overrides(ctx, ev.ID)
	if err != nil {
		return set, err
	}
	cur := policy.ConfigValues(ev)
	for f, o := range ovs {
		if o.Base == cur[f] {
			continue
		}
		dropped, err := a.ops.DropOverride(ctx, ev.ID, f, o)
		if err != nil {
			return set, err
		}
		if dropped {
			a.audit(ctx, ev.ID, fmt.Sprintf("%s %s -> %s: the config file's edit (%s was %s) replaces the API's value", f, o.Value, cur[f], f, o.Base), policy.SourceConfig)
		}
	}
	return policy.Overlay(ev, set, ovs), nil
}

func (a *Admitter) audit(ctx context.Context, event, change, source string) {
	// Who: a reload (config) or the adaptive admitter, as the source says.
	if err := a.ops.Audit(ctx, operators.AuditEntry{Event: event, Change: change, Source: source, By: source}); err != nil {
		a.log.Warn("audit", "event", event, "change", change, "err", err)
	}
}

// signal is what the booking core's health says, once per round: 1 it
// struggles (and why), 0 healthy, -1 no fresh summary (a booking core that
// stopped publishing tells nothing: the factor stays).
type signal struct {
	struggling int
	why        string
}

// freshHealth: a summary older than this says nothing (two seconds of the
// booking core's one-second publishing, and some slack).
const freshHealth = 5 * time.Second

// minRequests: a 5xx share over fewer answers than this is noise.
const minRequests = 20

// health reads the booking core's summaries and judges them against the
// thresholds: the worst replica's hold p99, the 5xx share of all.
func (a *Admitter) health(ctx context.Context, th config.Adaptive) signal {
	hs, err := a.ops.BookingHealthOf(ctx, a.now().Add(-freshHealth))
	if err != nil {
		a.log.Warn("booking health", "err", err)
		return signal{struggling: -1}
	}
	if len(hs) == 0 {
		return signal{struggling: -1}
	}
	var p99 time.Duration
	var holds, reqs, errs int64
	for _, h := range hs {
		p99 = max(p99, h.HoldP99)
		holds += h.Holds
		reqs += h.Requests
		errs += h.Errors
	}
	switch {
	case holds > 0 && p99 > th.HoldP99.D():
		return signal{1, fmt.Sprintf("hold p99 %s > %s", p99.Round(time.Millisecond), th.HoldP99)}
	case reqs >= minRequests && float64(errs)/float64(reqs) > th.ErrorShare:
		return signal{1, fmt.Sprintf("5xx share %.3f > %g", float64(errs)/float64(reqs), th.ErrorShare)}
	}
	return signal{0, fmt.Sprintf("hold p99 %s, 5xx share %.3f", p99.Round(time.Millisecond), float64(errs)/float64(max(reqs, 1)))}
}

// adapt moves ev's adaptive factor one step on sig and applies it to set's
// rate; the replica that moved it tells the audit why.
func (a *Admitter) adapt(ctx context.Context, ev config.Event, set line.Settings, th config.Adaptive, sig signal) (line.Settings, error) {
	f, was, err := a.ops.Adapt(ctx, ev.ID, sig.struggling, th.Interval.D(), th.Step, th.Floor)
	if err != nil {
		return set, err
	}
	base := set.AdmitPerSecond
	set.AdmitPerSecond = base * f
	set.Factor = f
	if f != was {
		verb := "the booking core struggles"
		if f > was {
			verb = "the booking core is healthy"
		}
		a.audit(ctx, ev.ID, fmt.Sprintf("admitPerSecond %s -> %s (%.0f%% of %s): %s, %s",
			policy.FormatRate(base*was), policy.FormatRate(base*f), f*100, policy.FormatRate(base), verb, sig.why), policy.SourceAdaptive)
		a.log.Info("adaptive rate", "event", ev.ID, "factor", f, "was", was, "why", sig.why)
	}
	return set, nil
}
