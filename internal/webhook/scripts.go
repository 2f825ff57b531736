package webhook

import (
	"github.com/waitroom/waitroom/internal/rdb"
)

// lua is the webhooks' function library (rdb.Library).
var lua = rdb.NewLibrary("webhook", rdb.Prelude, outboxLua)

// outboxLua is what every script that makes moments shares (after
// rdb.Prelude). Its KEYS are the event's webhook keys, 1 hooks, 2 moments,
// 3 deliveries, 4 pending, 5 log; its ARGV start 1 event, 2 how many
// deliveries the log keeps, 3 n receivers, then for each its id and its
// types ("*" or ",a,b,"); the script's own ARGV follow, from ARGV[own].
// A script that uses it begins with outbox_begin(), which reads those
// (the library's fragments are defined once, not at every call).
//
// A delivery's state (HASH deliveries) is one line:
//
//	<status> <attempts> <due ms> <claimed until ms> <created ms> <owner|-> <last error…>
const outboxLua = `
local event, bound, neps, own, now

local function outbox_begin()
  event, bound, neps = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
  own = 4 + 2 * neps
  now = clock()
end

local function parse(st)
  local status, att, due, claim, created, owner, err = string.match(st or '', '^(%S+) (%d+) (%d+) (%d+) (%d+) (%S+) ?(.*)$')
  return status, tonumber(att), tonumber(due), tonumber(claim), tonumber(created), owner, err
end

local function state(status, att, due, claim, created, owner, err)
  return status .. ' ' .. int(att) .. ' ' .. int(due) .. ' ' .. int(claim) .. ' ' .. int(created) .. ' ' .. owner .. ' ' .. (err or '')
end

-- trim drops the oldest settled deliveries past the bound, and a moment
-- with its last delivery; a pending delivery stays until it is settled.
local function trim()
  local over = redis.call('ZCARD', KEYS[5]) - bound
  if over <= 0 then return end
  for _, m in ipairs(redis.call('ZRANGE', KEYS[5], 0, over - 1)) do
    if parse(redis.call('HGET', KEYS[3], m)) ~= 'pending' then
      local seq = redis.call('ZSCORE', KEYS[5], m)
      redis.call('ZREM', KEYS[5], m)
      redis.call('HDEL', KEYS[3], m)
      if redis.call('ZCOUNT', KEYS[5], seq, seq) == 0 then
        redis.call('HDEL', KEYS[2], string.match(m, '^(%S+)'))
      end
    end
  end
end

-- enqueue makes the moment kind (data: its JSON) and a delivery of it to
-- every receiver that wants it, in the event's order; id is the moment's
-- own, or nil to derive one from the event's count of moments. It returns
-- how many deliveries it made: 0 for a moment no receiver wants, or one
-- made before (the same id).
local function enqueue(kind, data, id)
  local to = {}
  for i = 0, neps - 1 do
    local types = ARGV[5 + 2 * i]
    if types == '*' or string.find(types, ',' .. kind .. ',', 1, true) then to[#to + 1] = ARGV[4 + 2 * i] end
  end
  if #to == 0 then return 0 end
  local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  id = id or ('msg_' .. string.sub(redis.sha1hex(event .. ' ' .. kind .. ' ' .. seq .. ' ' .. int(now)), 1, 24))
  local body = '{"type":"' .. kind .. '","event":"' .. event .. '","atMs":' .. int(now) .. ',"data":' .. data .. '}'
  if redis.call('HSETNX', KEYS[2], id, body) == 0 then return 0 end
  for _, ep in ipairs(to) do
    local m = id .. ' ' .. ep
    redis.call('HSET', KEYS[3], m, state('pending', 0, now, 0, now, '-'))
    redis.call('ZADD', KEYS[4], seq, m)
    redis.call('ZADD', KEYS[5], seq, m)
  end
  trim()
  return #to
end
`

// enqueueScript queues a moment a caller made, once per id.
//
// KEYS, ARGV 1..own-1: outboxLua's
// ARGV own: type, own+1: data (JSON), own+2: the moment's id
// Returns the deliveries made (0: none wants it, or queued before).
var enqueueScript = lua.Script("enqueue", `
outbox_begin()
return enqueue(ARGV[own], ARGV[own + 1], ARGV[own + 2])
`)

// observeScript is an admitter's look at an event, once per tick: each
// aspect's state worked out here, from Redis, at one instant (so that two
// admitters reading at different times never undo each other's moment),
// compared with the state last announced, and a moment made when it moved.
//
//   - sale: closed (mode closed, or closes_at passed), soldout (the
//     inventory: nothing available, held or pending, as queue's inv_sold
//     reads it), paused, prequeue (before opens_at; passthrough never
//     waits), open. The mode is the config's with the operators' override
//     laid over it as policy.Overlay lays it: an override made over
//     another config value is not in force. Into open from paused is
//     sale.resumed, from anything else (nothing announced yet too)
//     sale.opened; into paused, closed, soldout their own; into prequeue
//     none.
//   - booking (adaptive events): degraded while the adaptive factor is
//     below 1, else healthy: booking.degraded, booking.recovered.
//   - line (mode auto, DESIGN.md "Always on"): formed while anyone waits
//     (the line's wait set on one shard, its mark on many) or when places
//     were made in line since the look before (a line that formed and was
//     let in between two looks), else cleared: line.formed, and
//     line.cleared after a formed. Other modes leave it as it was.
//   - lottery, selection: drawn, once, when the caller says the draw is
//     published (it never is undrawn).
//
// The caller's view must be the config the event's last announcement was
// made with (the fence): an admitter still on the config before a reload
// announces nothing until it has reloaded too.
//
// KEYS 1..5: outboxLua's, 6 inventory, 7 overrides, 8 adaptive, 9 the
// line's stats, 10 its wait set (one shard's)
// ARGV own: the fence (the config's values, JSON), +1 the config's mode,
// +2 opens_at ms ("" none), +3 closes_at ms ("" none), +4 adaptive "1"|"0",
// +5 the lottery's data when drawn ("" not), +6 the selection's
// Returns {type, deliveries, …} of the moments made.
var observeScript = lua.Script("observe", `
outbox_begin()
local fence = redis.call('HGET', KEYS[1], 'config')
if not fence then
  redis.call('HSET', KEYS[1], 'config', ARGV[own])
elseif fence ~= ARGV[own] then
  return {}
end
local made = {}
-- aspect moves name to st, and makes the moment into(previous) names.
local function aspect(name, st, into)
  local prev = redis.call('HGET', KEYS[1], name)
  if prev == st then return end
  redis.call('HSET', KEYS[1], name, st)
  local kind, data = into(prev)
  if kind then
    made[#made + 1] = kind
    made[#made + 1] = enqueue(kind, data)
  end
end

local mode = ARGV[own + 1]
local ov = redis.call('HGET', KEYS[7], 'mode')
if ov then
  local ok, o = pcall(cjson.decode, ov)
  if ok and type(o) == 'table' and o.base == mode and type(o.value) == 'string' then mode = o.value end
end
local opens, closes = tonumber(ARGV[own + 2]), tonumber(ARGV[own + 3])
local inv = redis.call('HMGET', KEYS[6], 'available', 'held', 'pending')
local sold = inv[1] and tonumber(inv[1]) <= 0 and (tonumber(inv[2]) or 0) <= 0 and (tonumber(inv[3]) or 0) <= 0
local sale = 'open'
if mode == 'closed' or (closes and now >= closes) then sale = 'closed'
elseif sold then sale = 'soldout'
elseif mode == 'paused' then sale = 'paused'
elseif mode ~= 'passthrough' and opens and now < opens then sale = 'prequeue'
end
aspect('sale', sale, function(prev)
  local kind = ({open = 'sale.opened', paused = 'sale.paused', closed = 'sale.closed', soldout = 'sale.soldout'})[sale]
  if sale == 'open' and prev == 'paused' then kind = 'sale.resumed' end
  return kind, cjson.encode({state = sale, previous = prev or cjson.null})
end)

if ARGV[own + 4] == '1' then
  local f = tonumber(redis.call('HGET', KEYS[8], 'factor')) or 1
  aspect('booking', f < 1 and 'degraded' or 'healthy', function(prev)
    if f < 1 then return 'booking.degraded', cjson.encode({adaptiveFactor = f}) end
    if prev == 'degraded' then return 'booking.recovered', cjson.encode({adaptiveFactor = f}) end
  end)
end

-- The line's count of places made in line, ever: its joins' sequence less
-- those let straight through (every layout keeps both on the event's tag).
-- Noted at every look, whatever the mode, so that an auto line compares
-- it with the look before.
local st = redis.call('HMGET', KEYS[9], 'seq', 'through', 'lined')
local placed = (tonumber(st[1]) or 0) - (tonumber(st[2]) or 0)
local seen = tonumber(redis.call('HGET', KEYS[1], 'placed'))
if seen ~= placed then redis.call('HSET', KEYS[1], 'placed', placed) end
if mode == 'auto' then
  local waits = redis.call('ZCARD', KEYS[10]) > 0 or st[3] ~= false or (seen ~= nil and placed > seen)
  aspect('line', waits and 'formed' or 'cleared', function(prev)
    if waits or prev == 'formed' then
      return waits and 'line.formed' or 'line.cleared', cjson.encode({state = waits and 'formed' or 'cleared', previous = prev or cjson.null})
    end
  end)
end

if ARGV[own + 5] ~= '' then
  aspect('lottery', 'drawn', function() return 'lottery.drawn', ARGV[own + 5] end)
end
if ARGV[own + 6] ~= '' then
  aspect('selection', 'drawn', function() return 'selection.drawn', ARGV[own + 6] end)
end
return made
`)

// reconfigureScript moves the config's values announced for an event
// from the ones the caller read to its own, and makes settings.changed
// with the difference; another caller that moved them first wins.
//
// KEYS, ARGV 1..own-1: outboxLua's
// ARGV own: the values read ("" none), +1 the caller's, +2 settings.changed's
// data ("" = nothing to announce)
// Returns -1 if the values read are not there any more, else the
// deliveries made.
var reconfigureScript = lua.Script("reconfigure", `
outbox_begin()
if (redis.call('HGET', KEYS[1], 'config') or '') ~= ARGV[own] then return -1 end
redis.call('HSET', KEYS[1], 'config', ARGV[own + 1])
if ARGV[own + 2] == '' then return 0 end
return enqueue('settings.changed', ARGV[own + 2])
`)

// claimScript takes the head of each receiver's line of an event, if it
// is due and nobody holds it, for the caller until its visibility
// timeout. A head older than the retry window is given up (failed); a
// head of a receiver that answered 410 Gone is settled gone; the next one
// in its line is then the head.
//
// KEYS: 1 deliveries, 2 pending, 3 moments
// ARGV: 1 the caller, 2 visibility timeout ms, 3 retry window ms, 4 how
// many pending deliveries to look at, 5 the gone receivers (" a b ")
// Returns {what, member, body, attempts, …}, what being claimed, failed
// or gone.
var claimScript = lua.Script("claim", `
local now = clock()
local window, gone = tonumber(ARGV[3]), ARGV[5]
local seen, out = {}, {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[4]) - 1)) do
  local id, ep = string.match(m, '^(%S+) (%S+)$')
  if ep and not seen[ep] then
    local st = redis.call('HGET', KEYS[1], m) or ''
    local status, att, due, claim, created, owner, err = string.match(st, '^(%S+) (%d+) (%d+) (%d+) (%d+) (%S+) ?(.*)$')
    local what
    if status ~= 'pending' then
      redis.call('ZREM', KEYS[2], m)
    elseif string.find(gone, ' ' .. ep .. ' ', 1, true) then
      what = 'gone'
    elseif now - tonumber(created) >= window then
      what = 'failed'
    else
      seen[ep] = true
      if tonumber(due) <= now and tonumber(claim) <= now then
        what = 'claimed'
        redis.call('HSET', KEYS[1], m, table.concat({status, att, due, int(now + tonumber(ARGV[2])), created, ARGV[1], err}, ' '))
      end
    end
    if what == 'gone' or what == 'failed' then
      redis.call('HSET', KEYS[1], m, table.concat({what, att, int(now), '0', created, '-', err}, ' '))
      redis.call('ZREM', KEYS[2], m)
    end
    if what then
      out[#out + 1] = what
      out[#out + 1] = m
      out[#out + 1] = redis.call('HGET', KEYS[3], id) or ''
      out[#out + 1] = att
    end
  end
end
return out
`)

// settleScript records how an attempt went: delivered or gone (the
// delivery leaves the line), or to be tried again after a wait (only by
// the sender that still holds it).
//
// KEYS: 1 deliveries, 2 pending
// ARGV: 1 member, 2 the caller, 3 delivered | gone | retry, 4 attempts,
// 5 retry after ms, 6 the error
// Returns 1 if recorded, 0 if the delivery was settled or taken over.
var settleScript = lua.Script("settle", `
local now = clock()
local st = redis.call('HGET', KEYS[1], ARGV[1]) or ''
local status, att, due, claim, created, owner = string.match(st, '^(%S+) (%d+) (%d+) (%d+) (%d+) (%S+)')
if status ~= 'pending' then return 0 end
if ARGV[3] == 'retry' then
  if owner ~= ARGV[2] then return 0 end
  redis.call('HSET', KEYS[1], ARGV[1], table.concat({'pending', ARGV[4], int(now + tonumber(ARGV[5])), '0', created, '-', ARGV[6]}, ' '))
  return 1
end
redis.call('HSET', KEYS[1], ARGV[1], table.concat({ARGV[3], ARGV[4], int(now), '0', created, '-', ARGV[6]}, ' '))
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`)
