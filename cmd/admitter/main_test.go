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

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/platform/service"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// TestRun starts the admitter as main does, checks its endpoints and that it
// publishes and admits, then stops it gracefully.
func TestRun(t *testing.T) {
	srv, rdb := testenv.Redis(t)
	port, err := localsvc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		cfg, err := config.Load(path)
		if err != nil {
			done <- err
			return
		}
		done <- run(ctx, service.Process{Config: cfg, ConfigPath: path, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	}()

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
	var set queue.Settings
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
