package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/waitroom/waitroom/internal/gateway"
	"github.com/waitroom/waitroom/internal/operators"
	"github.com/waitroom/waitroom/internal/pass"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/proof"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// proofYAML: two sales that ask a proof of work (bits 8: 256 hashes, so the
// tests solve at once), one that does not, and one that asks a proof and
// an access code.
const proofYAML = `
auth: {ticket_secret: "gateway-proof-secret-0123456789abcdef"}
gateway: {joins_per_ip_per_minute: %d}
booking: {payment: {secret: "gateway-test-payment-secret-0123456789"}}
events:
  - id: "guarded"
    admission: {admit_per_second: 100, max_active: 100, join_proof_bits: %d}
    showtimes: [{id: 42, title: "T", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "fortress"
    admission: {admit_per_second: 100, max_active: 100, join_proof_bits: 8}
    showtimes: [{id: 43, title: "U", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "open"
    admission: {admit_per_second: 100, max_active: 100}
    showtimes: [{id: 44, title: "V", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
  - id: "club"
    admission: {admit_per_second: 100, max_active: 100, join_proof_bits: 8, codes: "required"}
    showtimes: [{id: 45, title: "W", starts_at: "2036-12-01T19:00:00Z", rows: 2, seats_per_row: 2}]
`

type proofEnv struct {
	*env
	clock *testenv.Clock // the gateway's, which the test moves
	path  string         // the config file, for reloads
}

// setupProof is a gateway over proofYAML with joinsPerIP and "guarded" at
// bits, its config in a file (for reloads) and its clock in the test's hand.
func setupProof(t testing.TB, joinsPerIP, bits int) *proofEnv {
	t.Helper()
	rs, rc := testenv.Redis(t)
	src := fmt.Sprintf(proofYAML, joinsPerIP, bits)
	path, cfg := configFile(t, src)
	// Standing still unless moved: the per-IP window's calendar minute does
	// not turn mid-test.
	clk := testenv.NewClock(time.Now())
	priv := testenv.Ed25519Key(t)
	line := queue.NewStore(rc, []byte(cfg.Auth.TicketSecret)).WithDrawSecret([]byte(cfg.Auth.DrawSecret))
	srv, err := gateway.New(gateway.Options{Config: cfg, ConfigPath: path, Line: line, Operators: operators.New(rdb.New(rc)), Signer: pass.NewSigner(priv), Now: clk.Now,
		Presale: presale.New(rdb.New(rc), line, []byte(cfg.Auth.TicketSecret), "gateway-test").WithDrawSecret([]byte(cfg.Auth.DrawSecret))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return &proofEnv{env: &env{t: t, redis: rs, srv: srv, line: line, rdb: rc, cfg: cfg, priv: priv}, clock: clk, path: path}
}

// challenge asks event for a new place without a proof and returns the
// challenge of its 428.
func (e *proofEnv) challenge(event string) (string, int) {
	e.t.Helper()
	r := e.join(event)
	return e.challengeOf(r)
}

// challengeOf checks that r is the contract's 428 and returns its challenge.
func (e *proofEnv) challengeOf(r resp) (string, int) {
	e.t.Helper()
	if r.code != http.StatusPreconditionRequired || r.body["error"] != "proof_required" {
		e.t.Fatalf("join: %d %s; want 428 proof_required", r.code, r.raw)
	}
	ch, _ := r.body["challenge"].(string)
	bits, _ := r.body["bits"].(float64)
	exp, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r.body["expiresAt"]))
	if len(ch) != proof.ChallengeLen || bits < 1 || err != nil || r.body["message"] == "" {
		e.t.Fatalf("428 body %s: want challenge, bits, expiresAt and message", r.raw)
	}
	if want := e.clock.Now().Add(2 * time.Minute); exp.Sub(want).Abs() > time.Millisecond {
		e.t.Errorf("challenge expires at %v; want 2 minutes from now, %v", exp, want)
	}
	return ch, int(bits)
}

// solved is a fresh challenge of event, solved: the X-Waitroom-Proof value.
func (e *proofEnv) solved(event string) string {
	e.t.Helper()
	ch, bits := e.challenge(event)
	return ch + ":" + proof.Solve(ch, bits)
}

// proofCounts reads waitroom_join_proofs_total of event from /metrics.
func (e *proofEnv) proofCounts(event string) map[string]int {
	e.t.Helper()
	m := e.do(http.MethodGet, "/metrics", nil)
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(m.raw))
	prefix := `waitroom_join_proofs_total{event="` + event + `",result="`
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		result, value, _ := strings.Cut(rest, `"} `)
		n, _ := strconv.ParseFloat(value, 64)
		out[result] = int(n)
	}
	return out
}

func diff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if v-before[k] != 0 {
			out[k] = v - before[k]
		}
	}
	return out
}

func joined(t *testing.T, rdb redis.UniversalClient, event string) int {
	t.Helper()
	return int(queuetest.Of(t, rdb, event).Stat("joined"))
}

// Every refusal of a proof is a 428 with a fresh challenge, counted under
// the right result, and gives no place; a good proof gives one, once.
func TestJoinProofFlows(t *testing.T) {
	e := setupProof(t, 0, 8)
	// Every result of every event is exported from the start.
	for _, ev := range []string{"guarded", "fortress", "open"} {
		if c := e.proofCounts(ev); len(c) != 4 {
			t.Errorf("%s: waitroom_join_proofs_total series %v; want ok, missing, invalid and reused", ev, c)
		}
	}
	good := e.solved("guarded")
	ch := good[:proof.ChallengeLen]
	nonce := good[proof.ChallengeLen+1:]
	wrong := "0"
	for ; ; wrong += "0" {
		s := sha256.Sum256([]byte(ch + ":" + wrong))
		if !proof.Meets(s[:], 8) {
			break
		}
	}
	foreign := e.solved("fortress")
	stale := e.solved("guarded")

	before := e.proofCounts("guarded")
	steps := []struct {
		name    string
		header  string
		advance time.Duration
		want    int
		result  string
	}{
		{"missing", "", 0, http.StatusPreconditionRequired, "missing"},
		{"garbage", "hello", 0, http.StatusPreconditionRequired, "invalid"},
		{"wrong nonce", ch + ":" + wrong, 0, http.StatusPreconditionRequired, "invalid"},
		{"tampered", ch[:10] + string(ch[10]^1) + ch[11:] + ":" + nonce, 0, http.StatusPreconditionRequired, "invalid"},
		{"another event's", foreign, 0, http.StatusPreconditionRequired, "invalid"},
		{"good", good, 0, http.StatusCreated, "ok"},
		{"reused", good, 0, http.StatusPreconditionRequired, "reused"},
		{"stale", stale, 2*time.Minute + time.Millisecond, http.StatusPreconditionRequired, "invalid"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			e.clock.Add(st.advance)
			was := e.proofCounts("guarded")
			places := joined(t, e.rdb, "guarded")
			var r resp
			if st.header == "" {
				r = e.join("guarded")
			} else {
				r = e.join("guarded", "X-Waitroom-Proof", st.header)
			}
			if r.code != st.want {
				t.Fatalf("join: %d %s; want %d", r.code, r.raw, st.want)
			}
			if st.want == http.StatusPreconditionRequired {
				fresh, _ := e.challengeOf(r)
				if strings.HasPrefix(st.header, fresh) {
					t.Error("the 428 handed back the challenge it refused")
				}
				if n := joined(t, e.rdb, "guarded"); n != places {
					t.Errorf("a refused proof gave a place (joined %d → %d)", places, n)
				}
			}
			if got := diff(e.proofCounts("guarded"), was); len(got) != 1 || got[st.result] != 1 {
				t.Errorf("waitroom_join_proofs_total moved %v; want %s +1", got, st.result)
			}
		})
	}
	if got := diff(e.proofCounts("guarded"), before); got["ok"] != 1 || got["reused"] != 1 || got["invalid"] != 5 || got["missing"] != 1 {
		t.Errorf("in all: %v; want ok 1, reused 1, invalid 5, missing 1", got)
	}
	// The 428s themselves: the challenges handed out above were not counted
	// as joins, and the event that asks none never answers 428.
	if r := e.join("open", "X-Waitroom-Proof", good); r.code != http.StatusCreated {
		t.Errorf("a sale without proof of work: %d %s; want 201 whatever the header", r.code, r.raw)
	}
}

// A fan with a live place needs no proof to get it back; a dead ticket is a
// new place and pays like any other.
func TestJoinProofResumeNeedsNone(t *testing.T) {
	e := setupProof(t, 0, 8)
	r := e.join("guarded", "X-Waitroom-Proof", e.solved("guarded"))
	if r.code != http.StatusCreated {
		t.Fatalf("join: %d %s", r.code, r.raw)
	}
	tk := r.body["ticket"].(string)
	before := e.proofCounts("guarded")
	for _, hdr := range [][]string{{"X-Waitroom-Ticket", tk}, {"Cookie", "wr_t_guarded=" + tk}} {
		back := e.join("guarded", hdr...)
		if back.code != http.StatusOK || back.body["ticket"] != tk {
			t.Fatalf("resume by %s: %d %s; want 200 with the same ticket and no proof", hdr[0], back.code, back.raw)
		}
	}
	if got := diff(e.proofCounts("guarded"), before); len(got) != 0 {
		t.Errorf("resuming moved waitroom_join_proofs_total %v; want nothing", got)
	}
	if l := e.do(http.MethodDelete, "/api/v1/events/guarded/tickets/"+tk, nil); l.code != http.StatusNoContent {
		t.Fatalf("leave: %d", l.code)
	}
	e.challengeOf(e.join("guarded", "X-Waitroom-Ticket", tk))
}

// One proof presented by 50 joins at once, through the real handler:
// exactly one 201, and 49 428s counted as reused; Redis holds one place.
func TestJoinProofRace(t *testing.T) {
	e := setupProof(t, 0, 8)
	header := e.solved("guarded")
	before := e.proofCounts("guarded")
	const n = 50
	codes := make([]int, n)
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i], _ = http.NewRequest(http.MethodPost, "/api/v1/events/guarded/tickets", nil)
		reqs[i].Header.Set("X-Waitroom-Proof", header)
	}
	testenv.Race(n, func(i int) {
		res, err := e.srv.App().Test(reqs[i], 10_000)
		if err != nil {
			t.Error(err)
			return
		}
		res.Body.Close()
		codes[i] = res.StatusCode
	})
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[http.StatusCreated] != 1 || count[http.StatusPreconditionRequired] != n-1 {
		t.Fatalf("answers %v; want exactly one 201 and %d 428", count, n-1)
	}
	if got := diff(e.proofCounts("guarded"), before); got["ok"] != 1 || got["reused"] != n-1 || len(got) != 2 {
		t.Errorf("waitroom_join_proofs_total moved %v; want ok 1, reused %d", got, n-1)
	}
	if j, w := joined(t, e.rdb, "guarded"), queuetest.Of(t, e.rdb, "guarded").WaitingCount(); j != 1 || w != 1 {
		t.Errorf("Redis: joined %d, waiting %d; want 1 and 1", j, w)
	}
}

// Proofs and the per-IP limit: a bad proof never reaches Redis and never
// uses the address's budget, nor does a reused one (it is given back); a
// good proof refused by the limit stays good for after it.
func TestJoinProofAndTheIPLimit(t *testing.T) {
	e := setupProof(t, 2, 8)
	first := e.solved("guarded")
	if r := e.join("guarded", "X-Waitroom-Proof", first); r.code != http.StatusCreated {
		t.Fatalf("first join: %d %s", r.code, r.raw)
	}
	for i := range 10 {
		e.challengeOf(e.join("guarded", "X-Waitroom-Proof", "forged:"+strconv.Itoa(i)))
		e.challengeOf(e.join("guarded", "X-Waitroom-Proof", first)) // reused
	}
	second := e.solved("guarded")
	if r := e.join("guarded", "X-Waitroom-Proof", second); r.code != http.StatusCreated {
		t.Fatalf("second join within the limit of 2, after 20 refused proofs: %d %s; want 201", r.code, r.raw)
	}
	third := e.solved("guarded")
	if r := e.join("guarded", "X-Waitroom-Proof", third); r.code != http.StatusTooManyRequests {
		t.Fatalf("third join: %d %s; want 429", r.code, r.raw)
	}
	e.clock.Add(time.Minute) // the next calendar minute: the proof is still good
	if r := e.join("guarded", "X-Waitroom-Proof", third); r.code != http.StatusCreated {
		t.Fatalf("the rate-limited proof a minute later: %d %s; want 201", r.code, r.raw)
	}
}

// A bad proof costs no Redis command at all.
func TestJoinProofRefusedBeforeRedis(t *testing.T) {
	e := setupProof(t, 5, 8)
	e.redis.Kill()
	for _, h := range []string{"", "x", strings.Repeat("A", 63) + ":1"} {
		r := e.join("guarded", "X-Waitroom-Proof", h)
		if r.code != http.StatusPreconditionRequired {
			t.Fatalf("proof %q with Redis gone: %d %s; want 428 (no Redis needed)", h, r.code, r.raw)
		}
	}
}

// join_proof_bits follows the config file: raised, a challenge of the old
// difficulty is refused and the 428 asks the new one; 0 turns it off.
func TestJoinProofFollowsReloads(t *testing.T) {
	e := setupProof(t, 0, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal, 1)
	go e.srv.Watch(ctx, hup)
	old := e.solved("guarded")
	reload := func(bits, want int) resp {
		t.Helper()
		if err := os.WriteFile(e.path, []byte(fmt.Sprintf(proofYAML, 0, bits)), 0o644); err != nil {
			t.Fatal(err)
		}
		hup <- os.Interrupt
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			r := e.join("guarded")
			got := 0
			if r.code == http.StatusPreconditionRequired {
				got = int(r.body["bits"].(float64))
			}
			if got == want || time.Now().After(deadline) {
				if got != want {
					t.Fatalf("after the edit to %d bits: %d %s", bits, r.code, r.raw)
				}
				return r
			}
		}
	}
	reload(10, 10)
	r := e.join("guarded", "X-Waitroom-Proof", old)
	if _, bits := e.challengeOf(r); bits != 10 {
		t.Errorf("a proof of 8 bits once 10 are asked: 428 asks %d bits; want 10", bits)
	}
	reload(0, 0)
	if r := e.join("guarded", "X-Waitroom-Proof", old); r.code != http.StatusCreated {
		t.Errorf("proof of work off: %d %s; want 201", r.code, r.raw)
	}
}

// Without JavaScript nothing can pay a proof of work: the waiting room of
// such a sale says it needs JavaScript instead of offering the join form,
// and a form post anyway (a page loaded before the sale asked one) comes
// back with the same words. A sale without proof keeps its form.
func TestJoinProofWithoutJavaScript(t *testing.T) {
	e := setupProof(t, 0, 8)
	page := e.do(http.MethodGet, "/e/guarded", nil)
	body := string(page.raw)
	if page.code != http.StatusOK || !strings.Contains(body, `id="needs-script"`) || !strings.Contains(body, "Joining this sale needs JavaScript") ||
		strings.Contains(body, `action="/e/guarded/join"`) {
		t.Fatalf("room of a sale with proof of work: %d; want the needs-JavaScript words and no join form:\n%s", page.code, body)
	}
	if open := string(e.do(http.MethodGet, "/e/open", nil).raw); !strings.Contains(open, `action="/e/open/join"`) || strings.Contains(open, `id="needs-script"`) {
		t.Error("a sale without proof of work lost its join form")
	}
	r := e.do(http.MethodPost, "/e/guarded/join", nil)
	if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/e/guarded?e=proof_required" {
		t.Fatalf("form join: %d Location %q; want 303 to /e/guarded?e=proof_required", r.code, r.hdr.Get("Location"))
	}
	ja := string(e.do(http.MethodGet, "/e/guarded?e=proof_required", nil, "Accept-Language", "ja").raw)
	if strings.Count(ja, "JavaScript が必要です") != 1 {
		t.Errorf("the Japanese page says it needs JavaScript %d times; want once", strings.Count(ja, "JavaScript が必要です"))
	}
}

// BenchmarkJoinHandler is a join through the gateway's handler, in process
// (no network, no load generator), on real Redis, from 16 goroutines: a new
// place of the sale without proof of work (off), of the one that asks it,
// with a solved proof each (on), and its two refusals: no proof (missing:
// the 428 that hands out a challenge) and a forged one (invalid). With
// -count the four interleave, so the machine's load falls on all alike.
func BenchmarkJoinHandler(b *testing.B) {
	for _, c := range []struct{ name, event, proof string }{
		{"off", "open", ""}, {"on", "guarded", "solved"}, {"missing", "guarded", ""}, {"invalid", "guarded", "forged"},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := setupProof(b, 0, 8)
			want := http.StatusCreated
			var proofs []string
			switch c.proof {
			case "solved":
				k := proof.NewKeeper([]byte(e.cfg.Auth.TicketSecret))
				for range b.N {
					ch, err := k.Issue(c.event, 8, e.clock.Now())
					if err != nil {
						b.Fatal(err)
					}
					proofs = append(proofs, ch.Token+":"+proof.Solve(ch.Token, 8))
				}
			case "forged":
				want = http.StatusPreconditionRequired
				proofs = []string{strings.Repeat("A", proof.ChallengeLen) + ":12345"}
			default:
				if c.event == "guarded" {
					want = http.StatusPreconditionRequired
				}
			}
			h := e.srv.App().Handler()
			uri := "/api/v1/events/" + c.event + "/tickets"
			var next atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var ctx fasthttp.RequestCtx
				var req fasthttp.Request
				for pb.Next() {
					req.Reset()
					req.Header.SetMethod(http.MethodPost)
					req.SetRequestURI(uri)
					if len(proofs) > 0 {
						req.Header.Set("X-Waitroom-Proof", proofs[int(next.Add(1)-1)%len(proofs)])
					}
					ctx.Init(&req, nil, nil)
					ctx.ResetUserValues() // as the server does between requests
					h(&ctx)
					if got := ctx.Response.StatusCode(); got != want {
						b.Errorf("join: %d %s; want %d", got, ctx.Response.Body(), want)
						return
					}
				}
			})
		})
	}
}
