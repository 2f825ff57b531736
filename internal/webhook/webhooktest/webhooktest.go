// Package webhooktest is the other end of the room's webhooks, for tests: a
// real HTTP server on loopback that keeps every delivery it takes and
// answers what the test tells it, so that a test checks the deliveries as
// a receiver sees them.
package webhooktest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Delivery is one request the receiver took (answered 2xx). Marshalled,
// it is what a Standard Webhooks library verifies: its headers and its
// body.
type Delivery struct {
	Path string `json:"-"`
	// Headers are the request's webhook-id, webhook-timestamp,
	// webhook-signature and content-type.
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	// Payload is the body read as the room's notification.
	Payload Payload `json:"-"`
}

// Payload is a notification's body (DESIGN.md, Integrations).
type Payload struct {
	Type  string          `json:"type"`
	Event string          `json:"event"`
	At    string          `json:"at"`
	Data  json.RawMessage `json:"data"`
}

// Receiver keeps the deliveries it takes, in the order they came.
type Receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []Delivery
	count  map[string]int
	answer func(path string, n int) int
}

// New starts a receiver, closed when the test ends, that answers each
// request what answer says for its path and the how-manieth request to
// that path it is (1 = the first); nil answers 200 to all.
func New(t testing.TB, answer func(path string, n int) int) *Receiver {
	r := &Receiver{answer: answer, count: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got := Delivery{Path: req.URL.Path, Body: string(b), Headers: map[string]string{}}
		for _, h := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type"} {
			got.Headers[h] = req.Header.Get(h)
		}
		_ = json.Unmarshal(b, &got.Payload)
		r.mu.Lock()
		r.count[req.URL.Path]++
		n := r.count[req.URL.Path]
		code := http.StatusOK
		if r.answer != nil {
			code = r.answer(req.URL.Path, n)
		}
		if code >= 200 && code < 300 {
			r.got = append(r.got, got)
		}
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.Close)
	return r
}

// Answer changes what the receiver answers from the next request on (nil:
// 200 to all).
func (r *Receiver) Answer(answer func(path string, n int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = answer
}

// Delivered is what path took, in order; "" is every path's.
func (r *Receiver) Delivered(path string) []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Delivery
	for _, g := range r.got {
		if path == "" || g.Path == path {
			out = append(out, g)
		}
	}
	return out
}

// Requests is how many requests path got, whatever they were answered.
func (r *Receiver) Requests(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[path]
}
