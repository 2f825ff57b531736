package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/config"
)

func TestLiveReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "waitroom.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(valid)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	l := config.NewLive(path, cfg)

	if old, cur, err := l.Reload(false); old != nil || cur != nil || err != nil {
		t.Fatalf("unchanged file: %v %v %v; want nothing done", old, cur, err)
	}
	write(strings.Replace(valid, "admit_per_second: 50", "admit_per_second: 75", 1))
	old, cur, err := l.Reload(false)
	if err != nil || old != cfg || cur == nil || l.Load() != cur || *l.Load().Events[0].Admission.AdmitPerSecond != 75 {
		t.Fatalf("good edit: old %p cur %p err %v; want the new config (75/s) in force", old, cur, err)
	}
	write(strings.Replace(valid, "admit_per_second: 50", "admit_per_second: -1", 1))
	if _, _, err := l.Reload(false); err == nil || !strings.Contains(err.Error(), "events[0].admission.admit_per_second") {
		t.Fatalf("bad edit: %v; want an error naming the key", err)
	}
	if l.Load() != cur {
		t.Fatal("a bad edit replaced the config in force")
	}
	if _, _, err := l.Reload(false); err != nil {
		t.Fatalf("the same bad file again: %v; want it refused once, then left alone", err)
	}
	if _, _, err := l.Reload(true); err == nil {
		t.Fatal("forced reload of a bad file: no error; want it refused again")
	}
}
