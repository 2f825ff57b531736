package e2e_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

const reloadEvents = `  - id: "premiere"
    admission: {admit_per_second: 10, max_active: 100}
    showtimes:
      - {id: 42, title: "T", starts_at: "2026-12-01T19:00:00Z", rows: 2, seats_per_row: 5, price_cents: 1500}
`

var reloadErrors = regexp.MustCompile(`(?m)^waitroom_config_reload_errors_total (\S+)$`)

// eventInfo is the public event route's answer: its status, whether its
// body decoded, and the fields the tests read.
type eventInfo struct {
	code           int
	err            error
	AdmitPerSecond float64 `json:"admitPerSecond"`
	MaxActive      int     `json:"maxActive"`
	State          string  `json:"state"`
	OpensAt        string  `json:"opensAt"`
	Showtimes      []struct {
		ID int64 `json:"id"`
	} `json:"showtimes"`
}

// getEvent reads the public event route of gateway (its base URL).
func getEvent(t *testing.T, gateway, id string) eventInfo {
	t.Helper()
	res, err := http.Get(gateway + "/api/v1/events/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var e eventInfo
	e.err = json.NewDecoder(res.Body).Decode(&e)
	e.code = res.StatusCode
	return e
}

// waitEvent polls gateway's event route until ok holds, and returns how
// long that took.
func waitEvent(t *testing.T, gateway, id string, within time.Duration, ok func(eventInfo) bool) time.Duration {
	t.Helper()
	var last eventInfo
	took, done := waitFor(within, func() bool { last = getEvent(t, gateway, id); return ok(last) })
	if !done {
		t.Fatalf("event %s on %s after %v: %+v", id, gateway, within, last)
	}
	return took
}

// TestLiveReload: an operator's edit of the config file, by rename, is in
// force within one admitter tick (reported by the gateway, which re-reads the
// published settings twice a second); a new event is served by the gateway;
// a broken edit changes nothing.
func TestLiveReload(t *testing.T) {
	t.Parallel()
	s := stack.Start(t, stack.Options{Events: reloadEvents, Tick: "1s"})
	if e := getEvent(t, s.Gateway, "premiere"); e.AdmitPerSecond != 10 || e.MaxActive != 100 {
		t.Fatalf("before the edit: %+v", e)
	}
	s.EditConfig(t, func(c string) string {
		c = strings.Replace(c, "admit_per_second: 10, max_active: 100", "admit_per_second: 25, max_active: 300", 1)
		return c + `  - id: "encore"
    admission: {admit_per_second: 3}
    showtimes:
      - {id: 77, title: "E", starts_at: "2026-12-03T19:00:00Z", rows: 2, seats_per_row: 5, price_cents: 1500}
`
	})
	// One tick (1s) plus the gateway's half-second refresh and the file
	// watcher's debounce.
	took := waitEvent(t, s.Gateway, "premiere", 1700*time.Millisecond, func(e eventInfo) bool { return e.AdmitPerSecond == 25 && e.MaxActive == 300 })
	t.Logf("new rate and cap reported %v after the edit", took)
	waitEvent(t, s.Gateway, "encore", 2*time.Second, func(e eventInfo) bool { return e.code == 200 && e.AdmitPerSecond == 3 })
	res, err := http.Post(s.Gateway+"/api/v1/events/encore/tickets", "application/json", nil)
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("join the new event: %v %v", err, res)
	}
	res.Body.Close()

	s.EditConfig(t, func(c string) string {
		return strings.Replace(c, "admit_per_second: 25", "admit_per_second: -5", 1)
	})
	time.Sleep(2500 * time.Millisecond)
	if e := getEvent(t, s.Gateway, "premiere"); e.AdmitPerSecond != 25 || e.MaxActive != 300 {
		t.Fatalf("after a broken edit: %+v; want the previous 25/s, 300 in force", e)
	}
	for _, p := range []string{"admitter", "gateway"} {
		if !strings.Contains(s.Log(p), "events[0].admission.admit_per_second") {
			t.Errorf("%s did not log the bad key:\n%s", p, s.Log(p))
		}
	}
	for _, base := range []string{s.Admitter, s.Gateway} {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 1<<16)
		for {
			n, err := res.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		res.Body.Close()
		if m := reloadErrors.FindStringSubmatch(b.String()); m == nil || m[1] != "1" {
			t.Errorf("%s/metrics: waitroom_config_reload_errors_total = %v; want 1", base, m)
		}
	}
}
