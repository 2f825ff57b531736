package opscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// registeredMetrics reads the Go source of cmd/ and internal/ (tests
// excluded) for the metric families the binaries register: Name (with
// Namespace and Subsystem) of prometheus.{Counter,Gauge,Histogram,Summary}Opts
// literals, the name given to the platform's metrics.CounterVec and its
// peers, and the name of prometheus.NewDesc calls (collectors; typed by
// their _total suffix). Only names written as string literals are seen.
func registeredMetrics(t *testing.T) map[string]string {
	helperType := map[string]string{"Counter": counter, "CounterVec": counter, "GaugeVec": gauge, "Histogram": histogram, "HistogramVec": histogram}
	t.Helper()
	root := repoRoot(t)
	found := map[string]string{}
	optsType := map[string]string{
		"CounterOpts": counter, "GaugeOpts": gauge, "HistogramOpts": histogram, "SummaryOpts": summary,
	}
	fset := token.NewFileSet()
	for _, top := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				// Someone is mid-edit; the compile checks will say so.
				t.Logf("skipping %s: %v", path, err)
				return nil
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.CompositeLit:
					sel, ok := x.Type.(*ast.SelectorExpr)
					if !ok || optsType[sel.Sel.Name] == "" {
						return true
					}
					var ns, sub, name string
					for _, e := range x.Elts {
						kv, ok := e.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						key, _ := kv.Key.(*ast.Ident)
						val := stringLit(kv.Value)
						switch {
						case key == nil:
						case key.Name == "Name":
							name = val
						case key.Name == "Namespace":
							ns = val
						case key.Name == "Subsystem":
							sub = val
						}
					}
					if name != "" {
						found[joinName(ns, sub, name)] = optsType[sel.Sel.Name]
					}
				case *ast.CallExpr:
					if len(x.Args) == 0 {
						return true
					}
					// metrics.CounterVec("name", …) and its peers (CounterVec
					// alone inside package metrics).
					if id, ok := x.Fun.(*ast.Ident); ok && f.Name.Name == "metrics" && helperType[id.Name] != "" {
						if name := stringLit(x.Args[0]); name != "" {
							found[name] = helperType[id.Name]
						}
						return true
					}
					sel, ok := x.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if typ := helperType[sel.Sel.Name]; typ != "" {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == "metrics" {
							if name := stringLit(x.Args[0]); name != "" {
								found[name] = typ
							}
						}
						return true
					}
					if sel.Sel.Name != "NewDesc" {
						return true
					}
					if name := stringLit(x.Args[0]); name != "" {
						typ := gauge
						if strings.HasSuffix(name, "_total") {
							typ = counter
						}
						found[name] = typ
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found
}

func stringLit(e ast.Expr) string {
	if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
		s, err := strconv.Unquote(bl.Value)
		if err == nil {
			return s
		}
	}
	return ""
}

func joinName(parts ...string) string {
	var nonEmpty []string
	for _, p := range parts {
		if p != "" {
			nonEmpty = append(nonEmpty, p)
		}
	}
	return strings.Join(nonEmpty, "_")
}

// TestAgreedMetricsAreRegistered: until the binaries are scraped, this ties
// the agreed list (what dashboards and alerts may use) to the source: each
// agreed family is registered somewhere under cmd/ or internal/, with its type.
func TestAgreedMetricsAreRegistered(t *testing.T) {
	reg := registeredMetrics(t)
	for name, typ := range agreedMetrics {
		got, ok := reg[name]
		switch {
		case !ok:
			t.Errorf("%s (%s) is agreed but registered nowhere in cmd/ or internal/", name, typ)
		case got != typ:
			t.Errorf("%s is registered as a %s; the agreed list says %s", name, got, typ)
		}
	}
	for name := range reg {
		if _, ok := agreedMetrics[name]; !ok {
			t.Logf("%s is registered but not in the agreed list (dashboards and alerts cannot use it yet)", name)
		}
	}
}
