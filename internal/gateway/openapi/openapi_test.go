package openapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/oasdiff/checker"
	"github.com/oasdiff/oasdiff/diff"
	"github.com/oasdiff/oasdiff/load"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/waitroom/waitroom/internal/gateway/openapi"
)

var updateBaseline = flag.Bool("update-baseline", false, "write the current document to baseline.json (make openapi-baseline)")

// TestDocumentIsValidOpenAPI31: libopenapi builds its v3 model without an
// error, and libopenapi-validator finds the document valid against the
// OpenAPI 3.1 specification's schema.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	doc, err := libopenapi.NewDocument(openapi.JSON())
	if err != nil {
		t.Fatalf("libopenapi: %v", err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1") {
		t.Fatalf("version %q; want 3.1.x", v)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("libopenapi: the v3 model: %v", err)
	}
	if m.Model.Paths == nil || m.Model.Paths.PathItems.Len() == 0 {
		t.Fatal("no paths")
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("libopenapi-validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s", e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  %s (line %d): %s", se.FieldPath, se.Line, se.Reason)
			}
		}
	}
}

// TestServedIsWritten: the JSON served is the YAML written, key for key.
func TestServedIsWritten(t *testing.T) {
	var fromJSON any
	if err := json.Unmarshal(openapi.JSON(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(openapi.JSON(), []byte("{\n  \"openapi\": \"3.1")) {
		t.Errorf("the document starts %.40q; want its keys in the order written, openapi first", openapi.JSON())
	}
	if !strings.HasPrefix(openapi.ETag(), `"`) || len(openapi.ETag()) != 34 {
		t.Errorf("ETag %s; want 32 hex digits, quoted", openapi.ETag())
	}
}

// breaking lists oasdiff's breaking changes (level ERR) from base to rev.
func breaking(t *testing.T, base, rev []byte) []string {
	t.Helper()
	load1 := func(b []byte, name string) *load.SpecInfo {
		l := openapi3.NewLoader()
		si, err := load.NewSpecInfoFromData(l, b, name)
		if err != nil {
			t.Fatalf("oasdiff: loading %s: %v", name, err)
		}
		return si
	}
	s1, s2 := load1(base, "baseline.json"), load1(rev, "openapi.json")
	d, sources, err := diff.GetWithOperationsSourcesMap(diff.NewConfig(), s1, s2)
	if err != nil {
		t.Fatalf("oasdiff: %v", err)
	}
	changes := checker.CheckBackwardCompatibilityUntilLevel(checker.NewConfig(checker.GetAllChecks()), d, sources, checker.ERR)
	l := checker.NewDefaultLocalizer()
	var out []string
	for _, c := range changes {
		if c.GetLevel() >= checker.ERR {
			out = append(out, fmt.Sprintf("%s %s: %s (%s)", c.GetOperation(), c.GetPath(), c.GetUncolorizedText(l), c.GetId()))
		}
	}
	return out
}

// TestNoBreakingChange: oasdiff finds no breaking change from the
// committed baseline to the document. An intended one is committed with
// its baseline: make openapi-baseline (this test with -update-baseline).
func TestNoBreakingChange(t *testing.T) {
	if *updateBaseline {
		if err := os.WriteFile("baseline.json", openapi.JSON(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("baseline.json updated: commit it with the change")
		return
	}
	if b := breaking(t, openapi.Baseline, openapi.JSON()); len(b) > 0 {
		t.Errorf("the OpenAPI document breaks its clients (oasdiff, baseline.json → openapi.yaml):\n  %s\n"+
			"If the change is intended (a new major version, or the contract changed on purpose), update the baseline "+
			"with `make openapi-baseline` and commit it with the change; else make the change compatible.",
			strings.Join(b, "\n  "))
	}
}

// TestBreakingChangesAreCaught plants breaking changes in copies of the
// document and sees the check find each; the document itself passes.
func TestBreakingChangesAreCaught(t *testing.T) {
	cur := openapi.JSON()
	if b := breaking(t, cur, cur); len(b) > 0 {
		t.Fatalf("the document against itself: %v", b)
	}
	edit := func(f func(doc map[string]any)) []byte {
		var doc map[string]any
		if err := json.Unmarshal(cur, &doc); err != nil {
			t.Fatal(err)
		}
		f(doc)
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	obj := func(m any, keys ...string) map[string]any {
		for _, k := range keys {
			m = m.(map[string]any)[k]
		}
		return m.(map[string]any)
	}
	for _, tc := range []struct {
		name  string
		plant func(doc map[string]any)
		want  string // in a change's text
	}{
		{"a path removed", func(doc map[string]any) {
			delete(obj(doc, "paths"), "/api/v1/events/{event}/report")
		}, "/api/v1/events/{event}/report"},
		{"a required answer field removed", func(doc map[string]any) {
			w := obj(doc, "components", "schemas", "Waiting")
			delete(obj(w, "properties"), "position")
			var req []any
			for _, r := range w["required"].([]any) {
				if r != "position" {
					req = append(req, r)
				}
			}
			w["required"] = req
		}, "position"},
		{"a request field made required", func(doc map[string]any) {
			s := obj(doc, "paths", "/api/v1/booking/showtimes/{id}/holds", "post", "requestBody", "content", "application/json", "schema")
			s["required"] = []any{"seats"}
		}, "seats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := breaking(t, cur, edit(tc.plant))
			if len(b) == 0 {
				t.Fatal("no breaking change found")
			}
			if !strings.Contains(strings.Join(b, "\n"), tc.want) {
				t.Errorf("changes %v; want one naming %s", b, tc.want)
			}
		})
	}
}
