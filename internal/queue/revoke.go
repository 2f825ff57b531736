package queue

import (
	"context"
	"errors"

	"github.com/waitroom/waitroom/internal/rdb"
)

// ErrUnknownTicket: the ticket is neither waiting nor active.
var ErrUnknownTicket = errors.New("queue: ticket neither waiting nor active")

// Revoke takes the ticket with id (the access JWT's sub) out of the line or
// out of its active place at once, as its leaving would: its pass stops
// working at the gate at the next request. ErrInvalidTicket for a
// malformed id (no Redis call), ErrUnknownTicket when it was in neither.
func (s *Store) Revoke(ctx context.Context, event, id string) error {
	if !idPattern.MatchString(id) {
		return ErrInvalidTicket
	}
	k := rdb.KeysOf(event)
	n, err := s.c.Run(ctx, rdb.Call{Script: leaveScript, Keys: []string{k.Wait, k.Active, k.Stats, k.Inventory, k.Holders}, Args: []any{id}}).Int()
	if err != nil {
		return rdb.Interpret("revoke", err)
	}
	if n < 0 {
		seq, ok := seqOf(id)
		if !ok {
			return ErrInvalidTicket
		}
		sk := rdb.ShardKeysFor(event, -n)[int(seq%int64(-n))]
		left, err := s.c.Run(ctx, rdb.Call{Script: sLeaveShard, Keys: []string{sk.Wait, sk.Stats}, Args: []any{id}}).Int()
		if err != nil {
			return rdb.Interpret("revoke", err)
		}
		if left == 1 {
			return nil
		}
		n, err = s.c.Run(ctx, rdb.Call{Script: completeScript, Keys: []string{k.Active, k.Inventory, k.Holders, k.Claims}, Args: []any{id}}).Int()
		if err != nil {
			return rdb.Interpret("revoke", err)
		}
	}
	if n == 0 {
		return ErrUnknownTicket
	}
	return nil
}
