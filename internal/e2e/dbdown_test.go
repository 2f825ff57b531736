package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

const (
	outageEvent    = "outage"
	outageShowtime = 71
	// outageProxyTimeout is gateway.proxy_timeout's default (config.go):
	// the booking core's own bound (5 s) must answer before it.
	outageProxyTimeout = 10 * time.Second
)

// outageAnswer is what one request got while the database was out.
type outageAnswer struct {
	via, route string
	code       int
	retryAfter string
	errCode    string
	took       time.Duration
	err        error
}

func (a outageAnswer) String() string {
	if a.err != nil {
		return fmt.Sprintf("%s %s: %v after %s", a.via, a.route, a.err, a.took.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s %s: %d %s (Retry-After %q) in %s", a.via, a.route, a.code, a.errCode, a.retryAfter, a.took.Round(time.Millisecond))
}

// A database in recovery, or out in any other way, is a 503 with
// Retry-After, never a 500, from the booking core's own API and through the
// gateway's proxy alike: connections refused (the server stopped), a server
// in recovery (57P03), a backend terminated by an operator (57P01) or
// crashed mid-statement (then crash recovery), and a server that stops
// answering (SIGSTOP): that one is answered by the booking core's own 5 s
// bound, before the gateway's proxy timeout (10 s, the default). The sale
// goes on once the database is back.
func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.PrivatePostgres(t, "outage", true)
	s := stack.Start(t, stack.Options{
		DatabaseURL:  pg.URL("outage"),
		ProxyTimeout: outageProxyTimeout.String(),
		Events: fmt.Sprintf(`  - id: %q
    name: "Outage"
    mode: "passthrough"
    showtimes:
      - {id: %d, title: "Outage 19:00", starts_at: "2026-12-01T19:00:00Z", rows: 10, seats_per_row: 10, price_cents: 1000}
`, outageEvent, outageShowtime),
	})
	fan := &apiFan{t: t, base: s.Gateway, event: outageEvent}
	fan.join()
	fan.waitAdmitted()

	hc := &http.Client{Timeout: 3 * outageProxyTimeout}
	seatsPath := fmt.Sprintf("/api/v1/booking/showtimes/%d/seats", outageShowtime)
	holdsPath := fmt.Sprintf("/api/v1/booking/showtimes/%d/holds", outageShowtime)
	ask := func(via, base, route, seat string) outageAnswer {
		a := outageAnswer{via: via, route: route}
		method, path, body := http.MethodGet, seatsPath, any(nil)
		if route == "hold" {
			method, path, body = http.MethodPost, holdsPath, map[string]any{"seats": []string{seat}}
		}
		start := time.Now()
		code, hdr, raw, err := sendJSON(ctx, hc, base, method, path, fan.pass, nil, body)
		a.took, a.code, a.err = time.Since(start), code, err
		if err == nil {
			a.retryAfter = hdr.Get("Retry-After")
			var out struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(raw, &out)
			a.errCode = out.Error
		}
		return a
	}
	paths := []struct{ via, base string }{{"booking", s.Booking}, {"gateway", s.Gateway}}
	// all asks the seat map and a hold through both ways at once.
	all := func() []outageAnswer {
		var mu sync.Mutex
		var out []outageAnswer
		var wg sync.WaitGroup
		for _, p := range paths {
			for _, route := range []string{"seats", "hold"} {
				wg.Go(func() {
					a := ask(p.via, p.base, route, "J1")
					mu.Lock()
					out = append(out, a)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		return out
	}
	check := func(t *testing.T, fault string, as ...outageAnswer) {
		t.Helper()
		for _, a := range as {
			if a.err != nil || a.code != http.StatusServiceUnavailable || a.errCode != "unavailable" || a.retryAfter == "" {
				t.Errorf("%s: %v; want 503 unavailable with Retry-After", fault, a)
			}
			if a.took >= outageProxyTimeout {
				t.Errorf("%s: %v; want an answer before the gateway's proxy timeout (%s)", fault, a, outageProxyTimeout)
			}
		}
	}
	summary := func(fault string, as []outageAnswer, back time.Duration) {
		words := make([]string, len(as))
		for i, a := range as {
			words[i] = a.String()
		}
		t.Logf("SUMMARY %s: %s; serving again %s after the fault ended", fault, strings.Join(words, "; "), back.Round(time.Millisecond))
	}
	// serving waits until a seat map comes back through the gateway.
	serving := func(t *testing.T) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < 30*time.Second {
			if a := ask("gateway", s.Gateway, "seats", ""); a.err == nil && a.code == http.StatusOK {
				return time.Since(start)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("the booking API does not serve 30 s after the database came back:\n%s", s.Log("booking"))
		return 0
	}
	// blocked sends a hold of seat A1 through base while the test holds
	// A1's row lock, hands the pid of the backend serving it to fault, and
	// returns the hold's answer.
	blocked := func(t *testing.T, via, base string, fault func(pid int)) outageAnswer {
		t.Helper()
		locker := connectWhenReady(t, s.DBURL)
		defer locker.Close(context.Background())
		// The watcher looks for the hold's wait on a connection of its own:
		// inside the locker's transaction, pg_stat_activity is a snapshot
		// taken at its first read and never shows a wait that began after
		// it (the hold then only ran into its statement timeout).
		watcher := connectWhenReady(t, s.DBURL)
		defer watcher.Close(context.Background())
		if _, err := locker.Exec(ctx, fmt.Sprintf("BEGIN; SELECT 1 FROM seats WHERE showtime_id = %d AND seat_code = 'A1' FOR UPDATE", outageShowtime)); err != nil {
			t.Fatal(err)
		}
		answer := make(chan outageAnswer, 1)
		go func() { answer <- ask(via, base, "hold", "A1") }()
		var pid int
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			err := watcher.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			                               WHERE datname = current_database() AND wait_event_type = 'Lock' LIMIT 1`).Scan(&pid)
			if err == nil {
				break
			}
			select {
			case a := <-answer:
				t.Fatalf("the hold through the %s answered before it waited on the seat's lock: %v\n%s", via, a, s.Log("booking"))
			default:
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("the hold through the %s neither waited on the seat's lock nor answered in 30s:\n%s", via, s.Log("booking"))
			}
		}
		fault(pid)
		return <-answer
	}

	// blockedOnEveryPath is blocked through each path in turn, the sale
	// serving again before each.
	blockedOnEveryPath := func(t *testing.T, fault func(pid int)) []outageAnswer {
		var as []outageAnswer
		for _, p := range paths {
			serving(t)
			as = append(as, blocked(t, p.via, p.base, fault))
		}
		return as
	}

	t.Run("refused", func(t *testing.T) {
		serving(t)
		pg.Stop()
		as := all()
		if err := pg.Start(ctx); err != nil {
			t.Fatal(err)
		}
		check(t, "server stopped", as...)
		summary("refused", as, serving(t))
	})

	t.Run("in recovery", func(t *testing.T) {
		serving(t)
		pg.Stop()
		if err := pg.StartInRecovery(ctx); err != nil {
			t.Fatal(err)
		}
		as := all()
		pg.Stop()
		if err := pg.Start(ctx); err != nil {
			t.Fatal(err)
		}
		check(t, "in recovery (57P03)", as...)
		if !strings.Contains(s.Log("booking"), "57P03") {
			t.Errorf("the booking core's log names no 57P03: the fault was not the one under test")
		}
		summary("in recovery", as, serving(t))
	})

	t.Run("terminated", func(t *testing.T) {
		as := blockedOnEveryPath(t, func(pid int) {
			if _, err := adminConn(t, pg).Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
		})
		check(t, "backend terminated (57P01)", as...)
		summary("terminated", as, serving(t))
	})

	t.Run("backend crashed", func(t *testing.T) {
		as := blockedOnEveryPath(t, func(pid int) {
			// The postmaster then ends every backend and recovers.
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		})
		check(t, "backend crashed", as...)
		summary("backend crashed", as, serving(t))
	})

	t.Run("stops answering", func(t *testing.T) {
		serving(t)
		if err := pg.Pause(); err != nil {
			t.Fatal(err)
		}
		as := all()
		if err := pg.Resume(); err != nil {
			t.Fatal(err)
		}
		check(t, "server stopped answering (SIGSTOP)", as...)
		summary("stops answering", as, serving(t))
	})

	// The sale goes on.
	serving(t)
	if a := ask("gateway", s.Gateway, "hold", "B2"); a.err != nil || a.code != http.StatusCreated {
		t.Fatalf("hold after the outages: %v; want 201", a)
	}
}

// adminConn is a connection to pg's maintenance database, closed with the test.
func adminConn(t *testing.T, pg *localsvc.Postgres) *pgx.Conn {
	t.Helper()
	c := connectWhenReady(t, pg.URL("postgres"))
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// connectWhenReady is the test's own connection to url (the caller closes
// it), retried for 30 s: after a fault the server may still be starting or
// recovering (57P03) when the booking core, with a pooled connection, is
// serving again.
func connectWhenReady(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		c, err := pgx.Connect(context.Background(), url)
		if err == nil {
			return c
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("connect to the database 30 s after the fault: %v", err)
		}
	}
}
