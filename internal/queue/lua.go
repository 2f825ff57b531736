package queue

import (
	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/presale"
	"github.com/waitroom/waitroom/internal/rdb"
)

// The line's Lua library: every rule of the line is written once, here, as
// local functions, and each script (scripts.go) is a short body over them.
// The fragments are one Redis function library with the scripts (lua,
// rdb.Library): Redis defines them once, when it loads the library, not at
// every call.
//
// One layout, any number of shards (shards.go). A join, a poll and a tick
// each have a phase on the event's tag (the sequence, the refusals, the
// account, the proof; the active set and the claims; the bucket and the
// cap) and a phase on the fan's shard (the place in wait, its abandon
// deadline). With one shard the event's tag is the shard's, and one script
// runs both phases (joinScript, statusScript, tickScript); with K shards
// they are two scripts, on two tags, run in order by the Go code. The
// phases are the same functions either way.
//
// Replies follow one protocol: a call that answers many fans (merged by
// the batcher) begins with a head of the figures they share, {now ms,
// rate, available or -1}, then one element per fan. A waiting fan's element
// is a number, rank × 65536 + pollAfter ms (rank 0 = next); negative
// numbers and short strings say the rest (each script lists its own), and
// a table carries what needs more than a number.

// lua is the line's function library (rdb.Library): every fragment below,
// defined once when Redis loads it, and the scripts over them.
var lua = rdb.NewLibrary("line", rdb.Prelude, rdb.Base36, prelude, invPrelude, layoutPrelude,
	claimLua, leaveLua, draw.Lua, presale.GateLua, presale.CodeLua, bucketLua, joinLua, placeLua,
	pollLua, lotteryPrelude, reportPrelude, tickLua)

// prelude holds the line's helpers every script may use (with rdb's).
const prelude = `
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

-- a jitter u in [0,1) for the fan n (its rank or sequence number) at now
-- (ms): fans polled or joined together get different ones, and one fan a
-- different one at each poll. The scripts take it here rather than from
-- the caller: an argument less per fan.
local function jitter(n, now)
  return ((n * 7919 + now) % 1000) / 1000
end

-- the abandon deadline (unix s, rounded up so a fan is never dropped early)
local function deadline(now, poll, abandon)
  local d = math.floor((now + poll + abandon + 999) / 1000)
  if d > 4294967295 then d = 4294967295 end
  return d
end

-- deadline as the decimal string BITFIELD takes. The strings are kept
-- across calls (Redis runs one function at a time; at most 512, then
-- forgotten): the polls and joins of a few seconds share a few dozen
-- deadlines, and turning a number into a string was a poll's costliest
-- step of Lua (docs/EDGE.md, "Issue 41 measured again").
local DLS, DLS_n = {}, 0
local function deadline_s(now, poll, abandon)
  local d = deadline(now, poll, abandon)
  local s = DLS[d]
  if s then return s end
  if DLS_n >= 512 then DLS, DLS_n = {}, 0 end
  s = int(d)
  DLS[d], DLS_n = s, DLS_n + 1
  return s
end

-- KEPT is the abandon deadline of a place kept while its fan is away
-- (away.go): the largest u32, never reached (the year 2106).
local KEPT = 4294967295

-- the admission rate ETAs are computed from: the one the admitter measured,
-- or the configured one until it measured any.
local function rate_for_eta(stats, configured)
  local r = redis.call('HGET', stats, 'rate')
  if r then return r end
  return configured
end

local function seq_of(member)
  local p = string.match(member, '^([0-9a-z]+)%.')
  if p then return tonumber(p, 36) end
  return nil
end
`

// layoutPrelude: the layout an event's state has, in its stats. A script
// of the other layout bounces a call ({'layout', k}), which happens only
// while a process still holds the settings from before the event got its
// layout.
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

// claimLua: the first look at an admitted place (a status poll, or a join
// that resumes it) claims it: its access window then runs its full
// access_ttl from now, and claims holds the claim time (unix s, so always
// > 2), from which the window's ceiling is counted (extendScript). The
// tick left 1 there (admitted, unclaimed), or 2 for an away fan's place
// (away.go), which waited away_claim_within for this look: its window
// starts now, whether that ends sooner or later than the wait would have.
const claimLua = `
-- the place's expiry in force after this look, and 1 if this look claimed
-- it, else 0
local function claim(active, claims, stats, id, now, now_s, exp, ttl)
  local c = redis.call('HGET', claims, id)
  if c ~= '1' and c ~= '2' then return exp, 0 end
  redis.call('HSET', claims, id, now_s)
  local full = now + ttl
  if full > exp or c == '2' then
    exp = full
    redis.call('ZADD', active, 'XX', exp, id)
  end
  if c == '2' then redis.call('HINCRBY', stats, 'away_claimed', 1) end
  return exp, 1
end
`

// bucketLua: the admission bucket of an auto line (DESIGN.md, "Always
// on"), which the joins let straight through and the ticks both spend:
// one bucket, on the event's tag, so that together they admit at most a
// second's worth and one token over the rate, whatever the race.
const bucketLua = `
-- the tokens of an auto line's bucket at now: refilled at rate per second
-- by Redis TIME, holding at most a second's worth and one token. A bucket
-- never written is full: the first visitors of a new event need not wait
-- for an admitter's first ticks (the burst is the bucket's all the same).
local function auto_tokens(bucket, rate, now)
  local b = redis.call('HMGET', bucket, 'tokens', 'ts')
  local top = rate + 1
  if not b[2] then return top end
  local dt = now - tonumber(b[2])
  if dt < 0 then dt = 0 end
  return math.min((tonumber(b[1]) or 0) + dt * rate / 1000, top)
end
`

// joinLua: a join's phase on the event's tag. What every join of a call
// shares is read once (join_state); then each join in turn (join_one) is
// refused, resumes the account's place, or gets its sequence number (the
// place itself is the shard's phase, placeLua). A refusal for all is one
// word for every element.
const joinLua = `
-- the state a call's joins share: a refusal for them all, or nil and what
-- they need. A join before opens_at is a pre-queue place (the lottery's
-- entry) only until the entries froze: from then on, whatever opens_at the
-- caller brings, it is after opening. st is the stats' shards, rate and
-- seq (HMGET), when the caller read them already.
local function join_state(stats, inventory, lottery, mode, pre, opens, closes, gated, now, st)
  if mode == 'closed' or (closes and now >= closes) then return 'closed' end
  -- every field a call's joins use, made at once (a table grown field by
  -- field is made again at each power of two)
  local js = {avail = -1, joined = 0, admitted = 0, gated = gated, early = false, soldout = false,
    known = false, engaged = 0, took = 0, until_open = 0, uncommitted = false, passthrough = false,
    auto = false, rate = false, seq0 = 0, codes = false, cfg_rate = 0, cap = 0, only = false,
    waits = false, spent = false}
  if (pre and now < pre) or (not pre and opens and now < opens) then
    -- a presale's fans are told their own windows (the gate, join_one)
    if not gated then return 'not_open' end
    js.early = true
  end
  local known, avail, held, pending, engaged = inv_read(inventory)
  js.soldout = inv_sold(known, avail, held, pending)
  if known then js.avail = avail end
  js.until_open = 0
  if opens and now < opens and not js.early then
    local lot = redis.call('HMGET', lottery, 'commitment', 'frozen')
    if not lot[2] then
      js.until_open = opens - now
      js.uncommitted = not lot[1]
    end
  end
  js.passthrough = mode == 'passthrough' and js.until_open == 0
  js.auto = mode == 'auto' and js.until_open == 0
  js.known, js.engaged, js.took = known, engaged, 0
  st = st or redis.call('HMGET', stats, 'shards', 'rate', 'seq')
  js.rate, js.seq0 = st[2], tonumber(st[3]) or 0
  return nil, js
end

-- out with v as the element of each of its n joins
local function join_all(out, n, v)
  for i = 1, n do out[i + 4] = v end
  return out
end

-- a call's joins, begun: the reply with its head (the replies' head and
-- the sequence before the call, joinHead), the joins' count and
-- their shared state; or the reply already answered for them all (a
-- refusal, a layout bounce) and no state. The ARGV are the join scripts':
-- a header of 12 (the presale's gate and the codes 8 and 9, max_active
-- 11, straight only 12), then 6 per join. st: as join_state's.
local function join_call(layout_k, want, stats, inventory, lottery, now, st)
  local n = (#ARGV - 12) / 6
  local out = {now, '', -1, 0}
  if layout_k ~= want then return join_all(out, n, {'layout', layout_k}) end
  local gated = ARGV[8] ~= '' and (ARGV[8] == 'inf' or now < tonumber(ARGV[8]))
  local refused, js = join_state(stats, inventory, lottery, ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), gated, now, st)
  if refused then return join_all(out, n, refused) end
  js.rate = js.rate or ARGV[5]
  js.codes = ARGV[9] == '1'
  js.cfg_rate, js.cap = tonumber(ARGV[5]), tonumber(ARGV[11])
  js.only = ARGV[12] == '1'
  out[2], out[3], out[4] = js.rate, js.avail, js.seq0
  return out, n, js
end

-- whether a join of an auto line is let straight through (DESIGN.md,
-- "Always on"): nobody waits (js.waits, which the layout gives: the line
-- itself on one shard, the line's mark on many, shards.go), the live
-- actives below the cap, the places available not all taken by admitted
-- fans (as the tick's budget counts them), and a token in the bucket,
-- which it spends (written once per call, join_done). What a call's joins
-- share is read once, at its first join that gets this far.
local function straight(js, k, now)
  if js.waits() then return false end
  if not js.active then js.active = redis.call('ZCOUNT', k.active, '(' .. int(now), '+inf') end
  if js.active >= js.cap then return false end
  if js.known and js.avail - (js.active - js.engaged) <= 0 then return false end
  if not js.tokens then js.tokens = auto_tokens(k.bucket, js.cfg_rate, now) end
  if js.tokens < 1 then return false end
  js.tokens, js.active, js.took = js.tokens - 1, js.active + 1, js.took + 1
  return true
end

-- one join: its answer when it makes no place in line (a refusal;
-- {"account", entry}: the account's place, which may be live: live(id,
-- joined ms) says what this layout can see of it; {-1, seq, expiry}: let in
-- at once, in passthrough or straight through an auto line with room
-- (straight), admitted and claimed now, its fan holds its pass; 'line': a
-- join of a call that takes only places let in at once (js.only, forward
-- auth's) would have waited, and nothing was made or spent), else nil,
-- its sequence number and id. A join refused before the
-- code (the presale's gate, presale.GateLua; closed, sold out, not open)
-- spends nothing, and neither does one that brought no code. A code is
-- judged only once the join's proof is spent, here: a wrong or used-up
-- code costs its proof as a place does (presale.CodeLua), so one proof
-- buys one guess, whatever the race.
local function join_one(js, k, now, now_s, ttl, random, acct, live, proof, proof_exp, code)
  if acct ~= '' then
    local v = redis.call('HGET', k.accounts, acct)
    if v then
      local had, joined = string.match(v, '^(%S+) (%d+)')
      if live(had, tonumber(joined)) then return {'account', v} end
    end
  end
  if js.soldout then return 'sold_out' end
  if js.uncommitted then return 'uncommitted' end
  if js.gated then
    local refused = presale_gate(k, acct, now)
    if refused then return refused end
  end
  if js.early then return 'not_open' end
  if js.codes and code == '' then return 'code_required' end
  if proof ~= '' then
    if now >= tonumber(proof_exp) then return 'stale' end
    if redis.call('SADD', k.spent, proof) == 0 then return 'reused' end
    js.spent = true
  end
  if js.codes then
    local refused = code_check(k, code)
    if refused then return refused end
    code_spend(k, code)
  end
  local through = js.passthrough or (js.auto and straight(js, k, now))
  if js.only and not through then return 'line' end
  js.joined = js.joined + 1
  local seq = js.seq0 + js.joined
  local id = b36(seq) .. '.' .. random
  if acct ~= '' then redis.call('HSET', k.accounts, acct, id .. ' ' .. now .. ' ?') end
  if js.until_open > 0 then redis.call('RPUSH', k.entries, id) end
  if through then
    local exp = now + ttl
    redis.call('ZADD', k.active, exp, id)
    redis.call('HSET', k.claims, id, now_s)
    js.admitted = js.admitted + 1
    return {-1, seq, exp}
  end
  return nil, seq, id
end

-- what the joins of a call write once: the sequence, the counters, the
-- tokens the joins let straight through spent, the spent proofs' expiry.
-- A place in line is counted joined on its shard (placeLua); one let in
-- here is counted here, and through besides (the report's
-- straightThrough: an auto line's with room, and every passthrough join).
local function join_done(js, k, spent_goes, now)
  if js.joined > 0 then redis.call('HINCRBY', k.stats, 'seq', int(js.joined)) end
  if js.admitted > 0 then
    redis.call('HINCRBY', k.stats, 'joined', js.admitted)
    redis.call('HINCRBY', k.stats, 'admitted', js.admitted)
    redis.call('HINCRBY', k.stats, 'through', js.admitted)
    redis.call('HINCRBY', k.report, 't:' .. math.floor(now / 60000), js.admitted)
  end
  if js.took > 0 then redis.call('HSET', k.bucket, 'tokens', js.tokens, 'ts', int(now)) end
  if js.spent then redis.call('PEXPIREAT', k.spent, spent_goes) end
end
`

// placeLua: the shard's phase of a join: the new places in wait, each at
// its score (its sequence number after opening, its lottery number before),
// with its abandon deadline, counted joined on the shard. A place after
// opening costs its ZADD alone: its score is above every score in the line
// whenever it is above the line's last one (one ZREVRANGE per call, at the
// tail of the skiplist), and its rank is then the places counted before
// it; any other (a pre-queue place, a line whose tail is not below: never
// seen, checked, not assumed) takes a ZRANK.
const placeLua = `
-- PSETS: the BITFIELD arguments of the call running, its first p.ns; one
-- table kept across calls (Redis runs one function at a time), not one
-- grown at each call
local PSETS = {}

local function placer(wait, seen, k, q, abandon, now)
  return {wait = wait, seen = seen, k = k, q = q, abandon = abandon, now = now, ns = 0, n = 0,
    top = false, count = false}
end

-- one place: rank × 65536 + pollAfter ms. score_s is int(score) when the
-- caller has it, or nil.
local function place(p, id, score, seq, slot, until_open, score_s)
  if not p.count then
    local last = redis.call('ZREVRANGE', p.wait, '0', '0', 'WITHSCORES')
    p.top, p.count = tonumber(last[2]), redis.call('ZCARD', p.wait)
  end
  redis.call('ZADD', p.wait, score_s or int(score), id)
  local rank
  if not p.top or score > p.top then
    rank, p.top = p.count, score
  else
    rank = redis.call('ZRANK', p.wait, id)
  end
  p.count = p.count + 1
  p.n = p.n + 1
  local poll = poll_after_per(rank * p.k, p.q, until_open, jitter(seq, p.now))
  local j = p.ns
  PSETS[j + 1], PSETS[j + 2], PSETS[j + 3], PSETS[j + 4] = 'SET', 'u32', slot, deadline_s(p.now, poll, p.abandon)
  p.ns = j + 4
  return rank * 65536 + poll
end

-- the places' deadlines in one write, and the count
local function placed(p, stats)
  if p.ns > 0 then redis.call('BITFIELD', p.seen, unpack(PSETS, 1, p.ns)) end
  if p.n > 0 then redis.call('HINCRBY', stats, 'joined', int(p.n)) end
end
`

// pollLua: a waiting fan's poll on its shard: a new abandon deadline (all
// of a call's in one write) and its answer.
const pollLua = `
-- QSETS: the polls' BITFIELD arguments, as PSETS the places'
local QSETS = {}

local function poller(seen, k, q, abandon, until_open, now)
  return {seen = seen, k = k, q = q, abandon = abandon, until_open = until_open, now = now, ns = 0}
end

-- rank × 65536 + pollAfter ms
local function poll(p, rank, slot)
  local pa = poll_after_per(rank * p.k, p.q, p.until_open, jitter(rank, p.now))
  local j = p.ns
  QSETS[j + 1], QSETS[j + 2], QSETS[j + 3], QSETS[j + 4] = 'SET', 'u32', slot, deadline_s(p.now, pa, p.abandon)
  p.ns = j + 4
  return rank * 65536 + pa
end

-- the new deadlines in one write; a place kept away (KEPT) stays kept,
-- whatever page of its fan still polls (the write answers the old values,
-- so this costs a second write only when there is one)
local function polled(p)
  if p.ns == 0 then return end
  local old = redis.call('BITFIELD', p.seen, unpack(QSETS, 1, p.ns))
  local back
  for i = 1, #old do
    if old[i] == KEPT then
      back = back or {}
      local j = #back
      back[j + 1], back[j + 2], back[j + 3], back[j + 4] = 'SET', 'u32', QSETS[4 * i - 1], int(KEPT)
    end
  end
  if back then redis.call('BITFIELD', p.seen, unpack(back)) end
end
`

// leaveLua: a fan leaving, from the line or from its active place.
const leaveLua = `
-- out of wait, counted left: 1, or 0 if it was not waiting
local function leave_wait(wait, stats, id)
  if redis.call('ZREM', wait, id) == 0 then return 0 end
  redis.call('HINCRBY', stats, 'left', 1)
  return 1
end

-- an active place that ended before its window did, noted in the ends
-- stream (gatekeeper.go: every gate follows it while Redis answers, and
-- keeps refusing the place's passes while Redis does not). exp is the
-- window's end in force (ms), the latest exp any pass of the place has;
-- a window already over needs no note (its passes have expired). Each
-- note trims the front: the notes whose window is over, up to 16.
local function ended(ends, id, exp)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if exp <= now then return end
  redis.call('XADD', ends, '*', 't', id, 'e', string.format('%d', exp))
  local front = redis.call('XRANGE', ends, '-', '+', 'COUNT', 17)
  local keep = front[#front][1]
  for _, m in ipairs(front) do
    if tonumber(m[2][4]) > now then
      keep = m[1]
      break
    end
  end
  redis.call('XTRIM', ends, 'MINID', keep)
  redis.call('PEXPIREAT', ends, string.format('%d', exp), 'NX')
  redis.call('PEXPIREAT', ends, string.format('%d', exp), 'GT')
end

-- out of the active set (left, revoked, or its booking done), its end
-- noted: 1, or 0 if it was not active
local function leave_active(active, inventory, holders, claims, ends, id)
  local exp = tonumber(redis.call('ZSCORE', active, id))
  if not exp then return 0 end
  redis.call('ZREM', active, id)
  inv_leaves(inventory, holders, id)
  redis.call('HDEL', claims, id)
  ended(ends, id, exp)
  return 1
end

-- a fan who leaves is away no more: nobody is emailed for its place
local function away_gone(away, due, id)
  redis.call('HDEL', away, id)
  redis.call('ZREM', due, id)
end
`

// tickLua: the admission step's rules (scripts.go, tickScript, says them
// in order).
const tickLua = `
-- drop the actives whose window ended: their places, their claims. An
-- away fan's place never claimed (2) lapsed: it moves from the admitted
-- to the abandoned in the books (every place is in one of them), and
-- k.lapsed counts it.
local function expire_actives(k, now)
  local gone = redis.call('ZRANGEBYSCORE', k.active, '-inf', now)
  k.lapsed = 0
  if #gone == 0 then return 0 end
  local holding = redis.call('EXISTS', k.holders) == 1
  for _, m in ipairs(gone) do
    if holding then inv_leaves(k.inventory, k.holders, m) end
    if redis.call('HGET', k.claims, m) == '2' then k.lapsed = k.lapsed + 1 end
    redis.call('HDEL', k.claims, m)
  end
  redis.call('ZREMRANGEBYSCORE', k.active, '-inf', now)
  if k.lapsed > 0 then
    redis.call('HINCRBY', k.stats, 'admitted', -k.lapsed)
    redis.call('HINCRBY', k.stats, 'abandoned', k.lapsed)
    redis.call('HINCRBY', k.stats, 'away_lapsed', k.lapsed)
  end
  return #gone
end

-- a tick's start on the event's tag: the actives whose window ended are
-- dropped; then whether the line is let in now (queueing: queue, or auto,
-- whose line the tick lets in as queue's; passthrough), how many are
-- active, and the draw's bound (lotteryPrelude).
local function tick_start(k, lottery, mode, opens, closes, now)
  local expired = expire_actives(k, now)
  local open = (not opens or now >= opens) and (not closes or now < closes)
  local through = drawn_through(lottery)
  if through == false then open = false end
  return expired, redis.call('ZCARD', k.active), open and (mode == 'queue' or mode == 'auto'), open and mode == 'passthrough', through
end

-- the budget of a tick: how many to let in now. The bucket refills at
-- rate, exactly, however fractional: its capacity is one tick's refill,
-- counting the tick as at least one second and at most two, plus one
-- token (the fraction of a fan a fractional rate carries to the next
-- tick); an auto line's holds a second's worth and one token, whatever
-- the tick (auto_tokens: its joins spend it too). Nothing accrues while
-- admission is stopped (paused, closed, before opening, passthrough), so
-- resuming never bursts. Passthrough lets in up to batch. The places
-- available bound it (room: the places that can be held now less the
-- admitted fans who hold nothing yet; passthrough stops at sold out).
-- waiting is the line's length, or nil when unknown (many shards).
-- Returns n, room (-1 when the inventory is unknown), soldout (0|1), the
-- inventory's available (-1 unknown).
local function budget(bucket, inventory, rate, cap, active, waiting, queueing, passthrough, batch, now, auto)
  local tokens = 0
  local n = 0
  if queueing and auto then
    tokens = auto_tokens(bucket, rate, now)
    n = math.min(math.floor(tokens), cap - active)
  elseif queueing then
    local b = redis.call('HMGET', bucket, 'tokens', 'ts')
    local ts = tonumber(b[2]) or now
    tokens = tonumber(b[1]) or 0
    local dt = now - ts
    if dt < 0 then dt = 0 end
    local span = math.min(math.max(dt, 1000), 2000)
    tokens = math.min(tokens + dt * rate / 1000, span * rate / 1000 + 1)
    n = math.min(math.floor(tokens), cap - active)
  else
    tokens = 0
    if passthrough then n = batch end
  end
  if waiting then n = math.min(n, waiting) end
  n = math.max(0, n)
  redis.call('HSET', bucket, 'tokens', tokens, 'ts', now)
  local known, avail, held, pending, engaged = inv_read(inventory)
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
  return n, room, soldout, avail
end

-- the front of one shard's line: its first n fans still there, each
-- {member, score, abandon deadline, score as Redis wrote it}; the abandoned ahead of them are
-- dropped and counted (at most max_skip); a fan the draw has not reached
-- (score above through) ends it. k: the shards (a fan's deadline slot is
-- seq div k).
local function front(wait, seen, stats, n, max_skip, k, through, now_s)
  local live, abandoned, from = {}, 0, 0
  while #live < n and abandoned < max_skip do
    local got = redis.call('ZRANGE', wait, from, from + n - #live - 1, 'WITHSCORES')
    if #got == 0 then break end
    for i = 1, #got, 2 do
      local m, score = got[i], tonumber(got[i + 1])
      if through and score > through then return live, abandoned end
      local seq = seq_of(m)
      local dl = 0
      if seq then dl = redis.call('BITFIELD', seen, 'GET', 'u32', '#' .. math.floor(seq / k))[1] end
      if dl < now_s then
        redis.call('ZREM', wait, m)
        abandoned = abandoned + 1
      else
        live[#live + 1] = {m, score, dl, got[i + 1]}
        from = from + 1
      end
      if #live == n then break end
    end
  end
  if abandoned > 0 then redis.call('HINCRBY', stats, 'abandoned', abandoned) end
  return live, abandoned
end

-- let one fan in, or find it abandoned: 'a' or 'x'. Its window runs to
-- now + access_ttl, but no later than its abandon deadline until its fan
-- claims the place with a poll (claimLua): a fan who walked away just
-- before its turn gives the place back at the deadline, not a whole window
-- later. A fan away (k.away: the event has some; away.go) waits
-- away_claim_within (k.away_until) for its claim instead, and is noted due
-- its email. A post-opening join (a positive score) is counted in the FIFO
-- figures, a pre-queue entry (a negative one) in the draw's (reportPrelude).
local function admit(k, m, score, dl, exp, now_s, fifo)
  if dl < now_s then return 'x' end
  local e, claim = exp, 1
  if k.away and redis.call('HEXISTS', k.away, m) == 1 then
    e, claim = k.away_until, 2
    redis.call('ZADD', k.away_due, k.now, m)
    k.away_admitted = k.away_admitted + 1
  elseif dl > 1 and dl * 1000 < e then
    e = dl * 1000
  end
  redis.call('ZADD', k.active, e, m)
  redis.call('HSET', k.claims, m, claim)
  if k.holding and tonumber(redis.call('HGET', k.holders, m) or '0') > 0 then
    redis.call('HINCRBY', k.inventory, 'engaged', 1) -- cannot happen today: kept exact anyway
  end
  local seq = seq_of(m)
  if seq and score > 0 then fifo_admit(fifo, seq) elseif seq then rank_admit(fifo, seq) end
  return 'a'
end

-- what admit needs of the fans away: whether the event has any, and
-- when their places lapse unclaimed (now + away_claim_within ms)
local function away_start(k, away, due, now, within)
  k.away_admitted, k.now = 0, now
  if redis.call('EXISTS', away) == 1 then
    k.away, k.away_due, k.away_until = away, due, now + within
  end
end

-- the counters of a tick's admissions, and the tokens they spent
local function admitted_done(k, queueing, admitted, fifo, now)
  if k.away_admitted > 0 then redis.call('HINCRBY', k.stats, 'away_admitted', k.away_admitted) end
  if admitted > 0 then
    redis.call('HINCRBY', k.stats, 'admitted', admitted)
    if queueing then redis.call('HINCRBYFLOAT', k.bucket, 'tokens', -admitted) end
  end
  report_admitted(k.report, fifo, now, admitted)
end

-- the measured rate: an exponential moving average (τ = 10 s) of
-- admissions per second, sampled only while the line stayed non-empty (an
-- empty line does not read as a slow admitter), and reset to the
-- configured rate when that changes. cfg is the configured rate as the
-- caller formats it (compared as a string).
local function measure(stats, cfg, queueing, waiting, admitted, now)
  local st = redis.call('HMGET', stats, 'rate', 'rate_ts', 'rate_cfg')
  local measured, rts = tonumber(st[1]), tonumber(st[2])
  if st[3] ~= cfg or not measured then measured, rts = tonumber(cfg), nil end
  if queueing and waiting > 0 then
    if rts and now > rts then
      local dt = now - rts
      measured = measured + (1 - math.exp(-dt / 10000)) * (admitted * 1000 / dt - measured)
    end
    redis.call('HSET', stats, 'rate', measured, 'rate_ts', now, 'rate_cfg', cfg)
  else
    redis.call('HSET', stats, 'rate', measured, 'rate_cfg', cfg)
    redis.call('HDEL', stats, 'rate_ts')
  end
  return measured
end
`
