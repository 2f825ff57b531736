package queue

import (
	"crypto/rand"
	"encoding/base64"
	"regexp"
	"strconv"
	"time"

	"github.com/waitroom/waitroom/internal/line"
)

// Tickets are the line's (package line: the format, the codec). The Store
// signs the tickets of the places it makes; here are what its keys and
// scripts make of one.

var (
	b64 = base64.RawURLEncoding.Strict()
	// idPattern is a well-formed ticket id; Active, Extend and Complete
	// check it before they touch Redis.
	idPattern = regexp.MustCompile(`^[0-9a-z]{1,13}\.[A-Za-z0-9_-]{22}$`)
	// jtiPattern is a well-formed return token id (site.go): what the
	// gateway mints, 16 random bytes in base64url.
	jtiPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
)

// slot is the ticket's place in the seen key, as BITFIELD takes it ("#" and
// its sequence number: the slot of u32 number seq).
func slot(t line.Ticket) string {
	var b [1 + 20]byte
	return string(strconv.AppendInt(append(b[:0], '#'), t.Seq(), 10))
}

func newRandom() ([16]byte, error) {
	var r [16]byte
	_, err := rand.Read(r[:])
	return r, err
}

// sign is t signed for event, as the fan is handed it. The store signs
// the tickets of the places it makes (and rebuilds), and checks none: a
// ticket is checked once, where it comes in (the gateway's Codec.Parse),
// and the store's methods take the line.Ticket parsed. A zero Ticket is
// ErrInvalidTicket (known), before any Redis call.
func (s *Store) sign(event string, t line.Ticket) line.Ticket { return s.codec.Sign(event, t) }

// known is ErrInvalidTicket for the zero Ticket (none parsed), else nil.
func known(t line.Ticket) error {
	if t.IsZero() {
		return line.ErrInvalidTicket
	}
	return nil
}

func msToTime(ms int64) time.Time { return time.UnixMilli(ms) }
