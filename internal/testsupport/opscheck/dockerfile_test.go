package opscheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// stage is one FROM … block of a Dockerfile.
type stage struct {
	from, name string
	env        []string // ENV as NAME=value
	runs       []string // RUN commands, continuation lines joined, flags dropped
	copies     []string
}

// parseDockerfile reads the stages of a Dockerfile: enough of the syntax for
// the checks (FROM, ENV, RUN, COPY; line continuations; comments).
func parseDockerfile(text string) []stage {
	var stages []stage
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		if line := strings.TrimSpace(cur.String()); line != "" {
			lines = append(lines, line)
		}
		cur.Reset()
	}
	for _, line := range lines {
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			f := strings.Fields(rest)
			st := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
		case "ENV":
			if len(stages) > 0 {
				stages[len(stages)-1].env = append(stages[len(stages)-1].env, shellFields(rest)...)
			}
		case "RUN":
			for strings.HasPrefix(rest, "--") {
				_, rest, _ = strings.Cut(rest, " ")
				rest = strings.TrimSpace(rest)
			}
			if len(stages) > 0 {
				stages[len(stages)-1].runs = append(stages[len(stages)-1].runs, rest)
			}
		case "COPY":
			if len(stages) > 0 {
				stages[len(stages)-1].copies = append(stages[len(stages)-1].copies, rest)
			}
		}
	}
	return stages
}

// shellFields splits a command line as sh would for plain words and quotes
// (no expansion): -ldflags="-s -w" is one field, -ldflags=-s -w.
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// buildStage returns the Dockerfile's golang build stage and the argument
// list of its `go build` (from "build" on), and the -o target.
func buildStage(t *testing.T) (stage, []string, string) {
	t.Helper()
	stages := parseDockerfile(string(readRepoFile(t, "Dockerfile")))
	for _, st := range stages {
		if !strings.HasPrefix(st.from, "golang:") {
			continue
		}
		for _, r := range st.runs {
			for _, part := range strings.Split(r, "&&") {
				f := shellFields(strings.TrimSpace(part))
				if len(f) > 1 && f[0] == "go" && f[1] == "build" {
					out := ""
					if i := slices.Index(f, "-o"); i >= 0 && i+1 < len(f) {
						out = f[i+1]
					}
					return st, f[1:], out
				}
			}
		}
	}
	t.Fatal("Dockerfile: no golang stage with a `go build`")
	return stage{}, nil, ""
}

// dockerfileBinaries are the commands the build stage makes: ./cmd/x → x.
func dockerfileBinaries(t *testing.T) []string {
	t.Helper()
	_, args, _ := buildStage(t)
	var bins []string
	for _, a := range args {
		if strings.HasPrefix(a, "./cmd/") {
			bins = append(bins, filepath.Base(a))
		}
	}
	return bins
}

func TestDockerfile(t *testing.T) {
	st, _, out := buildStage(t)
	if st.from != "golang:1.26" || st.name == "" {
		t.Errorf("build stage FROM %s AS %q; want golang:1.26 AS <name>", st.from, st.name)
	}
	bins := dockerfileBinaries(t)
	slices.Sort(bins)
	if want := []string{"admitter", "booking", "gateway"}; !slices.Equal(bins, want) {
		t.Errorf("go build makes %q; want %q", bins, want)
	}
	if !strings.HasSuffix(out, "/") {
		t.Errorf("go build -o %q: with three packages -o must name a folder (end in /)", out)
	}
	stages := parseDockerfile(string(readRepoFile(t, "Dockerfile")))
	final := stages[len(stages)-1]
	if strings.HasPrefix(final.from, "golang:") {
		t.Errorf("the runtime stage is %s: ship the binaries, not the toolchain", final.from)
	}
	if !slices.ContainsFunc(final.copies, func(c string) bool {
		return strings.Contains(c, "--from="+st.name) && strings.Contains(c, out)
	}) {
		t.Errorf("runtime stage does not COPY --from=%s %s: %q", st.name, out, final.copies)
	}
}

// TestDockerfileBuildsTheBinaries runs the Dockerfile's own `go build`, with
// the stage's ENV, here, into a temporary folder: the image builds what the
// compose services run. It compiles the three commands, so it is the slowest
// check of this package and the one that fails while cmd/ does not compile.
func TestDockerfileBuildsTheBinaries(t *testing.T) {
	st, args, out := buildStage(t)
	dir := t.TempDir()
	for i, a := range args {
		if a == out {
			args[i] = dir + "/"
		}
	}
	start := time.Now()
	res, err := run(t, repoRoot(t), st.env, "go", args...)
	if err != nil {
		t.Fatalf("go %s (with %q): %v\n%s", strings.Join(args, " "), st.env, err, res)
	}
	t.Logf("go %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	for _, b := range dockerfileBinaries(t) {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil {
			t.Errorf("binary %s not built: %v", b, err)
			continue
		}
		if fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable", b)
		}
	}
}
