package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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
// and the outbox takes a message once. The first look at the place (the
// emailed link, or any poll) claims it, and its access window starts then;
// a place never claimed is given up once the wait ends, and moves from
// admitted to abandoned in the event's books (expire_actives).
//
// The event's stats count away (places that stepped away), away_admitted,
// away_claimed and away_lapsed.

// Sentinel errors of StepAway.
var (
	// ErrNotYours: the ticket has no account, or another one than the
	// token's: only a place's own account may have its turn emailed.
	ErrNotYours = errors.New("queue: the ticket is not this account's")
	// ErrAlreadyAdmitted: the place is let in already; there is nothing
	// to keep.
	ErrAlreadyAdmitted = errors.New("queue: the place is admitted already")
)

// AwayLimited is StepAway's answer when the account stepped away its
// hour's share of times already.
type AwayLimited struct {
	RetryAfter time.Duration
}

func (e AwayLimited) Error() string {
	return fmt.Sprintf("queue: this account stepped away too often, retry after %v", e.RetryAfter)
}

// DefaultAwayClaimWithin is how long an away place waits for its claim when
// the settings say nothing (settings published before the key existed).
const DefaultAwayClaimWithin = 10 * time.Minute

func awayClaimWithin(set Settings) time.Duration {
	if set.AwayClaimWithin > 0 {
		return set.AwayClaimWithin
	}
	return DefaultAwayClaimWithin
}

// AwayRequest is a fan stepping away.
type AwayRequest struct {
	Event    string
	Settings Settings
	Ticket   string
	// Account is the verified account token's sub, and Email its email
	// claim, checked by the caller: the place must be this account's.
	Account, Email string
	// Lang is the language the email is to speak.
	Lang string
	// Limit is how many times an account may step away per hour (0 = no
	// bound); Now is the caller's clock, the hour counted.
	Limit int
	Now   time.Time
}

// StepAway keeps the ticket's place without polls and notes where to email
// its fan when it is admitted. Stepping away again (a new address or
// language) replaces the note and is not counted again.
//
// Errors: ErrInvalidTicket (before any Redis call), ErrNotYours,
// ErrAlreadyAdmitted, ErrUnknownTicket (neither waiting nor admitted),
// AwayLimited.
func (s *Store) StepAway(ctx context.Context, r AwayRequest) error {
	t, err := s.decode(r.Event, r.Ticket)
	if err != nil {
		return err
	}
	if t.account == "" || t.account != r.Account {
		return ErrNotYours
	}
	id, k := t.id(), rdb.KeysOf(r.Event)
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
				return AwayLimited{RetryAfter: time.Unix((hour+1)*3600, 0).Sub(r.Now)}
			}
		}
	}
	entry := strings.Join([]string{r.Lang, r.Account, r.Email, r.Ticket}, " ")
	code, err := s.stepAway(ctx, r.Event, t, entry, r.Settings)
	if again, ok := relayout(r.Settings, err); ok {
		code, err = s.stepAway(ctx, r.Event, t, entry, again)
	}
	switch {
	case err != nil:
		return err
	case code == awayAdmitted:
		return ErrAlreadyAdmitted
	case code == awayGone:
		return ErrUnknownTicket
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
func (s *Store) stepAway(ctx context.Context, event string, t ticket, entry string, set Settings) (int64, error) {
	k, id := rdb.KeysOf(event), t.id()
	n := shardsOf(set)
	if n == 1 {
		v, err := s.c.Run(ctx, rdb.Call{Script: awayScript, Keys: []string{k.Wait, k.Seen, k.Away, k.Stats, k.Active},
			Args: []any{id, t.slot(), entry}, Told: true}).Result()
		if err != nil {
			return 0, rdb.Interpret("away", err)
		}
		if l, ok := v.([]any); ok {
			return 0, errLayout{int(rdb.ReplyOf(l).Int(1))}
		}
		code, _ := v.(int64)
		return code, nil
	}
	sk := rdb.ShardKeysFor(event, n)[int(t.seq%int64(n))]
	waiting, err := s.c.Run(ctx, rdb.Call{Script: awayShardScript, Keys: []string{sk.Wait, sk.Seen},
		Args: []any{id, "#" + itoa(t.seq/int64(n))}, Told: true}).Int()
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
// ARGV: 1 ticket id, 2 its seen slot, 3 the note ("<lang> <account> <email>
// <ticket>")
// Returns 1 (away now), 2 (away already: the note replaced), 0 (admitted:
// nothing done), -1 (neither waiting nor admitted), {"layout", k} (a
// sharded event).
var awayScript = redis.NewScript(prelude + layoutPrelude + `
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
var awayShardScript = redis.NewScript(prelude + `
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
var awayGlobalScript = redis.NewScript(rdb.Prelude + `
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

// AwayFan is an away fan let in, whose email is due.
type AwayFan struct {
	ID         string // the ticket's id
	Ticket     string // the signed ticket: the emailed link carries it
	Account    string
	Email      string // "" when the fan left since (nothing to send)
	Lang       string
	AdmittedAt time.Time
}

// AwayAdmitted lists up to max away fans let in whose email is still to be
// queued, those let in first first. Several admitters may read the same
// fans: whoever queues an email queues it once (package notify).
func (s *Store) AwayAdmitted(ctx context.Context, event string, max int) ([]AwayFan, error) {
	k := rdb.KeysOf(event)
	v, err := s.c.Run(ctx, rdb.Call{Script: awayDueScript, Keys: []string{k.AwayDue, k.Away}, Args: []any{max}}).Slice()
	if err != nil {
		return nil, rdb.Interpret("away due", err)
	}
	r := rdb.ReplyOf(v)
	out := make([]AwayFan, 0, len(v)/3)
	for i := 0; i+2 < len(v); i += 3 {
		f := AwayFan{ID: r.Str(i), AdmittedAt: msToTime(r.Int(i + 1))}
		if note, ok := v[i+2].(string); ok {
			if p := strings.Fields(note); len(p) == 4 {
				f.Lang, f.Account, f.Email, f.Ticket = p[0], p[1], p[2], p[3]
			}
		}
		out = append(out, f)
	}
	if r.Err() != nil {
		return nil, fmt.Errorf("away due: %w", r.Err())
	}
	return out, nil
}

// awayDueScript reads the away fans let in whose email is due.
//
// KEYS: 1 away due, 2 away
// ARGV: 1 how many at most
// Returns {id, admitted at ms, note or false, …}.
var awayDueScript = redis.NewScript(`
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

// AwayBooks are what away changed in an event's books.
type AwayBooks struct {
	Away     int64 // places whose fans stepped away
	Admitted int64 // of them, let in (counted in Stats.Admitted while claimed or waiting for the claim)
	Claimed  int64 // of those, claimed (the link opened, or any poll)
	Lapsed   int64 // let in, never claimed: given up (counted in Stats.Abandoned, no longer in Stats.Admitted)
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
