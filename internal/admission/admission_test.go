package admission_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/admission"
	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/policy"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// yamlConfig is a valid config whose events section is events.
func yamlConfig(events string) string {
	return `auth: {ticket_secret: "test-ticket-secret-0123456789abcdef", draw_secret: "test-draw-secret-0123456789abcdef"}
booking: {payment: {secret: "test-payment-secret-0123456789abcdef"}}
admitter: {tick: "20ms"}
events:
` + events
}

func eventYAML(id string, rate string) string {
	return fmt.Sprintf("  - id: %q\n    admission: {admit_per_second: %s, max_active: 5}\n", id, rate)
}

type env struct {
	dir, path string
	store     *queue.Store
	ops       *operators.Store
	rdb       redis.UniversalClient
	adm       *admission.Admitter
	logs      *testenv.LogBuffer
	hup       chan os.Signal
}

// backend is a kind of Redis the admitter runs on.
type backend struct {
	name   string
	client func(t testing.TB) redis.UniversalClient
}

var backends = []backend{
	{"single", func(t testing.TB) redis.UniversalClient { _, rdb := testenv.Redis(t); return rdb }},
	{"cluster", func(t testing.TB) redis.UniversalClient { _, rdb := testenv.Cluster(t); return rdb }},
}

// onEach runs test on a single redis-server and on a three-master Redis
// Cluster, as subtests "single" and "cluster".
func onEach(t *testing.T, test func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}

// setup writes the config to a temp folder and runs an admitter (ticks and
// watch) on a private single redis-server until the test ends.
func setup(t *testing.T, yaml string) *env { return setupOn(t, backends[0], yaml) }

// setupOn is setup on a private Redis of kind b; opts edit the
// admitter's options.
func setupOn(t *testing.T, b backend, yaml string, opts ...func(*env, *admission.Options)) *env {
	t.Helper()
	e := &env{dir: t.TempDir(), logs: &testenv.LogBuffer{}, hup: make(chan os.Signal, 1)}
	e.path = filepath.Join(e.dir, "waitroom.yaml")
	if err := os.WriteFile(e.path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(e.path)
	if err != nil {
		t.Fatal(err)
	}
	e.rdb = b.client(t)
	e.store = queue.NewStore(e.rdb, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret))
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	e.ops = operators.New(rdb.New(e.rdb))
	e.adm = e.admitter(t, cfg, log, opts...)
	return e
}

// admitter runs an admitter of e's config file and Redis (ticks and
// watch) until the test ends.
func (e *env) admitter(t *testing.T, cfg *config.Config, log *slog.Logger, opts ...func(*env, *admission.Options)) *admission.Admitter {
	o := admission.Options{Line: e.store, Operators: e.ops, Config: cfg, ConfigPath: e.path, Log: log}
	for _, f := range opts {
		f(e, &o)
	}
	adm := admission.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); adm.Run(ctx) }()
	go func() { defer wg.Done(); adm.Watch(ctx, e.hup) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return adm
}

// replace rewrites the config the way editors and sed -i do: a new file
// renamed over the old one.
func (e *env) replace(t *testing.T, yaml string) {
	t.Helper()
	tmp := filepath.Join(e.dir, ".waitroom.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, e.path); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// oneTickLater waits until a whole round started after now has completed.
func (e *env) oneTickLater(t *testing.T) {
	t.Helper()
	r := e.adm.Rounds()
	waitFor(t, "a tick round", func() bool { return e.adm.Rounds() >= r+2 })
}

func (e *env) published(t *testing.T, event string) line.Settings {
	t.Helper()
	s, err := e.store.Settings(context.Background(), event)
	if err != nil {
		t.Fatalf("settings of %s: %v", event, err)
	}
	return s
}

func TestReload(t *testing.T) {
	e := setup(t, yamlConfig(eventYAML("premiere", "10")))
	e.oneTickLater(t)
	if got := e.published(t, "premiere").AdmitPerSecond; got != 10 {
		t.Fatalf("published rate %v; want 10", got)
	}

	t.Run("a renamed edit acts within one tick", func(t *testing.T) {
		before := testutil.ToFloat64(metrics.ConfigReloads)
		e.replace(t, yamlConfig(eventYAML("premiere", "20")))
		waitFor(t, "the reload", func() bool { return policy.Rate(e.adm.Config().Events[0].Admission) == 20 })
		e.oneTickLater(t)
		if got := e.published(t, "premiere").AdmitPerSecond; got != 20 {
			t.Errorf("published rate %v one tick after the reload; want 20", got)
		}
		if got := testutil.ToFloat64(metrics.ConfigReloads) - before; got != 1 {
			t.Errorf("reloads counted %v; want 1", got)
		}
		if !strings.Contains(e.logs.String(), "premiere admit_per_second 10 -> 20") {
			t.Errorf("the change is not logged:\n%s", e.logs.String())
		}
	})

	t.Run("a broken edit keeps the previous config", func(t *testing.T) {
		before := testutil.ToFloat64(metrics.ConfigReloadErrors)
		e.replace(t, yamlConfig(eventYAML("premiere", "-3")))
		waitFor(t, "the refused reload", func() bool { return testutil.ToFloat64(metrics.ConfigReloadErrors) > before })
		e.oneTickLater(t)
		if got := e.published(t, "premiere").AdmitPerSecond; got != 20 {
			t.Errorf("published rate %v after a broken edit; want 20 still", got)
		}
		if !strings.Contains(e.logs.String(), "events[0].admission.admit_per_second") {
			t.Errorf("the log does not name the bad key:\n%s", e.logs.String())
		}
	})

	t.Run("a new event is served", func(t *testing.T) {
		e.replace(t, yamlConfig(eventYAML("premiere", "20")+eventYAML("encore", "7")))
		waitFor(t, "the new event", func() bool { return len(e.adm.Config().Events) == 2 })
		e.oneTickLater(t)
		if got := e.published(t, "encore").AdmitPerSecond; got != 7 {
			t.Errorf("new event rate %v; want 7", got)
		}
	})

	t.Run("SIGHUP reloads", func(t *testing.T) {
		before := testutil.ToFloat64(metrics.ConfigReloads)
		e.hup <- os.Interrupt // any signal value on the channel stands for SIGHUP
		waitFor(t, "the SIGHUP reload", func() bool { return testutil.ToFloat64(metrics.ConfigReloads) > before })
	})
}

// TestReloadConfigMapSwap follows a Kubernetes ConfigMap update: the file is
// a symlink through ..data, and the update re-points ..data atomically.
func TestReloadConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	write := func(stamp, yaml string) {
		if err := os.Mkdir(filepath.Join(dir, stamp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, stamp, "waitroom.yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(stamp, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	write("..2026_01", yamlConfig(eventYAML("premiere", "10")))
	path := filepath.Join(dir, "waitroom.yaml")
	if err := os.Symlink(filepath.Join("..data", "waitroom.yaml"), path); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rc := testenv.Redis(t)
	store := queue.NewStore(rc, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret))
	adm := admission.New(admission.Options{Line: store, Operators: operators.New(rdb.New(rc)), Config: cfg, ConfigPath: path, Log: slog.New(slog.NewJSONHandler(&testenv.LogBuffer{}, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); adm.Watch(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(50 * time.Millisecond) // the watch is set up

	write("..2026_02", yamlConfig(eventYAML("premiere", "33")))
	waitFor(t, "the ConfigMap reload", func() bool { return policy.Rate(adm.Config().Events[0].Admission) == 33 })
}

func TestOneBadEventDoesNotStopOthers(t *testing.T) { onEach(t, testOneBadEventDoesNotStopOthers) }

func testOneBadEventDoesNotStopOthers(t *testing.T, b backend) {
	e := setupOn(t, b, yamlConfig(eventYAML("broken", "10")+eventYAML("fine", "10")))
	// The broken event's line is not a ZSET: its script fails every tick.
	e.rdb.Set(context.Background(), queuetest.Of(t, e.rdb, "broken").Keys().Wait, "not a zset", 0)
	before := testutil.ToFloat64(admission.TickErrorsMetric("broken"))
	r, err := e.store.Join(context.Background(), "fine", policy.SettingsFor(e.adm.Config().Events[1]))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fine event to admit", func() bool {
		ok, _ := e.store.Active(context.Background(), "fine", r.ID)
		return ok
	})
	waitFor(t, "tick errors counted", func() bool { return testutil.ToFloat64(admission.TickErrorsMetric("broken")) > before })
	if got := testutil.ToFloat64(admission.TickErrorsMetric("fine")); got != 0 {
		t.Errorf("fine event tick errors %v; want 0", got)
	}
	if !strings.Contains(e.logs.String(), `"event":"broken"`) {
		t.Errorf("the failing event is not logged:\n%s", e.logs.String())
	}
}

func TestSettingsFor(t *testing.T) {
	rate, capacity := 40.0, 90
	opens := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		adm       config.Admission
		wantRate  float64
		wantCap   int
		wantOpens *time.Time
	}{
		{"computed rate and cap", config.Admission{}, 1000.0 / 6, 10000, nil},
		{"given rate, computed cap", config.Admission{AdmitPerSecond: &rate}, 40, 2400, nil},
		{"given both", config.Admission{AdmitPerSecond: &rate, MaxActive: &capacity}, 40, 90, &opens},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.adm.Capacity = config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}
			c.adm.AccessTTL = config.Duration(10 * time.Minute)
			c.adm.AbandonAfter = config.Duration(time.Minute)
			s := policy.SettingsFor(config.Event{ID: "x", Mode: "paused", OpensAt: c.wantOpens, Admission: c.adm})
			if s.AdmitPerSecond != c.wantRate || s.MaxActive != c.wantCap {
				t.Errorf("rate, cap = %v, %d; want %v, %d", s.AdmitPerSecond, s.MaxActive, c.wantRate, c.wantCap)
			}
			if s.Mode != "paused" || s.AccessTTL != 10*time.Minute || s.AbandonAfter != time.Minute || s.OpensAt != c.wantOpens {
				t.Errorf("settings = %+v", s)
			}
		})
	}
}

// TestComputedRateAdmits runs the admitter with no admit_per_second and
// max_active in the file: it admits at the computed rate, capped by the
// computed cap.
func TestComputedRateAdmits(t *testing.T) { onEach(t, testComputedRateAdmits) }

func testComputedRateAdmits(t *testing.T, b backend) {
	e := setupOn(t, b, yamlConfig(`  - id: "computed"
    admission: {capacity: {backend_tps: 60, calls_per_user: 3, retry_factor: 2, session_seconds: 0.5}}
`))
	e.oneTickLater(t)
	set := e.published(t, "computed")
	if set.AdmitPerSecond != 10 || set.MaxActive != 5 {
		t.Fatalf("published rate, cap = %v, %d; want 10, 5", set.AdmitPerSecond, set.MaxActive)
	}
	for range 20 {
		if _, err := e.store.Join(context.Background(), "computed", set); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the cap", func() bool {
		c, _ := e.store.Counts(context.Background(), "computed")
		return c.Active == 5
	})
	e.oneTickLater(t)
	if c, _ := e.store.Counts(context.Background(), "computed"); c.Active != 5 || c.Waiting != 15 {
		t.Errorf("counts = %+v; want 5 active (the computed cap), 15 waiting", c)
	}
}
