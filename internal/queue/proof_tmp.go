package queue

// TEMPORARY until the proof-of-work branch lands (it defines these).

import (
	"errors"
	"strconv"
	"time"
)

var (
	ErrProofSpent   = errors.New("queue: proof already spent")
	ErrProofExpired = errors.New("queue: proof expired")
)

type Proof struct {
	ID        string
	ExpiresAt time.Time
}

func proofsKey(event string, minute int64) string {
	return "wr:{" + event + "}:proofs:" + strconv.FormatInt(minute, 10)
}
