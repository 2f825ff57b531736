package e2e_test

// The second round of TestCheating (DESIGN.md, "Fair play, second round"
// and the lottery bullets of "Transparency"), on the same stack: a sale
// with a pre-queue where an insider reads the seed from Redis during the
// pre-queue and grinds tickets, and a bot that leaves and rejoins after an
// operator postpones opens_at past the draw. docs/RELIABILITY.md, section
// 7, has the rows.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

const drawEvent = "draw"

// drawEventYAML is the second round's sale: a pre-queue open since long
// ago, an opening far off (the test brings it forward), paused so that the
// line stands still until the test lets it in; a place for every fan.
var drawEventYAML = fmt.Sprintf(`  - id: %q
    name: "A drawn sale"
    mode: "paused"
    prequeue_opens_at: "2026-01-01T00:00:00Z"
    opens_at: "2031-01-01T00:00:00Z"
    admission: {admit_per_second: 500, max_active: 2000, abandon_after: "2m"}
    showtimes:
      - {id: 19, title: "Drawn 19:00", starts_at: "2026-12-01T19:00:00Z", rows: 10, seats_per_row: 30, price_cents: 1000}
`, drawEvent)

func secondRound(t *testing.T, s *stack.Stack, hc *http.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tl := newTally()
	fan := func(ip string) *player { return &player{t: t, s: s, hc: hc, tally: tl, ip: ip} }
	line := queue.NewStore(s.RDB, []byte(stack.TicketSecret))
	idOf := func(ticket string) string {
		id, err := line.TicketID(drawEvent, ticket)
		if err != nil {
			t.Fatalf("ticket id: %v", err)
		}
		return id
	}
	joinAll := func(prefix string, n int) []string {
		out := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := fan(fmt.Sprintf("%s.%d.%d", prefix, i/250, i%250+1))
				code, _, body := p.call(ctx, "join", http.MethodPost, "/api/v1/events/"+drawEvent+"/tickets", nil, nil)
				if code != http.StatusCreated {
					t.Errorf("pre-queue join: %d %v", code, body)
					return
				}
				out[i], _ = body["ticket"].(string)
			}()
		}
		wg.Wait()
		return out
	}

	honest := joinAll("10.20", 150)
	// The insider reads the seed from Redis (or its AOF, or a backup) while
	// the pre-queue runs, joins 300 times, keeps the 30 tickets whose HMAC
	// under the seed is lowest (the draw of the first round) and lets the
	// rest go.
	seed := queuetest.Of(t, s.RDB, drawEvent).Seed()
	if len(seed) != 32 {
		t.Fatalf("the insider reads the seed: %x", seed)
	}
	ground := joinAll("10.30", 300)
	hm := func(key []byte, id string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id))
		return m.Sum(nil)
	}
	sort.Slice(ground, func(a, b int) bool {
		return bytes.Compare(hm(seed, idOf(ground[a])), hm(seed, idOf(ground[b]))) < 0
	})
	kept := ground[:30]
	for _, tk := range ground[30:] {
		if code, _, _ := fan("10.30.9.9").call(ctx, "leave", http.MethodDelete, "/api/v1/events/"+drawEvent+"/tickets/"+tk, nil, nil); code != http.StatusNoContent {
			t.Errorf("insider's leave: %d", code)
		}
	}

	// The operator brings the opening forward: the entries freeze, the
	// draw is made and published.
	opens := time.Now().Add(2 * time.Second).UTC()
	setOpening(t, s, "2031-01-01T00:00:00Z", opens.Format(time.RFC3339Nano))
	var lot map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, _, lot = fan("10.40.0.1").call(ctx, "lottery", http.MethodGet, "/api/v1/events/"+drawEvent+"/lottery", nil, nil)
		if lot["seed"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lottery is not drawn 30 s after its opening: %v", lot)
		}
	}
	entries := num(lot["entries"])
	rankOf := func(tk string) float64 {
		code, _, d := fan("10.40.0.2").call(ctx, "draw", http.MethodGet, "/api/v1/events/"+drawEvent+"/lottery/"+tk, nil, nil)
		if code != http.StatusOK {
			t.Fatalf("a fan's draw: %d %v", code, d)
		}
		return num(d["rank"]) / entries
	}
	mean := func(tks []string) float64 {
		var sum float64
		for _, tk := range tks {
			sum += rankOf(tk)
		}
		return sum / float64(len(tks))
	}
	insider, fair := mean(kept), mean(honest)
	// Uniform ranks have a mean of 0.5; the mean of 30 has a standard
	// deviation of 0.053, so 0.3 is almost four of them away. With the
	// seed alone as the key, the kept tickets sit near 0.05.
	if insider < 0.3 {
		t.Errorf("the insider's kept tickets: mean rank %.3f of the entries; want about 0.5 (honest fans: %.3f)", insider, fair)
	}

	// The operator postpones the opening after the draw: ignored. A bot
	// leaves and rejoins, hoping for a lottery place it can compute: every
	// rejoin is FIFO behind every entry, in no lottery.
	setOpening(t, s, opens.Format(time.RFC3339Nano), "2032-01-01T00:00:00Z")
	mustWait(t, "the reload", 15*time.Second, func() bool {
		return strings.Count(s.Log("admitter"), "draw times changed") >= 2
	})
	time.Sleep(time.Second) // a tick after the reload
	waiting := len(honest) + len(kept)
	bot := fan("10.50.0.1")
	var ticket string
	for i := range 4 {
		if ticket != "" {
			bot.call(ctx, "leave", http.MethodDelete, "/api/v1/events/"+drawEvent+"/tickets/"+ticket, nil, nil)
		}
		code, _, body := bot.call(ctx, "join", http.MethodPost, "/api/v1/events/"+drawEvent+"/tickets", nil, nil)
		if code != http.StatusCreated {
			t.Fatalf("bot's rejoin %d: %d %v", i, code, body)
		}
		ticket, _ = body["ticket"].(string)
		if pos := num(body["position"]); int(pos) != waiting+1 {
			t.Errorf("bot's rejoin %d after the draw at place %v; want %d, behind the %d entries", i, pos, waiting+1, waiting)
		}
		if code, _, d := bot.call(ctx, "draw", http.MethodGet, "/api/v1/events/"+drawEvent+"/lottery/"+ticket, nil, nil); code != http.StatusNotFound || d["error"] != "not_in_lottery" {
			t.Errorf("bot's rejoin %d: its draw %d %v; want 404 not_in_lottery", i, code, d)
		}
	}
	_, _, ev := bot.call(ctx, "event", http.MethodGet, "/api/v1/events/"+drawEvent, nil, nil)
	if at, _ := time.Parse(time.RFC3339, fmt.Sprint(ev["opensAt"])); at.Unix() != opens.Unix() {
		t.Errorf("opensAt %v after the postponement; want the frozen %v", ev["opensAt"], opens)
	}

	// Let the line in: the entries in the drawn order, then the bot.
	s.EditConfig(t, func(c string) string {
		return strings.Replace(c, "name: \"A drawn sale\"\n    mode: \"paused\"", "name: \"A drawn sale\"\n    mode: \"queue\"", 1)
	})
	mustWait(t, "the line let in", 30*time.Second, func() bool {
		return queuetest.Of(t, s.RDB, drawEvent).WaitingCount() == 0
	})
	code, _, rep := bot.call(ctx, "report", http.MethodGet, "/api/v1/events/"+drawEvent+"/report", nil, nil)
	if code != http.StatusOK || num(rep["fifoInversions"]) != 0 || int(num(rep["admitted"])) != waiting+1 {
		t.Errorf("report: %d fifoInversions %v admitted %v; want 0 and %d", code, rep["fifoInversions"], rep["admitted"], waiting+1)
	}
	if n := tl.status5xx(); n > 0 {
		t.Errorf("%d answers were 5xx", n)
	}
	t.Logf("second round: the insider's kept tickets rank at %.3f of the entries on average, honest fans at %.3f; the bot rejoined 4 times, each FIFO", insider, fair)
}

// setOpening moves the draw event's opens_at in the stack's config.
func setOpening(t *testing.T, s *stack.Stack, from, to string) {
	t.Helper()
	s.EditConfig(t, func(c string) string {
		out := strings.Replace(c, fmt.Sprintf("opens_at: %q", from), fmt.Sprintf("opens_at: %q", to), 1)
		if out == c {
			t.Fatalf("the config has no opens_at %q", from)
		}
		return out
	})
}

// mustWait waits for ok, or fails the test.
func mustWait(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	if _, done := waitFor(within, ok); !done {
		t.Fatalf("timed out waiting for %s", what)
	}
}
