package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
)

// axeVersion is the axe-core the pages are checked with: a test-only
// dependency, installed from the npm registry into a cache folder outside
// the repository (never committed, never shipped to a fan's browser).
const axeVersion = "4.14.1"

var (
	axeOnce sync.Once
	axeJS   string
	axeErr  error
)

// axeSource returns axe.min.js: from $WAITROOM_AXE (a file) when set, else
// from the user cache, installing it there with npm on first use
// (localsvc.NPMPackage).
func axeSource(t *testing.T) string {
	t.Helper()
	axeOnce.Do(func() {
		if p := os.Getenv("WAITROOM_AXE"); p != "" {
			b, err := os.ReadFile(p)
			axeJS, axeErr = string(b), err
			return
		}
		dir, err := localsvc.NPMPackage("axe-core", axeVersion)
		if err != nil {
			axeErr = err
			return
		}
		file := filepath.Join(dir, "node_modules", "axe-core", "axe.min.js")
		b, err := os.ReadFile(file)
		axeJS, axeErr = string(b), err
	})
	if axeErr != nil {
		t.Fatalf("axe-core: %v", axeErr)
	}
	return axeJS
}

type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// checkA11y runs axe-core on the page as it is and fails the test on any
// serious or critical violation; lesser ones are logged. skip names rules
// not to run, each for a reason its caller states.
func checkA11y(t *testing.T, ctx context.Context, what string, skip ...string) {
	t.Helper()
	axeCheck(t, ctx, what, false, skip...)
}

// checkA11yAll is checkA11y failing on every violation, minor ones too.
func checkA11yAll(t *testing.T, ctx context.Context, what string, skip ...string) {
	t.Helper()
	axeCheck(t, ctx, what, true, skip...)
}

// axeCheck runs axe-core on the page and fails the test on a serious or
// critical violation, or on any when all.
func axeCheck(t *testing.T, ctx context.Context, what string, all bool, skip ...string) {
	t.Helper()
	out, err := axeRun(t, ctx, skip...)
	if err != nil {
		t.Fatalf("axe on %s: %v", what, err)
	}
	axeReport(t, what, all, out)
}

// axeRun runs axe-core on the tab's page and returns its violations as
// JSON.
func axeRun(t *testing.T, ctx context.Context, skip ...string) (string, error) {
	t.Helper()
	src := axeSource(t)
	rules := map[string]map[string]bool{}
	for _, r := range skip {
		rules[r] = map[string]bool{"enabled": false}
	}
	opts, _ := json.Marshal(map[string]any{"resultTypes": []string{"violations"}, "rules": rules})
	var out string
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := chromedp.Run(c,
		chromedp.ActionFunc(func(ctx context.Context) error {
			var loaded bool
			if err := chromedp.Evaluate(`typeof axe !== 'undefined'`, &loaded).Do(ctx); err != nil || loaded {
				return err
			}
			return chromedp.Evaluate(src, nil).Do(ctx)
		}),
		chromedp.Evaluate(`axe.run(document, `+string(opts)+`).then((r) => JSON.stringify(r.violations.map((v) => ({
			id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map((n) => n.target.join(' ')),
		}))))`, &out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
	)
	return out, err
}

// navigatedUnder reports whether err is DevTools saying the page went away
// under a call (it navigated: the call's document, or its JavaScript
// context, is gone).
func navigatedUnder(err error) bool {
	var e *cdproto.Error
	if !errors.As(err, &e) {
		return false
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "navigated or closed") || strings.Contains(m, "context was destroyed") || strings.Contains(m, "cannot find context")
}

// axeReport fails on axe's serious and critical violations (all: on every
// one) in out, axeRun's answer, and logs the others.
func axeReport(t *testing.T, what string, all bool, out string) {
	t.Helper()
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("axe on %s: %v (%s)", what, err, out)
	}
	var bad []string
	for _, v := range vs {
		line := fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, ", "))
		if all || v.Impact == "serious" || v.Impact == "critical" {
			bad = append(bad, line)
		} else {
			t.Logf("axe on %s, minor: %s", what, line)
		}
	}
	if len(bad) > 0 {
		t.Errorf("axe on %s: %d violation(s):\n  %s", what, len(bad), strings.Join(bad, "\n  "))
	}
}
