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

// sign is t signed for event, as the fan is handed it.
func (s *Store) sign(event string, t line.Ticket) string { return s.codec.Sign(event, t).String() }

// CheckTicket reports whether ticket is a well-formed, authentic ticket of
// event (ErrInvalidTicket if not). It never touches Redis: the gateway calls
// it to answer 400 invalid_ticket before any Redis work.
func (s *Store) CheckTicket(event, ticket string) error {
	_, err := s.codec.Parse(event, ticket)
	return err
}

// TicketID returns the id (the access JWT's sub) of an authentic ticket of
// event, without touching Redis.
func (s *Store) TicketID(event, ticket string) (string, error) {
	t, err := s.codec.Parse(event, ticket)
	if err != nil {
		return "", err
	}
	return t.ID(), nil
}

func msToTime(ms int64) time.Time { return time.UnixMilli(ms) }

// TicketAccount returns the account an authentic ticket of event belongs
// to ("" = none), without touching Redis.
func (s *Store) TicketAccount(event, ticket string) (string, error) {
	t, err := s.codec.Parse(event, ticket)
	if err != nil {
		return "", err
	}
	return t.Account(), nil
}
