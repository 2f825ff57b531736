package apicheck_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/waitroom/waitroom/internal/gateway/openapi"
	"github.com/waitroom/waitroom/internal/testsupport/apicheck"
)

// recorder is a test whose Errorf is kept, not failed.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestTransportFailsOnMismatch: a made-up gateway answers as the document
// says and not, and the Transport reports exactly the mismatches.
func TestTransportFailsOnMismatch(t *testing.T) {
	type answer struct {
		status int
		ct     string
		body   string
	}
	var (
		mu   sync.Mutex
		next answer
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a := next
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		if a.ct != "" {
			w.Header().Set("Content-Type", a.ct)
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	defer srv.Close()
	const js = "application/json"
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		answer       answer
		want         string // in the error; "" = none
	}{
		{"an answer as written", "GET", "/api/v1/events", "", answer{200, js, `{"events":[]}`}, ""},
		{"an error as written", "GET", "/api/v1/events/nope", "", answer{404, js, `{"error":"unknown_event","message":"no such event"}`}, ""},
		{"an answer missing a required field", "GET", "/api/v1/events/premiere/tickets/t1", "", answer{200, js, `{"status":"waiting","ahead":3,"etaSeconds":null,"pollAfterMs":1000}`}, "position"},
		{"an answer of the wrong type", "GET", "/api/v1/events", "", answer{200, js, `{"events":[{"id":1}]}`}, "GET /api/v1/events → 200"},
		{"an error code not in the contract", "GET", "/api/v1/events/nope", "", answer{404, js, `{"error":"no_such_thing","message":"x"}`}, "answer"},
		{"a status not listed", "GET", "/api/v1/events/premiere", "", answer{500, js, `{"error":"internal","message":"internal error"}`}, "500"},
		{"a route not in the document answered 404", "GET", "/api/v1/nope", "", answer{404, js, `{"error":"not_found","message":"no such route"}`}, ""},
		{"a route not in the document answered 200", "GET", "/api/v1/nope", "", answer{200, js, `{}`}, "not in the document"},
		{"a bad request refused", "POST", "/api/v1/booking/showtimes/42/holds", `{"seats":"A1"}`, answer{400, js, `{"error":"invalid_request","message":"x"}`}, ""},
		{"a bad request taken", "POST", "/api/v1/booking/showtimes/42/holds", `{"seats":"A1"}`, answer{201, js, `{"holdId":"h","expiresAt":"2026-12-01T10:00:00Z","seats":["A1"],"generalAdmission":{},"amountCents":1}`}, "request the document refuses"},
		{"a text list", "GET", "/api/v1/events/premiere/lottery/entries", "", answer{200, "text/plain; charset=utf-8", "a\nb\n"}, ""},
		{"a list in another media type", "GET", "/api/v1/events/premiere/lottery/entries", "", answer{200, "text/html", "<p>a"}, "content type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			apicheck.Watch(rec, srv.URL)
			mu.Lock()
			next = tc.answer
			mu.Unlock()
			hc := &http.Client{Transport: apicheck.Transport(http.DefaultTransport)}
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.body != "" {
				req.Header.Set("Content-Type", js)
			}
			res, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if string(got) != tc.answer.body || res.StatusCode != tc.answer.status {
				t.Errorf("the caller read %d %q; want the answer as sent, %d %q", res.StatusCode, got, tc.answer.status, tc.answer.body)
			}
			all := strings.Join(rec.errors, "\n")
			switch {
			case tc.want == "" && len(rec.errors) > 0:
				t.Errorf("reported %s; want nothing", all)
			case tc.want != "" && !strings.Contains(all, tc.want):
				t.Errorf("reported %q; want an error naming %q", all, tc.want)
			}
		})
	}
}

// BenchmarkCheck is what validating one exchange costs a test: a join
// and its 201.
func BenchmarkCheck(b *testing.B) {
	c, err := apicheck.New(openapi.JSON())
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/events/premiere/tickets", nil)
	body := []byte(`{"ticket":"t1","status":"waiting","position":12,"ahead":11,"etaSeconds":3,"pollAfterMs":1000}`)
	res := &http.Response{StatusCode: 201, Status: "201 Created", Header: http.Header{"Content-Type": {"application/json"}}}
	for b.Loop() {
		if p := c.Check(req, nil, res, body); len(p) > 0 {
			b.Fatal(p)
		}
	}
}

// TestTransportPassesACutAnswerOn: an answer cut short reaches the caller
// as it came, with its error, and is not validated.
func TestTransportPassesACutAnswerOn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, `{"events":`)
	}))
	defer srv.Close()
	rec := &recorder{TB: t}
	apicheck.Watch(rec, srv.URL)
	hc := &http.Client{Transport: apicheck.Transport(http.DefaultTransport)}
	res, err := hc.Get(srv.URL + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err == nil || string(got) != `{"events":` {
		t.Errorf("the caller read %q, %v; want what came and an error", got, err)
	}
	if len(rec.errors) > 0 {
		t.Errorf("reported %v; want nothing", rec.errors)
	}
}
