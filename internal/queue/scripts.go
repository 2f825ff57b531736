package queue

import (
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
)

// The Lua scripts of the line. Each is one redis.NewScript; every key it
// touches is passed in KEYS and carries the event's {tag}; "now" is always
// Redis TIME, so every gateway and admitter replica shares one clock.
//
// Two encodings keep a waiting fan at about 130 bytes of Redis:
//
//   - the wait ZSET holds only the ticket id (≈27 bytes) and its score; the
//     facts a fan needs later (join time, the ETA told at join) live in the
//     signed ticket, not in Redis;
//   - the "seen" key is a string used as an array of u32 indexed by the
//     ticket's sequence number (BITFIELD u32 #seq): 4 bytes per fan. A slot
//     holds the fan's abandon deadline in unix seconds while it waits
//     (last poll + pollAfter told + abandon_after, rounded up), then 1 once the
//     ticket is admitted, then the time (unix s) its fan claimed the place
//     (first saw the admission): the gateway observes the wait time exactly
//     once per ticket, and an access window can never be stretched past
//     claim + access_ttl + hold_ttl (extendScript). 0 in an active ticket's
//     slot is a place claimed before claim times were kept.
//
// Numbers that must not lose precision (the lottery score) are passed to
// Redis as the strings Go formatted; floats are returned as strings because
// Redis truncates Lua numbers in replies to integers.

// prelude holds the helpers every script shares.
const prelude = rdb.Prelude + `

-- base36 of a positive integer, as Go's strconv.FormatInt(n, 36): the
-- digits' bytes, lowest first, made one string (a string per digit made
-- this the join's costliest line).
local function b36(n)
  local d, i = {}, 0
  repeat
    local r = n % 36
    i = i + 1
    if r < 10 then d[i] = 48 + r else d[i] = 87 + r end
    n = (n - r) / 36
  until n == 0
  return string.reverse(string.char(unpack(d)))
end

-- pollAfter (ms) for a fan with ahead fans in front of it. See docs/QUEUE.md:
-- base = ahead / (4 × rate) seconds (about four polls over the wait), but
-- never more than ahead / 250 s, so that a line that speeds up past the
-- measured rate (a cap that stops binding, fans ahead who left) still finds
-- its fans awake: up to 166.67 fans/s (250 / 1.5, the jitter) nobody sleeps
-- past their turn. At least the time left before opening, clamped to
-- [1 s, 40 s], times a jitter of 1 + u/2 (u in [0,1)) so the bounds are
-- [1 s, 60 s). q is poll_per(rate): the scripts that answer many fans take
-- it once.
local function poll_per(rate)
  if rate == nil or rate < 0.01 then rate = 0.01 end
  local q = 1 / (4 * rate)
  if q > 1 / 250 then q = 1 / 250 end
  return q
end

local function poll_after_per(ahead, q, until_open, u)
  local base = ahead * q
  if until_open > 0 and until_open / 1000 > base then base = until_open / 1000 end
  if base < 1 then base = 1 elseif base > 40 then base = 40 end
  return math.floor(base * (1 + 0.5 * u) * 1000)
end

local function poll_after(ahead, rate, until_open, u)
  return poll_after_per(ahead, poll_per(rate), until_open, u)
end

-- a jitter u in [0,1) for the fan n (its rank or sequence number) at now
-- (ms): fans polled or joined together get different ones, and one fan a
-- different one at each poll. The hot scripts take it here rather than
-- from the caller: an argument less per fan.
local function jitter(n, now)
  return ((n * 7919 + now) % 1000) / 1000
end

-- the abandon deadline (unix s, rounded up so a fan is never dropped early)
local function deadline(now, poll, abandon)
  local d = math.floor((now + poll + abandon + 999) / 1000)
  if d > 4294967295 then d = 4294967295 end
  return d
end


-- the admission rate ETAs are computed from: the one the admitter measured,
-- or the configured one until it measured any.
local function rate_for_eta(stats, configured)
  local r = redis.call('HGET', stats, 'rate')
  if r then return r end
  return configured
end

-- claim: the first look at an admitted ticket (a status poll, or a join
-- that resumes it) claims the place: its access window then runs its full
-- access_ttl from now, and its seen slot holds the claim time (unix s, so
-- always > 1) from which the window's ceiling is counted (extendScript).
-- The tick left slot = 1 (admitted, unclaimed). Returns the expiry in force
-- and 1 if this look claimed the place, else 0.
local function claim(active, seen, id, slot, now, now_s, exp, ttl)
  if redis.call('BITFIELD', seen, 'GET', 'u32', slot)[1] ~= 1 then return exp, 0 end
  redis.call('BITFIELD', seen, 'SET', 'u32', slot, now_s)
  local full = now + ttl
  if full > exp then
    exp = full
    redis.call('ZADD', active, 'XX', exp, id)
  end
  return exp, 1
end

local function seq_of(member)
  local p = string.match(member, '^([0-9a-z]+)%.')
  if p then return tonumber(p, 36) end
  return nil
end
`

// joinScript gives fans new places in the line (a fan who carries a live
// ticket is resumed by statusScript instead, so that a join can never turn
// a dead ticket into a place for free: see Store.Join). It takes the joins
// of one event that a pipeline carries together (batcher.startMerged), one
// after the other, each answered as if alone: what they share (the clock,
// the layout, the rate, the inventory, the lottery's commitment) is read
// once, the counters, the sequence and the abandon deadlines are written
// once, and a new place after opening costs its ZADD alone: its score, the
// next sequence number, is above every score in the line when the line's
// last place is below the call's first number (one ZREVRANGE per call, at
// the tail of the skiplist), so its rank is the places counted before it.
// A pre-queue place (a random score) and a line whose tail is not below
// (never seen; checked, not assumed) take a ZRANK each.
//
// A join that pays with a proof of work (Store.JoinProved) spends it here,
// in the same script and round trip as the place it buys: once a join would
// hand out a place, the proof's id is added to the spent set of its expiry
// minute, and a proof already there, or expired by Redis TIME, buys nothing.
// Refusing by TIME as well as by the gateway's clock is what lets the set go
// a second after its minute: whatever any gateway's clock says, no proof can
// be spent once its set is gone. Joins with proofs of one expiry minute
// share a call (the set is a key); joins without proofs share another.
//
// A pre-queue place is given only once the event's lottery is committed
// (lottery.go): the script answers {"uncommitted"} and takes nothing until
// then, and records every pre-queue place among the draw's entries. Once
// the entries froze (at opens_at), no join is a pre-queue place again,
// whatever opens_at the caller brings: it is after opening, FIFO.
//
// A join for an account first looks for the account's place: if it is
// still waiting or active, the join makes nothing and answers {"account",
// <its accounts entry>} (the caller resumes it), before any proof is spent;
// otherwise the new place becomes the account's, in the same script: one
// place per account, whatever the race (two joins of one account in one
// call: the second finds the first's place).
//
// KEYS: 1 wait, 2 active, 3 seen, 4 stats, 5 inventory, 6 lottery,
// 7 lottery entries, 8 accounts, 9 (with proofs only) the spent proofs of
// their expiry minute
// ARGV: 1 mode, 2 prequeue_opens_at ms or "", 3 opens_at ms or "",
// 4 closes_at ms or "", 5 configured rate (/s), 6 access_ttl ms,
// 7 abandon_after ms; then per join: the random part of the new id
// (base64url), a lottery score (a negative integer, as a string), the
// account id or "", and with proofs: the proof's id, its expiry ms, when
// its set goes (unix ms)
// Returns the head {now ms, rate, available or -1}, then one element per
// join, each one of
//
//	{seq, rank × 65536 + pollAfter ms} (waiting; rank 0 = next)
//	{seq, -1, active expiry ms} (admitted)
//	"closed" | "not_open" | "sold_out" | "reused" | "stale" | "uncommitted"
//	{"account", entry} (the account's live place)
//	{"layout", k} (a sharded event)
var joinScript = redis.NewScript(prelude + invPrelude + `
local now, now_s = clock()
local per = 3
if KEYS[9] then per = 6 end
local n = (#ARGV - 7) / per
local out = {now, '', -1}
local function all(v)
  for i = 1, n do out[i + 3] = v end
  return out
end
local st = redis.call('HMGET', KEYS[4], 'shards', 'rate', 'seq')
local k = tonumber(st[1])
if k and k > 1 then return all({'layout', k}) end
local mode = ARGV[1]
local pre, opens, closes = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if mode == 'closed' or (closes and now >= closes) then return all('closed') end
if (pre and now < pre) or (not pre and opens and now < opens) then return all('not_open') end
local known, avail, held, pending = inv_read(KEYS[5])
local soldout = inv_sold(known, avail, held, pending)
if known then out[3] = avail end
local until_open = 0
if opens and now < opens then until_open = opens - now end
local uncommitted = false
if until_open > 0 then
  local lot = redis.call('HMGET', KEYS[6], 'commitment', 'frozen')
  if lot[2] then
    until_open = 0 -- the draw's entries froze: this place is after opening, whatever opens_at says now
  else
    uncommitted = not lot[1]
  end
end
local passthrough = mode == 'passthrough' and until_open == 0
local ttl, abandon = tonumber(ARGV[6]), tonumber(ARGV[7])
local r = st[2] or ARGV[5] -- rate_for_eta
out[2] = r
local q = poll_per(tonumber(r))
local seq0 = tonumber(st[3]) or 0
local joined, admitted, sets, spent = 0, 0, {}, nil
-- tail: the rank the next place after opening gets, when every score in
-- the line is below the call's first sequence number (nil: ZRANK it).
local tail
if until_open == 0 and not passthrough then
  local last = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if not last[2] or tonumber(last[2]) <= seq0 then tail = redis.call('ZCARD', KEYS[1]) end
end

local function one(a)
  local acct = ARGV[a + 3]
  if acct ~= '' then
    local v = redis.call('HGET', KEYS[8], acct)
    if v then
      local had = string.match(v, '^(%S+)')
      local exp = tonumber(redis.call('ZSCORE', KEYS[2], had))
      if redis.call('ZSCORE', KEYS[1], had) or (exp and exp > now) then return {'account', v} end
    end
  end
  if soldout then return 'sold_out' end
  if uncommitted then return 'uncommitted' end
  if KEYS[9] then
    if now >= tonumber(ARGV[a + 5]) then return 'stale' end
    if redis.call('SADD', KEYS[9], ARGV[a + 4]) == 0 then return 'reused' end
    spent = ARGV[a + 6]
  end
  joined = joined + 1
  local seq = seq0 + joined
  local id = b36(seq) .. '.' .. ARGV[a + 1]
  if acct ~= '' then redis.call('HSET', KEYS[8], acct, id .. ' ' .. now .. ' ?') end
  local j = #sets
  if passthrough then
    -- Let in at once, and claimed at once: the fan holds its pass now.
    local exp = now + ttl
    redis.call('ZADD', KEYS[2], exp, id)
    admitted = admitted + 1
    sets[j + 1], sets[j + 2], sets[j + 3], sets[j + 4] = 'SET', 'u32', string.format('#%d', seq), now_s
    return {seq, -1, exp}
  end
  local rank
  if until_open > 0 then
    redis.call('ZADD', KEYS[1], ARGV[a + 2], id)
    redis.call('RPUSH', KEYS[7], id)
    rank = redis.call('ZRANK', KEYS[1], id)
  else
    redis.call('ZADD', KEYS[1], int(seq), id)
    if tail then
      rank, tail = tail, tail + 1
    else
      rank = redis.call('ZRANK', KEYS[1], id)
    end
  end
  local poll = poll_after_per(rank, q, until_open, jitter(seq, now))
  sets[j + 1], sets[j + 2], sets[j + 3], sets[j + 4] = 'SET', 'u32', string.format('#%d', seq), int(deadline(now, poll, abandon))
  return {seq, rank * 65536 + poll}
end

for i = 1, n do out[i + 3] = one(7 + per * (i - 1)) end
if joined > 0 then
  redis.call('HINCRBY', KEYS[4], 'seq', joined)
  redis.call('HINCRBY', KEYS[4], 'joined', joined)
end
if admitted > 0 then redis.call('HINCRBY', KEYS[4], 'admitted', admitted) end
if #sets > 0 then redis.call('BITFIELD', KEYS[3], unpack(sets)) end
if spent then redis.call('PEXPIREAT', KEYS[9], spent) end
return out
`)

// statusScript reports where tickets stand and records that their fans are
// still there (a new abandon deadline). It answers the polls of one event
// that a pipeline carries together (batcher.startMerged): what every poll
// shares (the clock, the layout, the measured rate, the inventory) is read
// once per call and answered once, at the head of the reply; a waiting
// ticket costs one ZRANK and one number in the reply, and the new deadlines
// of all go in one BITFIELD. Each ticket's answer is the one it would get
// alone. (Inside Redis, a script's Lua around its commands costs more than
// the commands: every table, every number turned into an argument, every
// element of a reply. This one keeps them few; docs/EDGE.md, third round.)
//
// The first poll (or resuming join) that finds a ticket admitted claims
// the place (claim in the prelude): the access window, which the tick opened
// only until the fan's abandon deadline, now runs its full access_ttl from
// this moment.
//
// A waiting ticket of an event sold out is told so (its fan stops
// waiting); an admitted one is still admitted (its page says so).
//
// A ticket is in wait or in active, never in both (the tick and the join
// move it atomically): the wait set is looked at first because most polls
// are of waiting fans.
//
// KEYS: 1 wait, 2 active, 3 seen, 4 stats, 5 inventory
// ARGV: 1 mode, 2 opens_at ms or "", 3 closes_at ms or "", 4 configured
// rate, 5 abandon_after ms, 6 access_ttl ms; then per ticket: its id, its
// seen slot ("#" and its seq)
// Returns the head {now ms, rate, available or -1}, then one element per
// ticket, each one of
//
//	rank × 65536 + pollAfter ms (waiting; pollAfter < 60,000)
//	-1 (expired) | -2 (closed) | -3 (soldout)
//	{"admitted", expiry ms, first 0|1}
//	{"layout", k} (a sharded event)
var statusScript = redis.NewScript(prelude + invPrelude + `
local now, now_s = clock()
local n = (#ARGV - 6) / 2
local out = {now, '', -1}
-- The layout and the measured rate in one read.
local st = redis.call('HMGET', KEYS[4], 'shards', 'rate')
local k = tonumber(st[1])
if k and k > 1 then
  for i = 1, n do out[i + 3] = {'layout', k} end
  return out
end
local opens, closes = tonumber(ARGV[2]), tonumber(ARGV[3])
local closed = ARGV[1] == 'closed' or (closes and now >= closes)
local until_open = 0
if opens and now < opens then until_open = opens - now end
local r = st[2] or ARGV[4] -- rate_for_eta
out[2] = r
local q = poll_per(tonumber(r))
local abandon, ttl = tonumber(ARGV[5]), tonumber(ARGV[6])
local inv -- the inventory, read once when a waiting ticket needs it
local soldout
local sets, j = {}, 0
for i = 1, n do
  local id, slot = ARGV[2 * i + 5], ARGV[2 * i + 6]
  local rank = redis.call('ZRANK', KEYS[1], id)
  if not rank then
    local exp = tonumber(redis.call('ZSCORE', KEYS[2], id))
    if exp and exp > now then
      local first
      exp, first = claim(KEYS[2], KEYS[3], id, slot, now, now_s, exp, ttl)
      out[i + 3] = {'admitted', exp, first}
    else
      out[i + 3] = -1
    end
  elseif closed then
    out[i + 3] = -2
  else
    if not inv then
      local known, a, held, pending = inv_read(KEYS[5])
      inv = true
      soldout = inv_sold(known, a, held, pending)
      if known then out[3] = a end
    end
    if soldout then
      out[i + 3] = -3
    else
      local poll = poll_after_per(rank, q, until_open, jitter(rank, now))
      sets[j + 1], sets[j + 2], sets[j + 3], sets[j + 4] = 'SET', 'u32', slot, int(deadline(now, poll, abandon))
      j = j + 4
      out[i + 3] = rank * 65536 + poll
    end
  end
end
-- The waiting fans' new deadlines, in one write.
if j > 0 then redis.call('BITFIELD', KEYS[3], unpack(sets)) end
return out
`)

// leaveScript takes a ticket out of the line, or gives its active place back.
//
// KEYS: 1 wait, 2 active, 3 stats, 4 inventory, 5 holders
// ARGV: 1 ticket id
// Returns 1 if it was waiting (counted as left), 2 if it was active, 0 if
// neither, −k if the event's line is sharded over k (nothing done here).
var leaveScript = redis.NewScript(invPrelude + layoutPrelude + `
local k = sharded(KEYS[3])
if k then return -k end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[3], 'left', 1)
  return 1
end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  inv_leaves(KEYS[4], KEYS[5], ARGV[1])
  return 2
end
return 0
`)

// completeScript frees an active place at once (the fan's booking is done).
//
// KEYS: 1 active, 2 inventory, 3 holders, 4 claims (a sharded event's)
// ARGV: 1 ticket id
// Returns 1 if it was active, else 0.
var completeScript = redis.NewScript(invPrelude + `
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
inv_leaves(KEYS[2], KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return 1
`)

// activeScript reports whether a ticket is active and unexpired.
//
// KEYS: 1 active
// ARGV: 1 ticket id
// Returns the expiry (ms) if active, else 0.
var activeScript = redis.NewScript(prelude + `
local now = clock()
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if exp and exp > now then return exp end
return 0
`)

// extendScript moves an active ticket's expiry later, never earlier, and
// never past its ceiling: claim time + the longest window (access_ttl +
// hold_ttl), so that no chain of holds keeps a place for ever. A place
// whose claim time is unknown (claimed before claim times were kept, slot 0)
// is counted as claimed now. A sharded event keeps its claim times in
// claims, not in seen (shards.go).
//
// KEYS: 1 active, 2 seen, 3 claims
// ARGV: 1 ticket id, 2 wanted expiry ms, 3 longest window after the claim ms
// Returns the expiry in force afterwards (ms), or 0 when not active.
var extendScript = redis.NewScript(prelude + `
local now, now_s = clock()
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not exp or exp <= now then return 0 end
local claimed = tonumber(redis.call('HGET', KEYS[3], ARGV[1]))
if claimed then
  if claimed <= 1 then
    claimed = now_s
    redis.call('HSET', KEYS[3], ARGV[1], claimed)
  end
else
  local seq = seq_of(ARGV[1])
  if not seq then return exp end
  local slot = '#' .. seq
  claimed = redis.call('BITFIELD', KEYS[2], 'GET', 'u32', slot)[1]
  if claimed <= 1 then
    claimed = now_s
    redis.call('BITFIELD', KEYS[2], 'SET', 'u32', slot, claimed)
  end
end
local want = math.min(tonumber(ARGV[2]), claimed * 1000 + tonumber(ARGV[3]))
if want > exp then
  redis.call('ZADD', KEYS[1], 'XX', want, ARGV[1])
  return want
end
return exp
`)

// countsScript reads the line's length, the live actives and the
// inventory, at one instant.
//
// KEYS: 1 wait, 2 active, 3 inventory, 4 stats
// Returns {waiting, active, available, held, pending, updatedAt, shards}:
// ZCARD wait, ZCOUNT active (now +inf, the inventory's fields (false when
// the booking core has not published it), and the line's shards (the
// waiting fans of a sharded event are counted on its shards).
var countsScript = redis.NewScript(prelude + `
local now = clock()
local inv = redis.call('HMGET', KEYS[3], 'available', 'held', 'pending', 'updatedAt')
local k = tonumber(redis.call('HGET', KEYS[4], 'shards')) or 1
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'), inv[1], inv[2], inv[3], inv[4], k}
`)

// tickScript is one admission step for one event, atomic: any number of
// admitter replicas may run it, and a process dying mid-tick loses nothing
// (the script runs whole or not at all).
//
//  1. drop actives whose window ended;
//  2. refill the token bucket at rate, exactly, however fractional (the
//     computed 1000/6 = 166.67/s admits 10,000 a minute, not 9,960). Its
//     capacity is one tick's refill, counting the tick as at least one
//     second and at most two, plus one token: the fraction of a fan a
//     fractional rate carries to the next tick. So a line that waits gets
//     rate × elapsed to within one fan whether ticks come every 20 ms or a
//     little more than a second apart (an admitter's tick plus the tick's
//     own duration), while fans arriving at an empty line get at most one
//     tick's refill plus one at once (a second's at the usual tick), and a
//     stalled admitter catches up with at most two seconds' worth plus one.
//     A tick longer than two seconds (admitter.tick) therefore admits less
//     than the rate. Nothing accrues while admission is stopped (paused,
//     closed, before opening, outside closes_at, passthrough), so resuming
//     never bursts;
//  3. n = min(floor(tokens), max_active − active, waiting) in queue mode;
//     every waiting fan (up to the batch) in passthrough. Once the booking
//     core publishes the event's inventory, n is also at most available −
//     (active − engaged): the places that can be held now less the admitted
//     fans who hold nothing yet, so an admitted fan always has a place it
//     could hold; in passthrough nobody is let in once the event is sold
//     out (see inventory.go for why the figures are never too high);
//  4. pop from the front; a fan whose abandon deadline passed is dropped and
//     counted abandoned (at most max_skip per tick, to bound the script);
//     the others go to active with expiry now + access_ttl, but no later
//     than their abandon deadline until their fan claims the place with a
//     poll (see statusScript): a fan who walked away just before their turn
//     gives the place back at the deadline, not a whole access window later;
//  5. update the counters, the sale's report (admitted this minute, FIFO
//     inversions among post-opening joins: report.go) and the measured rate: an exponential moving
//     average (τ = 10 s) of admissions per second, sampled only while the line
//     stayed non-empty (so an empty line does not read as a slow admitter),
//     and reset to the configured rate when that changes.
//
// A line with a lottery committed is not open, whatever the time, until
// the draw has given the pre-queue its order (lottery.go), and while the
// draw is applied lets in nobody the draw has not reached.
//
// KEYS: 1 wait, 2 active, 3 seen, 4 stats, 5 bucket, 6 inventory, 7 holders,
// 8 lottery, 9 report
// ARGV: 1 mode, 2 opens_at ms or "", 3 closes_at ms or "", 4 rate (/s),
// 5 max_active, 6 access_ttl ms, 7 max_skip, 8 passthrough batch
// Returns {admitted, abandoned, expired, waiting, active, measured rate,
// room (places for more idle fans; -1 when the inventory is unknown)}, or
// {"layout", k} for a sharded event.
var tickScript = redis.NewScript(prelude + invPrelude + layoutPrelude + lotteryPrelude + reportPrelude + `
local now, now_s = clock()
local k = sharded(KEYS[4])
if k then return {'layout', k} end
local mode = ARGV[1]
local opens, closes = tonumber(ARGV[2]), tonumber(ARGV[3])
local rate, cap, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local max_skip, batch = tonumber(ARGV[7]), tonumber(ARGV[8])

local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #gone > 0 then
  if redis.call('EXISTS', KEYS[7]) == 1 then
    for _, m in ipairs(gone) do inv_leaves(KEYS[6], KEYS[7], m) end
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
end
local expired = #gone
local active = redis.call('ZCARD', KEYS[2])
local waiting = redis.call('ZCARD', KEYS[1])
local open = (not opens or now >= opens) and (not closes or now < closes)
local through = drawn_through(KEYS[8])
if through == false then open = false end
local queueing = open and mode == 'queue'

local b = redis.call('HMGET', KEYS[5], 'tokens', 'ts')
local tokens, ts = tonumber(b[1]) or 0, tonumber(b[2]) or now
local n = 0
if queueing then
  local dt = now - ts
  if dt < 0 then dt = 0 end
  local span = math.min(math.max(dt, 1000), 2000)
  tokens = math.min(tokens + dt * rate / 1000, span * rate / 1000 + 1)
  n = math.min(math.floor(tokens), cap - active, waiting)
else
  tokens = 0
  if open and mode == 'passthrough' then n = math.min(waiting, batch) end
end
local known, avail, held, pending, engaged = inv_read(KEYS[6])
local room = -1
if known then
  room = math.max(0, avail - (active - engaged))
  if queueing then
    n = math.min(n, room)
  elseif inv_sold(known, avail, held, pending) then
    n = 0
  end
end

if through and n > 0 then n = math.min(n, redis.call('ZCOUNT', KEYS[1], '-inf', through)) end

local admitted, abandoned = 0, 0
local exp = now + ttl
local holding = known and redis.call('EXISTS', KEYS[7]) == 1
local fifo = fifo_start(KEYS[9])
local past = false -- popped a fan the draw has not reached yet
while admitted < n and abandoned < max_skip and not past do
  local popped = redis.call('ZPOPMIN', KEYS[1], n - admitted)
  if #popped == 0 then break end
  for i = 1, #popped, 2 do
    local m = popped[i]
    local seq = seq_of(m)
    local dl = 0
    if seq then dl = redis.call('BITFIELD', KEYS[3], 'GET', 'u32', '#' .. seq)[1] end
    if past or (through and tonumber(popped[i + 1]) > through) then
      past = true
      redis.call('ZADD', KEYS[1], popped[i + 1], m) -- back, untouched
    elseif dl < now_s then
      abandoned = abandoned + 1
    else
      local e = exp
      if dl > 1 and dl * 1000 < e then e = dl * 1000 end
      redis.call('ZADD', KEYS[2], e, m)
      redis.call('BITFIELD', KEYS[3], 'SET', 'u32', '#' .. seq, 1)
      if holding and tonumber(redis.call('HGET', KEYS[7], m) or '0') > 0 then
        redis.call('HINCRBY', KEYS[6], 'engaged', 1) -- cannot happen today: kept exact anyway
      end
      if tonumber(popped[i + 1]) > 0 then fifo_admit(fifo, seq) end
      admitted = admitted + 1
    end
  end
end
if queueing then tokens = tokens - admitted end
redis.call('HSET', KEYS[5], 'tokens', tokens, 'ts', now)

if admitted > 0 then redis.call('HINCRBY', KEYS[4], 'admitted', admitted) end
if abandoned > 0 then redis.call('HINCRBY', KEYS[4], 'abandoned', abandoned) end
report_admitted(KEYS[9], fifo, now, admitted)

waiting = redis.call('ZCARD', KEYS[1])
local st = redis.call('HMGET', KEYS[4], 'rate', 'rate_ts', 'rate_cfg')
local measured, rts = tonumber(st[1]), tonumber(st[2])
if st[3] ~= ARGV[4] or not measured then measured, rts = rate, nil end
if queueing and waiting > 0 then
  if rts and now > rts then
    local dt = now - rts
    measured = measured + (1 - math.exp(-dt / 10000)) * (admitted * 1000 / dt - measured)
  end
  redis.call('HSET', KEYS[4], 'rate', measured, 'rate_ts', now, 'rate_cfg', ARGV[4])
else
  redis.call('HSET', KEYS[4], 'rate', measured, 'rate_cfg', ARGV[4])
  redis.call('HDEL', KEYS[4], 'rate_ts')
end
return {admitted, abandoned, expired, waiting, redis.call('ZCARD', KEYS[2]), tostring(measured), room}
`)
