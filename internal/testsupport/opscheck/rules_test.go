package opscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// ruleFile is the part of a Prometheus rule file the checks read.
type ruleFile struct {
	Groups []struct {
		Name  string           `yaml:"name"`
		Rules []map[string]any `yaml:"rules"`
	} `yaml:"groups"`
}

type alertRule struct {
	Alert       string
	Expr        string
	Annotations map[string]string
}

func loadAlerts(t *testing.T) []alertRule {
	t.Helper()
	var f ruleFile
	if err := yaml.Unmarshal(readRepoFile(t, "configs/alerts.yml"), &f); err != nil {
		t.Fatalf("configs/alerts.yml: %v", err)
	}
	var out []alertRule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			a := alertRule{Annotations: map[string]string{}}
			a.Alert, _ = r["alert"].(string)
			a.Expr, _ = r["expr"].(string)
			if ann, ok := r["annotations"].(map[string]any); ok {
				for k, v := range ann {
					a.Annotations[k], _ = v.(string)
				}
			}
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		t.Fatal("configs/alerts.yml has no rules")
	}
	return out
}

// ruleTests is the part of a promtool test file the checks read.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name        string `yaml:"name"`
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func TestPromtool(t *testing.T) {
	bin := promtool(t)
	root := repoRoot(t)
	tests := []struct {
		name string
		args []string
	}{
		{"check rules", []string{"check", "rules", "--lint=all", "--lint-fatal", "configs/alerts.yml"}},
		{"test rules", []string{"test", "rules", "configs/alerts_test.yml"}},
		{"check config", []string{"check", "config", "configs/prometheus.yml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, root, nil, bin, tt.args...)
			if err != nil {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			}
		})
	}
}

// TestAlertsAreDocumented: every alert says what happened and links its
// section of docs/OPERATIONS.md, and that section exists.
func TestAlertsAreDocumented(t *testing.T) {
	anchors := markdownAnchors(string(readRepoFile(t, "docs/OPERATIONS.md")))
	runbook := regexp.MustCompile(`^docs/OPERATIONS\.md#([a-z0-9_-]+)$`)
	seen := map[string]bool{}
	for _, a := range loadAlerts(t) {
		t.Run(a.Alert, func(t *testing.T) {
			if a.Alert == "" {
				t.Fatal("a rule without an alert name (recording rules belong in another file)")
			}
			if seen[a.Alert] {
				t.Errorf("alert %s defined twice", a.Alert)
			}
			seen[a.Alert] = true
			for _, k := range []string{"summary", "description", "runbook"} {
				if strings.TrimSpace(a.Annotations[k]) == "" {
					t.Errorf("annotation %s missing", k)
				}
			}
			m := runbook.FindStringSubmatch(a.Annotations["runbook"])
			if m == nil {
				t.Fatalf("runbook %q is not docs/OPERATIONS.md#anchor", a.Annotations["runbook"])
			}
			if !anchors[m[1]] {
				t.Errorf("runbook anchor #%s has no heading in docs/OPERATIONS.md", m[1])
			}
			if m[1] != strings.ToLower(a.Alert) {
				t.Errorf("runbook anchor #%s; want #%s (one section per alert, named after it)", m[1], strings.ToLower(a.Alert))
			}
		})
	}
}

// TestAlertsQueryExportedMetrics: an alert on a metric nobody exports never
// fires, and a rule test fed a series nobody exports proves nothing.
func TestAlertsQueryExportedMetrics(t *testing.T) {
	known := exportedNames(t)
	for _, a := range loadAlerts(t) {
		exportedMetrics(t, a.Alert, a.Expr, known)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(readRepoFile(t, "configs/alerts_test.yml"), &rt); err != nil {
		t.Fatal(err)
	}
	for _, tc := range rt.Tests {
		for _, s := range tc.InputSeries {
			names, err := metricNames(s.Series)
			if err != nil || len(names) != 1 {
				t.Errorf("test %q: series %q: names %q, %v", tc.Name, s.Series, names, err)
				continue
			}
			if bad := unknownNames(names, known); len(bad) > 0 {
				t.Errorf("test %q: input series of a metric nobody exports: %q", tc.Name, bad)
			}
		}
	}
}

// TestEveryAlertIsTested: each alert has a case where it fires and one where
// it must stay silent.
func TestEveryAlertIsTested(t *testing.T) {
	var rt ruleTests
	if err := yaml.Unmarshal(readRepoFile(t, "configs/alerts_test.yml"), &rt); err != nil {
		t.Fatal(err)
	}
	if len(rt.RuleFiles) != 1 || rt.RuleFiles[0] != "alerts.yml" {
		t.Errorf("alerts_test.yml rule_files = %q; want [alerts.yml]", rt.RuleFiles)
	}
	fires, silent := map[string]int{}, map[string]int{}
	for _, tc := range rt.Tests {
		for _, c := range tc.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname]++
			} else {
				silent[c.Alertname]++
			}
		}
	}
	for _, a := range loadAlerts(t) {
		if fires[a.Alert] == 0 {
			t.Errorf("%s: no test case where it fires", a.Alert)
		}
		if silent[a.Alert] == 0 {
			t.Errorf("%s: no test case where it must not fire", a.Alert)
		}
	}
}

// TestAlertTestsCatchBrokenAlerts runs the promtool tests against mutants of
// alerts.yml: each alert in turn made to never fire, then to always fire. The
// tests must fail on every mutant, or they do not really test that alert.
func TestAlertTestsCatchBrokenAlerts(t *testing.T) {
	bin := promtool(t)
	src := readRepoFile(t, "configs/alerts.yml")
	tests := readRepoFile(t, "configs/alerts_test.yml")
	mutants := []struct {
		name string
		expr string
	}{
		{"never fires", `absent(vector(1))`},
		{"always fires", `vector(1)`},
	}
	for _, a := range loadAlerts(t) {
		// The alert's own tests pass on the alert as written: a mutant's
		// failure below is the mutant's, not a file cut wrong.
		t.Run(a.Alert+"/as written", func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "alerts.yml"), src)
			writeFile(t, filepath.Join(dir, "alerts_test.yml"), testsOf(t, tests, a.Alert))
			if out, err := run(t, dir, nil, bin, "test", "rules", "alerts_test.yml"); err != nil {
				t.Errorf("promtool test rules of %s's own tests: %v\n%s", a.Alert, err, out)
			}
		})
		for _, m := range mutants {
			t.Run(a.Alert+"/"+m.name, func(t *testing.T) {
				var f ruleFile
				if err := yaml.Unmarshal(src, &f); err != nil {
					t.Fatal(err)
				}
				for _, g := range f.Groups {
					for _, r := range g.Rules {
						if r["alert"] == a.Alert {
							r["expr"] = m.expr
						}
					}
				}
				b, err := yaml.Marshal(f)
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "alerts.yml"), b)
				writeFile(t, filepath.Join(dir, "alerts_test.yml"), testsOf(t, tests, a.Alert))
				if out, err := run(t, dir, nil, bin, "test", "rules", "alerts_test.yml"); err == nil {
					t.Errorf("promtool test rules passed with %s as %s; the tests do not pin that alert down\n%s", a.Alert, m.expr, out)
				}
			})
		}
	}
}

// testsOf is the rule tests file with only its tests that check alert (an
// alert_rule_test naming it): a mutant of one alert can fail no other
// test, since promtool compares each test's alerts of the name it gives
// only. Each mutant's run then evaluates a test or two, not all of them.
func testsOf(t *testing.T, file []byte, alert string) []byte {
	t.Helper()
	var f map[string]any
	if err := yaml.Unmarshal(file, &f); err != nil {
		t.Fatal(err)
	}
	tests, _ := f["tests"].([]any)
	var kept []any
	for _, tc := range tests {
		m, _ := tc.(map[string]any)
		rules, _ := m["alert_rule_test"].([]any)
		for _, r := range rules {
			if rm, _ := r.(map[string]any); rm["alertname"] == alert {
				kept = append(kept, tc)
				break
			}
		}
	}
	f["tests"] = kept
	b, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
