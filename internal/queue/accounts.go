package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// One place per account (DESIGN.md, Accounts). A join for an account
// (JoinOptions.Account, verified by the gateway) records the account's
// place in the event's accounts hash (keys.go), in the very script that
// makes the place: the one-shard join script, or the sharded line's global
// step, both on the event's own tag. A join for an account that has a live
// place makes nothing and answers that place, so however many devices join
// for one account at once, through however many gateways, one place is
// made. A place that died (left, its window ended, abandoned) is replaced
// by the account's next join.
//
// The entry is "<ticket id> <joined at ms> <ETA told ms + 1, 0 = none>":
// with the account those are every fact the signed ticket carries, so a
// second device gets the very same ticket string, with no ticket kept in
// Redis. The script that makes the place writes "?" for the ETA, which the
// joining request fills in one round trip later, once it computed the ETA
// it tells; a join that finds "?" waits for it (accountGraceMs at most:
// a joining request that died never fills it in, and the ticket then has
// no ETA).
// Entries live as long as the event's keys (one short entry per account
// that ever joined).

// accountGraceMs: a sharded join's place reaches its shard one round trip
// after its global step, and every join's ETA reaches its entry one round
// trip after the place. Until it is that old, a place the caller found on
// no shard is taken for one on its way, not for a dead one, and an ETA not
// filled in for one on its way.
const (
	accountGraceMs = "2000"
	accountGrace   = 2 * time.Second
	// lateShardMs: a sharded place not on its shard this long after its
	// first step is never made (sJoinShard), so none is made after a join
	// of its account took it for dead.
	lateShardMs = "1500"
)

// errAccountPlace: the join found the account's place, maybe live; entry
// is its accounts entry.
type errAccountPlace struct{ entry string }

func (e errAccountPlace) Error() string { return "queue: the account has a place" }

// accountTries bounds how often a join for an account looks at the
// account's place and tries again (a place dying, or on its way to its
// shard, as the join runs); each look is one status call.
const accountTries = 60

func (s *Store) joinAccount(ctx context.Context, event string, set line.Settings, o line.JoinOptions) (line.JoinResult, error) {
	replace := ""
	for try := 0; ; try++ {
		r, err := s.join(ctx, event, set, o, replace)
		var had errAccountPlace
		if !errors.As(err, &had) {
			if err == nil && o.Account != "" {
				err = s.fillAccount(ctx, event, o.Account, r)
			}
			return r, err
		}
		t, pending, err := s.entryTicket(had.entry, o.Account)
		if err != nil {
			return line.JoinResult{}, fmt.Errorf("join: %w", err)
		}
		if pending && try < accountTries {
			// Its ETA is on its way: the same ticket is answered, or none.
			if err := pause(ctx); err != nil {
				return line.JoinResult{}, err
			}
			continue
		}
		st, err := s.statusOf(ctx, event, t, set)
		if err != nil {
			return line.JoinResult{}, err
		}
		if st.State != line.Expired {
			return line.JoinResult{Ticket: s.sign(event, t), ID: t.ID(), State: st.State, Position: st.Position,
				ActiveUntil: st.ActiveUntil, Account: t.Account(), Resumed: true, Status: st}, nil
		}
		if try >= accountTries {
			return line.JoinResult{}, fmt.Errorf("join: the account's place %s stays on its way", t.ID())
		}
		if t.ID() == replace {
			// A sharded place not on its shard yet (see accountGraceMs).
			if err := pause(ctx); err != nil {
				return line.JoinResult{}, err
			}
		}
		replace = t.ID()
	}
}

// pause waits a moment before a join for an account looks again.
func pause(ctx context.Context) error {
	select {
	case <-time.After(accountGrace / accountTries):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("join: %w", ctx.Err())
	}
}

// fillAccountScript adds the ETA told to an account's entry, unless the
// entry changed meanwhile (the place was replaced).
//
// KEYS: 1 accounts
// ARGV: 1 account, 2 the entry the join wrote, 3 the entry with the ETA
// Returns 1 if it wrote, else 0.
var fillAccountScript = lua.Script("fill_account", `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
`)

func (s *Store) fillAccount(ctx context.Context, event, account string, r line.JoinResult) error {
	t := r.Ticket // made and signed by this join: nothing to check
	entry := t.ID() + " " + strconv.FormatInt(t.JoinedAtMs(), 10)
	full := entry + " " + etaField(t)
	err := s.c.Start(ctx, rdb.Call{Script: fillAccountScript, Keys: []string{rdb.KeysOf(event).Accounts}, Args: []any{account, entry + " ?", full}, Told: true}).Wait().Err()
	return rdb.Interpret("join", err)
}

// etaField is the ETA told at t's join as an entry writes it: the ms plus
// one, 0 when none was told.
func etaField(t line.Ticket) string {
	ms, ok := t.JoinETA()
	if !ok {
		return "0"
	}
	return strconv.FormatInt(ms+1, 10)
}

// entryTicket rebuilds the ticket of account an accounts entry names (not
// signed); pending: its ETA is not filled in yet (and it is younger than
// accountGrace by the local clock: a join that died leaves no ETA).
func (s *Store) entryTicket(entry, account string) (t line.Ticket, pending bool, err error) {
	t, pending, err = parseEntry(entry, account)
	if pending {
		pending = s.now().Sub(msToTime(t.JoinedAtMs())) < accountGrace
	}
	return t, pending, err
}

// parseEntry parses an entry; unknown: its ETA is "?" (not filled in yet).
func parseEntry(entry, account string) (t line.Ticket, unknown bool, err error) {
	f := strings.Fields(entry)
	if len(f) != 3 {
		return line.Ticket{}, false, fmt.Errorf("accounts entry %q", entry)
	}
	seqPart, randPart, ok := strings.Cut(f[0], ".")
	seq, err := strconv.ParseInt(seqPart, 36, 64)
	if !ok || err != nil || seq < 1 {
		return line.Ticket{}, false, fmt.Errorf("accounts entry %q", entry)
	}
	var random [16]byte
	if b, err := b64.DecodeString(randPart); err != nil || len(b) != len(random) {
		return line.Ticket{}, false, fmt.Errorf("accounts entry %q", entry)
	} else {
		copy(random[:], b)
	}
	joinedAt, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return line.Ticket{}, false, fmt.Errorf("accounts entry %q", entry)
	}
	t = line.NewTicket(seq, random, joinedAt, account)
	if f[2] == "?" {
		return t, true, nil
	}
	eta, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || eta < 0 {
		return line.Ticket{}, false, fmt.Errorf("accounts entry %q", entry)
	}
	if eta > 0 {
		t = t.WithJoinETA(eta - 1)
	}
	return t, false, nil
}

// AccountPlace returns the ticket of account's place in event, signed, and
// its status, as a poll has it (a zero Ticket and Status if the account never
// joined, or its place is being made right now). A place on its way to its shard reads Expired here; JoinWith
// tells it from a dead one.
func (s *Store) AccountPlace(ctx context.Context, event, account string, set line.Settings) (line.Ticket, line.Status, error) {
	entry, err := s.c.HGet(ctx, rdb.KeysOf(event).Accounts, account).Result()
	if errors.Is(err, redis.Nil) {
		return line.Ticket{}, line.Status{}, nil
	}
	if err != nil {
		return line.Ticket{}, line.Status{}, rdb.Interpret("account", err)
	}
	t, pending, err := s.entryTicket(entry, account)
	if err != nil {
		return line.Ticket{}, line.Status{}, fmt.Errorf("account: %w", err)
	}
	if pending {
		// Being made right now: JoinWith waits for it.
		return line.Ticket{}, line.Status{}, nil
	}
	st, err := s.statusOf(ctx, event, t, set)
	if err != nil {
		return line.Ticket{}, line.Status{}, err
	}
	return s.sign(event, t), st, nil
}
