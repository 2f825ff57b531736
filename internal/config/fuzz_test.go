package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/waitroom/waitroom/internal/config"
)

// FuzzParse: the config file is outside input (an operator's edit, applied
// live by the admitter). Whatever its bytes, Parse never panics and either
// refuses them with a *config.Error (what the watcher logs, keeping the
// previous config) or returns a config that validates; and a config it
// accepted, written back as YAML, is accepted again, the same (nothing it
// let in depends on how it was spelled). Seeded from the shipped configs
// and this package's test configs.
func FuzzParse(f *testing.F) {
	shipped, _ := filepath.Glob("../../configs/waitroom*.yaml")
	if len(shipped) == 0 {
		f.Fatal("no configs/waitroom*.yaml to seed from")
	}
	for _, p := range shipped {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(valid))
	f.Add([]byte(valid + "gateway: {trusted_proxies: [\"10.0.0.0/8\", \"fd00::/8\"], ipv6_prefix: 48, public_url: \"https://tickets.example\"}\n"))
	f.Add([]byte("events: [{id: x, opens_at: \"2026-13-01T00:00:00Z\"}]"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := config.Parse(b, noEnv)
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("Parse refused with %T %v; want a *config.Error naming the problems", err, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that does not validate: %v", err)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("an accepted config does not marshal: %v", err)
		}
		again, err := config.Parse(out, noEnv)
		if err != nil {
			t.Fatalf("an accepted config, written back, is refused: %v\n%s", err, out)
		}
		if back, _ := yaml.Marshal(again); string(back) != string(out) {
			t.Fatalf("an accepted config changes when written back and read again:\n%s\n--- then ---\n%s", out, back)
		}
	})
}
