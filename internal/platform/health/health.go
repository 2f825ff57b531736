// Package health is the one shape of every process's probes: GET /healthz
// (the process is up and serving: always 200) and GET /readyz (every store it
// needs answers within a second: 200, else 503 with Retry-After naming the
// stores that did not). Both answer JSON, {"status":"ok"} or
// {"status":"unavailable","unavailable":["redis"]}; a probe never carries an
// error's text (which could hold an address or a password from a URL).
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Check is one store a process needs to serve: its name, and a ping.
type Check struct {
	Name string
	Ping func(context.Context) error
}

// timeout bounds each check of /readyz.
const timeout = time.Second

// Routes adds /healthz and /readyz to mux.
func Routes(mux *http.ServeMux, checks ...Check) {
	mux.HandleFunc("GET /healthz", Live)
	mux.Handle("GET /readyz", Ready(checks...))
}

// Live answers /healthz.
func Live(w http.ResponseWriter, _ *http.Request) {
	write(w, http.StatusOK, body{Status: "ok"})
}

// Ready answers /readyz from checks, run one after another, each within a
// second.
func Ready(checks ...Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var down []string
		for _, c := range checks {
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			if err := c.Ping(ctx); err != nil {
				down = append(down, c.Name)
			}
			cancel()
		}
		if len(down) > 0 {
			w.Header().Set("Retry-After", "2")
			write(w, http.StatusServiceUnavailable, body{Status: "unavailable", Unavailable: down})
			return
		}
		write(w, http.StatusOK, body{Status: "ok"})
	})
}

type body struct {
	Status      string   `json:"status"`
	Unavailable []string `json:"unavailable,omitempty"`
}

func write(w http.ResponseWriter, code int, b body) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(b)
}
