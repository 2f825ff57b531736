package queue

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Away from the page (DESIGN.md): a fan with an account whose token carries
// an email may step away. From then its place is kept without polls: its
// abandon deadline is KEPT (lua.go), which no tick ever passes and no poll
// overwrites, and the event's away hash holds where to tell it. When the
// tick lets it in (admit, lua.go), the place waits away_claim_within for its
// claim instead of the usual deadline (claims 2), and the fan is noted due
// its email (the away due set), in the same script as the admission: a
// crash anywhere loses no email to send. The admitter then hands each due
// fan to the outbox (package notify) and drops it from the set
// (AwayAdmitted, AwayNotified): a crash between the two hands it over again,
// and the outbox takes a message once.
//
// No bearer credential at rest (DESIGN.md, Fair play, third round): the
// note never holds the ticket, which would let a reader of Redis (or of a
// backup) take the place. It holds the place (AwayFan.Place): the ticket's
// id and the facts it was signed with, and a seal binding them to the
// address the fan gave, made with the ticket secret. The email's link is
// signed only when the email is written (AwayTicket), from the place and
// for that address alone: a writer of Redis cannot have a place's ticket
// sent anywhere else. The first look at the place (the
// emailed link, or any poll) claims it, and its access window starts then;
// a place never claimed is given up once the wait ends, and moves from
// admitted to abandoned in the event's books (expire_actives).
//
// The event's stats count away (places that stepped away), away_admitted,
// away_claimed and away_lapsed.

func awayClaimWithin(set line.Settings) time.Duration { return set.ClaimWithin() }

// StepAway keeps the ticket's place without polls and notes where to email
// its fan when it is admitted. Stepping away again (a new address or
// language) replaces the note and is not counted again.
//
// Errors: ErrInvalidTicket (no ticket, before any Redis call), ErrNotYours,
// ErrAlreadyAdmitted, ErrUnknownTicket (neither waiting nor admitted),
// AwayLimited.
func (s *Store) StepAway(ctx context.Context, r line.AwayRequest) error {
	t := r.Ticket
	if err := known(t); err != nil {
		return err
	}
	if t.Account() == "" || t.Account() != r.Account {
		return line.ErrNotYours
	}
	id, k := t.ID(), rdb.KeysOf(r.Event)
	if r.Limit > 0 {
		err := s.c.HGet(ctx, k.Away, id).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return rdb.Interpret("away", err)
		}
		if again := err == nil; !again {
			hour := r.Now.Unix() / 3600
			n, err := s.countIn(ctx, rdb.AwayLimitKey(r.Account, hour), 2*time.Hour)
			if err != nil {
				return rdb.Interpret("away limit", err)
			}
			if n > int64(r.Limit) {
				return line.AwayLimited{RetryAfter: time.Unix((hour+1)*3600, 0).Sub(r.Now)}
			}
		}
	}
	if !noteable(r.Lang) || !noteable(r.Email) {
		return fmt.Errorf("away: a language or address with a space")
	}
	entry := r.Lang + " " + r.Email + " " + s.placeOf(r.Event, t, r.Email)
	code, err := s.stepAway(ctx, r.Event, t, entry, r.Settings)
	if again, ok := relayout(r.Settings, err); ok {
		code, err = s.stepAway(ctx, r.Event, t, entry, again)
	}
	switch {
	case err != nil:
		return err
	case code == awayAdmitted:
		return line.ErrAlreadyAdmitted
	case code == awayGone:
		return line.ErrUnknownTicket
	}
	return nil
}

// The away scripts' answers.
const (
	awayGone     = -1
	awayAdmitted = 0
)

// stepAway is one step away in the event's layout: one script on one
// shard; on many, the fan's shard first (the place kept, if it waits),
// then the event's tag (the note).
func (s *Store) stepAway(ctx context.Context, event string, t line.Ticket, entry string, set line.Settings) (int64, error) {
	k, id := rdb.KeysOf(event), t.ID()
	n := shardsOf(set)
	if n == 1 {
		v, err := s.c.Run(ctx, rdb.Call{Script: awayScript, Keys: []string{k.Wait, k.Seen, k.Away, k.Stats, k.Active},
			Args: []any{id, slot(t), entry}, Told: true}).Result()
		if err != nil {
			return 0, rdb.Interpret("away", err)
		}
		if l, ok := v.([]any); ok {
			return 0, errLayout{int(rdb.ReplyOf(l).Int(1))}
		}
		code, _ := v.(int64)
		return code, nil
	}
	sk := rdb.ShardKeysFor(event, n)[int(t.Seq()%int64(n))]
	waiting, err := s.c.Run(ctx, rdb.Call{Script: awayShardScript, Keys: []string{sk.Wait, sk.Seen},
		Args: []any{id, "#" + itoa(t.Seq()/int64(n))}, Told: true}).Int()
	if err != nil {
		return 0, rdb.Interpret("away", err)
	}
	code, err := s.c.Run(ctx, rdb.Call{Script: awayGlobalScript, Keys: []string{k.Stats, k.Active, k.Away},
		Args: []any{id, entry, waiting}, Told: true}).Int64()
	return code, rdb.Interpret("away", err)
}

// awayScript steps a fan away on a line of one shard: a waiting place is
// kept (its deadline KEPT) and noted in away.
//
// KEYS: 1 wait, 2 seen, 3 away, 4 stats, 5 active
// ARGV: 1 ticket id, 2 its seen slot, 3 the note ("<lang> <email> <place>",
// Store.placeOf)
// Returns 1 (away now), 2 (away already: the note replaced), 0 (admitted:
// nothing done), -1 (neither waiting nor admitted), {"layout", k} (a
// sharded event).
var awayScript = lua.Script("away", `
local k = sharded(KEYS[4])
if k then return {'layout', k} end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local now = clock()
  local exp = tonumber(redis.call('ZSCORE', KEYS[5], ARGV[1]))
  if exp and exp > now then return 0 end
  return -1
end
redis.call('BITFIELD', KEYS[2], 'SET', 'u32', ARGV[2], int(KEPT))
if redis.call('HSET', KEYS[3], ARGV[1], ARGV[3]) == 1 then
  redis.call('HINCRBY', KEYS[4], 'away', 1)
  return 1
end
return 2
`)

// awayShardScript keeps a waiting place on its shard (a line of many).
//
// KEYS: 1 wait, 2 seen
// ARGV: 1 ticket id, 2 its seen slot ("#" and seq div shards)
// Returns 1 if it waits (kept now), else 0.
var awayShardScript = lua.Script("away_shard", `
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('BITFIELD', KEYS[2], 'SET', 'u32', ARGV[2], int(KEPT))
return 1
`)

// awayGlobalScript notes an away fan on the event's tag (a line of many),
// once its shard kept its place.
//
// KEYS: 1 stats, 2 active, 3 away
// ARGV: 1 ticket id, 2 the note, 3 1 if the shard kept its place, else 0
// Returns awayScript's numbers.
var awayGlobalScript = lua.Script("away_global", `
if ARGV[3] ~= '1' then
  local now = clock()
  local exp = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
  if exp and exp > now then return 0 end
  return -1
end
if redis.call('HSET', KEYS[3], ARGV[1], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'away', 1)
  return 1
end
return 2
`)

// AwayAdmitted lists up to max away fans let in whose email is still to be
// queued, those let in first first. Several admitters may read the same
// fans: whoever queues an email queues it once (package notify).
func (s *Store) AwayAdmitted(ctx context.Context, event string, max int) ([]line.AwayFan, error) {
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: awayDueScript, Keys: []string{k.AwayDue, k.Away}, Args: []any{max}}).Slice()
	if err != nil {
		return nil, rdb.Interpret("away due", err)
	}
	r := rdb.ReplyOf(v)
	out := make([]line.AwayFan, 0, len(v)/3)
	for i := 0; i+2 < len(v); i += 3 {
		f := line.AwayFan{ID: r.Str(i), AdmittedAt: msToTime(r.Int(i + 1))}
		if note, ok := v[i+2].(string); ok {
			s.readNote(event, note, &f)
		}
		out = append(out, f)
	}
	if r.Err() != nil {
		return nil, fmt.Errorf("away due: %w", r.Err())
	}
	return out, nil
}

// readNote fills f from an away note: "<lang> <email> <place>", or, as a
// gateway of an earlier release wrote it, "<lang> <account> <email>
// <ticket>" (its place is made here: the note goes once its email is
// queued). A note it cannot read leaves f without an address.
func (s *Store) readNote(event, note string, f *line.AwayFan) {
	p := strings.Fields(note)
	switch len(p) {
	case 2 + placeFields:
		f.Lang, f.Email, f.Place, f.Account = p[0], p[1], strings.Join(p[2:], " "), p[2+3]
	case 4:
		// The ticket of an old note comes back from Redis, not from a fan:
		// it is checked (its HMAC, for this event, and that it is the
		// place admitted) because the place made of it is sealed for the
		// note's address and its email carries the ticket; a writer of
		// Redis must not get a place of its own choosing sent to an
		// address of its own choosing (no bearer credential at rest, and
		// none forged there either).
		if t, err := s.codec.Parse(event, p[3]); err == nil && t.ID() == f.ID {
			f.Lang, f.Account, f.Email, f.Place = p[0], p[1], p[2], s.placeOf(event, t, p[2])
		}
	}
}

// placeFields is how many fields a place has: "<id> <joined ms> <eta>
// <account> <seal>", the eta 0 when none was told, else the ms plus one
// (as an accounts entry writes it).
const placeFields = 5

// placeOf is the place of ticket t of event, sealed for address to.
func (s *Store) placeOf(event string, t line.Ticket, to string) string {
	facts := t.ID() + " " + itoa(t.JoinedAtMs()) + " " + etaField(t) + " " + t.Account()
	return facts + " " + s.codec.Seal(event, facts, to)
}

// AwayTicket rebuilds the signed ticket of an away fan's place (AwayFan.Place)
// for its email to address to: the very ticket the fan held when it
// stepped away. A place not sealed for to by this secret, for this event,
// is ErrInvalidTicket. It never touches Redis.
func (s *Store) AwayTicket(event, place, to string) (string, error) {
	p := strings.Fields(place)
	if len(p) != placeFields || p[2] == "?" {
		return "", line.ErrInvalidTicket
	}
	facts := strings.Join(p[:placeFields-1], " ")
	want := s.codec.Seal(event, facts, to)
	if !hmac.Equal([]byte(p[placeFields-1]), []byte(want)) {
		return "", line.ErrInvalidTicket
	}
	t, _, err := parseEntry(strings.Join(p[:3], " "), p[3])
	if err != nil || t.Account() == "" || len(t.Account()) > line.MaxAccountLen {
		return "", line.ErrInvalidTicket
	}
	return s.sign(event, t).String(), nil
}

// noteable: a word of a note, no space in it.
func noteable(s string) bool { return s != "" && !strings.ContainsAny(s, " \t\r\n") }

// awayDueScript reads the away fans let in whose email is due.
//
// KEYS: 1 away due, 2 away
// ARGV: 1 how many at most
// Returns {id, admitted at ms, note or false, …}.
var awayDueScript = lua.Script("away_due", `
local due = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local out = {}
for i = 1, #due, 2 do
  out[#out + 1] = due[i]
  out[#out + 1] = due[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], due[i])
end
return out
`)

// AwayNotified forgets the away fans whose emails are queued: they are due
// no more, and away no more (the place itself waits for its claim).
func (s *Store) AwayNotified(ctx context.Context, event string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	k := rdb.KeysOf(event)
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, k.AwayDue, rdb.Args(ids)...)
		p.HDel(ctx, k.Away, ids...)
		return nil
	})
	return rdb.Interpret("away notified", err)
}

// countIn adds one to the count at key, which lives ttl from its first
// count, and returns the count (the windowed limits: joins per minute,
// steps away per hour).
func (s *Store) countIn(ctx context.Context, key string, ttl time.Duration) (int64, error) {
	var incr *redis.IntCmd
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.Incr(ctx, key)
		p.Expire(ctx, key, ttl)
		return nil
	})
	return incr.Val(), err
}
