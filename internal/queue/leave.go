package queue

import (
	"context"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// Leave removes ticket t (parsed for event) from the line, or gives its
// active place back.
func (s *Store) Leave(ctx context.Context, event string, t line.Ticket) error {
	if err := known(t); err != nil {
		return err
	}
	_, err := s.leave(ctx, event, t.ID(), t.Seq())
	return err
}

// Revoke takes the ticket with id (the access JWT's sub) out of the line or
// out of its active place at once, as its leaving would: its pass stops
// working at the gate at the next request. ErrInvalidTicket for a
// malformed id (no Redis call), ErrUnknownTicket when it was in neither.
func (s *Store) Revoke(ctx context.Context, event, id string) error {
	seq, ok := seqOf(id)
	if !ok || !idPattern.MatchString(id) {
		return line.ErrInvalidTicket
	}
	was, err := s.leave(ctx, event, id, seq)
	if err == nil && !was {
		return line.ErrUnknownTicket
	}
	return err
}

// leave takes the ticket id out of wait or out of the active set, in the
// event's layout (the one script of one shard tells which); was: it was in
// one of them.
func (s *Store) leave(ctx context.Context, event, id string, seq int64) (was bool, err error) {
	k := rdb.KeysOf(event)
	n, err := s.c.Run(ctx, rdb.Call{Script: leaveScript, Keys: []string{k.Wait, k.Active, k.Stats, k.Inventory, k.Holders, k.Claims, k.Away, k.AwayDue, k.Ends}, Args: []any{id}}).Int()
	if err != nil {
		return false, rdb.Interpret("leave", err)
	}
	if n >= 0 {
		return n > 0, nil
	}
	sk := rdb.ShardKeysFor(event, -n)[int(seq%int64(-n))]
	left, err := s.c.Run(ctx, rdb.Call{Script: leaveShardScript, Keys: []string{sk.Wait, sk.Stats}, Args: []any{id}}).Int()
	if err != nil || left == 1 {
		return left == 1, rdb.Interpret("leave", err)
	}
	return s.complete(ctx, event, id)
}

// Active, Extend and Complete take the ticket id (Status.ID, the JWT sub),
// not the signed ticket string: the booking core knows only the JWT.
// A malformed id is simply not active: no Redis call is made for it.

// Active reports whether ticket is in the event's active set and unexpired.
func (s *Store) Active(ctx context.Context, event, ticket string) (bool, error) {
	if !idPattern.MatchString(ticket) {
		return false, nil
	}
	exp, err := s.c.Run(ctx, rdb.Call{Script: activeScript, Keys: []string{rdb.KeysOf(event).Active}, Args: []any{ticket}}).Int64()
	if err != nil {
		return false, rdb.Interpret("active", err)
	}
	return exp > 0, nil
}

// Renew is Active for a use of a sliding session's pass: it also moves the
// ticket's expiry to now + ttl (Redis's now) when that is at least every
// later than it is. The write is told (it waits for replicas under
// redis.wait_replicas): a pass may be issued again on the expiry in force,
// now or at a use within every. Reports the expiry in force afterwards,
// and false when the ticket is not active (it is then never written).
func (s *Store) Renew(ctx context.Context, event, ticket string, ttl, every time.Duration) (time.Time, bool, error) {
	if !idPattern.MatchString(ticket) {
		return time.Time{}, false, nil
	}
	exp, err := s.c.Run(ctx, rdb.Call{Script: activeScript, Keys: []string{rdb.KeysOf(event).Active},
		Args: []any{ticket, ttl.Milliseconds(), every.Milliseconds()}, Told: true}).Int64()
	if err != nil {
		return time.Time{}, false, rdb.Interpret("renew", err)
	}
	if exp == 0 {
		return time.Time{}, false, nil
	}
	return msToTime(exp), true, nil
}

// Extend moves an active ticket's expiry to until if that is later than it
// is now; never shortens it, and never moves it past the ticket's ceiling:
// its claim time + window (access_ttl + hold_ttl: see extendScript).
// Reports the expiry in force afterwards, and false when the ticket is not
// active.
func (s *Store) Extend(ctx context.Context, event, ticket string, until time.Time, window time.Duration) (time.Time, bool, error) {
	if !idPattern.MatchString(ticket) {
		return time.Time{}, false, nil
	}
	k := rdb.KeysOf(event)
	exp, err := s.c.Run(ctx, rdb.Call{Script: extendScript, Keys: []string{k.Active, k.Claims}, Args: []any{ticket, until.UnixMilli(), window.Milliseconds()}}).Int64()
	if err != nil {
		return time.Time{}, false, rdb.Interpret("extend", err)
	}
	if exp == 0 {
		return time.Time{}, false, nil
	}
	return msToTime(exp), true, nil
}

// Complete frees the ticket's active place at once (booking confirmed).
// ticket here is the ticket id as carried in the access JWT's sub. It is
// CompleteFor a place of no account.
func (s *Store) Complete(ctx context.Context, event, ticket string) error {
	return s.CompleteFor(ctx, event, ticket, "")
}

// CompleteFor frees the active place of ticket, whose booking was
// confirmed, at once, and notes in the same step that account ("" = none)
// bought: a presale's invitation buys once, so the account makes no new
// place in its window (presale.GateLua). Safe to repeat: the booking
// core relays each confirmation at least once, after its sale freed the
// place and noted the same already (BookedFor), and a repeat changes
// nothing.
func (s *Store) CompleteFor(ctx context.Context, event, ticket, account string) error {
	if !idPattern.MatchString(ticket) {
		return nil
	}
	k := rdb.KeysOf(event)
	err := s.c.Run(ctx, rdb.Call{Script: completeScript, Keys: []string{k.Active, k.Inventory, k.Holders, k.Claims, k.Ends, k.Booked, k.Bought},
		Args: []any{ticket, "1", account}}).Err()
	return rdb.Interpret("complete", err)
}

func (s *Store) complete(ctx context.Context, event, id string) (bool, error) {
	k := rdb.KeysOf(event)
	n, err := s.c.Run(ctx, rdb.Call{Script: completeScript, Keys: []string{k.Active, k.Inventory, k.Holders, k.Claims, k.Ends}, Args: []any{id}}).Int()
	if err != nil {
		return false, rdb.Interpret("complete", err)
	}
	return n == 1, nil
}
