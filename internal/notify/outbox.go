// Package notify is the email the room sends its fans: "it's your turn" to
// a fan who stepped away from the page, and the presale's invitations. A
// message is queued in the event's outbox in Redis (Outbox.Enqueue), once
// per (event, kind, key) however many callers race to queue it, and one
// sender at a time (Sender, run by the admitters, under a lease) sends it
// over SMTP (SMTP), retrying with backoff until its deadline.
//
// One email per message (DESIGN.md, Fair play, third round): a message is
// claimed in Redis, atomically and on its own, just before it is sent, for
// longer than its sending can last (the sender's Inflight, above the SMTP
// client's own time-out; the sender gives the send up at three quarters of
// it): until the claim lapses no other sender finds it due, and only its
// claimant may put it back. The lease keeps a second sender off while one
// is alive, renewed before every message, so a round of slow sends never
// outlives it; were two to send at once, the claims still keep them off
// each other's messages.
//
// The guarantee is at least once, not exactly once: a sender that dies
// after the SMTP server accepted the message but before it marked it sent
// leaves it to be sent again once its claim lapses. Every copy carries the
// same Message-ID, derived from the message's identity, so a mail store or
// client that dedupes by Message-ID shows one.
package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
)

// lua is the mail outbox's function library (rdb.Library).
var lua = rdb.NewLibrary("notify", rdb.Prelude)

// Kinds of message.
const (
	// KindYourTurn: an away fan's place was let in; Data "place" is what
	// its link's ticket is signed from when the email is written
	// (queue.Store.AwayTicket: never the ticket itself, which Redis must
	// not hold), "until" the RFC 3339 end of its wait for the claim.
	KindYourTurn = "your_turn"
	// KindPresaleSelected: a presale's registrant was invited (by the
	// selection or a top-up); Data "opens" and "until" are its window
	// (RFC 3339), "path" the register page.
	KindPresaleSelected = "presale_selected"
)

// Message is one email to send.
type Message struct {
	// Kind says which email it is (its template): KindYourTurn, or one
	// the presale adds.
	Kind string `json:"kind"`
	// Key is what the message is about (a ticket id, a registration id):
	// with the event and Kind, the message's identity. 1–128 printable
	// characters, no space.
	Key string `json:"key"`
	// To is the address, as the origin site signed it.
	To string `json:"to"`
	// Lang is the language to write it in ("en", "ja", "ko").
	Lang string `json:"lang"`
	// Data are the facts its template needs besides the event's own.
	Data map[string]string `json:"data,omitempty"`
	// NotAfter: a message still unsent then is dropped (zero = never).
	NotAfter time.Time `json:"notAfter,omitzero"`
}

// ID is the message's identity within its event.
func (m Message) ID() string { return m.Kind + ":" + m.Key }

// ErrInvalid: a message Enqueue refuses (no kind or key, a bad address).
var ErrInvalid = errors.New("notify: invalid message")

func (m Message) check() error {
	switch {
	case m.Kind == "" || strings.ContainsAny(m.Kind, " :\r\n"):
		return fmt.Errorf("%w: kind %q", ErrInvalid, m.Kind)
	case m.Key == "" || len(m.Key) > 128 || strings.ContainsAny(m.Key, " \r\n"):
		return fmt.Errorf("%w: key %q", ErrInvalid, m.Key)
	case !ValidAddress(m.To):
		return fmt.Errorf("%w: address %q", ErrInvalid, m.To)
	}
	return nil
}

// ValidAddress reports whether a is one plain email address (local@domain,
// no display name, no spaces or line breaks, at most 254 bytes): what the
// away route accepts from an account token's email claim.
func ValidAddress(a string) bool {
	if a == "" || len(a) > 254 || strings.ContainsAny(a, " \t\r\n<>\"") {
		return false
	}
	p, err := mail.ParseAddress(a)
	if err != nil || p.Address != a {
		return false
	}
	at := strings.LastIndexByte(a, '@')
	return at > 0 && at < len(a)-1 && !strings.HasPrefix(a[at+1:], ".")
}

// Outbox is every event's queue of email, in Redis.
type Outbox struct {
	c *rdb.Client
}

// NewOutbox is the outbox over c.
func NewOutbox(c *rdb.Client) *Outbox { return &Outbox{c: c} }

// record is a queued message as the outbox keeps it.
type record struct {
	Message
	Attempts int    `json:"attempts,omitempty"`
	Error    string `json:"error,omitempty"` // the last attempt's
}

// Enqueue queues m for event, once: the same (event, m.Kind, m.Key) again
// queues nothing, whether the first is still queued or sent long ago. It
// reports whether this call queued it.
func (o *Outbox) Enqueue(ctx context.Context, event string, m Message) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	b, err := json.Marshal(record{Message: m})
	if err != nil {
		return false, fmt.Errorf("enqueue: %w", err)
	}
	k := rdb.KeysOf(event)
	n, err := o.c.Run(ctx, rdb.Call{Script: enqueueScript, Keys: []string{k.Outbox, k.Mail}, Args: []any{m.ID(), b}, Told: true}).Int()
	if err != nil {
		return false, rdb.Interpret("enqueue", err)
	}
	if n == 1 {
		notifications.WithLabelValues(event, m.Kind, ResultQueued).Inc()
	}
	return n == 1, nil
}

// enqueueScript queues a message once.
//
// KEYS: 1 outbox, 2 mail
// ARGV: 1 message id, 2 its record (JSON)
// Returns 1 if queued now, 0 if the id was queued (or sent) before.
var enqueueScript = lua.Script("enqueue", `
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('ZADD', KEYS[1], clock(), ARGV[1])
return 1
`)

// taken is a message a sender took to send.
type taken struct {
	id string
	record
}

// take claims up to max messages of event that are due, each for claim,
// for owner: until then no other sender finds it due, and only owner may
// put it back or drop it (settle).
func (o *Outbox) take(ctx context.Context, event string, max int, claim time.Duration, owner string) ([]taken, error) {
	k := rdb.KeysOf(event)
	v, err := o.c.Run(ctx, rdb.Call{Script: takeScript, Keys: []string{k.Outbox, k.Mail, k.MailClaims},
		Args: []any{max, claim.Milliseconds(), owner}}).Slice()
	if err != nil {
		return nil, rdb.Interpret("take", err)
	}
	out := make([]taken, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		id, _ := v[i].(string)
		raw, _ := v[i+1].(string)
		t := taken{id: id}
		if err := json.Unmarshal([]byte(raw), &t.record); err != nil {
			return nil, fmt.Errorf("take %s: %w", id, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// takeScript claims the due messages for a sender, pushing each one's due
// time past the claim and naming the sender in claims.
//
// KEYS: 1 outbox, 2 mail, 3 claims
// ARGV: 1 how many at most, 2 the claim (ms), 3 the sender
// Returns {id, record, …}; a queued id without its record is dropped.
var takeScript = lua.Script("take", `
local now = clock()
local due = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for _, id in ipairs(due) do
  local r = redis.call('HGET', KEYS[2], id)
  if r and string.sub(r, 1, 1) == '{' then
    redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), id)
    redis.call('HSET', KEYS[3], id, ARGV[3])
    out[#out + 1] = id
    out[#out + 1] = r
  else
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[3], id)
  end
end
return out
`)

// settle records how a message owner took ended: sent (its record
// becomes "sent <ms>", enough to refuse the id again, whoever claims it
// now: the server has it), or, while owner's claim is still the last
// taken, dropped ("expired <ms>") or to be tried again after retry (its
// record updated). A sender whose claim lapsed and was taken by another
// changes nothing but a send: the other decides.
func (o *Outbox) settle(ctx context.Context, event string, t taken, how string, retry time.Duration, owner string) error {
	k := rdb.KeysOf(event)
	var arg any = how
	if how == "" {
		b, err := json.Marshal(t.record)
		if err != nil {
			return err
		}
		arg = b
	}
	err := o.c.Run(ctx, rdb.Call{Script: settleScript, Keys: []string{k.Outbox, k.Mail, k.MailClaims},
		Args: []any{t.id, arg, retry.Milliseconds(), owner}}).Err()
	return rdb.Interpret("settle", err)
}

// settleScript ends a message (sent, expired) or puts it back for later.
//
// KEYS: 1 outbox, 2 mail, 3 claims
// ARGV: 1 id, 2 "sent" | "expired" | the updated record (JSON), 3 retry
// after ms, 4 the sender
// Returns 1 if it changed the message, else 0 (another sender's claim).
var settleScript = lua.Script("settle", `
local now = clock()
if ARGV[2] ~= 'sent' then
  local by = redis.call('HGET', KEYS[3], ARGV[1])
  if by and by ~= ARGV[4] then return 0 end
end
redis.call('HDEL', KEYS[3], ARGV[1])
if string.sub(ARGV[2], 1, 1) == '{' then
  if redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[3]), ARGV[1]) == 1 then
    redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  end
  return 1
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. now)
return 1
`)

// Pending is how many messages of event wait to be sent (queued or being
// retried): for tests and the operators.
func (o *Outbox) Pending(ctx context.Context, event string) (int64, error) {
	n, err := o.c.Run(ctx, rdb.Call{Script: pendingScript, Keys: []string{rdb.KeysOf(event).Outbox}}).Int64()
	return n, rdb.Interpret("pending", err)
}

// pendingScript: KEYS 1 outbox. Returns its size.
var pendingScript = lua.Script("pending", `return redis.call('ZCARD', KEYS[1])`)

// State says what became of message id of event: "queued", "sent",
// "expired", or "" (never queued).
func (o *Outbox) State(ctx context.Context, event, id string) (string, error) {
	v, err := o.c.HGet(ctx, rdb.KeysOf(event).Mail, id).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", rdb.Interpret("state", err)
	case strings.HasPrefix(v, "{"):
		return "queued", nil
	}
	how, _, _ := strings.Cut(v, " ")
	return how, nil
}
