package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/waitroom/waitroom/internal/gateway/web"
)

// lineHarness drives the room's SDK (/sdk/waitroom.js, the waiting room's
// line) on its own, in a blank page: a fake fetch answers each request from
// the case's script (a request with nothing scripted never gets an answer,
// so the line waits there for ever), a fake storage keeps the ticket, a fake
// waiter does not wait and records how long it was asked to, and the proof
// is "worked out" at once as <challenge>:42. drive(c) resolves once the
// line published c.until (or after 2 s) and a moment more, with every
// change as "change status next.action [notice]".
const lineHarness = `window.drive = async (c) => {
  const { Waitroom } = await import('/sdk/waitroom.js');
  const now = Date.parse('2030-01-01T00:00:00Z');
  const info = c.info || { req: 'GET /api/v1/events/ev', status: 200, data: { name: 'Ev', state: 'open' } };
  const queues = {};
  for (const a of [info, ...(c.answers || [])]) (queues[a.req] ||= []).push(a);
  const requests = [];
  const fetch = async (path, { method, headers = {} }) => {
    const req = method + ' ' + path;
    const ours = Object.fromEntries(Object.entries(headers).filter(([k]) => k.startsWith('X-Waitroom-')));
    requests.push(Object.keys(ours).length ? req + ' ' + JSON.stringify(ours) : req);
    const a = (queues[req] || []).shift();
    if (!a) return new Promise(() => {});
    if (a.offline) throw new TypeError('Failed to fetch');
    if (a.data && a.data.opensInMs) a.data.opensAt = new Date(now + a.data.opensInMs).toISOString();
    return new Response(a.status === 204 ? null : JSON.stringify(a.data || {}), { status: a.status, headers: a.headers || {} });
  };
  const kept = new Map();
  const storage = { getItem: (k) => kept.get(k) ?? null, setItem: (k, v) => kept.set(k, v), removeItem: (k) => kept.delete(k) };
  if (c.kept) kept.set('waitroom:ticket:ev', JSON.stringify(c.kept));
  const sleeps = [];
  const waiter = {
    sleep: async (ms) => {
      sleeps.push(ms);
      if (c.goneWhileAsleep) kept.delete('waitroom:ticket:ev');
    },
    wake() {},
  };
  const solve = c.noWorker ? null : async () => '42';
  const room = new Waitroom({ event: 'ev', account: c.account, storage, fetch, solve, waiter, now: () => now });
  const trace = [];
  const unfrozen = [];
  const done = new Promise((resolve) => {
    room.on('change', (s, prev) => {
      for (const [name, v] of Object.entries({ snapshot: s, place: s.place, info: s.info, next: s.next, pass: s.pass })) {
        if (v && !Object.isFrozen(v)) unfrozen.push(s.change + ': ' + name);
      }
      if (prev.seq + 1 !== s.seq) unfrozen.push(s.change + ': seq ' + prev.seq + ' then ' + s.seq);
      trace.push([s.change, s.status, s.next && s.next.action, s.notice].filter(Boolean).join(' '));
      if (s.change === c.leaveOn) room.leave();
      if (s.change === c.awayOn && trace.filter((x) => x.startsWith(c.awayOn)).length === 1) room.away();
      if (s.change === c.until) resolve();
    });
  });
  if (c.moved) room.forget();
  if (c.resume) room.resume(c.resume);
  else room.join();
  await Promise.race([done, new Promise((r) => setTimeout(r, 2000))]);
  await new Promise((r) => setTimeout(r, 50));
  const last = room.snapshot;
  const ticketKept = {};
  for (const [k, v] of kept) ticketKept[k.replace('waitroom:', '')] = JSON.parse(v);
  return { trace, requests, sleeps, kept: ticketKept, unfrozen, infoState: last.info ? last.info.state : '', place: last.place, pass: last.pass };
};`

// lineAnswer is one scripted answer of the fake API: to Req ("METHOD path"),
// Status with Data, or no answer at all (Offline: a NetworkError).
type lineAnswer struct {
	Req     string            `json:"req"`
	Status  int               `json:"status,omitempty"`
	Data    map[string]any    `json:"data,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Offline bool              `json:"offline,omitempty"`
}

// lineCase is what drive() takes: the ticket kept before (and whether the
// page forgets it, as after a move, or resumes another), the account token,
// the answers, when to leave or step away, and when to stop watching.
type lineCase struct {
	Moved           bool           `json:"moved,omitempty"`
	Resume          string         `json:"resume,omitempty"`
	Kept            map[string]any `json:"kept,omitempty"`
	Account         string         `json:"account,omitempty"`
	NoWorker        bool           `json:"noWorker,omitempty"`
	GoneWhileAsleep bool           `json:"goneWhileAsleep,omitempty"`
	LeaveOn         string         `json:"leaveOn,omitempty"`
	AwayOn          string         `json:"awayOn,omitempty"`
	Until           string         `json:"until"`
	Info            *lineAnswer    `json:"info,omitempty"`
	Answers         []lineAnswer   `json:"answers"`
}

type lineRun struct {
	Trace     []string       `json:"trace"`
	Requests  []string       `json:"requests"`
	Sleeps    []float64      `json:"sleeps"`
	Kept      map[string]any `json:"kept"`
	Unfrozen  []string       `json:"unfrozen"`
	InfoState string         `json:"infoState"`
	Place     map[string]any `json:"place"`
	Pass      map[string]any `json:"pass"`
}

const (
	lineInfo = "GET /api/v1/events/ev"
	lineJoin = "POST /api/v1/events/ev/tickets"
	linePoll = "GET /api/v1/events/ev/tickets/T1"
)

func waitingAt(req string, status, pos int, pollMs int) lineAnswer {
	return lineAnswer{Req: req, Status: status, Data: map[string]any{
		"ticket": "T1", "status": "waiting", "position": pos, "ahead": pos - 1, "etaSeconds": 60 * pos, "pollAfterMs": pollMs,
	}}
}

func joinAnswer(status int, data map[string]any) lineAnswer {
	return lineAnswer{Req: lineJoin, Status: status, Data: data}
}

// TestBrowserLine is a unit test of the line of the room's SDK
// (/sdk/waitroom.js, which the waiting room runs), with no server: each case
// scripts the gateway's answers and checks every change the line published
// (its status and what it does next), the requests it made, how long it
// waited, what it kept and the pass. Every snapshot must be frozen and
// numbered in order.
func TestBrowserLine(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(lineSite())
	t.Cleanup(srv.Close)
	tab := tab(t, browser(t))
	run(t, tab, 15*time.Second, "open a blank page", chromedp.Navigate(srv.URL), chromedp.Evaluate(lineHarness, nil))

	joined := waitingAt(lineJoin, 201, 5, 1500)
	keptT1 := map[string]any{"ticket:ev": map[string]any{"ticket": "T1", "start": 5.0}}
	// joining: the changes of a join, up to its first request.
	joining := func(more ...string) []string {
		return append([]string{"joining joining", "info joining", "trying joining join"}, more...)
	}
	type lineTest struct {
		name     string
		c        lineCase
		trace    []string
		requests []string
		sleeps   [][2]float64 // each wait's bounds, in ms (jitter)
		kept     map[string]any
		pass     map[string]any
	}
	// joinsAfter: the first join is refused (the line changes by step and
	// waits within wait), the second gets a place.
	joinsAfter := func(name string, refusal lineAnswer, step string, wait [2]float64) lineTest {
		return lineTest{
			name:     name,
			c:        lineCase{Until: "waiting", Answers: []lineAnswer{refusal, joined}},
			trace:    joining(step, "waiting waiting poll"),
			requests: []string{lineInfo, lineJoin, lineJoin, linePoll},
			sleeps:   [][2]float64{wait, {1500, 1500}},
			kept:     keptT1,
		}
	}
	// endsAtJoin: the join's answer (c's one) ends the line with the change
	// last; nothing else is asked, nothing kept.
	endsAtJoin := func(name string, c lineCase, last string) lineTest {
		return lineTest{name: name, c: c, trace: joining(last), requests: []string{lineInfo, lineJoin}, kept: map[string]any{}}
	}
	// endsAtFirstPoll: a place at the join, then the first poll's answer
	// ends the line in status until, leaving kept.
	endsAtFirstPoll := func(name, until string, answer lineAnswer, kept map[string]any) lineTest {
		return lineTest{
			name:     name,
			c:        lineCase{Until: until, Answers: []lineAnswer{joined, answer}},
			trace:    joining("waiting waiting poll", until+" "+until+" stop"),
			requests: []string{lineInfo, lineJoin, linePoll},
			sleeps:   [][2]float64{{1500, 1500}},
			kept:     kept,
		}
	}
	unavailable := lineAnswer{Req: linePoll, Status: 503, Data: map[string]any{"error": "unavailable"}, Headers: map[string]string{"Retry-After": "2"}}
	tests := []lineTest{
		{
			name: "a proof, a place, next, the turn",
			c: lineCase{Account: "ACC", Until: "admitted", Answers: []lineAnswer{
				joinAnswer(428, map[string]any{"error": "proof_required", "challenge": "c1", "bits": 4}),
				joined,
				waitingAt(linePoll, 200, 1, 100),
				{Req: linePoll, Status: 200, Data: map[string]any{"status": "admitted", "accessToken": "A", "expiresAt": "2030-01-01T00:05:00Z"}},
			}},
			trace: joining("checking checking prove", "proved checking join",
				"waiting waiting poll", "waiting next poll", "admitted admitted stop"),
			requests: []string{lineInfo, lineJoin + ` {"X-Waitroom-Account":"ACC"}`, lineJoin + ` {"X-Waitroom-Account":"ACC","X-Waitroom-Proof":"c1:42"}`, linePoll, linePoll},
			sleeps:   [][2]float64{{1500, 1500}, {500, 500}}, // pollAfterMs, then 100 raised to the floor
			kept:     keptT1,
			pass:     map[string]any{"accessToken": "A", "expiresAt": "2030-01-01T00:05:00Z", "returnUrl": nil},
		},
		{
			name: "a kept ticket is resumed",
			c: lineCase{Kept: map[string]any{"ticket": "T1", "start": 40}, Until: "waiting", Answers: []lineAnswer{
				waitingAt(lineJoin, 200, 30, 2000),
			}},
			trace:    joining("waiting waiting poll"),
			requests: []string{lineInfo, lineJoin + ` {"X-Waitroom-Ticket":"T1"}`, linePoll},
			sleeps:   [][2]float64{{2000, 2000}},
			kept:     map[string]any{"ticket:ev": map[string]any{"ticket": "T1", "start": 40.0}},
		},
		{
			name: "a ticket from elsewhere is resumed",
			c: lineCase{Kept: map[string]any{"ticket": "T0", "start": 9}, Resume: "T1", Until: "waiting", Answers: []lineAnswer{
				waitingAt(lineJoin, 200, 3, 2000),
			}},
			trace:    joining("waiting waiting poll"),
			requests: []string{lineInfo, lineJoin + ` {"X-Waitroom-Ticket":"T1"}`, linePoll},
			sleeps:   [][2]float64{{2000, 2000}},
			kept:     map[string]any{"ticket:ev": map[string]any{"ticket": "T1", "start": 3.0}},
		},
		{
			name: "a move of this site drops the kept ticket",
			c: lineCase{Moved: true, Kept: map[string]any{"ticket": "T0", "start": 9}, Until: "waiting", Answers: []lineAnswer{
				waitingAt(lineJoin, 200, 3, 2000),
			}},
			trace:    joining("waiting waiting poll"),
			requests: []string{lineInfo, lineJoin, linePoll},
			sleeps:   [][2]float64{{2000, 2000}},
			kept:     map[string]any{"ticket:ev": map[string]any{"ticket": "T1", "start": 3.0}},
		},
		{
			name:     "an unknown event",
			c:        lineCase{Until: "error", Info: &lineAnswer{Req: lineInfo, Status: 404}},
			trace:    []string{"joining joining", "info joining", "error unknown-event stop"},
			requests: []string{lineInfo},
			kept:     map[string]any{},
		},
		joinsAfter("the room opens in 10 s: it joins then",
			joinAnswer(403, map[string]any{"error": "not_open", "opensInMs": 10000}),
			"not-open not-open join", [2]float64{10000, 13000}),
		joinsAfter("busy: it waits Retry-After, then joins",
			lineAnswer{Req: lineJoin, Status: 429, Data: map[string]any{"error": "rate_limited"}, Headers: map[string]string{"Retry-After": "2"}},
			"busy joining join rate_limited", [2]float64{2000, 2400}),
		endsAtJoin("sold out at the join",
			lineCase{Until: "soldout", Answers: []lineAnswer{joinAnswer(409, map[string]any{"error": "sold_out"})}},
			"soldout soldout stop"),
		endsAtJoin("closed at the join",
			lineCase{Until: "closed", Answers: []lineAnswer{joinAnswer(409, map[string]any{"error": "event_closed"})}},
			"closed closed stop"),
		endsAtJoin("an account is needed: nothing to retry",
			lineCase{Until: "refused", Answers: []lineAnswer{joinAnswer(401, map[string]any{"error": "invalid_account"})}},
			"refused joining stop invalid_account"),
		endsAtJoin("nothing here can pay the proof",
			lineCase{NoWorker: true, Until: "no-worker", Answers: []lineAnswer{joinAnswer(428, map[string]any{"challenge": "c1", "bits": 4})}},
			"no-worker no-worker stop"),
		{
			name: "a kept ticket the gateway refuses is forgotten",
			c: lineCase{Kept: map[string]any{"ticket": "bad", "start": 2}, Until: "waiting", Answers: []lineAnswer{
				joinAnswer(400, map[string]any{"error": "invalid_ticket"}),
				joined,
			}},
			trace:    joining("forget joining join", "waiting waiting poll"),
			requests: []string{lineInfo, lineJoin + ` {"X-Waitroom-Ticket":"bad"}`, lineJoin, linePoll},
			sleeps:   [][2]float64{{1500, 1500}},
			kept:     keptT1,
		},
		{
			name: "no answer twice, then back",
			c: lineCase{Until: "back", Answers: []lineAnswer{
				{Req: lineJoin, Offline: true}, {Req: lineJoin, Offline: true}, joined,
			}},
			trace: joining("offline joining join", "trying joining join",
				"offline joining join", "trying joining join", "waiting waiting poll", "back waiting poll"),
			requests: []string{lineInfo, lineJoin, lineJoin, lineJoin, linePoll},
			sleeps:   [][2]float64{{500, 1000}, {1000, 2000}, {1500, 1500}},
			kept:     keptT1,
		},
		{
			// DESIGN.md, "When parts fail": while Redis is away a poll is 503
			// with Retry-After; the line waits what it was told, keeps its
			// place and polls again.
			name: "polls answered 503 while Redis is away keep the place",
			c:    lineCase{Until: "back", Answers: []lineAnswer{joined, unavailable, unavailable, waitingAt(linePoll, 200, 4, 1500)}},
			trace: joining("waiting waiting poll", "offline waiting poll", "trying waiting poll",
				"offline waiting poll", "trying waiting poll", "waiting waiting poll", "back waiting poll"),
			requests: []string{lineInfo, lineJoin, linePoll, linePoll, linePoll, linePoll},
			sleeps:   [][2]float64{{1500, 1500}, {2000, 2400}, {2000, 2400}, {1500, 1500}},
			kept:     keptT1,
		},
		endsAtFirstPoll("the place expired", "expired",
			lineAnswer{Req: linePoll, Status: 410, Data: map[string]any{"status": "expired"}}, map[string]any{}),
		endsAtFirstPoll("sold out while waiting", "soldout",
			lineAnswer{Req: linePoll, Status: 200, Data: map[string]any{"status": "soldout"}}, keptT1),
		{
			name:     "the fan left in another tab",
			c:        lineCase{GoneWhileAsleep: true, Until: "left", Answers: []lineAnswer{joined}},
			trace:    joining("waiting waiting poll", "left left stop"),
			requests: []string{lineInfo, lineJoin},
			sleeps:   [][2]float64{{1500, 1500}},
			kept:     map[string]any{},
		},
		{
			name:     "leaving gives the place back",
			c:        lineCase{LeaveOn: "waiting", Until: "left", Answers: []lineAnswer{joined, {Req: "DELETE /api/v1/events/ev/tickets/T1", Status: 204}}},
			trace:    joining("waiting waiting poll", "left left stop"),
			requests: []string{lineInfo, lineJoin, "DELETE /api/v1/events/ev/tickets/T1"}, // no poll after
			kept:     map[string]any{},
		},
		{
			name: "stepping away: kept by the room, no polls",
			c: lineCase{Account: "ACC", AwayOn: "waiting", Until: "away", Answers: []lineAnswer{
				joined, {Req: "POST /api/v1/events/ev/tickets/T1/away", Status: 202, Data: map[string]any{"status": "away"}},
			}},
			trace:    joining("waiting waiting poll", "away away stop"),
			requests: []string{lineInfo, lineJoin + ` {"X-Waitroom-Account":"ACC"}`, "POST /api/v1/events/ev/tickets/T1/away " + `{"X-Waitroom-Account":"ACC"}`},
			kept:     keptT1,
		},
		{
			name: "a refused step away keeps following the place",
			c: lineCase{AwayOn: "waiting", Until: "admitted", Answers: []lineAnswer{
				joined, {Req: "POST /api/v1/events/ev/tickets/T1/away", Status: 403, Data: map[string]any{"error": "no_email"}},
				{Req: linePoll, Status: 200, Data: map[string]any{"status": "admitted", "accessToken": "A", "expiresAt": "2030-01-01T00:05:00Z", "returnUrl": "/back"}},
			}},
			trace:    joining("waiting waiting poll", "refused waiting poll no_email", "admitted admitted stop"),
			requests: []string{lineInfo, lineJoin, "POST /api/v1/events/ev/tickets/T1/away", linePoll},
			sleeps:   [][2]float64{{1500, 1500}},
			kept:     keptT1,
			pass:     map[string]any{"accessToken": "A", "expiresAt": "2030-01-01T00:05:00Z", "returnUrl": "/back"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := driveLine(t, tab, tt.c)
			if !reflect.DeepEqual(got.Trace, tt.trace) {
				t.Errorf("changes:\n  got  %s\n  want %s", strings.Join(got.Trace, " | "), strings.Join(tt.trace, " | "))
			}
			if len(got.Requests) != len(tt.requests) || (len(got.Requests) > 0 && !reflect.DeepEqual(got.Requests, tt.requests)) {
				t.Errorf("requests:\n  got  %q\n  want %q", got.Requests, tt.requests)
			}
			if len(got.Sleeps) != len(tt.sleeps) {
				t.Errorf("waits = %v; want %d within %v", got.Sleeps, len(tt.sleeps), tt.sleeps)
			} else {
				for i, ms := range got.Sleeps {
					if ms < tt.sleeps[i][0] || ms > tt.sleeps[i][1] {
						t.Errorf("wait %d = %v ms; want within %v", i, ms, tt.sleeps[i])
					}
				}
			}
			if !reflect.DeepEqual(got.Kept, tt.kept) {
				t.Errorf("kept = %v; want %v", got.Kept, tt.kept)
			}
			if !reflect.DeepEqual(got.Pass, tt.pass) {
				t.Errorf("pass = %v; want %v", got.Pass, tt.pass)
			}
			if len(got.Unfrozen) > 0 {
				t.Errorf("snapshots not immutable or out of order: %v", got.Unfrozen)
			}
		})
	}

	// What the snapshots carry for the page to draw: the place as the line
	// told it (ahead from the position when absent; the progress from the
	// place kept at join), and the event's state once it ended.
	t.Run("the place and the event's state", func(t *testing.T) {
		got := driveLine(t, tab, lineCase{Kept: map[string]any{"ticket": "T1", "start": 40}, Until: "soldout", Answers: []lineAnswer{
			{Req: lineJoin, Status: 200, Data: map[string]any{"ticket": "T1", "status": "waiting", "position": 30, "etaSeconds": 120, "pollAfterMs": 1000, "available": 7}},
			{Req: linePoll, Status: 200, Data: map[string]any{"status": "soldout"}},
		}})
		want := map[string]any{"position": 30.0, "ahead": 29.0, "etaSeconds": 120.0, "available": 7.0, "start": 40.0}
		if !reflect.DeepEqual(got.Place, want) || got.InfoState != "soldout" {
			t.Errorf("place %v, event state %q; want %v, soldout", got.Place, got.InfoState, want)
		}
	})
}

// driveLine runs one case through the harness.
func driveLine(t *testing.T, tab context.Context, c lineCase) lineRun {
	t.Helper()
	spec, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got lineRun
	run(t, tab, 10*time.Second, "drive the line", chromedp.Evaluate(`drive(`+string(spec)+`)`, &got,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	return got
}

// lineSite serves the SDK and a blank page to load it in.
func lineSite() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/sdk/", http.StripPrefix("/sdk/", http.FileServer(http.FS(web.SDK()))))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html lang="en"><title>waitroom.js</title></html>`))
	})
	return mux
}
