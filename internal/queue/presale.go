package queue

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/rdb"
)

// What the presale asks of the line (presale.Places): which invited
// accounts used their places, and how many places are left for more.

var _ presale.Places = (*Store)(nil)

// placeStatesPart is how many accounts one pipeline asks about.
const placeStatesPart = 1000

// PlaceStates says what became of each account's place in event's line:
// none; live (waiting, or let in and not expired); booked (a booking of
// the place, or of an earlier place of the account, was confirmed:
// CompleteFor); or ended without a booking.
func (s *Store) PlaceStates(ctx context.Context, event string, accounts []string) ([]presale.PlaceState, error) {
	out := make([]presale.PlaceState, len(accounts))
	k := rdb.KeysOf(event)
	shards, err := s.c.HGet(ctx, k.Stats, "shards").Int()
	if err != nil && err != redis.Nil {
		return nil, rdb.Interpret("place states", err)
	}
	now, err := s.c.Time(ctx).Result()
	if err != nil {
		return nil, rdb.Interpret("place states", err)
	}
	for from := 0; from < len(accounts); from += placeStatesPart {
		part := accounts[from:min(from+placeStatesPart, len(accounts))]
		entries, err := s.c.HMGet(ctx, k.Accounts, part...).Result()
		if err != nil {
			return nil, rdb.Interpret("place states", err)
		}
		bought, err := s.c.HMGet(ctx, k.Bought, part...).Result()
		if err != nil {
			return nil, rdb.Interpret("place states", err)
		}
		type asked struct {
			i            int
			wait, active *redis.FloatCmd
			booked       *redis.BoolCmd
		}
		var ask []asked
		_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, e := range entries {
				entry, _ := e.(string)
				id, _, _ := strings.Cut(entry, " ")
				if bought[i] != nil {
					out[from+i] = presale.BookedPlace
					continue
				}
				if id == "" {
					continue
				}
				wait := k.Wait
				if seq, ok := seqOf(id); ok && shards > 1 {
					wait = rdb.ShardKeysFor(event, shards)[seq%int64(shards)].Wait
				}
				ask = append(ask, asked{i: from + i, wait: p.ZScore(ctx, wait, id), active: p.ZScore(ctx, k.Active, id), booked: p.HExists(ctx, k.Booked, id)})
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return nil, rdb.Interpret("place states", err)
		}
		for _, a := range ask {
			exp, activeErr := a.active.Result()
			switch {
			case a.booked.Val():
				out[a.i] = presale.BookedPlace
			case a.wait.Err() == nil, activeErr == nil && int64(exp) > now.UnixMilli():
				out[a.i] = presale.LivePlace
			default:
				out[a.i] = presale.EndedPlace
			}
		}
	}
	return out, nil
}

// PlacesLeft is the places the booking core says are available less the
// fans live in line (waiting or let in): those may each still take one. A
// fan let in who holds seats already is counted twice (its seats are out
// of the available ones): the figure errs low, never high. ok is false
// until the booking core has published the event's inventory.
func (s *Store) PlacesLeft(ctx context.Context, event string) (int64, bool, error) {
	c, err := s.Counts(ctx, event)
	if err != nil || !c.Inventory.Known {
		return 0, false, err
	}
	return c.Inventory.Available - c.Waiting - c.Active, true, nil
}
