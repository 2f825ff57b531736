package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/notify"
	"github.com/waitroom/waitroom/internal/platform/service"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/mailsink"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// TestRun starts the admitter as main does, checks its endpoints and that it
// publishes and admits, then stops it gracefully.
func TestRun(t *testing.T) {
	srv, rdb := testenv.Redis(t)
	addr := testenv.FreeAddr(t)
	path := filepath.Join(t.TempDir(), "waitroom.yaml")
	yaml := fmt.Sprintf(`redis: {url: %q}
auth: {ticket_secret: "test-ticket-secret-0123456789abcdef"}
booking: {payment: {secret: "test-payment-secret-0123456789abcdef"}}
admitter: {addr: %q, tick: "20ms"}
events:
  - id: "premiere"
    admission: {admit_per_second: 100, max_active: 10}
`, srv.URL(), addr)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cancel, done := start(t, path)

	get := func(p string) (int, string) {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	store := queue.NewStore(rdb, []byte("test-ticket-secret-0123456789abcdef"))
	var (
		set line.Settings
		err error
	)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if set, err = store.Settings(context.Background(), "premiere"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no settings published: %v", err)
		}
	}
	j, err := store.Join(context.Background(), "premiere", set)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ok, _ := store.Active(context.Background(), "premiere", j.ID); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the joined fan was never admitted")
		}
	}
	for _, c := range []struct {
		path, want string
	}{
		{"/healthz", "ok"},
		{"/readyz", "ok"},
		{"/metrics", `waitroom_admitted_total{event="premiere"} 1`},
		{"/metrics", "waitroom_admitter_tick_duration_seconds_bucket"},
		{"/metrics", `waitroom_max_active{event="premiere"} 10`},
	} {
		if code, body := get(c.path); code != http.StatusOK || !strings.Contains(body, c.want) {
			t.Errorf("GET %s = %d, missing %q", c.path, code, c.want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run = %v; want nil after a graceful stop", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop")
	}
	if code, _ := get("/healthz"); code != 0 {
		t.Errorf("still serving after stop")
	}
}

// waitroom_notifications_total is on the admitter's /metrics before any
// email: every configured event's series (each kind, each result) at 0
// from the start, and a new event's once a reload adds it, so that the
// dashboards and alerts read zeros, not nothing.
func TestNotificationSeriesFromTheStart(t *testing.T) {
	srv, _ := testenv.Redis(t)
	sink, err := mailsink.Start(mailsink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	addr := testenv.FreeAddr(t)
	path := filepath.Join(t.TempDir(), "waitroom.yaml")
	yaml := func(events ...string) string {
		y := fmt.Sprintf(`redis: {url: %q}
auth: {ticket_secret: "test-ticket-secret-0123456789abcdef"}
booking: {payment: {secret: "test-payment-secret-0123456789abcdef"}}
admitter: {addr: %q, tick: "50ms"}
notify: {smtp_url: %q}
events:
`, srv.URL(), addr, "smtp://"+sink.Addr)
		for _, ev := range events {
			y += fmt.Sprintf("  - {id: %q, admission: {admit_per_second: 10, max_active: 10}}\n", ev)
		}
		return y
	}
	if err := os.WriteFile(path, []byte(yaml("opening")), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, path)
	series := func(event string) []string {
		var out []string
		for _, k := range []string{"your_turn", "presale_selected"} {
			for _, r := range []string{"queued", "sent", "failed", "expired"} {
				out = append(out, fmt.Sprintf(`waitroom_notifications_total{event=%q,kind=%q,result=%q} 0`, event, k, r))
			}
		}
		return out
	}
	waitFor := func(want []string) {
		t.Helper()
		var body string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			res, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			body = string(b)
			missing := false
			for _, w := range want {
				missing = missing || !strings.Contains(body, w)
			}
			if !missing {
				return
			}
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("/metrics lacks %s", w)
			}
		}
		t.FailNow()
	}
	waitFor(series("opening"))
	if err := os.WriteFile(path, []byte(yaml("opening", "encore")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(series("encore"))
}

// The admitter sends over STARTTLS and verifies the server's certificate:
// with notify.ca_file naming the server's CA the email goes, over TLS;
// without it the certificate is not trusted and nothing goes (the attempt
// counted failed, to be retried), even on loopback. There is no setting
// that skips the check.
func TestAdmitterMailVerifiesTheServer(t *testing.T) {
	for _, trusted := range []bool{true, false} {
		t.Run(fmt.Sprintf("ca_file %v", trusted), func(t *testing.T) {
			srv, rc := testenv.Redis(t)
			sink, err := mailsink.Start(mailsink.Options{TLS: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sink.Close() })
			dir := t.TempDir()
			ca := ""
			if trusted {
				ca = filepath.Join(dir, "ca.pem")
				if err := os.WriteFile(ca, sink.CertPEM(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			addr := testenv.FreeAddr(t)
			path := filepath.Join(dir, "waitroom.yaml")
			yaml := fmt.Sprintf(`redis: {url: %q}
auth: {ticket_secret: "test-ticket-secret-0123456789abcdef"}
booking: {payment: {secret: "test-payment-secret-0123456789abcdef"}}
admitter: {addr: %q, tick: "50ms"}
notify: {smtp_url: %q, ca_file: %q, timeout: "2s"}
events:
  - {id: "premiere", name: "Premiere night", admission: {admit_per_second: 10, max_active: 10}}
`, srv.URL(), addr, "smtp://"+sink.Addr, ca)
			if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			// An invitation to send (what the presale queues).
			opens := time.Now().Add(time.Hour).UTC()
			m := notify.Message{Kind: notify.KindPresaleSelected, Key: "r1", To: "fan@example.test", Lang: "en", NotAfter: opens.Add(time.Hour),
				Data: map[string]string{"opens": opens.Format(time.RFC3339), "until": opens.Add(time.Hour).Format(time.RFC3339), "path": "/e/premiere/register"}}
			if _, err := notify.NewOutbox(rdb.New(rc)).Enqueue(context.Background(), "premiere", m); err != nil {
				t.Fatal(err)
			}
			failedBefore := failedAttempts(t)
			start(t, path)
			if trusted {
				wctx, stop := context.WithTimeout(context.Background(), 15*time.Second)
				defer stop()
				got, err := sink.Wait(wctx, "fan@example.test", 1)
				if err != nil {
					t.Fatal(err)
				}
				if !got[0].TLS {
					t.Error("the email came in clear; want over STARTTLS")
				}
				return
			}
			for deadline := time.Now().Add(15 * time.Second); failedAttempts(t) == failedBefore; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no failed attempt counted")
				}
			}
			if n := len(sink.Messages()); n != 0 {
				t.Errorf("%d emails to a server whose certificate is not trusted; want none", n)
			}
		})
	}
}

// failedAttempts is waitroom_notifications_total of premiere's failed
// presale_selected attempts, as this process's registry (the admitter's
// /metrics) has it.
// start runs the admitter on the config file at path as main does, until
// cancel or the test's end (which waits for it to stop); run's result
// comes on done.
func start(t *testing.T, path string) (cancel context.CancelFunc, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		defer close(result)
		cfg, err := config.Load(path)
		if err != nil {
			result <- err
			return
		}
		result <- run(ctx, service.Process{Config: cfg, ConfigPath: path, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		for range result {
		}
	})
	return cancel, result
}

func failedAttempts(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "waitroom_notifications_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["event"] == "premiere" && l["kind"] == "presale_selected" && l["result"] == "failed" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
