package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/proof"
)

// TestMain doubles as the command: with rehearseMainEnv set, the test
// binary is rehearse itself (main, its flags and its exit status), so the
// tests below run the real command against their rooms.
func TestMain(m *testing.M) {
	if os.Getenv(rehearseMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const rehearseMainEnv = "WAITROOM_TEST_REHEARSE_MAIN"

// rehearse runs the command with args and returns its exit status and
// what it wrote.
func rehearse(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), rehearseMainEnv+"=1", "WAITROOM_ADMIN_TOKEN=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// fakeRoom is a room small enough to script: one open event, "premiere",
// whose line asks every new fan a proof of work (8 bits) and admits one
// fan per tick, first come first served, or (planted) last come first
// served; it can also answer one status poll with a 500. It speaks the
// public API the rehearsal uses and nothing else: no booking (-buy 0).
type fakeRoom struct {
	lifo   bool // the planted bug: the newest fan is let in first
	fail   bool // the third fan's first poll gets a 500
	ranked int  // the rank inversions its report owns up to
	every  time.Duration
	mu     sync.Mutex
	seq    int
	line   []int          // waiting fans' numbers, in join order
	state  map[int]string // waiting | admitted | left
	polled map[int]bool
	from   map[string]int // successful joins per client address
	proofs int            // proofs of work accepted
	joined int
	admits int
}

func startFakeRoom(t *testing.T, r *fakeRoom) string {
	t.Helper()
	r.state, r.polled, r.from = map[int]string{}, map[int]bool{}, map[string]int{}
	srv := httptest.NewServer(r)
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(r.every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				r.admit()
			}
		}
	}()
	t.Cleanup(func() { close(stop); srv.Close() })
	return srv.URL
}

func (r *fakeRoom) admit() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.line) == 0 {
		return
	}
	var n int
	if r.lifo {
		n, r.line = r.line[len(r.line)-1], r.line[:len(r.line)-1]
	} else {
		n, r.line = r.line[0], r.line[1:]
	}
	r.state[n] = "admitted"
	r.admits++
}

func (r *fakeRoom) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	answer := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	const ev = "/api/v1/events/premiere"
	p := req.URL.Path
	switch {
	case req.Method == http.MethodGet && p == ev:
		answer(200, map[string]any{"id": "premiere", "name": "Fake", "state": "open", "waiting": len(r.line), "active": 0,
			"maxActive": 100, "admitPerSecond": 0.8 * float64(time.Second/r.every), "opensAt": nil, "showtimes": []any{}})
	case req.Method == http.MethodGet && p == ev+"/report":
		answer(200, map[string]any{"joined": r.joined, "admitted": r.admits, "fifoInversions": 0, "rankInversions": r.ranked,
			"admittedPerSecond": map[string]any{"mean": 0, "configured": float64(time.Second / r.every)}})
	case req.Method == http.MethodGet && p == "/api/v1/admin/events":
		// The operators' list: the rate configured before an adaptive
		// factor (here 0.8 of it is in force).
		if req.Header.Get("Authorization") != "Bearer "+fakeToken {
			answer(401, map[string]any{"error": "unauthorized"})
			return
		}
		rate := float64(time.Second / r.every)
		answer(200, map[string]any{"events": []any{map[string]any{"id": "premiere", "state": "open", "waiting": len(r.line), "active": 0,
			"admitted": r.admits, "admitPerSecond": 0.8 * rate, "configuredAdmitPerSecond": rate}}})
	case req.Method == http.MethodGet && p == ev+"/lottery":
		answer(404, map[string]any{"error": "no_lottery"})
	case req.Method == http.MethodPost && p == ev+"/tickets":
		h := req.Header.Get("X-Waitroom-Proof")
		challenge, nonce, _ := strings.Cut(h, ":")
		sum := sha256.Sum256([]byte(challenge + ":" + nonce))
		if !strings.HasPrefix(challenge, "fake-") || !proof.Meets(sum[:], 8) {
			answer(428, map[string]any{"error": "proof_required", "challenge": fmt.Sprintf("fake-%d", r.seq), "bits": 8})
			return
		}
		r.proofs++
		r.seq++
		n := r.seq
		r.line = append(r.line, n)
		r.state[n] = "waiting"
		r.joined++
		host, _, _ := net.SplitHostPort(req.RemoteAddr)
		r.from[host]++
		answer(201, map[string]any{"ticket": "t" + strconv.Itoa(n), "status": "waiting", "position": len(r.line),
			"ahead": len(r.line) - 1, "etaSeconds": len(r.line), "pollAfterMs": 20})
	case strings.HasPrefix(p, ev+"/tickets/t"):
		n, err := strconv.Atoi(strings.TrimPrefix(p, ev+"/tickets/t"))
		if err != nil || r.state[n] == "" {
			answer(400, map[string]any{"error": "invalid_ticket"})
			return
		}
		if req.Method == http.MethodDelete {
			r.state[n] = "left"
			w.WriteHeader(204)
			return
		}
		if r.fail && n == 3 && !r.polled[n] {
			r.polled[n] = true
			answer(500, map[string]any{"error": "internal"})
			return
		}
		r.polled[n] = true
		switch r.state[n] {
		case "admitted":
			answer(200, map[string]any{"status": "admitted", "accessToken": "pass-" + strconv.Itoa(n), "expiresAt": time.Now().Add(time.Minute)})
		case "left":
			answer(410, map[string]any{"status": "expired"})
		default:
			pos := 0
			for i, m := range r.line {
				if m == n {
					pos = i + 1
				}
			}
			answer(200, map[string]any{"status": "waiting", "position": pos, "ahead": pos - 1, "etaSeconds": pos, "pollAfterMs": 20})
		}
	case strings.HasPrefix(p, "/api/v1/events/"):
		answer(404, map[string]any{"error": "unknown_event"})
	default:
		answer(404, map[string]any{"error": "not_found"})
	}
}

// summaryFile reads what -out wrote.
func summaryFile(t *testing.T, path string) summary {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return s
}

// 40 fans arrive within a second (one every 25 ms) at a line that lets one
// in every 50 ms: a line of a score forms and drains in about two
// seconds. -duration is only a bound (the rehearsal ends when the last fan
// is done), generous for a crowded machine.
var fakeArgs = []string{"-event", "premiere", "-fans", "40", "-arrival", "burst", "-duration", "30s", "-buy", "0"}

const (
	fakeEvery = 50 * time.Millisecond
	fakeToken = "fake-operators-token-0123456789"
)

// A room that keeps its order: every fan pays its proof of work, joins
// from one of a few loopback addresses (16 fans at most each), is let in
// in order and leaves; rehearse exits 0 and its summary and plot say so.
// It reads the line with the operators' token here (-admin-token).
func TestRehearseAFairRoom(t *testing.T) {
	t.Parallel()
	room := &fakeRoom{every: fakeEvery}
	url := startFakeRoom(t, room)
	dir := t.TempDir()
	out, svg := filepath.Join(dir, "summary.json"), filepath.Join(dir, "plot.svg")
	code, stdout, stderr := rehearse(t, append([]string{"-url", url, "-out", out, "-plot", svg, "-admin-token", fakeToken}, fakeArgs...)...)
	if code != 0 {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	s := summaryFile(t, out)
	room.mu.Lock()
	joined, admitted, proofs, from := room.joined, room.admits, room.proofs, room.from
	room.mu.Unlock()
	if s.Seen.Joined != 40 || joined != 40 || proofs != 40 {
		t.Errorf("fans joined %d, the room counts %d joins and %d proofs; want 40 each", s.Seen.Joined, joined, proofs)
	}
	if s.Seen.Admitted != admitted || s.Seen.Outcomes["admitted, did not buy, left"] != admitted {
		t.Errorf("fans admitted %d (outcomes %v); the room admitted %d", s.Seen.Admitted, s.Seen.Outcomes, admitted)
	}
	if s.FIFO.Inversions != 0 || s.FIFO.Compared < 20 || !s.OK {
		t.Errorf("FIFO %+v, ok %v; want no inversion among at least 20 fans checked", s.FIFO, s.OK)
	}
	if s.Answers.ByStatus["428"] != 40 || s.Answers.Status5xx != 0 {
		t.Errorf("answers %+v; want a 428 per fan and no 5xx", s.Answers)
	}
	if len(from) != 3 {
		t.Errorf("the fans joined from %d addresses %v; want 40 fans over 3 (16 a source address)", len(from), from)
	}
	for a, n := range from {
		if !strings.HasPrefix(a, "127.0.0.") || a == "127.0.0.1" || n > 16 {
			t.Errorf("%d fans joined from %s; want at most 16 from each of 127.0.0.2…", n, a)
		}
	}
	// With the operators' token, the rate configured is the operators'
	// list's (20/s), not the one in force (16/s) the public route shows.
	for _, smp := range s.Samples {
		if smp.Configured != 20 {
			t.Fatalf("sample %+v; want the configured 20/s, read with the operators' token", smp)
		}
	}
	if s.Room == nil || s.Room.Admitted != int64(admitted) {
		t.Errorf("the room's report in the summary: %+v; want %d admitted", s.Room, admitted)
	}
	for _, want := range []string{"rehearsal of premiere", "FIFO", "0 inversions", "result       OK"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the printed summary lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Panels []struct {
			Lines []struct{} `xml:"polyline"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil || len(doc.Panels) != 2 || len(doc.Panels[0].Lines) != 2 || len(doc.Panels[1].Lines) != 2 {
		t.Errorf("plot: %v, %+v; want two panels of two lines", err, doc)
	}
}

// rehearseFails rehearses a sale on room, which must fail it (exit 1), and
// returns the summary file and what rehearse printed.
func rehearseFails(t *testing.T, room *fakeRoom) (summary, string) {
	t.Helper()
	url := startFakeRoom(t, room)
	out := filepath.Join(t.TempDir(), "summary.json")
	code, stdout, stderr := rehearse(t, append([]string{"-url", url, "-out", out}, fakeArgs...)...)
	if code != 1 {
		t.Fatalf("exit %d; want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	return summaryFile(t, out), stdout
}

// The planted bug: a line that lets the newest fan in first. The fans
// see it (an earlier fan still waiting after a later one was let in), and
// rehearse exits 1.
func TestRehearseFindsAFIFOBug(t *testing.T) {
	t.Parallel()
	s, stdout := rehearseFails(t, &fakeRoom{every: fakeEvery, lifo: true})
	if s.FIFO.Inversions < 5 || s.OK {
		t.Errorf("FIFO %+v, ok %v; want the passed-over fans counted (5 at least)", s.FIFO, s.OK)
	}
	t.Logf("the summary:\n%s", stdout)
	if !strings.Contains(stdout, "PROBLEM") || !strings.Contains(stdout, "FIFO inversions") {
		t.Errorf("the summary does not name the problem:\n%s", stdout)
	}
}

// One 500 on a poll is enough to fail the rehearsal (the fan retries and
// carries on).
func TestRehearseFailsOnA5xx(t *testing.T) {
	t.Parallel()
	s, stdout := rehearseFails(t, &fakeRoom{every: fakeEvery, fail: true})
	if s.Answers.ByStatus["500"] != 1 || s.Seen.Admitted != 40 || s.FIFO.Inversions != 0 {
		t.Errorf("answers %v, admitted %d, FIFO %+v; want one 500, every fan let in anyway, in order", s.Answers.ByStatus, s.Seen.Admitted, s.FIFO)
	}
	if !strings.Contains(stdout, "5xx (1 × 500 Internal Server Error)") {
		t.Errorf("the summary does not name the 500:\n%s", stdout)
	}
}

// A room whose own report owns up to rank inversions (pre-queue fans let
// in out of the draw's order) fails the rehearsal, whatever the fans saw.
func TestRehearseFailsOnRankInversions(t *testing.T) {
	t.Parallel()
	s, stdout := rehearseFails(t, &fakeRoom{every: fakeEvery, ranked: 3})
	if s.Room == nil || s.Room.RankInversions != 3 || s.OK {
		t.Errorf("room %+v, ok %v; want its 3 rank inversions and a failed rehearsal", s.Room, s.OK)
	}
	if !strings.Contains(stdout, "PROBLEM") || !strings.Contains(stdout, "3 rank inversions") {
		t.Errorf("the summary does not name the problem:\n%s", stdout)
	}
}

// A room elsewhere is refused before anything is sent to it, unless the
// operator says it is theirs; bad flags are refused too (exit 2).
func TestRehearseRefuses(t *testing.T) {
	// The refusals that name a room on this machine name this listener:
	// rehearse must refuse before it sends anything, so nothing connects
	// to it. (The rooms elsewhere cannot be watched so: their refusal is
	// the flag's own text, which only the check of the flags writes,
	// before the first request.)
	trap, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trap.Close() })
	here := "http://" + trap.Addr().String()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a room elsewhere", []string{"-url", "http://192.0.2.1:8080", "-event", "premiere"}, "-i-own-this-room"},
		{"a name is not loopback", []string{"-url", "https://tickets.example.com", "-event", "premiere"}, "is not on this machine"},
		{"no event", []string{"-url", here}, "-event"},
		{"bad arrival", []string{"-url", here, "-event", "e", "-arrival", "trickle"}, "burst or ramp"},
		{"bad buy", []string{"-url", here, "-event", "e", "-buy", "2"}, "-buy 2"},
		{"bad duration", []string{"-url", here, "-event", "e", "-duration", "-1s"}, "-duration"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := rehearse(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) || stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want 2 and %q", code, stderr, stdout, tt.want)
			}
			if n := connectionsTo(t, trap); n != 0 {
				t.Errorf("%d connections to the room before the refusal; want nothing sent", n)
			}
		})
	}
	// With the flag, a room elsewhere is rehearsed: the refusal is the
	// flag's, not a check of the network.
	if _, err := parseFlags([]string{"-url", "http://192.0.2.1:8080", "-event", "premiere", "-i-own-this-room"}, &bytes.Buffer{}); err != nil {
		t.Errorf("-i-own-this-room: %v; want the room accepted", err)
	}
	// An unknown event is named (exit 2) after one look at the room.
	url := startFakeRoom(t, &fakeRoom{every: time.Second})
	if code, _, stderr := rehearse(t, "-url", url, "-event", "nope", "-fans", "1"); code != 2 || !strings.Contains(stderr, `no event "nope"`) {
		t.Errorf("unknown event: exit %d, %q; want 2, naming it", code, stderr)
	}
	// So is an operators' token the room refuses.
	if code, _, stderr := rehearse(t, "-url", url, "-event", "premiere", "-fans", "1", "-admin-token", "wrong"); code != 2 || !strings.Contains(stderr, "-admin-token") {
		t.Errorf("a wrong token: exit %d, %q; want 2, naming -admin-token", code, stderr)
	}
}

// connectionsTo counts the connections made to l and not accepted yet,
// without waiting on a clock: it connects once itself and accepts until
// its own connection comes out (a listener's backlog is first come, first
// served), so every connection made before the call is counted.
func connectionsTo(t *testing.T, l net.Listener) int {
	t.Helper()
	mark, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer mark.Close()
	for n := 0; ; n++ {
		conn, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		ours := conn.RemoteAddr().String() == mark.LocalAddr().String()
		conn.Close()
		if ours {
			return n
		}
	}
}
