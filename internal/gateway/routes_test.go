package gateway

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/gateway/openapi"
)

// operation is one method on one path, as OpenAPI writes it.
type operation struct{ method, path string }

func (o operation) String() string { return strings.ToUpper(o.method) + " " + o.path }

var fiberParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// documented is the document's operations, with each one's operators'
// scopes (the operatorToken security requirement's).
func documented(t *testing.T) map[operation][]string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[operation][]string{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			switch method {
			case "parameters", "summary", "description", "servers":
				continue
			}
			var op struct {
				Security []map[string][]string `json:"security"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			var scopes []string
			for _, req := range op.Security {
				scopes = append(scopes, req["operatorToken"]...)
			}
			out[operation{method, path}] = scopes
		}
	}
	return out
}

// TestOpenAPICoversTheRoutes: the OpenAPI document's operations are the
// gateway's /api/v1 routes (its route table's) and the booking API's as
// the gate passes it on (booking.Routes, but the operators' route, which
// the gate refuses), both ways, and each operators' route names the scope
// the table guards it with.
func TestOpenAPICoversTheRoutes(t *testing.T) {
	doc := documented(t)
	served := map[operation]string{} // → the scope the table asks
	anyMethod := map[string]bool{}   // paths of every method (ALL)
	for _, r := range (&Server{}).routeTable() {
		if r.method == methodUse || !strings.HasPrefix(r.path, "/api/v1/") {
			continue
		}
		if !r.api {
			t.Errorf("%s %s: an /api/v1 route the OpenAPI document does not describe (mark it api in routes.go, and describe it)", r.method, r.path)
			continue
		}
		if r.path == bookingPrefix+"/*" {
			for _, b := range booking.Routes() {
				if b.Access != booking.AccessOperator {
					served[operation{strings.ToLower(b.Method), booking.Prefix + b.Path}] = ""
				}
			}
			continue
		}
		path := fiberParam.ReplaceAllString(r.path, "{$1}")
		if r.method == methodAll {
			// A proxy asks with any method; the document describes GET.
			anyMethod[path] = true
			served[operation{"get", path}] = r.scope
			continue
		}
		served[operation{strings.ToLower(r.method), path}] = r.scope
	}
	for op, scope := range served {
		scopes, ok := doc[op]
		switch {
		case !ok:
			t.Errorf("%s: served, not in the OpenAPI document", op)
		case scope == "" && len(scopes) > 0:
			t.Errorf("%s: the document asks an operators' scope %v; the route none", op, scopes)
		case scope != "" && !slices.Equal(scopes, []string{scope}):
			t.Errorf("%s: the document asks the scopes %v; the route %s", op, scopes, scope)
		}
	}
	for op := range doc {
		if _, ok := served[op]; !ok && !(anyMethod[op.path] && slices.Contains(fiberMethods, strings.ToUpper(op.method))) {
			t.Errorf("%s: in the OpenAPI document, not served", op)
		}
	}
	if len(served) < 30 {
		t.Errorf("%d operations served; the table holds more", len(served))
	}
}

var fiberMethods = []string{fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch, fiber.MethodDelete, fiber.MethodOptions}
