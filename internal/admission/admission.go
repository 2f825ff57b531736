// Package admission is the admitter: for every event of the config, once per
// tick, it publishes the settings in force to Redis and runs the queue's
// atomic admission step. It keeps no state of its own (everything lives in
// Redis, decided inside one script), so any number of replicas may run, and
// it follows the config file live: ops retune rates, caps and modes without
// a restart, and a bad edit never replaces a good config.
package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/platform/periodic"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/presale"
)

// Line is what the admitter needs of the line.
type Line interface {
	PublishSettings(ctx context.Context, event string, set line.Settings) error
	Tick(ctx context.Context, event string, set line.Settings) (line.TickResult, error)
	// Opening is what the event's lottery froze of its times.
	Opening(ctx context.Context, event string) (line.Opening, error)
	// Lottery is the event's lottery as published (lottery.drawn).
	Lottery(ctx context.Context, event string, set line.Settings) (line.Draw, error)
	// TickEvery tells the store the tick interval (a sharded event's tick
	// lease is a few of them).
	TickEvery(d time.Duration)
	// AwayAdmitted and AwayNotified: the away fans let in whose email is
	// due, and forgetting them once it is queued.
	AwayAdmitted(ctx context.Context, event string, max int) ([]line.AwayFan, error)
	AwayNotified(ctx context.Context, event string, ids []string) error
}

// Outbox is where the admitter queues the emails of away fans let in
// (package notify).
type Outbox interface {
	Enqueue(ctx context.Context, event string, m notify.Message) (bool, error)
}

// Operators is what the admitter needs of the operators' state
// (operators.go).
type Operators interface {
	Overrides(ctx context.Context, event string) (map[string]operators.Override, error)
	DropOverride(ctx context.Context, event, field string, o operators.Override) (bool, error)
	Adapt(ctx context.Context, event string, struggling int, interval time.Duration, step, floor float64) (now, was float64, err error)
	BookingHealthOf(ctx context.Context, since time.Time) ([]operators.BookingHealth, error)
	Audit(ctx context.Context, e operators.AuditEntry) error
	AuditOnce(ctx context.Context, once string, ttl time.Duration, e operators.AuditEntry) error
}

// Presale is what the admitter needs of the presale: its step (commit,
// freeze and draw the selection, settle the windows that closed).
type Presale interface {
	Step(ctx context.Context, event string, p presale.Plan) error
	// Selection is the selection as published (selection.drawn).
	Selection(ctx context.Context, event string, p presale.Plan) (line.Draw, error)
}

// Admitter ticks every configured event.
type Admitter struct {
	line    Line
	ops     Operators
	presale Presale
	outbox  Outbox // nil: no email (notify.smtp_url empty)
	hooks   Webhooks
	// announced: event → the config values this process announced
	// (hooks.go); drawsSeen: "lottery/<event>", "selection/<event>" once
	// announced.
	announced sync.Map
	drawsSeen sync.Map
	// stepping: events whose presale step runs now (a draw of a million
	// registrations takes seconds: it runs beside the ticks, one at a time).
	stepping sync.Map
	log      *slog.Logger
	now      func() time.Time
	cfg      *config.Live // re-read from its file on change

	// layouts: event → the shards its line really has, as the last tick
	// found (a config asking another layout for a line with state is kept
	// from it: see line.Settings.Shards).
	layouts sync.Map
	rounds  atomic.Int64
}

// Options are the admitter's dependencies.
type Options struct {
	Line      Line
	Operators Operators
	Presale   Presale // nil = presales are not run by this admitter
	Config    *config.Config
	// Outbox queues the away fans' emails (nil: there is no email, and
	// nobody can step away).
	Outbox Outbox
	// Webhooks is the webhooks' outbox (nil: no moments noticed here).
	Webhooks Webhooks
	// ConfigPath is the file Watch follows ("" = no reloads).
	ConfigPath string
	Log        *slog.Logger
	Now        func() time.Time // nil = time.Now
}

// New returns an admitter serving o.Config.
func New(o Options) *Admitter {
	a := &Admitter{line: o.Line, ops: o.Operators, presale: o.Presale, outbox: o.Outbox, hooks: o.Webhooks, log: o.Log, now: o.Now, cfg: config.NewLive(o.ConfigPath, o.Config)}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return a
}

// Config is the config in force.
func (a *Admitter) Config() *config.Config { return a.cfg.Load() }

// Rounds counts completed tick rounds (every event ticked once).
func (a *Admitter) Rounds() int64 { return a.rounds.Load() }

// Run ticks every event until ctx ends. The interval is read from the config
// in force at each round, so a reloaded admitter.tick acts at once.
func (a *Admitter) Run(ctx context.Context) {
	periodic.Run(ctx, func() time.Duration { return nextRound(a.Config(), a.now()) }, a.TickAll)
}

// nextRound is how long to wait before the next round: one tick, or less
// if an event opens sooner (its lottery freezes and is drawn at once, so
// its first fans are let in within moments of opens_at).
func nextRound(cfg *config.Config, now time.Time) time.Duration {
	wait := cfg.Admitter.Tick.D()
	soon := func(at *time.Time) {
		if at != nil {
			if d := at.Sub(now); d >= 0 && d < wait {
				wait = d + time.Millisecond
			}
		}
	}
	for _, ev := range cfg.Events {
		soon(ev.OpensAt)
		if ev.Presale != nil {
			soon(ev.Presale.RegistrationClosesAt) // the selection is drawn then
		}
	}
	return wait
}

// TickAll runs one round: every event of the config in force, concurrently.
// An event's error is logged and counted; it never stops the others.
func (a *Admitter) TickAll(ctx context.Context) {
	cfg := a.Config()
	a.line.TickEvery(cfg.Admitter.Tick.D())
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, max(cfg.Admitter.Tick.D(), time.Second))
	defer cancel()
	sig := signal{struggling: -1}
	for _, ev := range cfg.Events {
		if ev.Admission.Adaptive {
			sig = a.health(ctx, cfg.Admitter.Adaptive)
			break
		}
	}
	var wg sync.WaitGroup
	for _, ev := range cfg.Events {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A tick that ran out of time (Redis failing over) is an error
			// too; one cut short by the admitter stopping is not.
			if err := a.tick(ctx, cfg, ev, sig); err != nil && parent.Err() == nil {
				tickErrors.WithLabelValues(ev.ID).Inc()
				a.log.Error("tick failed", "event", ev.ID, "err", err)
			}
		}()
	}
	wg.Wait()
	a.rounds.Add(1)
}

func (a *Admitter) tick(ctx context.Context, cfg *config.Config, ev config.Event, sig signal) error {
	start := a.now()
	defer func() { tickDuration.WithLabelValues(ev.ID).Observe(a.now().Sub(start).Seconds()) }()
	tickErrors.WithLabelValues(ev.ID).Add(0) // exported from the first tick, so increase() sees the first error
	if ev.Presale != nil && a.presale != nil {
		a.stepPresale(ctx, ev)
	}
	set, err := a.overlay(ctx, ev, policy.SettingsFor(ev))
	if err != nil {
		return err
	}
	if ev.Admission.Adaptive {
		if set, err = a.adapt(ctx, ev, set, cfg.Admitter.Adaptive, sig); err != nil {
			return err
		}
	}
	if k, ok := a.layouts.Load(ev.ID); ok {
		set.Shards = k.(int)
	}
	if set, err = a.pinOpening(ctx, ev, set); err != nil {
		return err
	}
	configured := set.AdmitPerSecond
	if !set.Admitting(a.now()) {
		configured = 0 // "not admitting on purpose": the stalled-line alert keys on it
	}
	admitRateConfigured.WithLabelValues(ev.ID).Set(configured)
	maxActiveGauge.WithLabelValues(ev.ID).Set(float64(set.MaxActive))
	if err := a.line.PublishSettings(ctx, ev.ID, set); err != nil {
		return err
	}
	r, err := a.line.Tick(ctx, ev.ID, set)
	// A sharded tick may fail after letting fans in (the handover's last
	// step): what it did is counted all the same.
	admittedTotal.WithLabelValues(ev.ID).Add(float64(r.Admitted))
	abandonedTotal.WithLabelValues(ev.ID).Add(float64(r.Abandoned + r.Lapsed))
	if err != nil {
		return err
	}
	a.announce(ctx, cfg, ev, set)
	if err := a.relayAway(ctx, ev.ID, set); err != nil {
		return err
	}
	if r.Shards != set.Shards {
		a.layouts.Store(ev.ID, r.Shards)
		if want := policy.SettingsFor(ev).Shards; r.Shards != want {
			a.log.Warn("the event's line keeps its layout while it has state in Redis", "event", ev.ID, "shards", r.Shards, "config", want)
		}
	}
	if r.Busy {
		return nil // another replica ticks this event now
	}
	admitRate.WithLabelValues(ev.ID).Set(r.Rate)
	return nil
}

// presaleBudget bounds one presale step (a selection of a million
// registrations is drawn in a few seconds; one cut short is taken up again
// from the start by the next tick, and writes the same).
const presaleBudget = time.Minute

// stepPresale runs ev's presale step beside the tick (at most one per
// event at a time); its error is logged and counted as the tick's are.
func (a *Admitter) stepPresale(ctx context.Context, ev config.Event) {
	if _, busy := a.stepping.LoadOrStore(ev.ID, true); busy {
		return
	}
	go func() {
		defer a.stepping.Delete(ev.ID)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), presaleBudget)
		defer cancel()
		if err := a.presale.Step(sctx, ev.ID, policy.PlanFor(ev)); err != nil {
			tickErrors.WithLabelValues(ev.ID).Inc()
			a.log.Error("presale step failed", "event", ev.ID, "err", err)
		}
	}()
}

// awayBatch is how many away fans' emails one tick queues at most (the
// next tick queues the rest).
const awayBatch = 500

// relayAway queues the email of every away fan the line let in (the tick
// noted them due, in the same script as their admission), then forgets
// them. The message carries the place, not the ticket: its link is signed
// when the email is written (queue.Store.AwayTicket), so the outbox holds
// no credential. Every replica may do it at once, or again after dying between the
// two steps: the outbox queues one message per place, whoever asks.
func (a *Admitter) relayAway(ctx context.Context, event string, set line.Settings) error {
	if a.outbox == nil {
		return nil
	}
	due, err := a.line.AwayAdmitted(ctx, event, awayBatch)
	if err != nil || len(due) == 0 {
		return err
	}
	within := set.AwayClaimWithin
	if within <= 0 {
		within = line.DefaultAwayClaimWithin
	}
	done := make([]string, 0, len(due))
	for _, f := range due {
		if f.Email != "" { // "": the fan left since; nothing to tell
			until := f.AdmittedAt.Add(within)
			m := notify.Message{Kind: notify.KindYourTurn, Key: f.ID, To: f.Email, Lang: f.Lang, NotAfter: until,
				Data: map[string]string{"place": f.Place, "until": until.UTC().Format(time.RFC3339)}}
			if _, err := a.outbox.Enqueue(ctx, event, m); err != nil && !errors.Is(err, notify.ErrInvalid) {
				return fmt.Errorf("away: %w", err)
			} else if err != nil {
				a.log.Warn("away: email not queued", "event", event, "ticket", f.ID, "err", err)
			}
		}
		done = append(done, f.ID)
	}
	return a.line.AwayNotified(ctx, event, done)
}

// pinOpening puts in force the times the event's lottery froze, if it
// did: once the entries froze, a reload that moves opens_at or
// prequeue_opens_at changes nothing of the line (DESIGN.md, "Once drawn,
// always drawn"). Such a reload is told to the audit as ignored, once.
func (a *Admitter) pinOpening(ctx context.Context, ev config.Event, set line.Settings) (line.Settings, error) {
	o, err := a.line.Opening(ctx, ev.ID)
	if err != nil || !o.Frozen {
		return set, err
	}
	if !sameMs(set.OpensAt, o.OpensAt) || !sameMs(set.PrequeueOpensAt, o.PrequeueOpensAt) {
		change := fmt.Sprintf("%s opens_at %s prequeue_opens_at %s ignored: the lottery's entries froze with opens_at %s",
			ev.ID, timeText(set.OpensAt), timeText(set.PrequeueOpensAt), timeText(o.OpensAt))
		sum := sha256.Sum256([]byte(change))
		e := operators.AuditEntry{Event: ev.ID, Change: change, Source: policy.SourceConfig, By: config.ByConfig}
		if err := a.ops.AuditOnce(ctx, "pinned:"+hex.EncodeToString(sum[:12]), pinnedOnce, e); err != nil {
			a.log.Warn("audit", "change", change, "err", err)
		}
	}
	set.OpensAt, set.PrequeueOpensAt = o.OpensAt, o.PrequeueOpensAt
	return set, nil
}

// pinnedOnce is how long one ignored change is told to the audit once
// (every replica finds it at every tick).
const pinnedOnce = 24 * time.Hour

func timeText(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// sameMs: the lottery keeps its times in ms, as Redis TIME does.
func sameMs(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UnixMilli() == b.UnixMilli()
}

// applied logs what a reload changed and forgets the gauges of events that
// are gone; the next tick uses the new config.
func (a *Admitter) applied(old, cfg *config.Config) {
	changes := diff(old, cfg)
	a.log.Info("config reloaded", "path", a.cfg.Path(), "changes", changes)
	a.auditReload(changes)
	a.forgetGone(old, cfg)
	for _, ev := range old.Events {
		if _, ok := cfg.Event(ev.ID); !ok {
			forgetEvent(ev.ID)
		}
	}
	if old.Redis.URL != cfg.Redis.URL {
		a.log.Warn("redis.url changed: it takes effect only after a restart")
	}
}

// auditReload tells the audit what a reload changed for each event, once
// however many admitter replicas reload the same edit (they do within a
// second or so of each other).
func (a *Admitter) auditReload(changes []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, c := range changes {
		event, _, _ := strings.Cut(c, " ")
		if strings.HasPrefix(c, "event ") {
			event = strings.Fields(c)[1]
		} else if strings.HasPrefix(c, "admitter.") {
			event = ""
		}
		sum := sha256.Sum256([]byte(c))
		e := operators.AuditEntry{Event: event, Change: c, Source: policy.SourceConfig, By: config.ByConfig}
		if err := a.ops.AuditOnce(ctx, "reload:"+hex.EncodeToString(sum[:12]), reloadOnce, e); err != nil {
			a.log.Warn("audit", "change", c, "err", err)
		}
	}
}

// reloadOnce is how long the replicas' identical reloads count as one.
const reloadOnce = 10 * time.Second

// diff lists what a reload changed, event by event, for the log and the
// audit: each line starts with the event's id ("event <id> added" and
// "admitter.tick …" aside).
func diff(old, cur *config.Config) []string {
	var out []string
	for _, ev := range cur.Events {
		o, ok := old.Event(ev.ID)
		if !ok {
			out = append(out, fmt.Sprintf("event %s added", ev.ID))
			continue
		}
		was, now := policy.SettingsFor(*o), policy.SettingsFor(ev)
		if was.Mode != now.Mode {
			out = append(out, fmt.Sprintf("%s mode %s -> %s", ev.ID, was.Mode, now.Mode))
		}
		if was.AdmitPerSecond != now.AdmitPerSecond {
			// Seven digits: a computed 166.666… reads 166.6667, not 166.66666666666666,
			// and the largest rate allowed, 1000000, needs no exponent.
			out = append(out, fmt.Sprintf("%s admit_per_second %.7g -> %.7g", ev.ID, was.AdmitPerSecond, now.AdmitPerSecond))
		}
		if was.MaxActive != now.MaxActive {
			out = append(out, fmt.Sprintf("%s max_active %d -> %d", ev.ID, was.MaxActive, now.MaxActive))
		}
		if was.AccessTTL != now.AccessTTL || was.AbandonAfter != now.AbandonAfter {
			out = append(out, fmt.Sprintf("%s access_ttl %s abandon_after %s", ev.ID, now.AccessTTL, now.AbandonAfter))
		}
		if o.Admission.Adaptive != ev.Admission.Adaptive {
			out = append(out, fmt.Sprintf("%s adaptive %t -> %t", ev.ID, o.Admission.Adaptive, ev.Admission.Adaptive))
		}
		if !sameTime(was.PrequeueOpensAt, now.PrequeueOpensAt) || !sameTime(was.OpensAt, now.OpensAt) || !sameTime(was.ClosesAt, now.ClosesAt) {
			out = append(out, fmt.Sprintf("%s times changed", ev.ID))
		}
	}
	for _, ev := range old.Events {
		if _, ok := cur.Event(ev.ID); !ok {
			out = append(out, fmt.Sprintf("event %s removed", ev.ID))
		}
	}
	if old.Admitter.Tick != cur.Admitter.Tick {
		out = append(out, fmt.Sprintf("admitter.tick %s -> %s", old.Admitter.Tick, cur.Admitter.Tick))
	}
	return out
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// Watch follows the config file (any editor, a Kubernetes ConfigMap swap,
// SIGHUP on hup) until ctx ends: see config.Live.Watch.
func (a *Admitter) Watch(ctx context.Context, hup <-chan os.Signal) {
	a.cfg.Watch(ctx, hup, a.log, a.applied)
}
