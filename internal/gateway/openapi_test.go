package gateway_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/waitroom/waitroom/internal/gateway/openapi"
)

// TestOpenAPIDocumentServed: GET /api/v1/openapi.json is the document, as
// JSON, with an ETag that a repeat sends back for a 304.
func TestOpenAPIDocumentServed(t *testing.T) {
	e := setup(t, 0)
	r := e.do(http.MethodGet, "/api/v1/openapi.json", nil)
	if r.code != http.StatusOK || !bytes.Equal(r.raw, openapi.JSON()) {
		t.Fatalf("got %d, %d bytes; want 200 and the document", r.code, len(r.raw))
	}
	if ct := r.hdr.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	etag := r.hdr.Get("ETag")
	if etag != openapi.ETag() || r.hdr.Get("Cache-Control") != "public, max-age=300" {
		t.Errorf("ETag %q, Cache-Control %q", etag, r.hdr.Get("Cache-Control"))
	}
	if r := e.do(http.MethodGet, "/api/v1/openapi.json", nil, "If-None-Match", etag); r.code != http.StatusNotModified || len(r.raw) != 0 {
		t.Errorf("If-None-Match: got %d, %d bytes; want 304 and nothing", r.code, len(r.raw))
	}
	if r := e.do(http.MethodGet, "/api/v1/openapi.json", nil, "If-None-Match", `"other"`); r.code != http.StatusOK {
		t.Errorf("another ETag: got %d; want 200", r.code)
	}
}
