package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/proof"
	"github.com/waitroom/waitroom/internal/rdb"
)

// A wrong code costs its proof (DESIGN.md, "Fair play, third round"), at
// the gateway: a join without a proof is 428 before any code is judged,
// whatever code it brings (no answer tells a good code from a bad one
// without a proof); a guess with a proof is judged once, and its proof
// then buys nothing, not even with a good code (428 with a fresh
// challenge, counted reused); a fresh proof and the good code get a place.
func TestAWrongCodeCostsItsProof(t *testing.T) {
	e := setupProof(t, 0, 8)
	codes := presale.New(rdb.New(e.rdb), e.line, []byte(e.cfg.Auth.TicketSecret), "gateway-test")
	if err := codes.AddCodes(context.Background(), "club", []string{"FANCLUB-2026"}, 5); err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"", "WRONG-CODE", "FANCLUB-2026"} {
		hdr := []string{}
		if code != "" {
			hdr = append(hdr, "X-Waitroom-Code", code)
		}
		e.challengeOf(e.join("club", hdr...)) // 428, whatever the code
	}

	guess := e.solved("club")
	before := e.proofCounts("club")
	if r := e.join("club", "X-Waitroom-Proof", guess, "X-Waitroom-Code", "WRONG-CODE"); r.code != http.StatusForbidden || r.body["error"] != "invalid_code" {
		t.Fatalf("a guess with a proof: %d %s; want 403 invalid_code", r.code, r.raw)
	}
	var fresh string
	for _, code := range []string{"FANCLUB-2026", "WRONG-CODE"} {
		r := e.join("club", "X-Waitroom-Proof", guess, "X-Waitroom-Code", code)
		ch, _ := e.challengeOf(r)
		if ch == guess[:proof.ChallengeLen] {
			t.Fatalf("the 428 handed back the spent challenge")
		}
		fresh = ch
	}
	if n := joined(t, e.rdb, "club"); n != 0 {
		t.Fatalf("%d places after guesses; want none", n)
	}
	if cc, _ := codes.CodeCounts(context.Background(), "club"); cc.Used != 0 {
		t.Fatalf("codes used %d after guesses; want 0", cc.Used)
	}
	if got := diff(e.proofCounts("club"), before); len(got) != 2 || got["ok"] != 1 || got["reused"] != 2 {
		t.Errorf("proofs counted %v; want the guess's ok and its two reuses", got)
	}
	paid := fresh + ":" + proof.Solve(fresh, 8)
	if r := e.join("club", "X-Waitroom-Proof", paid, "X-Waitroom-Code", "fanclub 2026"); r.code != http.StatusCreated {
		t.Fatalf("a fresh proof and the code: %d %s; want 201", r.code, r.raw)
	}
	if cc, _ := codes.CodeCounts(context.Background(), "club"); cc.Used != 1 {
		t.Fatalf("codes used %d; want 1", cc.Used)
	}
}
