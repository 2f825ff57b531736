package queue

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"regexp"
	"strconv"
	"time"
)

// A ticket is what the fan holds: base64url(payload ‖ tag), where
//
//	payload = version(1) ‖ uvarint(seq) ‖ random(16) ‖ uvarint(joinedAt ms) ‖ uvarint(joinETA ms + 1, 0 = none)
//	          (version 2: ‖ uvarint(len) ‖ account id, the fan's account, see accounts.go)
//	tag     = HMAC-SHA256(ticket_secret, "waitroom-ticket\x00" ‖ event ‖ "\x00" ‖ payload)[:16]
//
// The 16 random bytes come from crypto/rand (128 bits: unguessable); the
// tag, bound to the event, makes it tamper-evident (a 128-bit truncated
// HMAC-SHA256 tag, as RFC 2104 §5 allows). The facts a ticket carries (its
// sequence number, join time, the ETA told at join) therefore need no Redis
// memory, and a bad ticket is refused without touching Redis.
//
// The ticket id (the Redis member and the access JWT's sub) is
// base36(seq) "." base64url(random): the sequence number in front lets the
// admission script find the ticket's abandon deadline slot from the member
// alone.
type ticket struct {
	seq      int64
	random   [16]byte
	joinedAt int64  // unix ms, Redis TIME at join
	joinETA  *int64 // ms; nil when no ETA was told (paused, before opening)
	// account is the account the place belongs to ("" = none): signed
	// with the rest, so a poll's pass names it without asking Redis.
	account string
}

const (
	ticketVersion        = 1
	ticketVersionAccount = 2 // with an account id
	tagLen               = 16
	// maxAccountLen bounds an account id (package account checks it).
	maxAccountLen = 64
	// maxTicketLen bounds what we decode: 1+10+16+10+10+16 bytes in
	// base64, and 1+64 more with an account.
	maxTicketLen = 176
)

var (
	b64 = base64.RawURLEncoding.Strict()
	// idPattern is a well-formed ticket id; Active, Extend and Complete
	// check it before they touch Redis.
	idPattern = regexp.MustCompile(`^[0-9a-z]{1,13}\.[A-Za-z0-9_-]{22}$`)
	// jtiPattern is a well-formed return token id (site.go): what the
	// gateway mints, 16 random bytes in base64url.
	jtiPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
)

// id is the ticket's id.
func (t ticket) id() string {
	var b [13 + 1 + 22]byte // base36 of an int64, ".", base64 of 16 bytes
	out := strconv.AppendInt(b[:0], t.seq, 36)
	out = append(out, '.')
	return string(b64.AppendEncode(out, t.random[:]))
}

// slot is the ticket's place in the seen key, as BITFIELD takes it ("#" and
// its sequence number: the slot of u32 number seq).
func (t ticket) slot() string {
	var b [1 + 20]byte
	return string(strconv.AppendInt(append(b[:0], '#'), t.seq, 10))
}

func newRandom() ([16]byte, error) {
	var r [16]byte
	_, err := rand.Read(r[:])
	return r, err
}

// tag appends the ticket tag of payload for event to dst.
func (s *Store) tag(dst []byte, event string, payload []byte) []byte {
	// Keyed HMAC states are pooled: hmac.New hashes the key's pads again on
	// every call, and every poll checks a ticket. The state's own buffers
	// take the message and the sum, so a check allocates nothing.
	m, _ := s.macs.Get().(*mac)
	if m == nil {
		m = &mac{h: hmac.New(sha256.New, s.secret)}
	}
	m.h.Reset()
	m.msg = append(append(append(append(m.msg[:0], "waitroom-ticket\x00"...), event...), 0), payload...)
	m.h.Write(m.msg)
	dst = append(dst, m.h.Sum(m.sum[:0])[:tagLen]...)
	s.macs.Put(m)
	return dst
}

// mac is a pooled keyed HMAC state with its buffers (Store.tag).
type mac struct {
	h   hash.Hash
	msg []byte
	sum [sha256.Size]byte
}

// encode signs t for event.
func (s *Store) encode(event string, t ticket) string {
	b := make([]byte, 0, 64+len(t.account))
	if t.account == "" {
		b = append(b, ticketVersion)
	} else {
		b = append(b, ticketVersionAccount)
	}
	b = binary.AppendUvarint(b, uint64(t.seq))
	b = append(b, t.random[:]...)
	b = binary.AppendUvarint(b, uint64(t.joinedAt))
	var eta uint64
	if t.joinETA != nil {
		eta = uint64(*t.joinETA) + 1
	}
	b = binary.AppendUvarint(b, eta)
	if t.account != "" {
		b = binary.AppendUvarint(b, uint64(len(t.account)))
		b = append(b, t.account...)
	}
	b = s.tag(b, event, b)
	return b64.EncodeToString(b)
}

// decode verifies and parses a ticket of event. Any failure is
// ErrInvalidTicket; the tag is checked (in constant time) before the payload
// is parsed, so a forger learns nothing from the parser.
func (s *Store) decode(event, str string) (ticket, error) {
	var t ticket
	if len(str) < 20 || len(str) > maxTicketLen {
		return t, ErrInvalidTicket
	}
	b, err := b64.DecodeString(str)
	if err != nil || len(b) < 1+1+16+1+1+tagLen {
		return t, ErrInvalidTicket
	}
	payload, tag := b[:len(b)-tagLen], b[len(b)-tagLen:]
	var want [tagLen]byte
	if !hmac.Equal(tag, s.tag(want[:0], event, payload)) {
		return t, ErrInvalidTicket
	}
	version := payload[0]
	if version != ticketVersion && version != ticketVersionAccount {
		return t, ErrInvalidTicket
	}
	p := payload[1:]
	seq, n := binary.Uvarint(p)
	if n <= 0 || seq == 0 || seq > 1<<62 || len(p[n:]) < 16 {
		return t, ErrInvalidTicket
	}
	p = p[n:]
	t.seq = int64(seq)
	copy(t.random[:], p[:16])
	p = p[16:]
	joined, n := binary.Uvarint(p)
	if n <= 0 || joined > 1<<62 {
		return t, ErrInvalidTicket
	}
	p = p[n:]
	t.joinedAt = int64(joined)
	eta, n := binary.Uvarint(p)
	if n <= 0 || eta > 1<<62 || (version == ticketVersion && n != len(p)) {
		return t, ErrInvalidTicket
	}
	p = p[n:]
	if eta > 0 {
		v := int64(eta - 1)
		t.joinETA = &v
	}
	if version == ticketVersionAccount {
		l, n := binary.Uvarint(p)
		if n <= 0 || l < 1 || l > maxAccountLen || uint64(len(p)-n) != l {
			return t, ErrInvalidTicket
		}
		t.account = string(p[n:])
	}
	return t, nil
}

// CheckTicket reports whether ticket is a well-formed, authentic ticket of
// event (ErrInvalidTicket if not). It never touches Redis: the gateway calls
// it to answer 400 invalid_ticket before any Redis work.
func (s *Store) CheckTicket(event, ticket string) error {
	_, err := s.decode(event, ticket)
	return err
}

// TicketID returns the id (the access JWT's sub) of an authentic ticket of
// event, without touching Redis.
func (s *Store) TicketID(event, ticket string) (string, error) {
	t, err := s.decode(event, ticket)
	if err != nil {
		return "", err
	}
	return t.id(), nil
}

func msToTime(ms int64) time.Time { return time.UnixMilli(ms) }

// TicketAccount returns the account an authentic ticket of event belongs
// to ("" = none), without touching Redis.
func (s *Store) TicketAccount(event, ticket string) (string, error) {
	t, err := s.decode(event, ticket)
	if err != nil {
		return "", err
	}
	return t.account, nil
}
