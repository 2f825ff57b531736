package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/proof"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/stack"
)

// The third round of TestCheating, the join's part (DESIGN.md, "Fair play,
// third round": a wrong code costs its proof), on the same stack: a sale
// that asks a proof of work and an access code, a bot that guesses codes
// from an address per guess, and a fan with the code. docs/RELIABILITY.md,
// section 7, has the rows.

const guessEvent = "guess"

// guessBits is the guess sale's proof: 2^12 hashes on average, a few
// milliseconds for the test, the same price per guess as per place.
const guessBits = 12

// guessEventYAML is the sale the bot guesses at: open, a proof and a code
// for every new place.
var guessEventYAML = fmt.Sprintf(`  - id: %q
    name: "A sale with codes"
    admission: {admit_per_second: 100, max_active: 100, join_proof_bits: %d, codes: "required"}
    showtimes:
      - {id: 29, title: "Codes 19:00", starts_at: "2026-12-01T19:00:00Z", rows: 2, seats_per_row: 10, price_cents: 1000}
`, guessEvent, guessBits)

// codeGuessing: a bot without a proof learns nothing of a code (428
// whatever it sends); with one proof it gets one guess judged, and every
// other guess with that proof is 428 with a fresh challenge, counted
// reused; paying a fresh proof per guess is the only way to guess. None
// of its guesses makes a place or spends a use; the fan with the code and
// a proof gets its place.
func codeGuessing(t *testing.T, s *stack.Stack, hc *http.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tl := newTally()
	// The operators' codes, as the API adds them (hashed under the
	// gateway's key, auth.ticket_secret).
	codes := presale.New(rdb.New(s.RDB), queue.NewStore(s.RDB, []byte(stack.TicketSecret)), []byte(stack.TicketSecret), "e2e")
	if err := codes.AddCodes(ctx, guessEvent, []string{"FANCLUB-2026"}, 1); err != nil {
		t.Fatal(err)
	}
	// The bot: an address per guess, so the per-address join limit is not
	// what stops it.
	addr := 0
	bot := func() *player {
		addr++
		return &player{t: t, s: s, hc: hc, tally: tl, ip: fmt.Sprintf("10.60.%d.%d", addr/250, addr%250+1)}
	}
	join := func(p *player, proofHeader, code string) (int, map[string]any) {
		hdr := map[string]string{"X-Waitroom-Code": code}
		if proofHeader != "" {
			hdr["X-Waitroom-Proof"] = proofHeader
		}
		c, _, body := p.call(ctx, "join", http.MethodPost, "/api/v1/events/"+guessEvent+"/tickets", hdr, nil)
		return c, body
	}
	solve := func(body map[string]any) string {
		ch, _ := body["challenge"].(string)
		bits := int(num(body["bits"]))
		if ch == "" || bits != guessBits {
			t.Fatalf("428 without a challenge of %d bits: %v", guessBits, body)
		}
		return ch + ":" + proof.Solve(ch, bits)
	}
	reused := func() float64 {
		return metric(t, s.Gateway, fmt.Sprintf(`waitroom_join_proofs_total{event=%q,result="reused"}`, guessEvent))
	}

	// No proof: 428 for a wrong code and the right one alike.
	var last map[string]any
	for _, code := range []string{"WRONG-0000", "FANCLUB-2026"} {
		c, body := join(bot(), "", code)
		if c != http.StatusPreconditionRequired || body["error"] != "proof_required" {
			t.Fatalf("a guess without a proof: %d %v; want 428 proof_required, the code not judged", c, body)
		}
		last = body
	}
	// One proof, ten guesses from ten addresses: one judged.
	paid := solve(last)
	reusedBefore := reused()
	judged := 0
	for i := range 10 {
		c, body := join(bot(), paid, fmt.Sprintf("WRONG-%04d", i))
		switch {
		case c == http.StatusForbidden && body["error"] == "invalid_code":
			judged++
		case c == http.StatusPreconditionRequired && body["error"] == "proof_required":
			last = body
		default:
			t.Fatalf("guess %d with the one proof: %d %v", i, c, body)
		}
	}
	if judged != 1 {
		t.Fatalf("%d guesses judged for one proof; want 1", judged)
	}
	if n := reused() - reusedBefore; n != 9 {
		t.Errorf("waitroom_join_proofs_total reused grew by %v; want 9", n)
	}
	// A proof per guess: each is judged, each costs its own proof.
	const paying = 10
	began := time.Now()
	for i := range paying {
		paid = solve(last)
		p := bot()
		if c, body := join(p, paid, fmt.Sprintf("PAID-%04d", i)); c != http.StatusForbidden || body["error"] != "invalid_code" {
			t.Fatalf("a paid guess: %d %v; want 403 invalid_code", c, body)
		}
		// The next guess starts where every guess does: a 428.
		c, body := join(p, paid, fmt.Sprintf("PAID-%04d", i))
		if c != http.StatusPreconditionRequired {
			t.Fatalf("a paid guess's proof again: %d %v; want 428", c, body)
		}
		last = body
	}
	perGuess := time.Since(began) / paying
	line := queuetest.Of(t, s.RDB, guessEvent)
	if n := line.Stat("joined"); n != 0 {
		t.Fatalf("%d places after the guesses; want none", n)
	}
	if cc, err := codes.CodeCounts(ctx, guessEvent); err != nil || cc.Used != 0 {
		t.Fatalf("codes used %d (%v) after the guesses; want 0", cc.Used, err)
	}

	// The fan with the code pays one proof and gets its place.
	fan := &player{t: t, s: s, hc: hc, tally: tl, ip: "10.61.0.1"}
	_, body := join(fan, "", "fanclub 2026")
	if c, body := join(fan, solve(body), "fanclub 2026"); c != http.StatusCreated {
		t.Fatalf("the fan with the code: %d %v; want 201", c, body)
	}
	if cc, _ := codes.CodeCounts(ctx, guessEvent); cc.Used != 1 {
		t.Fatalf("codes used %d; want the fan's 1", cc.Used)
	}
	if n := tl.status5xx(); n > 0 {
		t.Errorf("%d answers were 5xx", n)
	}
	t.Logf("third round, codes: one proof got 1 of 10 guesses judged; paid guesses cost one proof each (2^%d hashes), %v a guess here including the round trips",
		guessBits, perGuess.Round(time.Millisecond))
}
