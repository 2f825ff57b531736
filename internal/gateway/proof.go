package gateway

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/platform/metrics"
	"github.com/waitroom/waitroom/internal/proof"
)

// proofHeader carries a join's proof of work: <challenge>:<nonce>.
const proofHeader = "X-Waitroom-Proof"

// Results of waitroom_join_proofs_total: a proof spent (ok: a new place
// paid for, or an access code judged and refused, which costs its proof
// as a place does), asked for without a proof (missing: every fan's first
// join of such a sale), a proof that is wrong, forged, another event's,
// stale or too easy (invalid), and a proof spent already (reused).
const (
	proofOK      = "ok"
	proofMissing = "missing"
	proofInvalid = "invalid"
	proofReused  = "reused"
)

var proofResults = []string{proofOK, proofMissing, proofInvalid, proofReused}

var joinProofs = metrics.CounterVec("waitroom_join_proofs_total",
	"Joins for a new place of a sale that asks a proof of work, by what their proof was: ok, missing, invalid, reused.", "event", "result")

// proofOf is the proof of work a new place of ev costs, checked in the
// gateway before any Redis call for the join: a bad proof costs one HMAC and
// one SHA-256, never Redis, and never the network's join budget. It returns
// the proof to spend, or nil and why there is none (nil when ev asks for
// none: join_proof_bits 0, the config in force). A join that resumes a
// place needs none, so what to answer is the line's to say.
func (s *queueAPI) proofOf(c *fiber.Ctx, ev *config.Event) (*line.Proof, error) {
	bits := ev.Admission.JoinProofBits
	if bits <= 0 {
		return nil, nil
	}
	p, err := s.proofs.Verify(ev.ID, c.Get(proofHeader), bits, s.now())
	if err != nil {
		return nil, err
	}
	return &line.Proof{ID: p.ID, ExpiresAt: p.ExpiresAt}, nil
}

// proofRequired counts a join refused for its proof (why: a proof.Err… or
// line.ErrProofSpent/ErrProofExpired) and answers 428 with a fresh
// challenge, in the one error shape plus challenge, bits and expiresAt.
func (s *queueAPI) proofRequired(c *fiber.Ctx, ev *config.Event, why error) error {
	result, msg := proofInvalid, "the proof was not valid for this sale (wrong, expired, or another sale's): solve this new challenge and join again"
	switch {
	case errors.Is(why, proof.ErrMissing):
		result, msg = proofMissing, `this sale asks a proof of work for a new place: find a nonce (decimal digits) such that SHA-256(challenge ":" nonce) begins with bits zero bits, and join again with the header X-Waitroom-Proof: <challenge>:<nonce>`
	case errors.Is(why, line.ErrProofSpent):
		result, msg = proofReused, "that proof bought a place already: solve this new challenge and join again"
	}
	joinProofs.WithLabelValues(ev.ID, result).Inc()
	bits := max(ev.Admission.JoinProofBits, 1)
	ch, err := s.proofs.Issue(ev.ID, bits, s.now())
	if err != nil {
		return err
	}
	noStore(c)
	return &apiError{
		Status: fiber.StatusPreconditionRequired, Code: "proof_required", Message: msg,
		Challenge: ch.Token, Bits: ch.Bits, ExpiresAt: ch.ExpiresAt.UTC().Format(time.RFC3339Nano),
	}
}
