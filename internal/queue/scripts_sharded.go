package queue

import "github.com/redis/go-redis/v9"

// The scripts of a sharded event (shards.go; admission.shards > 1). A
// waiting fan lives on one shard, under its own hash tag; what must be one
// for the whole event (the sequence, the token bucket, the active set, the
// inventory) lives under the event's tag. No script touches two tags: the
// steps that need both are run in order by the Go code, and each is safe to
// run again or to stop after.

// layoutPrelude: the layout an event's state has. One-shard scripts bounce
// a call for a sharded event ({'layout', k}), which happens only while a
// process still holds the settings from before the event got its layout.
const layoutPrelude = `
local function sharded(stats)
  local k = tonumber(redis.call('HGET', stats, 'shards'))
  if k and k > 1 then return k end
  return nil
end

-- the layout of an event: the one stored, else 1 if the event already has
-- one-shard state, else the wanted one, stored if > 1.
local function layout(stats, want)
  local k = tonumber(redis.call('HGET', stats, 'shards'))
  if k then return k end
  if redis.call('HEXISTS', stats, 'seq') == 1 then return 1 end
  if want > 1 then redis.call('HSET', stats, 'shards', want) end
  return want
end
`

// sJoinGlobal is the first step of a join on a sharded event, for many
// joins at once (batch.go merges them): it checks the event is open and not
// sold out, spends the proof of work if any, and takes the next sequence
// number. In passthrough it admits the fan then and there.
//
// As the one-shard join, a pre-queue place needs the lottery committed
// ({"uncommitted"} until then) and is recorded among the draw's entries,
// and none is made once the entries froze.
//
// A join for an account makes the new place the account's here, in this
// first step; it makes nothing and answers {"account", entry} while the
// account has a place that may be live. This step sees only the event's
// tag, not the shard a waiting place is on, so "may be live" is: active,
// or not the place the caller found dead (its 5th item: the caller asks the
// place's status and comes back with the id of a dead one), or made less
// than accountGrace ms ago (its second step, on its shard, may not have
// run yet).
//
// KEYS: 1 stats, 2 active, 3 inventory, 4 claims, 5 lottery, 6 lottery
// entries, 7 accounts, [8 spent proofs of the minute]
// ARGV: 1 mode, 2 prequeue_opens_at ms or "", 3 opens_at ms or "",
// 4 closes_at ms or "", 5 configured rate, 6 access_ttl ms, 7 shards,
// 8 when the proofs' set goes (unix ms) or "", then per join: 5 items,
// the random part of the id, the proof's id or "", its expiry ms or "",
// the account id or "", the id of the account's place found dead or "".
// Returns per join one of
//
//	{"closed"} | {"not_open"} | {"sold_out"} | {"reused"} | {"stale"} | {"layout", k} | {"uncommitted"}
//	{"account", entry} (the account's place, maybe live)
//	{"place", seq, now ms, rate, available or -1, ms until opening}
//	{"admitted", seq, now ms, expiry ms}
var sJoinGlobal = redis.NewScript(prelude + invPrelude + layoutPrelude + `
local now, now_s = clock()
local mode = ARGV[1]
local pre, opens, closes = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {}
local n = (#ARGV - 8) / 5
local function all(r) for i = 1, n do out[i] = r end return out end
local k = layout(KEYS[1], tonumber(ARGV[7]))
if k ~= tonumber(ARGV[7]) then return all({'layout', k}) end
if mode == 'closed' or (closes and now >= closes) then return all({'closed'}) end
if (pre and now < pre) or (not pre and opens and now < opens) then return all({'not_open'}) end
local known, avail = inv_read(KEYS[3])
if inv_soldout(KEYS[3]) then return all({'sold_out'}) end
if not known then avail = -1 end
local until_open = 0
if opens and now < opens then until_open = opens - now end
if until_open > 0 then
  local lot = redis.call('HMGET', KEYS[5], 'commitment', 'frozen')
  if lot[2] then
    until_open = 0 -- the entries froze: after opening, whatever opens_at says now
  elseif not lot[1] then
    return all({'uncommitted'})
  end
end
local rate = rate_for_eta(KEYS[1], ARGV[5])
local ttl = tonumber(ARGV[6])
for i = 1, n do
  local at = 9 + 5 * (i - 1)
  local ok = true
  local acct = ARGV[at + 3]
  if acct ~= '' then
    local v = redis.call('HGET', KEYS[7], acct)
    if v then
      local had, joined = string.match(v, '^(%S+) (%d+)')
      local exp = tonumber(redis.call('ZSCORE', KEYS[2], had))
      if (exp and exp > now) or had ~= ARGV[at + 4] or now - tonumber(joined) < ` + accountGraceMs + ` then
        out[i], ok = {'account', v}, false
      end
    end
  end
  if ok and ARGV[at + 1] ~= '' then
    if now >= tonumber(ARGV[at + 2]) then
      out[i], ok = {'stale'}, false
    elseif redis.call('SADD', KEYS[8], ARGV[at + 1]) == 0 then
      out[i], ok = {'reused'}, false
    else
      redis.call('PEXPIREAT', KEYS[8], ARGV[8])
    end
  end
  if ok then
    local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
    if acct ~= '' then redis.call('HSET', KEYS[7], acct, b36(seq) .. '.' .. ARGV[at] .. ' ' .. now .. ' ?') end
    if mode == 'passthrough' and until_open == 0 then
      local id = b36(seq) .. '.' .. ARGV[at]
      local exp = now + ttl
      redis.call('ZADD', KEYS[2], exp, id)
      redis.call('HSET', KEYS[4], id, now_s)
      redis.call('HINCRBY', KEYS[1], 'joined', 1)
      redis.call('HINCRBY', KEYS[1], 'admitted', 1)
      out[i] = {'admitted', seq, now, exp}
    else
      if until_open > 0 then redis.call('RPUSH', KEYS[6], b36(seq) .. '.' .. ARGV[at]) end
      out[i] = {'place', seq, now, rate, avail, until_open}
    end
  end
end
return out
`)

// sJoinShard puts a new place on its shard (the second step of a join).
// The place's poll interval is computed from the fans ahead on this shard
// times the shards (their share of the line); the exact position is added
// up by the caller from every shard.
//
// A pre-queue place that arrives once the draw has begun on this shard
// (lottery.go: the draw marks every shard first) is refused with
// {"redraw"}: its score must be its draw's, which the caller then knows.
//
// A place that arrives later than lateShardMs after its first step is
// refused with {"late"} and never made: until accountGraceMs after the
// first step, a join of the same account takes the place for one on its
// way and makes none (accounts.go), and after it, it may replace it; so a
// place must be on its shard, or never be, by then. (The margin is for the
// clocks of a cluster's masters, which this compares.)
//
// KEYS: 1 wait, 2 seen, 3 stats, 4 info
// ARGV: 1 ticket id, 2 score, 3 seen slot, 4 rate, 5 ms until opening,
// 6 abandon_after ms, 7 jitter u, 8 shards, 9 1 if the score is the
// ticket's draw (else 0), 10 the first step's time (ms)
// Returns {rank on this shard, pollAfter ms} | {"redraw"} | {"late"}.
var sJoinShard = redis.NewScript(prelude + `
local now = clock()
if now - tonumber(ARGV[10]) > ` + lateShardMs + ` then return {'late'} end
if ARGV[9] ~= '1' and tonumber(ARGV[2]) < 0 and redis.call('HGET', KEYS[4], 'drawn') then return {'redraw'} end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'joined', 1)
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
local poll = poll_after(rank * tonumber(ARGV[8]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[7]))
redis.call('BITFIELD', KEYS[2], 'SET', 'u32', '#' .. ARGV[3], deadline(now, poll, tonumber(ARGV[6])))
return {rank, poll}
`)

// sStatusShard is a waiting fan's poll on its shard: the fan is still there
// (a new abandon deadline), its rank on the shard, its score (for the
// counts of the other shards), and the figures the tick copied in.
//
// KEYS: 1 wait, 2 seen, 3 info, 4 moving
// ARGV: 1 ticket id, 2 seen slot, 3 mode, 4 opens_at ms or "",
// 5 closes_at ms or "", 6 configured rate, 7 abandon_after ms, 8 jitter u,
// 9 shards
// Returns one of
//
//	{"gone"} (not on this shard: admitted, or no longer in line)
//	{"moving"} (a tick is handing it to the active set right now)
//	{"closed"} | {"soldout"}
//	{"waiting", now ms, rank on this shard, pollAfter ms, rate, available or -1, score}
var sStatusShard = redis.NewScript(prelude + `
local now = clock()
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
if not rank then
  if redis.call('ZSCORE', KEYS[4], ARGV[1]) then return {'moving'} end
  return {'gone'}
end
local opens, closes = tonumber(ARGV[4]), tonumber(ARGV[5])
if ARGV[3] == 'closed' or (closes and now >= closes) then return {'closed'} end
local info = redis.call('HMGET', KEYS[3], 'rate', 'available', 'soldout')
if info[3] == '1' then return {'soldout'} end
local r = info[1] or ARGV[6]
local avail = info[2] or -1
local until_open = 0
if opens and now < opens then until_open = opens - now end
local poll = poll_after(rank * tonumber(ARGV[9]), tonumber(r), until_open, tonumber(ARGV[8]))
redis.call('BITFIELD', KEYS[2], 'SET', 'u32', '#' .. ARGV[2], deadline(now, poll, tonumber(ARGV[7])))
return {'waiting', now, rank, poll, r, avail, redis.call('ZSCORE', KEYS[1], ARGV[1])}
`)

// sBelow counts, for many scores at once (batch.go merges the calls), the
// fans of one shard ahead of each: those waiting with a lower score, and
// those a tick is handing over (they are ahead until they are in).
//
// KEYS: 1 wait, 2 moving
// ARGV: the scores
// Returns one count per score.
var sBelow = redis.NewScript(`
local out = {}
local moving = redis.call('EXISTS', KEYS[2]) == 1
for i = 1, #ARGV do
  local below = '(' .. ARGV[i]
  out[i] = redis.call('ZCOUNT', KEYS[1], '-inf', below)
  if moving then out[i] = out[i] + redis.call('ZCOUNT', KEYS[2], '-inf', below) end
end
return out
`)

// sStatusGlobal is the poll of a fan no longer on its shard: admitted
// (the first look claims the place, as claim does for one shard) or gone.
//
// KEYS: 1 active, 2 claims, 3 stats
// ARGV: 1 ticket id, 2 access_ttl ms
// Returns {"expired"} | {"admitted", now ms, expiry ms, first 0|1} |
// {"layout", 1} (the event's line is not sharded: the ticket was never on a
// shard).
var sStatusGlobal = redis.NewScript(prelude + layoutPrelude + `
if not sharded(KEYS[3]) then return {'layout', 1} end
local now, now_s = clock()
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not exp or exp <= now then return {'expired'} end
local c = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
if c and c > 1 then return {'admitted', now, exp, 0} end
redis.call('HSET', KEYS[2], ARGV[1], now_s)
local full = now + tonumber(ARGV[2])
if full > exp then
  exp = full
  redis.call('ZADD', KEYS[1], 'XX', exp, ARGV[1])
end
return {'admitted', now, exp, 1}
`)

// sLeaveShard takes a waiting ticket out of its shard.
//
// KEYS: 1 wait, 2 stats
// ARGV: 1 ticket id
// Returns 1 if it was waiting (counted as left), else 0.
var sLeaveShard = redis.NewScript(`
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'left', 1)
  return 1
end
return 0
`)

// An active place is given back by completeScript (scripts.go): the same
// keys on every layout.

// The tick of a sharded event is six steps, each one script on one tag,
// under a lease and a fencing number (the epoch) so that exactly one
// admitter replica's tick can hand fans over at a time. The lease is held
// for one tick only and given back at its end, so the replicas take turns
// (whoever ticks next) and a replica that dies between ticks costs nothing;
// one that dies within a tick holds the others off until the lease lapses
// (three tick intervals, at least a second):
//
//  1. sTickBegin (global): take the lease (or find another replica has it),
//     a new epoch; drop ended actives; refill the bucket; the budget n, as
//     the one-shard tick computes it (tokens, cap, places); the watermark:
//     the sequence number given out by the previous tick's begin;
//  2. sTickPrepare (each shard, at once): note the epoch (older ticks are
//     refused from now on), copy in the global figures the shard's polls
//     show, drop abandoned fans at the front, and read the first n;
//  3. in Go: merge the shards' fronts by score into the one line and take
//     its first n, stopping at the first fan whose join is newer than the
//     watermark (its join's two steps may not both have landed: a fan
//     joined just before it might not be on its shard yet);
//  4. sTickTake (each shard with fans taken): move them from wait to moving;
//  5. sTickAccept (global): if the epoch is still the newest, add them to
//     the active set (within the cap, abandon deadlines checked again),
//     spend the tokens, count, and record each one's outcome;
//  6. sTickDone (each shard): clear moving, putting back in line any fan
//     not accepted, at its place.
//
// A tick that dies between 4 and 6 leaves a shard's moving set behind; the
// next tick's prepare finds it, and the outcomes recorded by 5 (or none:
// the epoch was never accepted, and now never can be) tell sTickDone what
// to do with each fan, before anyone else is taken from that shard.

// sTickBegin: step 1.
//
// As the one-shard tick, a line whose lottery is committed stays shut
// until the draw gave its first scores, and lets in nobody the draw has
// not reached until it is applied (lottery.go): the bound goes back to Go,
// which takes nobody past it.
//
// KEYS: 1 stats, 2 active, 3 bucket, 4 inventory, 5 holders, 6 claims,
// 7 lease, 8 tick, 9 lottery
// ARGV: 1 this replica's id, 2 lease ms, 3 mode, 4 opens_at ms or "",
// 5 closes_at ms or "", 6 rate (/s), 7 max_active, 8 passthrough batch,
// 9 shards
// Returns {"layout", k} | {"busy"} |
// {"go", epoch, n, expired, active, watermark, rate, available or -1, soldout 0|1, room, now ms, queueing 0|1,
// the draw's bound (lotteryPrelude) or ""}
var sTickBegin = redis.NewScript(prelude + invPrelude + layoutPrelude + lotteryPrelude + `
local now, now_s = clock()
local k = layout(KEYS[1], tonumber(ARGV[9]))
if k ~= tonumber(ARGV[9]) then return {'layout', k} end
local holder = redis.call('GET', KEYS[7])
if holder and holder ~= ARGV[1] then return {'busy'} end
redis.call('SET', KEYS[7], ARGV[1], 'PX', ARGV[2])
local epoch = redis.call('HINCRBY', KEYS[8], 'epoch', 1)
local mark = tonumber(redis.call('HGET', KEYS[8], 'mark')) or 0
redis.call('HSET', KEYS[8], 'mark', redis.call('HGET', KEYS[1], 'seq') or 0)

local mode = ARGV[3]
local opens, closes = tonumber(ARGV[4]), tonumber(ARGV[5])
local rate, cap, batch = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #gone > 0 then
  local holding = redis.call('EXISTS', KEYS[5]) == 1
  for _, m in ipairs(gone) do
    if holding then inv_leaves(KEYS[4], KEYS[5], m) end
    redis.call('HDEL', KEYS[6], m)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
end
local active = redis.call('ZCARD', KEYS[2])
local open = (not opens or now >= opens) and (not closes or now < closes)
local through = drawn_through(KEYS[9])
if through == false then open = false end
local queueing = open and mode == 'queue'

local b = redis.call('HMGET', KEYS[3], 'tokens', 'ts')
local tokens, ts = tonumber(b[1]) or 0, tonumber(b[2]) or now
local n = 0
if queueing then
  local dt = now - ts
  if dt < 0 then dt = 0 end
  local span = math.min(math.max(dt, 1000), 2000)
  tokens = math.min(tokens + dt * rate / 1000, span * rate / 1000 + 1)
  n = math.max(0, math.min(math.floor(tokens), cap - active))
else
  tokens = 0
  if open and mode == 'passthrough' then n = batch end
end
redis.call('HSET', KEYS[3], 'tokens', tokens, 'ts', now)
local known, avail, held, pending, engaged = inv_read(KEYS[4])
local room, soldout = -1, 0
if known then
  room = math.max(0, avail - (active - engaged))
  if inv_sold(known, avail, held, pending) then soldout = 1 end
  if queueing then
    n = math.min(n, room)
  elseif soldout == 1 then
    n = 0
  end
else
  avail = -1
end
local q = 0
if queueing then q = 1 end
-- Nobody to hand over: the lease is given back now (the shards' steps
-- that follow need no exclusivity; a newer epoch fences them).
if n == 0 then redis.call('DEL', KEYS[7]) end
return {'go', epoch, n, #gone, active, mark, tostring(rate_for_eta(KEYS[1], ARGV[6])), avail, soldout, room, now, q, through or ''}
`)

// sTickPrepare: step 2, on one shard.
//
// KEYS: 1 wait, 2 seen, 3 stats, 4 info, 5 moving, 6 fence
// ARGV: 1 epoch, 2 n, 3 max_skip, 4 shards, 5 rate, 6 available or -1,
// 7 soldout 0|1
// Returns {"fenced"} | {"stale", epoch, members…} (a dead tick's handover to
// finish first) | {"ok", waiting, abandoned, member, score, member, score…}
var sTickPrepare = redis.NewScript(prelude + `
local now, now_s = clock()
local epoch = tonumber(ARGV[1])
if epoch < (tonumber(redis.call('HGET', KEYS[6], 'epoch')) or 0) then return {'fenced'} end
redis.call('HSET', KEYS[6], 'epoch', epoch)
redis.call('HSET', KEYS[4], 'rate', ARGV[5], 'available', ARGV[6], 'soldout', ARGV[7])
local stale = redis.call('HGET', KEYS[6], 'moving')
if stale then
  local out = {'stale', stale}
  for _, m in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do out[#out + 1] = m end
  return out
end
local n, max_skip, k = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {'ok', 0, 0}
local live, abandoned, from = 0, 0, 0
while live < n and abandoned < max_skip do
  local front = redis.call('ZRANGE', KEYS[1], from, from + n - live - 1, 'WITHSCORES')
  if #front == 0 then break end
  for i = 1, #front, 2 do
    local m = front[i]
    local seq = seq_of(m)
    local dl = 0
    if seq then dl = redis.call('BITFIELD', KEYS[2], 'GET', 'u32', '#' .. math.floor(seq / k))[1] end
    if dl < now_s then
      redis.call('ZREM', KEYS[1], m)
      abandoned = abandoned + 1
    else
      out[#out + 1] = m
      out[#out + 1] = front[i + 1]
      live = live + 1
      from = from + 1
    end
  end
end
if abandoned > 0 then redis.call('HINCRBY', KEYS[3], 'abandoned', abandoned) end
out[2] = redis.call('ZCARD', KEYS[1])
out[3] = abandoned
return out
`)

// sTickTake: step 4, on one shard.
//
// KEYS: 1 wait, 2 seen, 3 moving, 4 fence
// ARGV: 1 epoch, 2 shards, then the members to take
// Returns {"fenced"} | {member, abandon deadline (unix s), …} for those
// still waiting (a fan may have left since step 2).
var sTickTake = redis.NewScript(prelude + `
if redis.call('HGET', KEYS[4], 'epoch') ~= ARGV[1] or redis.call('HEXISTS', KEYS[4], 'moving') == 1 then
  return {'fenced'}
end
local k = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local m = ARGV[i]
  local s = redis.call('ZSCORE', KEYS[1], m)
  if s then
    redis.call('ZREM', KEYS[1], m)
    redis.call('ZADD', KEYS[3], s, m)
    local seq = seq_of(m)
    out[#out + 1] = m
    out[#out + 1] = redis.call('BITFIELD', KEYS[2], 'GET', 'u32', '#' .. math.floor(seq / k))[1]
  end
end
if #out > 0 then redis.call('HSET', KEYS[4], 'moving', ARGV[1]) end
return out
`)

// sTickAccept: step 5.
//
// It also keeps the sale's report (report.go): the fans admitted this
// minute, and the FIFO inversions among post-opening joins (those with a
// sequence number above the last pre-queue one, which the draw records).
//
// KEYS: 1 stats, 2 active, 3 bucket, 4 inventory, 5 holders, 6 claims,
// 7 tick, 8 this epoch's outcomes, 9 lease, 10 report, 11 lottery
// ARGV: 1 epoch, 2 queueing 0|1, 3 max_active, 4 access_ttl ms, 5 rate
// (/s, as configured), 6 fans still waiting after the take, 7 this
// replica's id, then pairs (member, abandon deadline)
// Returns {"fenced"} | {outcomes, active, measured rate}: outcomes one
// letter per member, a (admitted), r (refused: back in line), x (abandoned).
var sTickAccept = redis.NewScript(prelude + invPrelude + reportPrelude + `
if redis.call('HGET', KEYS[7], 'epoch') ~= ARGV[1] then return {'fenced'} end
local now, now_s = clock()
local queueing = ARGV[2] == '1'
local cap, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local active = redis.call('ZCARD', KEYS[2])
local limit = (#ARGV - 7) / 2
if queueing then limit = math.min(limit, cap - active) end
local holding = redis.call('EXISTS', KEYS[5]) == 1
local codes, admitted, abandoned = {}, 0, 0
local exp = now + ttl
local fifo = fifo_start(KEYS[10])
local last = tonumber(redis.call('HGET', KEYS[11], 'last')) or 0
for i = 8, #ARGV, 2 do
  local m, dl = ARGV[i], tonumber(ARGV[i + 1])
  local c
  if dl < now_s then
    c, abandoned = 'x', abandoned + 1
  elseif admitted < limit then
    local e = exp
    if dl > 1 and dl * 1000 < e then e = dl * 1000 end
    redis.call('ZADD', KEYS[2], e, m)
    redis.call('HSET', KEYS[6], m, 1)
    if holding and tonumber(redis.call('HGET', KEYS[5], m) or '0') > 0 then
      redis.call('HINCRBY', KEYS[4], 'engaged', 1)
    end
    local seq = seq_of(m)
    if seq and seq > last then fifo_admit(fifo, seq) end
    c, admitted = 'a', admitted + 1
  else
    c = 'r'
  end
  codes[#codes + 1] = c
  redis.call('HSET', KEYS[8], m, c)
end
redis.call('PEXPIRE', KEYS[8], 3600000)
if queueing and admitted > 0 then redis.call('HINCRBYFLOAT', KEYS[3], 'tokens', -admitted) end
if admitted > 0 then redis.call('HINCRBY', KEYS[1], 'admitted', admitted) end
report_admitted(KEYS[10], fifo, now, admitted)

local waiting = tonumber(ARGV[6]) + (#codes - admitted - abandoned)
local st = redis.call('HMGET', KEYS[1], 'rate', 'rate_ts', 'rate_cfg')
local measured, rts = tonumber(st[1]), tonumber(st[2])
if st[3] ~= ARGV[5] or not measured then measured, rts = tonumber(ARGV[5]), nil end
if queueing and waiting > 0 then
  if rts and now > rts then
    local dt = now - rts
    measured = measured + (1 - math.exp(-dt / 10000)) * (admitted * 1000 / dt - measured)
  end
  redis.call('HSET', KEYS[1], 'rate', measured, 'rate_ts', now, 'rate_cfg', ARGV[5])
else
  redis.call('HSET', KEYS[1], 'rate', measured, 'rate_cfg', ARGV[5])
  redis.call('HDEL', KEYS[1], 'rate_ts')
end
if redis.call('GET', KEYS[9]) == ARGV[7] then redis.call('DEL', KEYS[9]) end
return {table.concat(codes), redis.call('ZCARD', KEYS[2]), tostring(measured)}
`)

// sTickRelease gives the lease back at the end of a tick that handed
// nobody over (if it still holds it).
//
// KEYS: 1 lease
// ARGV: 1 this replica's id
var sTickRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// sTickDone: step 6, on one shard; also how a dead tick's handover is
// finished (with the outcomes it recorded, r for any it did not).
//
// KEYS: 1 wait, 2 moving, 3 stats, 4 fence
// ARGV: 1 the epoch whose handover this is, 2 outcomes (one letter per
// member), then the members
// Returns the fans put back in line, or -1 when that handover was finished
// already.
var sTickDone = redis.NewScript(`
if redis.call('HGET', KEYS[4], 'moving') ~= ARGV[1] then return -1 end
local codes = ARGV[2]
local back, abandoned = 0, 0
for i = 3, #ARGV do
  local m = ARGV[i]
  local c = string.sub(codes, i - 2, i - 2)
  local s = redis.call('ZSCORE', KEYS[2], m)
  if s then
    redis.call('ZREM', KEYS[2], m)
    if c == 'r' or c == '' then
      redis.call('ZADD', KEYS[1], s, m)
      back = back + 1
    elseif c == 'x' then
      abandoned = abandoned + 1
    end
  end
end
-- anything left in moving was not named: back in line
local rest = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #rest, 2 do
  redis.call('ZADD', KEYS[1], rest[i + 1], rest[i])
  back = back + 1
end
redis.call('DEL', KEYS[2])
if abandoned > 0 then redis.call('HINCRBY', KEYS[3], 'abandoned', abandoned) end
redis.call('HDEL', KEYS[4], 'moving')
return back
`)
