package line

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"strconv"
	"sync"
)

// A ticket is what the fan holds: base64url(payload ‖ tag), where
//
//	payload = version(1) ‖ uvarint(seq) ‖ random(16) ‖ uvarint(joinedAt ms) ‖ uvarint(joinETA ms + 1, 0 = none)
//	          (version 2: ‖ uvarint(len) ‖ account id, the fan's account)
//	tag     = HMAC-SHA256(ticket_secret, "waitroom-ticket\x00" ‖ event ‖ "\x00" ‖ payload)[:16]
//
// The 16 random bytes come from crypto/rand (128 bits: unguessable); the
// tag, bound to the event, makes it tamper-evident (a 128-bit truncated
// HMAC-SHA256 tag, as RFC 2104 §5 allows). The facts a ticket carries (its
// sequence number, join time, the ETA told at join) therefore need no
// memory in the store, and a bad ticket is refused without asking it.
//
// The ticket id (the store's member and the access JWT's sub) is
// base36(seq) "." base64url(random): the sequence number in front lets the
// admission script find the ticket's abandon deadline slot from the member
// alone.
//
// A ticket is checked once, where it comes in (the gateway: Codec.Parse);
// the line's store takes the Ticket parsed and never checks it again.

const (
	ticketVersion        = 1
	ticketVersionAccount = 2 // with an account id
	tagLen               = 16
	// MaxAccountLen bounds an account id (package account checks it).
	MaxAccountLen = 64
	// maxTicketLen bounds what is decoded: 1+10+16+10+10+16 bytes in
	// base64, and 1+64 more with an account.
	maxTicketLen = 176
)

// b64 is the tickets' and ids' base64 (URL alphabet, no padding, strict).
var b64 = base64.RawURLEncoding.Strict()

// Ticket is a fan's place as its signed ticket carries it. Build one with
// NewTicket (the line's store, which makes places) and sign it with
// Codec.Sign, or read one with Codec.Parse. Its zero value is no ticket.
type Ticket struct {
	seq      int64
	random   [16]byte
	joinedAt int64 // unix ms, the store's clock at join
	eta      int64 // the ETA told at join in ms, plus one; 0 = none told
	// account is the account the place belongs to ("" = none): signed
	// with the rest, so a poll's pass names it without asking the store.
	account string
	signed  string // its signed form ("" until signed)
}

// NewTicket is the ticket of the place with sequence number seq and random
// part random, made at joinedAtMs (unix ms) for account ("" = none), with
// no ETA told and not signed yet.
func NewTicket(seq int64, random [16]byte, joinedAtMs int64, account string) Ticket {
	return Ticket{seq: seq, random: random, joinedAt: joinedAtMs, account: account}
}

// WithJoinETA is t with the ETA told at join (ms), not signed.
func (t Ticket) WithJoinETA(ms int64) Ticket {
	t.eta, t.signed = ms+1, ""
	return t
}

// Seq is the place's sequence number (1 = the event's first).
func (t Ticket) Seq() int64 { return t.seq }

// Random is the ticket's 128 random bits.
func (t Ticket) Random() [16]byte { return t.random }

// JoinedAtMs is when the place was made (unix ms).
func (t Ticket) JoinedAtMs() int64 { return t.joinedAt }

// JoinETA is the ETA told at join in ms; ok is false when none was told
// (paused, before opening).
func (t Ticket) JoinETA() (ms int64, ok bool) { return t.eta - 1, t.eta > 0 }

// Account is the account the place belongs to ("" = none).
func (t Ticket) Account() string { return t.account }

// IsZero reports whether t is no ticket.
func (t Ticket) IsZero() bool { return t.seq == 0 }

// ID is the ticket's id: the store's member and the access JWT's sub.
func (t Ticket) ID() string {
	var b [13 + 1 + 22]byte // base36 of an int64, ".", base64 of 16 bytes
	out := strconv.AppendInt(b[:0], t.seq, 36)
	out = append(out, '.')
	return string(b64.AppendEncode(out, t.random[:]))
}

// String is the signed ticket, what the fan holds: the very string Parse
// read it from (not copied: a caller that parsed a string it does not own
// copies what it keeps past the request), or what Sign made; "" for a
// ticket not signed.
func (t Ticket) String() string { return t.signed }

// Codec signs and checks the tickets of every event with one secret
// (config auth.ticket_secret). It is safe for concurrent use.
type Codec struct {
	secret []byte
	macs   sync.Pool // keyed HMAC-SHA256 states (mac)
}

// NewCodec returns the codec of tickets signed with secret.
func NewCodec(secret []byte) *Codec {
	return &Codec{secret: append([]byte(nil), secret...)}
}

// mac is a pooled keyed HMAC state with its buffers (Codec.tag).
type mac struct {
	h   hash.Hash
	msg []byte
	sum [sha256.Size]byte
}

// tag appends the ticket tag of payload for event to dst.
func (c *Codec) tag(dst []byte, event string, payload []byte) []byte {
	// Keyed HMAC states are pooled: hmac.New hashes the key's pads again on
	// every call, and every poll checks a ticket. The state's own buffers
	// take the message and the sum, so a check allocates nothing.
	m, _ := c.macs.Get().(*mac)
	if m == nil {
		m = &mac{h: hmac.New(sha256.New, c.secret)}
	}
	m.h.Reset()
	m.msg = append(append(append(append(m.msg[:0], "waitroom-ticket\x00"...), event...), 0), payload...)
	m.h.Write(m.msg)
	dst = append(dst, m.h.Sum(m.sum[:0])[:tagLen]...)
	c.macs.Put(m)
	return dst
}

// Sign returns t signed for event: its String is the ticket to hand to the
// fan.
func (c *Codec) Sign(event string, t Ticket) Ticket {
	b := make([]byte, 0, 64+len(t.account))
	if t.account == "" {
		b = append(b, ticketVersion)
	} else {
		b = append(b, ticketVersionAccount)
	}
	b = binary.AppendUvarint(b, uint64(t.seq))
	b = append(b, t.random[:]...)
	b = binary.AppendUvarint(b, uint64(t.joinedAt))
	b = binary.AppendUvarint(b, uint64(t.eta))
	if t.account != "" {
		b = binary.AppendUvarint(b, uint64(len(t.account)))
		b = append(b, t.account...)
	}
	b = c.tag(b, event, b)
	t.signed = b64.EncodeToString(b)
	return t
}

// Parse verifies and reads a ticket of event. Any failure is
// ErrInvalidTicket and the zero Ticket (IsZero); the tag is checked (in
// constant time) before the payload is parsed, so a forger learns nothing
// from the parser.
func (c *Codec) Parse(event, str string) (Ticket, error) {
	t, err := c.parse(event, str)
	if err != nil {
		return Ticket{}, err
	}
	return t, nil
}

func (c *Codec) parse(event, str string) (Ticket, error) {
	var t Ticket
	if len(str) < 20 || len(str) > maxTicketLen {
		return t, ErrInvalidTicket
	}
	b, err := b64.DecodeString(str)
	if err != nil || len(b) < 1+1+16+1+1+tagLen {
		return t, ErrInvalidTicket
	}
	payload, tag := b[:len(b)-tagLen], b[len(b)-tagLen:]
	var want [tagLen]byte
	if !hmac.Equal(tag, c.tag(want[:0], event, payload)) {
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
	t.eta = int64(eta)
	if version == ticketVersionAccount {
		l, n := binary.Uvarint(p)
		if n <= 0 || l < 1 || l > MaxAccountLen || uint64(len(p)-n) != l {
			return Ticket{}, ErrInvalidTicket
		}
		t.account = string(p[n:])
	}
	t.signed = str
	return t, nil
}

// Seal binds facts of a place of event (its id and what its ticket was
// signed with) to the address to its ticket may be sent to: an away fan's
// note holds the seal, never the ticket (DESIGN.md, Fair play, third round:
// no bearer credential at rest).
func (c *Codec) Seal(event, facts, to string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("waitroom-away\x00" + event + "\x00" + facts + "\x00" + to))
	return b64.EncodeToString(m.Sum(nil)[:tagLen])
}
