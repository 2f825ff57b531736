package queue

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// The line knows what is left (DESIGN.md, "Inventory"). The booking core,
// the source of truth, keeps per event in Redis:
//
//   - inventory (HASH, the contract's wr:{e}:inventory): available (places
//     that can be held now), held (places in live holds), pending (payments
//     open), updatedAt (ms), and engaged: how many tickets in the active set
//     hold something;
//   - places (HASH hold id → "<ticket> <places> <reserved at ms>"): every
//     live hold the inventory counts;
//   - holders (HASH ticket → live holds): who holds something;
//   - ended (HASH hold id → how and when it ended): the holds given back or
//     booked in the last inFlight, which a sync needs to read a snapshot
//     right (see syncScript);
//   - payments (HASH payment id → opened at ms): the payments open.
//
// so that the tick can read, in the same script that admits, both the places
// available and the admitted fans who hold nothing yet (ZCARD active −
// engaged), and never admit more idle fans than places. For that bound to
// be exact while the numbers are in flight, Redis must never show more
// places, or fewer idle fans, than PostgreSQL has: a hold is reserved here
// BEFORE its statement runs (and given back if it was refused); a release,
// a lapse and a confirmation are told AFTER they committed; a ticket leaving
// the active set (completion, leave, window over) leaves engaged in the same
// script. Every change is keyed by its hold or payment id, so repeating one
// changes nothing. SyncInventory rebuilds it all from a PostgreSQL snapshot
// (at the booking core's start, after a Redis flush, and every few seconds
// to repair what a crash between the two stores left).

// inFlight is how long a reservation may wait for its hold's statement
// (line.InFlight).
const inFlight = line.InFlight

// Reserve counts a hold's places out of the event's inventory before the
// hold's statement runs (the conservative order: Redis never shows a place
// PostgreSQL may already have given away). It reports whether the event's
// inventory was there: false means Redis lost it (a flush) and the caller
// should sync. Reserving a hold id twice changes nothing.
func (s *Store) Reserve(ctx context.Context, event, holdID, ticket string, places int) (bool, error) {
	k := rdb.KeysOf(event)
	n, err := s.c.Run(ctx, rdb.Call{Script: reserveScript, Keys: []string{k.Inventory, k.Places, k.Holders, k.Active}, Args: []any{holdID, ticket, places}}).Int()
	if err != nil {
		return false, rdb.Interpret("reserve", err)
	}
	return n >= 0, nil
}

// ReserveActive is Reserve for a hold whose pass the booking core checks in
// the same call (gatekeeper.Gatekeeper.CheckBy): nothing is reserved, and
// active is false, unless ticket holds its active place in event now, as
// Active says. known is Reserve's answer.
func (s *Store) ReserveActive(ctx context.Context, event, holdID, ticket string, places int) (active, known bool, err error) {
	k := rdb.KeysOf(event)
	n, err := s.c.Run(ctx, rdb.Call{Script: reserveScript, Keys: []string{k.Inventory, k.Places, k.Holders, k.Active}, Args: []any{holdID, ticket, places, 1}}).Int()
	if err != nil {
		return false, false, rdb.Interpret("reserve", err)
	}
	return n != -2, n >= 0, nil
}

// Release gives a hold's places back to the inventory: the hold was
// refused, released, or lapsed (told after PostgreSQL committed it).
// Releasing an unknown or already released hold changes nothing.
func (s *Store) Release(ctx context.Context, event, holdID string) error {
	return s.giveBack(ctx, "release", event, holdID, 0, "")
}

// Booked is BookedFor a hold of no account.
func (s *Store) Booked(ctx context.Context, event, holdID string) error {
	return s.BookedFor(ctx, event, holdID, "")
}

// BookedFor moves a confirmed hold's places from held to sold (told after
// the confirmation committed), and frees its fan's active place at once,
// noting in the same step that its place and account ("" = none) bought,
// as CompleteFor does: a presale's invitation buys once, and a join of the
// account must not find the place gone and the purchase not yet noted
// (the booking core's relay calls CompleteFor only later). Safe to repeat.
func (s *Store) BookedFor(ctx context.Context, event, holdID, account string) error {
	return s.giveBack(ctx, "booked", event, holdID, 1, account)
}

func (s *Store) giveBack(ctx context.Context, op, event, holdID string, booked int, account string) error {
	k := rdb.KeysOf(event)
	n, err := s.c.Run(ctx, rdb.Call{Script: giveScript, Keys: []string{k.Inventory, k.Places, k.Holders, k.Active, k.Ended, k.Claims, k.Ends, k.Booked, k.Bought},
		Args: []any{holdID, booked, account}}).Int()
	if err != nil {
		return rdb.Interpret(op, err)
	}
	if n == 2 {
		return s.soldOutToShards(ctx, event)
	}
	return nil
}

// soldOutToShards tells the shards of a sharded event at once that it is
// sold out, so that its waiting fans are told by their next poll (the
// tick copies the inventory to the shards too, but only once a tick).
func (s *Store) soldOutToShards(ctx context.Context, event string) error {
	k := rdb.KeysOf(event)
	n, err := s.c.HMGet(ctx, k.Stats, "shards").Result()
	if err != nil {
		return rdb.Interpret("sold out", err)
	}
	shards := int(rdb.Num(n[0]))
	if shards <= 1 {
		return nil
	}
	inv, err := s.InventoryOf(ctx, event)
	if err != nil || !inv.SoldOut() {
		return err
	}
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sk := range rdb.ShardKeysFor(event, shards) {
			p.HSet(ctx, sk.Info, "soldout", 1, "available", 0)
		}
		return nil
	})
	return rdb.Interpret("sold out", err)
}

// PaymentOpened and PaymentSettled keep the count of open payments (a
// sale with a payment pending is not sold out: it may still fail).
func (s *Store) PaymentOpened(ctx context.Context, event, paymentID string) error {
	k := rdb.KeysOf(event)
	err := s.c.Run(ctx, rdb.Call{Script: paymentScript, Keys: []string{k.Inventory, k.Payments, k.Ended}, Args: []any{paymentID, 1}}).Err()
	return rdb.Interpret("payment opened", err)
}

func (s *Store) PaymentSettled(ctx context.Context, event, paymentID string) error {
	k := rdb.KeysOf(event)
	open, err := s.c.Run(ctx, rdb.Call{Script: paymentScript, Keys: []string{k.Inventory, k.Payments, k.Ended}, Args: []any{paymentID, 0}}).Int()
	if err != nil {
		return rdb.Interpret("payment settled", err)
	}
	if open == 0 {
		return s.soldOutToShards(ctx, event)
	}
	return nil
}

// SyncMark is the instant (Redis TIME, ms) a sync starts from: take it
// before reading the snapshot.
func (s *Store) SyncMark(ctx context.Context) (int64, error) {
	t, err := s.c.Time(ctx).Result()
	if err != nil {
		return 0, rdb.Interpret("sync mark", err)
	}
	return t.UnixMilli(), nil
}

// SyncInventory replaces the event's inventory by snap, read from
// PostgreSQL after mark (SyncMark): every live hold of the snapshot is
// counted, every reservation absent from it is dropped unless it is younger
// than mark − inFlight (its hold may be committing now), and available is
// the snapshot's free places less those kept reservations. A sync that
// races holds and releases errs only on the safe side (fewer places), and
// the next one corrects it.
func (s *Store) SyncInventory(ctx context.Context, event string, mark int64, snap line.Snapshot) error {
	k := rdb.KeysOf(event)
	args := make([]any, 0, 5+3*len(snap.Holds)+len(snap.Payments)+len(snap.Booked))
	args = append(args, mark-inFlight.Milliseconds(), snap.Free, len(snap.Holds), len(snap.Payments), len(snap.Booked))
	for _, h := range snap.Holds {
		args = append(args, h.HoldID, h.Ticket, h.Places)
	}
	for _, p := range snap.Payments {
		args = append(args, p)
	}
	for _, b := range snap.Booked {
		args = append(args, b)
	}
	v, err := s.c.Run(ctx, rdb.Call{Script: syncScript, Keys: []string{k.Inventory, k.Places, k.Holders, k.Active, k.Payments, k.Ended}, Args: args}).Int64Slice()
	if err != nil {
		return rdb.Interpret("sync inventory", err)
	}
	if len(v) == 4 && v[0] <= 0 && v[1] <= 0 && v[2] <= 0 {
		return s.soldOutToShards(ctx, event)
	}
	return nil
}

// InventoryOf reads what the booking core published for event.
func (s *Store) InventoryOf(ctx context.Context, event string) (line.Inventory, error) {
	v, err := s.c.HMGet(ctx, rdb.KeysOf(event).Inventory, "available", "held", "pending", "updatedAt").Result()
	if err != nil {
		return line.Inventory{}, rdb.Interpret("inventory", err)
	}
	return inventoryOf(v), nil
}

// inventoryOf reads an HMGET of available, held, pending, updatedAt.
func inventoryOf(v []any) line.Inventory {
	if len(v) < 4 || v[0] == nil {
		return line.Inventory{}
	}
	return line.Inventory{Known: true, Available: rdb.Num(v[0]), Held: rdb.Num(v[1]), Pending: rdb.Num(v[2]), UpdatedAt: time.UnixMilli(rdb.Num(v[3]))}
}

// invPrelude: the inventory's shared steps (after prelude). KEYS are passed
// by name: inv (inventory), places, holders, active.
const invPrelude = `
-- a ticket that leaves the active set while it holds something is no longer
-- engaged: every script that removes from active calls this.
local function inv_leaves(inv, holders, ticket)
  local n = tonumber(redis.call('HGET', holders, ticket))
  if n and n > 0 then redis.call('HINCRBY', inv, 'engaged', -1) end
end

-- the event's inventory: known, available, held, pending, engaged
local function inv_read(inv)
  local v = redis.call('HMGET', inv, 'available', 'held', 'pending', 'engaged')
  if not v[1] then return false, 0, 0, 0, 0 end
  return true, tonumber(v[1]), tonumber(v[2]) or 0, tonumber(v[3]) or 0, tonumber(v[4]) or 0
end

-- sold out: every place is sold (none available, none held, no payment
-- pending), of an inventory as inv_read reads it.
local function inv_sold(known, avail, held, pending)
  return known and avail <= 0 and held <= 0 and pending <= 0
end

local function inv_soldout(inv)
  return inv_sold(inv_read(inv))
end
`

// reserveScript counts a hold's places out before its statement runs.
//
// KEYS: 1 inventory, 2 places, 3 holders, 4 active
// ARGV: 1 hold id, 2 ticket id, 3 places, 4 "1" when the ticket must hold
// its active place now (ReserveActive), else absent
// Returns 1 (reserved), 0 (already reserved), -1 (no inventory: sync first;
// nothing written), -2 (the ticket is not active: nothing written).
var reserveScript = lua.Script("reserve", `
local now = clock()
local exp
if ARGV[4] == '1' then
  exp = tonumber(redis.call('ZSCORE', KEYS[4], ARGV[2]))
  if not exp or exp <= now then return -2 end
end
if redis.call('HEXISTS', KEYS[1], 'available') == 0 then return -1 end
local places = tonumber(ARGV[3])
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. places .. ' ' .. now) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'available', -places)
redis.call('HINCRBY', KEYS[1], 'held', places)
if redis.call('HINCRBY', KEYS[3], ARGV[2], 1) == 1 and (exp or redis.call('ZSCORE', KEYS[4], ARGV[2])) then
  redis.call('HINCRBY', KEYS[1], 'engaged', 1)
end
redis.call('HSET', KEYS[1], 'updatedAt', now)
return 1
`)

// giveScript ends a hold the inventory counts: its places go back
// (refused, released, lapsed) or are sold (booked, which also frees the
// fan's active place: the booking is done, and that place's end is noted
// in the line's ends, as leave_active notes it). The end is noted in ended
// for the syncs that may read a snapshot taken before it.
//
// A sale notes, in the same step that frees the place, what
// completeScript notes (which the booking core's relay runs later): the
// place in booked and its account in bought, so that no join of the
// account finds its place gone and its invitation unused. The account is
// noted even for a hold not counted (its sale is confirmed all the same);
// both are noted once, at the first telling (HSETNX), so a repeat, or the
// relay's completion, changes nothing.
//
// KEYS: 1 inventory, 2 places, 3 holders, 4 active, 5 ended, 6 claims,
// 7 ends, 8 booked, 9 bought
// ARGV: 1 hold id, 2 booked 0|1, 3 the sale's account ("" = none)
// Returns 1, 2 when the event is sold out now, or 0 when the hold was not
// counted (nothing else changes).
var giveScript = lua.Script("give", `
local now = clock()
if ARGV[2] == '1' and ARGV[3] ~= '' then redis.call('HSETNX', KEYS[9], ARGV[3], int(now)) end
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return 0 end
local ticket, places = string.match(v, '^(%S+) (%d+)')
places = tonumber(places)
redis.call('HDEL', KEYS[2], ARGV[1])
local kind = 'r'
if ARGV[2] == '1' then
  kind = 'b'
  redis.call('HSETNX', KEYS[8], ticket, int(now))
end
redis.call('HSET', KEYS[5], ARGV[1], kind .. ' ' .. places .. ' ' .. now)
if ARGV[2] == '0' then redis.call('HINCRBY', KEYS[1], 'available', places) end
redis.call('HINCRBY', KEYS[1], 'held', -places)
local active = redis.call('ZSCORE', KEYS[4], ticket)
if ARGV[2] == '1' and active then
  inv_leaves(KEYS[1], KEYS[3], ticket)
  redis.call('ZREM', KEYS[4], ticket)
  redis.call('HDEL', KEYS[6], ticket)
  ended(KEYS[7], ticket, tonumber(active))
  active = false
end
if redis.call('HINCRBY', KEYS[3], ticket, -1) <= 0 then
  redis.call('HDEL', KEYS[3], ticket)
  if active then redis.call('HINCRBY', KEYS[1], 'engaged', -1) end
end
redis.call('HSET', KEYS[1], 'updatedAt', now)
if inv_soldout(KEYS[1]) then return 2 end
return 1
`)

// paymentScript keeps the set of open payments and its count; a settled
// one is noted in ended ("pay:<id>") for the syncs that may read a snapshot
// taken while it was still open.
//
// KEYS: 1 inventory, 2 payments, 3 ended
// ARGV: 1 payment id, 2 opened 1 | settled 0
// Returns the payments open.
var paymentScript = lua.Script("payment", `
if redis.call('HEXISTS', KEYS[1], 'available') == 0 then return -1 end
local now = clock()
if ARGV[2] == '1' then
  if redis.call('HEXISTS', KEYS[3], 'pay:' .. ARGV[1]) == 0 then redis.call('HSETNX', KEYS[2], ARGV[1], now) end
else
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HSET', KEYS[3], 'pay:' .. ARGV[1], 'p 0 ' .. now)
end
local n = redis.call('HLEN', KEYS[2])
redis.call('HSET', KEYS[1], 'pending', n, 'updatedAt', now)
return n
`)

// syncScript rebuilds an event's inventory from a PostgreSQL snapshot read
// after mark. Between the snapshot and this script, holds went on; so:
//
//   - a live hold of the snapshot that ended since (it is in ended) is not
//     counted again; if it was given back, its places are free now although
//     the snapshot did not count them free: they are added;
//   - a hold booked since (in ended) that the snapshot neither held nor knew
//     booked (not in Booked) was taken after the snapshot: the snapshot
//     counted its places free, and they are sold: they are taken off;
//   - a reservation absent from the snapshot is kept if it was made after
//     mark − inFlight (its hold may be committing now; its places are taken
//     off the snapshot's free), and dropped if older (a crash left it);
//   - a payment open in the snapshot and settled since is not open again.
//
// Every case is exact or errs on the safe side (fewer places), which the
// next sync puts right.
//
// KEYS: 1 inventory, 2 places, 3 holders, 4 active, 5 payments, 6 ended
// ARGV: 1 mark − inFlight (ms), 2 free places, 3 live holds h, 4 pending
// payments p, 5 booked lately b, then h × (hold id, ticket, places), then p
// payment ids, then b hold ids
// Returns {available, held, pending, engaged}.
var syncScript = lua.Script("sync", `
local now = clock()
local keep_after, free = tonumber(ARGV[1]), tonumber(ARGV[2])
local h, p, b = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local snap = {}
for i = 0, h - 1 do
  local at = 6 + 3 * i
  snap[ARGV[at]] = ARGV[at + 1] .. ' ' .. ARGV[at + 2]
end
local booked = {}
for i = 6 + 3 * h + p, 5 + 3 * h + p + b do booked[ARGV[i]] = true end
-- holds that ended lately
local adjust = 0
local ended = redis.call('HGETALL', KEYS[6])
for i = 1, #ended, 2 do
  local id = ended[i]
  local kind, places, at = string.match(ended[i + 1], '^(%a) (%d+) (%d+)')
  places = tonumber(places)
  if tonumber(at) < keep_after then
    redis.call('HDEL', KEYS[6], id) -- every snapshot from now on shows it
  elseif snap[id] then
    snap[id] = nil
    if kind == 'r' then adjust = adjust + places end
  elseif kind == 'b' and not booked[id] then
    adjust = adjust - places
  end
end
-- reservations not in the snapshot: kept only if their hold may be in flight
local flying = 0
local cur = redis.call('HGETALL', KEYS[2])
for i = 1, #cur, 2 do
  local id, v = cur[i], cur[i + 1]
  if not snap[id] then
    local ticket, places, at = string.match(v, '^(%S+) (%d+) (%d+)')
    if tonumber(at) >= keep_after then
      flying = flying + tonumber(places)
    else
      redis.call('HDEL', KEYS[2], id)
    end
  end
end
for id, v in pairs(snap) do
  if redis.call('HEXISTS', KEYS[2], id) == 0 then redis.call('HSET', KEYS[2], id, v .. ' ' .. now) end
end
-- who holds what, from what is now counted
redis.call('DEL', KEYS[3])
local held, engaged = 0, 0
cur = redis.call('HGETALL', KEYS[2])
for i = 1, #cur, 2 do
  local ticket, places = string.match(cur[i + 1], '^(%S+) (%d+)')
  held = held + tonumber(places)
  if redis.call('HINCRBY', KEYS[3], ticket, 1) == 1 and redis.call('ZSCORE', KEYS[4], ticket) then
    engaged = engaged + 1
  end
end
-- open payments: the snapshot's, and any opened since the mark
local pays = {}
for i = 6 + 3 * h, 5 + 3 * h + p do pays[ARGV[i]] = true end
cur = redis.call('HGETALL', KEYS[5])
for i = 1, #cur, 2 do
  if not pays[cur[i]] and tonumber(cur[i + 1]) < keep_after then redis.call('HDEL', KEYS[5], cur[i]) end
end
for id in pairs(pays) do
  -- settled since the snapshot: not open again
  if redis.call('HEXISTS', KEYS[6], 'pay:' .. id) == 0 then redis.call('HSETNX', KEYS[5], id, now) end
end
local pending = redis.call('HLEN', KEYS[5])
local available = free - flying + adjust
redis.call('HSET', KEYS[1], 'available', available, 'held', held, 'pending', pending, 'engaged', engaged, 'updatedAt', now)
return {available, held, pending, engaged}
`)
