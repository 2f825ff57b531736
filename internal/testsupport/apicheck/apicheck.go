// Package apicheck holds the end-to-end tests to the OpenAPI document
// (DESIGN.md, "Integrations": the end-to-end tests' answers validate
// against it). Its Transport wraps an http.RoundTripper: every exchange
// with a watched gateway under /api/v1 is validated against the document
// the gateway serves (package openapi) by libopenapi-validator, and a
// mismatch fails the test that watches that gateway (t.Errorf, naming the
// route and the validation error). The stack watches each gateway it
// starts and installs the Transport as http.DefaultTransport, so
// http.Get, http.Post, http.DefaultClient and every client with no
// Transport of its own are checked; a client with its own wraps it with
// Transport.
//
// What is a mismatch:
//   - an answer whose status the operation does not list, or whose JSON
//     body does not match the schema of that status;
//   - a request the document calls invalid that the gateway took (2xx): a
//     test that sends a bad request on purpose gets its 4xx, which is
//     right;
//   - a 2xx from a path or a method the document lacks (a 404 or 405 for
//     one is right).
//
// The pass's security is not checked: a browser sends its pass in a cookie
// named by the event (wr_a_{event}), which OpenAPI cannot name.
package apicheck

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"

	"github.com/waitroom/waitroom/internal/gateway/openapi"
)

// maxBody is the most of a JSON answer read to validate it (the largest
// answers, the published lists, are text and not read).
const maxBody = 16 << 20

// Checker validates exchanges against a document.
type Checker struct {
	v validator.Validator
	// mu serialises the validator: it keeps caches of its own, and the
	// tests' traffic is not what is measured.
	mu sync.Mutex
}

// New is a Checker of doc (JSON or YAML).
func New(doc []byte) (*Checker, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(d, config.WithoutSecurityValidation())
	if len(errs) > 0 {
		return nil, fmt.Errorf("apicheck: %v", errs)
	}
	return &Checker{v: v}, nil
}

var gateway = sync.OnceValues(func() (*Checker, error) { return New(openapi.JSON()) })

// Check lists what is wrong with one exchange: req was sent with body
// reqBody and answered res, whose body was resBody (nil when it was not
// read: an answer that is not JSON is checked for its status and media
// type).
func (c *Checker) Check(req *http.Request, reqBody []byte, res *http.Response, resBody []byte) []string {
	vreq := req.Clone(req.Context())
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	vreq.ContentLength = int64(len(reqBody))
	vres := *res
	vres.Request = vreq
	vres.Body = io.NopCloser(bytes.NewReader(resBody))
	vres.ContentLength = int64(len(resBody))
	ok2xx := res.StatusCode >= 200 && res.StatusCode < 300

	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	reqOK, reqErrs := c.v.ValidateHttpRequestSync(vreq)
	if !reqOK {
		for _, e := range reqErrs {
			if e.ValidationType == helpers.PathValidation {
				// Not in the document: right for a 404 or a 405 only.
				if res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusMethodNotAllowed {
					out = append(out, "not in the document, yet answered "+res.Status+": "+describe(e))
				}
				return out
			}
			if ok2xx {
				out = append(out, "request the document refuses, yet answered "+res.Status+": "+describe(e))
			}
		}
	}
	if resOK, resErrs := c.v.ValidateHttpResponse(vreq, &vres); !resOK {
		for _, e := range resErrs {
			out = append(out, "answer: "+describe(e))
		}
	}
	return out
}

// describe is a validation error in one line, with each schema failure.
func describe(e *verrors.ValidationError) string {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Reason != "" && e.Reason != e.Message {
		b.WriteString(": " + e.Reason)
	}
	for _, f := range e.SchemaValidationErrors {
		fmt.Fprintf(&b, "; %s %s", f.FieldPath, f.Reason)
	}
	return b.String()
}

// watched maps a gateway's host:port to the test that watches it.
var (
	watchMu sync.Mutex
	watched = map[string]*watch{}
)

// watch is a gateway's test, and how many of its exchanges were checked.
type watch struct {
	t       testing.TB
	checked atomic.Int64
	failed  atomic.Int64
}

// Watch validates every /api/v1 exchange with the gateway at base (its
// http://host:port) through Transport until t ends, failing t on a
// mismatch.
func Watch(t testing.TB, base string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("apicheck: %v", err)
	}
	if _, err := gateway(); err != nil {
		t.Fatalf("apicheck: the gateway's document: %v", err)
	}
	w := &watch{t: t}
	watchMu.Lock()
	watched[u.Host] = w
	watchMu.Unlock()
	t.Cleanup(func() {
		watchMu.Lock()
		if watched[u.Host] == w {
			delete(watched, u.Host)
		}
		watchMu.Unlock()
		t.Logf("apicheck: %d /api/v1 exchanges with %s validated against the OpenAPI document, %d mismatched", w.checked.Load(), base, w.failed.Load())
	})
}

func watcher(host string) *watch {
	watchMu.Lock()
	defer watchMu.Unlock()
	return watched[host]
}

var install sync.Once

// Install makes http.DefaultTransport a Transport of itself, once.
func Install() {
	install.Do(func() { http.DefaultTransport = Transport(http.DefaultTransport) })
}

// Transport wraps next (nil = http.DefaultTransport as it was) so that its
// exchanges with watched gateways are validated.
func Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if _, ok := next.(*transport); ok {
		return next
	}
	return &transport{next: next}
}

type transport struct{ next http.RoundTripper }

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := watcher(req.URL.Host)
	if w == nil || !strings.HasPrefix(req.URL.Path, "/api/v1/") {
		return tr.next.RoundTrip(req)
	}
	t := w.t
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		// A RoundTripper must not change the caller's request: send a copy
		// with the body read.
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	res, err := tr.next.RoundTrip(req)
	if err != nil {
		return res, err
	}
	var resBody []byte
	if isJSON(res.Header.Get("Content-Type")) {
		b, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
		res.Body.Close()
		if err != nil {
			// The caller reads what came, then the same error: an answer cut
			// short (a reset, a fault injected) is not validated.
			res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
			return res, nil
		}
		res.Body = io.NopCloser(bytes.NewReader(b))
		if len(b) > maxBody {
			t.Errorf("apicheck: %s %s: an answer of more than %d bytes", req.Method, req.URL.Path, maxBody)
			return res, nil
		}
		resBody = b
	}
	c, _ := gateway() // Watch built it
	w.checked.Add(1)
	problems := c.Check(req, reqBody, res, resBody)
	if len(problems) > 0 {
		w.failed.Add(1)
	}
	for _, p := range problems {
		t.Errorf("openapi: %s %s → %d: %s", req.Method, req.URL.Path, res.StatusCode, p)
	}
	return res, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
