package booking_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// The health summary: the hold route's p99 and the 5xx share over the last
// 10 s, nothing older, health checks not counted.
func TestHealthSummary(t *testing.T) {
	clock := testenv.NewClock(time.Unix(1_000_000, 0))
	h := booking.NewHealth(nil, nil)
	h.Now = clock.Now
	mux := http.NewServeMux()
	var took time.Duration
	mux.HandleFunc("POST /api/v1/booking/showtimes/{id}/holds", func(w http.ResponseWriter, r *http.Request) {
		clock.Add(took)
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /api/v1/booking/bookings/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	srv := h.Wrap(mux)
	call := func(method, path string) {
		srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
	}
	// An old slow second, then 100 holds: 98 of 10 ms, 2 of 900 ms.
	took = 5 * time.Second
	call("POST", "/api/v1/booking/showtimes/1/holds")
	clock.Add(11 * time.Second)
	for i := range 100 {
		took = 10 * time.Millisecond
		if i >= 98 {
			took = 900 * time.Millisecond
		}
		call("POST", "/api/v1/booking/showtimes/1/holds")
	}
	for range 5 {
		call("GET", "/api/v1/booking/bookings/x")
		call("GET", "/healthz")
	}
	s := h.Summary()
	if s.Holds != 100 || s.Requests != 105 || s.Errors != 5 {
		t.Errorf("summary %+v; want 100 holds, 105 requests, 5 errors", s)
	}
	if s.HoldP99 != 900*time.Millisecond {
		t.Errorf("p99 = %v; want 900ms (2 of 100 that slow)", s.HoldP99)
	}
	clock.Add(11 * time.Second)
	if s := h.Summary(); s.Holds != 0 || s.Requests != 0 || s.HoldP99 != 0 {
		t.Errorf("11 s later: %+v; want nothing", s)
	}
}
