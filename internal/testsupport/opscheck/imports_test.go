package opscheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/waitroom/waitroom/"

// readsConfig are the packages the README's import rules let read the
// config file and run as a process: cmd, the services (gateway and its
// pages, admission, booking's service itself), policy, platform/service,
// config, and the tests' own packages. Every other package (the domain and
// its stores: queue, presale, draw, notify, payment, booking/postgres, rdb,
// operators, webhook, pass, proof, account, a package added later) is
// handed what it needs instead.
var readsConfig = []string{
	"cmd/", "internal/gateway", "internal/gateway/", "internal/admission", "internal/booking",
	"internal/policy", "internal/platform/service", "internal/config",
	"internal/testsupport/", "internal/e2e", "internal/loadtest",
}

// upward are what the domain must not depend on, even through another
// package.
var upward = []string{module + "internal/config", module + "internal/platform/service"}

// The domain imports neither internal/config nor internal/platform/service
// (README, the import rules), directly or through another package: go
// list's own graph of the shipped code (tests' imports aside), each
// offending package named with the chain that leads up.
func TestTheDomainReadsNoConfig(t *testing.T) {
	pkgs, imports, deps := importGraph(t)
	var checked []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p, module)
		if slices.ContainsFunc(readsConfig, func(a string) bool {
			return rel == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(rel, a))
		}) {
			continue
		}
		checked = append(checked, rel)
		for _, up := range upward {
			if slices.Contains(deps[p], up) {
				t.Errorf("%s depends on %s: %s", rel, strings.TrimPrefix(up, module), strings.Join(chain(imports, p, up), " → "))
			}
		}
	}
	// The rule is about the domain: a list that lost it checks nothing.
	for _, want := range []string{"internal/queue", "internal/presale", "internal/notify", "internal/payment", "internal/booking/postgres", "internal/rdb", "internal/pass"} {
		if !slices.Contains(checked, want) {
			t.Errorf("%s is not checked (packages: %d checked)", want, len(checked))
		}
	}
	t.Logf("checked: %s", strings.Join(checked, " "))
}

// importGraph is go list's graph of the module's shipped code (tests'
// imports aside): its packages, each one's imports and all it depends on.
func importGraph(t *testing.T) (pkgs []string, imports, deps map[string][]string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports, deps = map[string][]string{}, map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			t.Fatalf("go list: a line %q", line)
		}
		pkgs = append(pkgs, f[0])
		imports[f[0]], deps[f[0]] = strings.Fields(f[1]), strings.Fields(f[2])
	}
	return pkgs, imports, deps
}

// queue is the line's Redis implementation: only the commands that
// assemble the processes import it (and tests, and its own queuetest);
// the services speak the line's words (internal/line) through small
// interfaces of their own.
func TestOnlyTheCommandsImportTheLinesRedis(t *testing.T) {
	pkgs, imports, _ := importGraph(t)
	found := 0
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p, module)
		if !slices.Contains(imports[p], module+"internal/queue") {
			continue
		}
		found++
		if !strings.HasPrefix(rel, "cmd/") && rel != "internal/queue/queuetest" {
			t.Errorf("%s imports internal/queue: speak internal/line through an interface of its own", rel)
		}
	}
	if found == 0 {
		t.Error("nothing imports internal/queue: the rule checks nothing (update it with the layout)")
	}
}

// The line's words are words: no Redis client, nothing else of the module.
func TestTheLinesWordsStandAlone(t *testing.T) {
	pkgs, _, deps := importGraph(t)
	if !slices.Contains(pkgs, module+"internal/line") {
		t.Fatal("no internal/line: update the rule with the layout")
	}
	for _, d := range deps[module+"internal/line"] {
		if strings.HasPrefix(d, module) || strings.Contains(d, "redis") {
			t.Errorf("internal/line depends on %s", d)
		}
	}
}

// chain is the shortest import path from p to up, each package relative to
// the module.
func chain(imports map[string][]string, p, up string) []string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == up {
			var out []string
			for ; cur != ""; cur = prev[cur] {
				out = append([]string{strings.TrimPrefix(cur, module)}, out...)
			}
			return out
		}
		for _, next := range imports[cur] {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return []string{strings.TrimPrefix(p, module), "…", strings.TrimPrefix(up, module)}
}
