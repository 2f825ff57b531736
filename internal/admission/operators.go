package admission

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/queue"
)

// Sources of a setting (GET /api/v1/admin/events) and of an audit entry.
const (
	SourceConfig   = "config"
	SourceAPI      = "api"
	SourceAdaptive = "adaptive"
)

// Fields are the settings an operator may override, in the API's names.
var Fields = []string{operators.FieldMode, operators.FieldAdmitPerSecond, operators.FieldMaxActive}

// ConfigValues are the values the config in force gives the overridable
// settings of ev, as an override's Base records them: an override made
// over one value gives way once the config gives another.
func ConfigValues(ev config.Event) map[string]string {
	set := SettingsFor(ev)
	return map[string]string{
		operators.FieldMode:           set.Mode,
		operators.FieldAdmitPerSecond: FormatRate(set.AdmitPerSecond),
		operators.FieldMaxActive:      strconv.Itoa(set.MaxActive),
	}
}

// FormatRate writes a rate as overrides and the audit keep it: seven
// digits (a computed 166.666… reads 166.6667; 1000000, the largest, needs
// no exponent).
func FormatRate(r float64) string { return strconv.FormatFloat(r, 'g', 7, 64) }

// Overlay puts the overrides in force on set (the config's settings) and
// says where each overridable setting comes from. An override whose Base is
// not the config's value any more is skipped: the config wins (the
// admitter drops it, see Admitter.overlay).
func Overlay(ev config.Event, set queue.Settings, ovs map[string]operators.Override) queue.Settings {
	cur := ConfigValues(ev)
	set.Sources = map[string]string{}
	for _, f := range Fields {
		set.Sources[f] = SourceConfig
		o, ok := ovs[f]
		if !ok || o.Base != cur[f] {
			continue
		}
		switch f {
		case operators.FieldMode:
			set.Mode = o.Value
		case operators.FieldAdmitPerSecond:
			v, err := strconv.ParseFloat(o.Value, 64)
			if err != nil || !(v > 0) {
				continue
			}
			set.AdmitPerSecond = v
		case operators.FieldMaxActive:
			v, err := strconv.Atoi(o.Value)
			if err != nil || v < 1 {
				continue
			}
			set.MaxActive = v
		}
		set.Sources[f] = SourceAPI
	}
	return set
}

// overlay reads ev's overrides and puts them in force on set. An override
// the config file overtook (its key was edited since) is dropped here, by
// exactly one replica, which tells the audit.
func (a *Admitter) overlay(ctx context.Context, ev config.Event, set queue.Settings) (queue.Settings, error) {
	ovs, err := a.ops.Overrides(ctx, ev.ID)
	if err != nil {
		return set, err
	}
	cur := ConfigValues(ev)
	for f, o := range ovs {
		if o.Base == cur[f] {
			continue
		}
		dropped, err := a.ops.DropOverride(ctx, ev.ID, f, o)
		if err != nil {
			return set, err
		}
		if dropped {
			a.audit(ctx, ev.ID, fmt.Sprintf("%s %s -> %s: the config file's edit (%s was %s) replaces the API's value", f, o.Value, cur[f], f, o.Base), SourceConfig)
		}
	}
	return Overlay(ev, set, ovs), nil
}

func (a *Admitter) audit(ctx context.Context, event, change, source string) {
	if err := a.ops.Audit(ctx, operators.AuditEntry{Event: event, Change: change, Source: source}); err != nil {
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
	hs, err := a.ops.BookingHealthOf(ctx, time.Now().Add(-freshHealth))
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
func (a *Admitter) adapt(ctx context.Context, ev config.Event, set queue.Settings, th config.Adaptive, sig signal) (queue.Settings, error) {
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
			FormatRate(base*was), FormatRate(base*f), f*100, FormatRate(base), verb, sig.why), SourceAdaptive)
		a.log.Info("adaptive rate", "event", ev.ID, "factor", f, "was", was, "why", sig.why)
	}
	return set, nil
}
