package presale_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/rdb"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// A wrong code costs its proof (DESIGN.md, "Fair play, third round"): the
// line's join judges a code only once the join's proof is spent, in the
// same script, so a bot pays a proof per guess.

// codeSale is a sale with access codes on a line of shards: "FANCLUB" has
// 100 uses, "SPENT" none left.
func codeSale(t *testing.T, shards int) *sale {
	t.Helper()
	s := newSale(t, plan(time.Minute, time.Minute, time.Hour, 1, 1))
	s.set = line.Settings{Mode: line.ModeQueue, AdmitPerSecond: 100, MaxActive: 100, AccessTTL: time.Minute,
		AbandonAfter: time.Minute, Codes: true, Shards: shards}
	if err := s.pre.AddCodes(s.ctx, s.event, []string{"FANCLUB"}, 100); err != nil {
		t.Fatal(err)
	}
	if err := s.pre.AddCodes(s.ctx, s.event, []string{"SPENT"}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.line.JoinWith(s.ctx, s.event, s.set, line.JoinOptions{Code: s.pre.CodeHash(s.event, "SPENT")}); err != nil {
		t.Fatalf("spending SPENT's one use: %v", err)
	}
	return s
}

// guess joins with a proof and a code.
func (s *sale) guess(p line.Proof, code string) (line.JoinResult, error) {
	return s.line.JoinWith(s.ctx, s.event, s.set, line.JoinOptions{Proof: &p, Code: s.pre.CodeHash(s.event, code)})
}

// A join refused invalid_code or code_used spends its proof: the same
// proof then buys nothing, not even with a good code. A join with no code
// judges nothing and spends nothing. Nothing else changes: no place, no
// use of a code.
func TestAWrongCodeSpendsItsProof(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			s := codeSale(t, shards)
			exp := time.Now().Add(90 * time.Second)
			for i, wrong := range []struct {
				code string
				want error
			}{{"NOPE-NOPE", presale.ErrInvalidCode}, {"bad*code", presale.ErrInvalidCode}, {"SPENT", presale.ErrCodeUsed}} {
				p := line.Proof{ID: fmt.Sprintf("guess-%d", i), ExpiresAt: exp}
				if _, err := s.guess(p, wrong.code); !errors.Is(err, wrong.want) {
					t.Fatalf("guess %q: %v; want %v", wrong.code, err, wrong.want)
				}
				if _, err := s.guess(p, "FANCLUB"); !errors.Is(err, line.ErrProofSpent) {
					t.Fatalf("the proof of guess %q again, with a good code: %v; want it spent", wrong.code, err)
				}
				if _, err := s.guess(p, wrong.code); !errors.Is(err, line.ErrProofSpent) {
					t.Fatalf("guess %q again with its proof: %v; want the proof spent, the code not judged", wrong.code, err)
				}
			}
			c, err := s.line.Counts(s.ctx, s.event)
			if err != nil || c.Waiting != 1 {
				t.Fatalf("the line holds %d (%v); want only SPENT's place", c.Waiting, err)
			}
			if cc, _ := s.pre.CodeCounts(s.ctx, s.event); cc.Used != 1 {
				t.Fatalf("codes used %d; want 1 (the guesses spent no use)", cc.Used)
			}
			// No code: nothing judged, the proof kept for the fan's next try.
			p := line.Proof{ID: "forgot-the-code", ExpiresAt: exp}
			if _, err := s.guess(p, ""); !errors.Is(err, presale.ErrCodeRequired) {
				t.Fatalf("a join with no code: %v", err)
			}
			if r, err := s.guess(p, "fanclub"); err != nil || r.State != line.Waiting {
				t.Fatalf("the same proof with the code: %+v, %v; want a place", r, err)
			}
			spent := s.rdb.SCard(s.ctx, rdb.ProofsKey(s.event, exp.UnixMilli()/60_000)).Val()
			if spent != 4 {
				t.Fatalf("%d proofs spent; want 4 (three guesses, one place)", spent)
			}
		})
	}
}

// One proof, many guesses at once (through one gateway or many): exactly
// one is judged, every other is told the proof is spent, and Redis agrees:
// one proof in the spent set, no place, no use of a code.
func TestOneProofOneGuessRaced(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			s := codeSale(t, shards)
			exp := time.Now().Add(90 * time.Second)
			p := line.Proof{ID: "one-proof", ExpiresAt: exp}
			const n = 64
			var (
				mu              sync.Mutex
				judged, refused int
				other           []error
			)
			testenv.Race(n, func(i int) {
				_, err := s.guess(p, fmt.Sprintf("GUESS%04d", i))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, presale.ErrInvalidCode):
					judged++
				case errors.Is(err, line.ErrProofSpent):
					refused++
				default:
					other = append(other, err)
				}
			})
			if judged != 1 || refused != n-1 || len(other) != 0 {
				t.Fatalf("%d guesses judged, %d told the proof is spent, others %v; want 1, %d, none", judged, refused, other, n-1)
			}
			spent, err := s.rdb.SMembers(s.ctx, rdb.ProofsKey(s.event, exp.UnixMilli()/60_000)).Result()
			if err != nil || len(spent) != 1 || spent[0] != p.ID {
				t.Fatalf("spent proofs %q, %v; want just %q", spent, err, p.ID)
			}
			if c, err := s.line.Counts(s.ctx, s.event); err != nil || c.Waiting != 1 {
				t.Fatalf("the line holds %d (%v); want only SPENT's place", c.Waiting, err)
			}
			if cc, _ := s.pre.CodeCounts(s.ctx, s.event); cc.Used != 1 {
				t.Fatalf("codes used %d; want 1", cc.Used)
			}
		})
	}
}
