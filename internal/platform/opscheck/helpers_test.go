package opscheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/platform/localsvc"
)

// exportedNames is every series name a dashboard or an alert may select.
//
// For now it comes from the agreed metric list (agreedMetrics); the plan is to
// scrape the /metrics of the three running binaries instead and feed each page
// to parseExposition. Every check that needs "does this metric exist" asks
// here, so that swap touches this function only.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	names := seriesNames(agreedMetrics)
	for _, n := range prometheusSeries {
		names[n] = true
	}
	return names
}

// repoRoot is the folder holding go.mod, found from the test's working
// directory (the package folder) upwards.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's working directory")
		}
		dir = parent
	}
}

// readRepoFile reads a file by its path relative to the repository root.
func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// promtool finds promtool, installing Debian's prometheus package if needed.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := localsvc.Ensure("promtool", "prometheus")
	if err != nil {
		t.Fatalf("promtool: %v", err)
	}
	return p
}

// run runs a command in dir and returns its combined output.
func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// unknownNames returns the names in used that are not in known.
func unknownNames(used []string, known map[string]bool) []string {
	var bad []string
	for _, n := range used {
		if !known[n] {
			bad = append(bad, n)
		}
	}
	return bad
}

// markdownAnchors returns the anchors GitHub gives the headings of a Markdown
// document: lower case, punctuation but - and _ dropped, spaces as -, and a
// -1, -2 … suffix on repeats.
func markdownAnchors(doc string) map[string]bool {
	drop := regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
	anchors, count := map[string]bool{}, map[string]int{}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := count[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		count[slug]++
	}
	return anchors
}
