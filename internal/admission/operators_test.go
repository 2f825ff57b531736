package admission_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/admission"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
)

// runAdmitter runs another admitter replica on e's Redis and config file
// until the returned stop is called (or the test ends).
func (e *env) runAdmitter(t *testing.T) (stop func()) {
	t.Helper()
	cfg, err := config.Load(e.path)
	if err != nil {
		t.Fatal(err)
	}
	adm := admission.New(admission.Options{Line: queue.NewStore(e.rdb, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret)), Operators: operators.New(rdb.New(e.rdb)),
		Config: cfg, ConfigPath: e.path, Log: slog.New(slog.NewJSONHandler(e.logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); adm.Run(ctx) }()
	go func() { defer wg.Done(); adm.Watch(ctx, make(chan os.Signal)) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

func (e *env) override(t *testing.T, event string, values map[string]string) {
	t.Helper()
	cfg, _ := config.Load(e.path)
	ev, _ := cfg.Event(event)
	base := policy.ConfigValues(*ev)
	set := map[string]operators.Override{}
	for f, v := range values {
		set[f] = operators.Override{Value: v, Base: base[f], At: time.Now()}
	}
	if err := e.ops.SetOverrides(context.Background(), event, set, nil); err != nil {
		t.Fatal(err)
	}
}

func (e *env) auditOf(t *testing.T) []operators.AuditEntry {
	t.Helper()
	got, err := e.ops.AuditLog(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func count(entries []operators.AuditEntry, source, substr string) int {
	n := 0
	for _, e := range entries {
		if e.Source == source && strings.Contains(e.Change, substr) {
			n++
		}
	}
	return n
}

// An operator's overrides are in force on every admitter replica within a
// tick and after a restart; an edit of the same key in the config file wins
// (the override is dropped, once, and the audit says so), while the other
// overrides stay; the reload itself is audited once for both replicas.
func TestOverridesAcrossReplicas(t *testing.T) {
	onEach(t, func(t *testing.T, b backend) {
		yaml := yamlConfig(eventYAML("premiere", "10") + eventYAML("other", "10"))
		e := setupOn(t, b, yaml)
		stopSecond := e.runAdmitter(t)
		e.override(t, "premiere", map[string]string{operators.FieldAdmitPerSecond: "3", operators.FieldMode: "paused"})
		e.oneTickLater(t)
		set := e.published(t, "premiere")
		if set.AdmitPerSecond != 3 || set.Mode != "paused" || set.MaxActive != 5 {
			t.Fatalf("published %+v; want rate 3, paused, max 5", set)
		}
		if want := map[string]string{"mode": "api", "admitPerSecond": "api", "maxActive": "config"}; !sameMap(set.Sources, want) {
			t.Errorf("sources = %v; want %v", set.Sources, want)
		}
		if o := e.published(t, "other"); o.AdmitPerSecond != 10 || o.Sources["admitPerSecond"] != "config" {
			t.Errorf("other event published %+v; want its config's 10", o)
		}
		// Both replicas publish the same, tick after tick.
		for range 5 {
			e.oneTickLater(t)
			if s := e.published(t, "premiere"); s.AdmitPerSecond != 3 {
				t.Fatalf("a replica published %v", s.AdmitPerSecond)
			}
		}
		// A restart: the overrides are in Redis, not in the process.
		stopSecond()
		e.runAdmitter(t)
		e.oneTickLater(t)
		if s := e.published(t, "premiere"); s.AdmitPerSecond != 3 || s.Mode != "paused" {
			t.Fatalf("after a restart: %+v", s)
		}
		// The file's edit of admit_per_second wins; mode stays the API's.
		e.replace(t, strings.Replace(yaml, "admit_per_second: 10", "admit_per_second: 7", 1))
		waitFor(t, "the config edit to win", func() bool {
			s, _ := e.store.Settings(context.Background(), "premiere")
			return s.AdmitPerSecond == 7
		})
		e.oneTickLater(t)
		s := e.published(t, "premiere")
		if s.Mode != "paused" || s.Sources["admitPerSecond"] != "config" || s.Sources["mode"] != "api" {
			t.Errorf("after the edit: %+v; want rate from config, mode still the API's paused", s)
		}
		ovs, _ := e.ops.Overrides(context.Background(), "premiere")
		if _, ok := ovs[operators.FieldAdmitPerSecond]; ok || len(ovs) != 1 {
			t.Errorf("overrides after the edit: %+v; want mode alone", ovs)
		}
		audit := e.auditOf(t)
		if n := count(audit, "config", "replaces the API's value"); n != 1 {
			t.Errorf("%d audit entries for the dropped override; want 1: %+v", n, audit)
		}
		if n := count(audit, "config", "premiere admit_per_second 10 -> 7"); n != 1 {
			t.Errorf("%d audit entries for the reload; want 1 (two replicas reloaded): %+v", n, audit)
		}
		for _, a := range audit {
			if a.Event != "premiere" {
				t.Errorf("audit entry of event %q: %+v", a.Event, a)
			}
		}
	})
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// With admission.adaptive the rate in force halves while the booking core's
// hold p99 is over the threshold, and comes back step by step to the
// configured rate once healthy; a stale summary changes nothing; an event
// without adaptive keeps its rate throughout. Every change is audited.
func TestAdaptiveRate(t *testing.T) {
	yaml := `auth: {ticket_secret: "test-ticket-secret-0123456789abcdef", draw_secret: "test-draw-secret-0123456789abcdef"}
booking: {payment: {secret: "test-payment-secret-0123456789abcdef"}}
admitter: {tick: "20ms", adaptive: {hold_p99: "300ms", interval: "150ms", step: 0.25, floor: 0.2}}
events:
  - id: "premiere"
    admission: {admit_per_second: 40, max_active: 5, adaptive: true}
  - id: "other"
    admission: {admit_per_second: 40, max_active: 5}
`
	e := setup(t, yaml)
	ctx := context.Background()
	publish := func(p99 time.Duration, at time.Time) {
		t.Helper()
		h := operators.BookingHealth{Replica: "b1", HoldP99: p99, Holds: 50, Requests: 100, At: at}
		if err := e.ops.PublishBookingHealth(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	rate := func() float64 { s, _ := e.store.Settings(ctx, "premiere"); return s.AdmitPerSecond }
	publish(20*time.Millisecond, time.Now())
	e.oneTickLater(t)
	if r := rate(); r != 40 {
		t.Fatalf("healthy: rate %v; want 40", r)
	}
	// Struggling: halved, then halved again one interval later, down to the floor.
	var seen []float64
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		publish(900*time.Millisecond, time.Now())
		// One read a round: a second read could see the floor the first
		// did not, and the loop would end without noting it.
		r := rate()
		if len(seen) == 0 || seen[len(seen)-1] != r {
			seen = append(seen, r)
		}
		if r == 8 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if want := "[40 20 10 8]"; fmtFloats(seen) != want {
		t.Fatalf("rates while struggling %v; want %s", seen, want)
	}
	if o, _ := e.store.Settings(ctx, "other"); o.AdmitPerSecond != 40 {
		t.Errorf("the event without adaptive: rate %v; want 40", o.AdmitPerSecond)
	}
	// A stale summary says nothing: the rate stays.
	publish(10*time.Millisecond, time.Now().Add(-time.Minute+time.Second))
	time.Sleep(400 * time.Millisecond)
	if r := rate(); r != 8 {
		t.Fatalf("stale summary: rate %v; want 8 kept", r)
	}
	// Healthy: back by 25 % of 40 per interval, to 40 and no further.
	seen = seen[:0]
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (len(seen) == 0 || seen[len(seen)-1] != 40) {
		publish(10*time.Millisecond, time.Now())
		if r := rate(); len(seen) == 0 || seen[len(seen)-1] != r {
			seen = append(seen, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if want := "[8 18 28 38 40]"; fmtFloats(seen) != want {
		t.Fatalf("rates once healthy %v; want %s", seen, want)
	}
	audit := e.auditOf(t)
	if n := count(audit, "adaptive", "struggles, hold p99"); n != 3 {
		t.Errorf("%d audit entries of halvings; want 3: %+v", n, audit)
	}
	if n := count(audit, "adaptive", "is healthy"); n != 4 {
		t.Errorf("%d audit entries of steps up; want 4: %+v", n, audit)
	}
}

func fmtFloats(v []float64) string {
	var b strings.Builder
	b.WriteString("[")
	for i, f := range v {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(policy.FormatRate(f))
	}
	return b.String() + "]"
}
