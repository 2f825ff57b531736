package queue

// The Lua scripts of the line, each a composition of the library's
// fragments (lua.go). Every key a script touches is passed in KEYS and
// carries one hash tag: the event's, or one shard's; "now" is always Redis
// TIME, so every gateway and admitter replica shares one clock.
//
// Two encodings keep a waiting fan at about 130 bytes of Redis:
//
//   - the wait ZSET holds only the ticket id (≈27 bytes) and its score; the
//     facts a fan needs later (join time, the ETA told at join) live in the
//     signed ticket, not in Redis;
//   - the "seen" key is a string used as an array of u32 indexed by the
//     ticket's sequence number (BITFIELD u32 #seq; #(seq div K) on a line of
//     K shards): 4 bytes per fan, the abandon deadline in unix seconds while
//     it waits (last poll + pollAfter told + abandon_after, rounded up).
//
// Once admitted, a fan's claim lives in the event's claims (1: admitted,
// unclaimed; then the claim time, unix s), as long as its active place.
//
// Numbers that must not lose precision (the lottery score) are passed to
// Redis as the strings Go formatted; floats are returned as strings because
// Redis truncates Lua numbers in replies to integers.

// The join (joinLua, placeLua). A fan who carries a live ticket is resumed
// by the status script instead, so that a join can never turn a dead
// ticket into a place for free (Store.Join). A join that pays with a proof
// of work spends it in the same script and round trip as the place it
// buys: once a join would hand out a place, or have its access code judged
// (a wrong code costs its proof: one proof, one guess), the proof's id is
// added to the spent set of its expiry minute, and a proof already there,
// or expired by Redis TIME, buys nothing; refusing by TIME as well as by
// the gateway's clock lets the set go a second after its minute (no proof
// can be spent once its set is gone). Joins with proofs of one expiry
// minute share a call (the set is a key); joins without proofs share
// another.
//
// A join for an account first looks for the account's place: if it may
// still be live, the join makes nothing and answers {"account", entry}
// (the caller resumes it), before any proof is spent; otherwise the new
// place becomes the account's, in the same script: one place per account,
// whatever the race (two joins of one account in one call: the second
// finds the first's place). On one shard "may be live" is: waiting or
// active. On many, the event's tag sees no wait: active, or not the place
// the caller found dead (it asks the place's status and comes back with
// the id of a dead one), or made less than accountGraceMs ago (its shard's
// phase may not have run yet).

// joinScript gives fans new places on a line of one shard, both phases in
// one script, for the joins of one event that a pipeline carries together.
//
// KEYS: 1 wait, 2 active, 3 seen, 4 stats, 5 inventory, 6 lottery,
// 7 lottery entries, 8 accounts, 9 claims, 10 presale, 11 presale
// accounts, 12 presale ranks, 13 presale top-ups, 14 codes, 15 codes info,
// 16 bought, 17 bucket, 18 report, 19 (with proofs only) the spent proofs
// of their expiry minute
// ARGV: 1 mode, 2 prequeue_opens_at ms or "", 3 opens_at ms or "",
// 4 closes_at ms or "", 5 configured rate (/s), 6 access_ttl ms,
// 7 abandon_after ms, 8 the presale's gate ("" none, "inf" for ever, else
// until general_sale_at ms), 9 codes required ("1") or "", 10 when the
// proofs' set goes (unix ms) or "", 11 max_active, 12 straight only ("1":
// a join that would wait makes nothing and answers "line"); then per join:
// the random part of the new id (base64url), its lottery number (a
// negative integer), the account id or "", the proof's id or "", its
// expiry ms or "", the access code's hash or ""
// Returns the head {now ms, rate, available or -1, the sequence before
// the call}, then one element per join, each one of
//
//	code × 256 + seq − the head's sequence, where code is rank × 65536 +
//	pollAfter ms (waiting; rank 0 = next): one number, not a table per
//	join (a table is made, converted and collected for each element),
//	while that is exact (code < 2^45: a rank below 2^29) and the offset
//	below 256 (a call carries at most 128 joins, joinHead); else {code, seq}
//	{-1, seq, active expiry ms} (admitted: passthrough, or straight through
//	an auto line with room, in the line's order: nobody waits)
//	"closed" | "not_open" | "sold_out" | "reused" | "stale" | "uncommitted"
//	"line" (straight only, and it would have waited)
//	a presale's or a code's refusal (presale.GateLua, presale.CodeLua)
//	{"account", entry} (the account's place)
//	{"layout", k} (a sharded event)
var joinScript = lua.Script("join", `
local now, now_s = clock()
-- the layout (sharded), the rate and the sequence, in one read
local st = redis.call('HMGET', KEYS[4], 'shards', 'rate', 'seq')
local layout_k = tonumber(st[1])
if not layout_k or layout_k <= 1 then layout_k = 1 end
local out, n, js = join_call(layout_k, 1, KEYS[4], KEYS[5], KEYS[6], now, st)
if not js then return out end
local keys = {stats = KEYS[4], active = KEYS[2], claims = KEYS[9], accounts = KEYS[8], entries = KEYS[7],
  presale = KEYS[10], registered = KEYS[11], pranks = KEYS[12], topups = KEYS[13], codes = KEYS[14], codesinfo = KEYS[15],
  bought = KEYS[16], bucket = KEYS[17], report = KEYS[18], spent = KEYS[19]}
-- one shard: whoever waits is in wait (a place this call made too)
js.waits = function() return redis.call('ZCARD', KEYS[1]) > 0 end
local function live(id)
  local exp = tonumber(redis.call('ZSCORE', KEYS[2], id))
  return redis.call('ZSCORE', KEYS[1], id) or (exp and exp > now)
end
local ttl = tonumber(ARGV[6])
local p = placer(KEYS[1], KEYS[3], 1, poll_per(tonumber(js.rate)), tonumber(ARGV[7]), now)
for i = 1, n do
  local a = 13 + 6 * (i - 1)
  local answer, seq, id = join_one(js, keys, now, now_s, ttl, ARGV[a], ARGV[a + 2], live, ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
  if answer then
    out[i + 4] = answer
  else
    local score, seq_s = seq, int(seq)
    local score_s = seq_s
    if js.until_open > 0 then score, score_s = tonumber(ARGV[a + 1]), nil end
    local code = place(p, id, score, seq, '#' .. seq_s, js.until_open, score_s)
    local off = seq - js.seq0
    if code < 35184372088832 and off < 256 then out[i + 4] = code * 256 + off else out[i + 4] = {code, seq} end
  end
end
join_done(js, keys, ARGV[10], now)
placed(p, KEYS[4])
return out
`)

// joinGlobalScript is a join's phase on the event's tag, on a line of
// many shards, for the joins of one event a pipeline carries together: the
// refusals, the account, the proof, the sequence number; passthrough, or an
// auto line with room, lets the fan in then and there. The place is made
// on its shard next (joinShardScript), and the line's mark (stats lined:
// when the last place was sent to a shard) says so to every later join:
// nobody is let straight through while it stands (shards.go says when the
// tick lifts it).
//
// KEYS: 1 stats, 2 active, 3 inventory, 4 claims, 5 lottery, 6 lottery
// entries, 7 accounts, 8–14 the presale's, the codes' and bought as
// joinScript's 10–16, 15 bucket, 16 report, 17 (with proofs only) the
// spent proofs of their expiry minute
// ARGV: 1 mode, 2 prequeue_opens_at ms or "", 3 opens_at ms or "",
// 4 closes_at ms or "", 5 configured rate, 6 access_ttl ms, 7 shards,
// 8 the presale's gate, 9 codes, 10 when the proofs' set goes (unix ms) or
// "", 11 max_active, 12 straight only; then per join: the random part of
// the id, the account id or "", the id of the account's place the caller
// found dead or "", the proof's id or "", its expiry ms or "", the access
// code's hash or ""
// Returns the head {now ms, rate, available or -1, the sequence before
// the call}, then per join one of
//
//	{-2, seq, ms until opening} (to be placed on its shard)
//	{-1, seq, active expiry ms} (admitted: passthrough, or straight through)
//	a refusal, {"account", entry}, {"layout", k} as joinScript's
var joinGlobalScript = lua.Script("join_global", `
local now, now_s = clock()
local want = tonumber(ARGV[7])
local out, n, js = join_call(layout(KEYS[1], want), want, KEYS[1], KEYS[3], KEYS[5], now)
if not js then return out end
local keys = {stats = KEYS[1], active = KEYS[2], claims = KEYS[4], accounts = KEYS[7], entries = KEYS[6],
  presale = KEYS[8], registered = KEYS[9], pranks = KEYS[10], topups = KEYS[11], codes = KEYS[12], codesinfo = KEYS[13],
  bought = KEYS[14], bucket = KEYS[15], report = KEYS[16], spent = KEYS[17]}
-- many shards: the line's mark stands while anyone may wait (shards.go)
local sent = false
js.waits = function() return sent or redis.call('HEXISTS', KEYS[1], 'lined') == 1 end
local ttl = tonumber(ARGV[6])
for i = 1, n do
  local a = 13 + 6 * (i - 1)
  local replace = ARGV[a + 2]
  local function live(id, joined)
    local exp = tonumber(redis.call('ZSCORE', KEYS[2], id))
    return (exp and exp > now) or id ~= replace or now - joined < `+accountGraceMs+`
  end
  local answer, seq = join_one(js, keys, now, now_s, ttl, ARGV[a], ARGV[a + 1], live, ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
  if not answer then
    answer, sent = {-2, seq, js.until_open}, true
  end
  out[i + 4] = answer
end
if sent then redis.call('HSET', KEYS[1], 'lined', int(now)) end
join_done(js, keys, ARGV[10], now)
return out
`)

// joinShardScript is a join's phase on its shard, for the places of one
// shard that a pipeline carries together. The poll interval is computed
// from the fans ahead on this shard times the shards (their share of the
// line); the exact position is added up by the caller from every shard.
//
// A pre-queue place that arrives once the draw has begun on this shard
// (lottery.go: the draw marks every shard first) is refused with "redraw":
// its score must be its draw's, which the caller then knows. A place that
// arrives more than lateShardMs after its first phase is refused with
// "late" and never made (its fan is answered 503 and joins again): until
// accountGraceMs after the first phase a join of the same account takes
// the place for one on its way and makes none, and after it may replace
// it; and the tick lifts an auto line's mark only once every place sent
// before it is on its shard or never will be (docs/QUEUE.md, "No
// overtaking, many shards"). So every place must be on its shard, or never
// be, by then (the margin is for the clocks of a cluster's masters, which
// this compares).
//
// KEYS: 1 wait, 2 seen, 3 stats, 4 info
// ARGV: 1 rate, 2 abandon_after ms, 3 shards; then per place: its ticket
// id, score, seen slot, ms until opening, 1 if the score is the ticket's
// draw (else 0), the first phase's time (ms)
// Returns per place rank × 65536 + pollAfter ms (rank on this shard) |
// "redraw" | "late".
var joinShardScript = lua.Script("join_shard", `
local now = clock()
local k = tonumber(ARGV[3])
local drawn = redis.call('HGET', KEYS[4], 'drawn')
local p = placer(KEYS[1], KEYS[2], k, poll_per(tonumber(ARGV[1])), tonumber(ARGV[2]), now)
local out = {}
for i = 1, (#ARGV - 3) / 6 do
  local a = 4 + 6 * (i - 1)
  local score = tonumber(ARGV[a + 1])
  local made = tonumber(ARGV[a + 5])
  if made and now - made > `+lateShardMs+` then
    out[i] = 'late'
  elseif ARGV[a + 4] ~= '1' and score < 0 and drawn then
    out[i] = 'redraw'
  else
    out[i] = place(p, ARGV[a], score, seq_of(ARGV[a]), ARGV[a + 2], tonumber(ARGV[a + 3]))
  end
end
placed(p, KEYS[3])
return out
`)

// The poll (pollLua, claimLua). It records that the fan is still there (a
// new abandon deadline) and says where it stands; the first poll (or
// resuming join) that finds a ticket admitted claims the place. A waiting
// ticket of an event sold out is told so (its fan stops waiting); an
// admitted one is still admitted (its page says so). A ticket is in wait
// or in active, never in both (the tick and the join move it atomically):
// wait is looked at first because most polls are of waiting fans.
//
// Inside Redis, a script's Lua around its commands costs more than the
// commands: every table, every number turned into an argument, every
// element of a reply. The poll keeps them few (docs/EDGE.md, third round):
// what the polls of a call share is read once and answered once, at the
// head of the reply, a waiting fan costs one ZRANK and one number, and the
// new deadlines of all go in one BITFIELD.

// statusScript answers the polls of one event on a line of one shard,
// both phases in one script, that a pipeline carries together.
//
// KEYS: 1 wait, 2 active, 3 seen, 4 stats, 5 inventory, 6 claims
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
var statusScript = lua.Script("status", `
local now, now_s = clock()
local n = (#ARGV - 6) / 2
local out = {now, '', -1}
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
local ttl = tonumber(ARGV[6])
local p = poller(KEYS[3], 1, poll_per(tonumber(r)), tonumber(ARGV[5]), until_open, now)
local soldout -- read once, when a waiting ticket needs it
for i = 1, n do
  local id, slot = ARGV[2 * i + 5], ARGV[2 * i + 6]
  local rank = redis.call('ZRANK', KEYS[1], id)
  if not rank then
    local exp = tonumber(redis.call('ZSCORE', KEYS[2], id))
    if exp and exp > now then
      local first
      exp, first = claim(KEYS[2], KEYS[6], KEYS[4], id, now, now_s, exp, ttl)
      out[i + 3] = {'admitted', exp, first}
    else
      out[i + 3] = -1
    end
  elseif closed then
    out[i + 3] = -2
  else
    if soldout == nil then
      local known, a, held, pending = inv_read(KEYS[5])
      soldout = inv_sold(known, a, held, pending)
      if known then out[3] = a end
    end
    if soldout then out[i + 3] = -3 else out[i + 3] = poll(p, rank, slot) end
  end
end
polled(p)
return out
`)

// statusShardScript answers, on one shard of a line of many, the polls of
// waiting fans that a pipeline carries together. The global figures (rate,
// available, sold out) are the copies the tick writes into the shard's
// info. Each fan brings the score it expects to have (its sequence number,
// or its lottery number or draw): the counts of the other shards were
// started with it, and a fan whose score is another (opens_at moved since,
// or the draw gave it its place) is answered it, to count again.
//
// KEYS: 1 wait, 2 seen, 3 info, 4 moving
// ARGV: 1 mode, 2 opens_at ms or "", 3 closes_at ms or "", 4 configured
// rate, 5 abandon_after ms, 6 shards; then per ticket: its id, its seen
// slot ("#" and seq div shards), the score it expects
// Returns the head {now ms, rate, available or -1}, then per ticket one of
//
//	rank × 65536 + pollAfter ms (waiting, rank on this shard)
//	{rank × 65536 + pollAfter ms, score} (waiting, at another score)
//	-2 (closed) | -3 (soldout) | -4 (not on this shard: admitted, or gone)
//	| -5 (a tick is handing it to the active set right now)
var statusShardScript = lua.Script("status_shard", `
local now = clock()
local n = (#ARGV - 6) / 3
local out = {now, '', -1}
local opens, closes = tonumber(ARGV[2]), tonumber(ARGV[3])
local closed = ARGV[1] == 'closed' or (closes and now >= closes)
local info = redis.call('HMGET', KEYS[3], 'rate', 'available', 'soldout')
local r = info[1] or ARGV[4]
out[2], out[3] = r, tonumber(info[2]) or -1
local until_open = 0
if opens and now < opens then until_open = opens - now end
local p = poller(KEYS[2], tonumber(ARGV[6]), poll_per(tonumber(r)), tonumber(ARGV[5]), until_open, now)
for i = 1, n do
  local a = 7 + 3 * (i - 1)
  local id = ARGV[a]
  local rank = redis.call('ZRANK', KEYS[1], id)
  if not rank then
    if redis.call('ZSCORE', KEYS[4], id) then out[i + 3] = -5 else out[i + 3] = -4 end
  elseif closed then
    out[i + 3] = -2
  elseif info[3] == '1' then
    out[i + 3] = -3
  else
    local code = poll(p, rank, ARGV[a + 1])
    local score = redis.call('ZSCORE', KEYS[1], id)
    if tonumber(score) ~= tonumber(ARGV[a + 2]) then code = {code, score} end
    out[i + 3] = code
  end
end
polled(p)
return out
`)

// statusGlobalScript is the poll of a fan no longer on its shard (a line
// of many): admitted (the first look claims the place) or gone.
//
// KEYS: 1 active, 2 claims, 3 stats
// ARGV: 1 ticket id, 2 access_ttl ms
// Returns -1 (expired) | {"admitted", expiry ms, first 0|1} | {"layout", 1}
// (the event's line is not sharded: the ticket was never on a shard).
var statusGlobalScript = lua.Script("status_global", `
if not sharded(KEYS[3]) then return {'layout', 1} end
local now, now_s = clock()
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not exp or exp <= now then return -1 end
local first
exp, first = claim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], now, now_s, exp, tonumber(ARGV[2]))
return {'admitted', exp, first}
`)

// belowScript counts, for many scores at once (the batcher merges the
// calls), the fans of one shard ahead of each: those waiting with a lower
// score, and those a tick is handing over (they are ahead until they are
// in).
//
// KEYS: 1 wait, 2 moving
// ARGV: the scores
// Returns one count per score.
var belowScript = lua.Script("below", `
local out = {}
local moving = redis.call('EXISTS', KEYS[2]) == 1
for i = 1, #ARGV do
  local below = '(' .. ARGV[i]
  out[i] = redis.call('ZCOUNT', KEYS[1], '-inf', below)
  if moving then out[i] = out[i] + redis.call('ZCOUNT', KEYS[2], '-inf', below) end
end
return out
`)

// leaveScript takes a ticket out of a line of one shard, or gives its
// active place back; either way its fan is away no more.
//
// KEYS: 1 wait, 2 active, 3 stats, 4 inventory, 5 holders, 6 claims, 7 away,
// 8 away due, 9 ends
// ARGV: 1 ticket id
// Returns 1 if it was waiting (counted as left), 2 if it was active (its
// end noted), 0 if neither, −k if the event's line is sharded over k
// (nothing else done here).
var leaveScript = lua.Script("leave", `
away_gone(KEYS[7], KEYS[8], ARGV[1])
local k = sharded(KEYS[3])
if k then return -k end
if leave_wait(KEYS[1], KEYS[3], ARGV[1]) == 1 then return 1 end
if leave_active(KEYS[2], KEYS[4], KEYS[5], KEYS[6], KEYS[9], ARGV[1]) == 1 then return 2 end
return 0
`)

// leaveShardScript takes a waiting ticket out of its shard.
//
// KEYS: 1 wait, 2 stats
// ARGV: 1 ticket id
// Returns 1 if it was waiting (counted as left), else 0.
var leaveShardScript = lua.Script("leave_shard", `
return leave_wait(KEYS[1], KEYS[2], ARGV[1])
`)

// completeScript frees an active place at once (the fan's booking is done,
// or it left or was revoked on a line of many shards). A confirmed
// booking is noted in the same step: the place in booked (the presale's
// top-ups), its account in bought (an invitation buys once: the
// presale's gate refuses the account a new place in its window). Each is
// noted at its first telling (the sale's, giveScript, or this): a repeat
// changes nothing.
//
// KEYS: 1 active, 2 inventory, 3 holders, 4 claims, 5 ends; with ARGV 2:
// 6 booked, 7 bought
// ARGV: 1 ticket id, 2 "1": its booking was confirmed, or absent; 3 the
// place's account ("" = none)
// Returns 1 if it was active (its end noted), else 0.
var completeScript = lua.Script("complete", `
if ARGV[2] == '1' then
  local now = int(clock())
  redis.call('HSETNX', KEYS[6], ARGV[1], now)
  if ARGV[3] ~= '' then redis.call('HSETNX', KEYS[7], ARGV[3], now) end
end
return leave_active(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1])
`)

// activeScript reports whether a ticket is active and unexpired, and for
// a sliding session's use (ARGV 2 and 3; DESIGN.md, "Sessions that last
// while they are used") renews its place in the same step: its expiry moves
// to now + ttl when that is at least every later than it is. The guard is
// the place's own expiry in Redis, so whatever the number of gateways and
// uses, a place's expiry is written at most once per every (and a place
// that is not active, left, revoked, completed or past its window, is
// never written: ZADD XX behind the check, in one script). It never
// shortens a window (a hold's may reach further).
//
// KEYS: 1 active
// ARGV: 1 ticket id; for a renewal: 2 ttl ms, 3 every ms
// Returns the expiry (ms) in force afterwards if active, else 0.
var activeScript = lua.Script("active", `
local now = clock()
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not exp or exp <= now then return 0 end
if ARGV[2] then
  local want = now + tonumber(ARGV[2])
  if want > exp and want - exp >= tonumber(ARGV[3]) then
    redis.call('ZADD', KEYS[1], 'XX', int(want), ARGV[1])
    return want
  end
end
return exp
`)

// extendScript moves an active ticket's expiry later, never earlier, and
// never past its ceiling: claim time + the longest window (access_ttl +
// hold_ttl), so that no chain of holds keeps a place for ever. A place not
// claimed yet (1, or 2 away) is counted as claimed now.
//
// KEYS: 1 active, 2 claims
// ARGV: 1 ticket id, 2 wanted expiry ms, 3 longest window after the claim ms
// Returns the expiry in force afterwards (ms), or 0 when not active.
var extendScript = lua.Script("extend", `
local now, now_s = clock()
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not exp or exp <= now then return 0 end
local claimed = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
if not claimed or claimed <= 2 then
  claimed = now_s
  redis.call('HSET', KEYS[2], ARGV[1], claimed)
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
var countsScript = lua.Script("counts", `
local now = clock()
local inv = redis.call('HMGET', KEYS[3], 'available', 'held', 'pending', 'updatedAt')
local k = tonumber(redis.call('HGET', KEYS[4], 'shards')) or 1
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'), inv[1], inv[2], inv[3], inv[4], k}
`)

// The tick (tickLua), atomic per script: any number of admitter replicas
// may run it, and a process dying mid-tick loses nothing:
//
//  1. drop actives whose window ended;
//  2. the budget: the token bucket refilled at rate, the cap, the places
//     available (budget in tickLua);
//  3. the front of the line, the abandoned ahead of it dropped and counted
//     (at most max_skip per tick, to bound the script);
//  4. let them in (admit);
//  5. the counters, the sale's report (admitted this minute, FIFO
//     inversions among post-opening joins, rank inversions among the
//     pre-queue's entries: report.go) and the measured rate.
//
// A line with a lottery committed is not open, whatever the time, until
// the draw has given the pre-queue its first scores, and while the draw is
// applied lets in nobody it has not reached (lottery.go).

// tickScript is the tick of a line of one shard: steps 1 to 5 in one
// script.
//
// KEYS: 1 wait, 2 active, 3 seen, 4 stats, 5 bucket, 6 inventory, 7 holders,
// 8 lottery, 9 report, 10 claims, 11 away, 12 away due, 13 the draw's ranks
// ARGV: 1 mode, 2 opens_at ms or "", 3 closes_at ms or "", 4 rate (/s),
// 5 max_active, 6 access_ttl ms, 7 max_skip, 8 passthrough batch,
// 9 away_claim_within ms
// Returns {admitted, abandoned, expired, waiting, active, measured rate,
// room (places for more idle fans; -1 when the inventory is unknown),
// lapsed (away places never claimed, given up)}, or {"layout", k} for a
// sharded event.
var tickScript = lua.Script("tick", `
local now, now_s = clock()
local k = sharded(KEYS[4])
if k then return {'layout', k} end
local rate, cap, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local keys = {active = KEYS[2], claims = KEYS[10], holders = KEYS[7], inventory = KEYS[6], stats = KEYS[4], bucket = KEYS[5], report = KEYS[9]}
local expired, active, queueing, passthrough, through = tick_start(keys, KEYS[8], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), now)
local n, room = budget(KEYS[5], KEYS[6], rate, cap, active, redis.call('ZCARD', KEYS[1]), queueing, passthrough, tonumber(ARGV[8]), now, ARGV[1] == 'auto')
away_start(keys, KEYS[11], KEYS[12], now, tonumber(ARGV[9]))

local live, abandoned = front(KEYS[1], KEYS[3], KEYS[4], n, tonumber(ARGV[7]), 1, through, now_s)
keys.holding = #live > 0 and redis.call('EXISTS', KEYS[7]) == 1 and room >= 0
local fifo = fifo_start(KEYS[9], KEYS[13])
local exp = now + ttl
local admitted = 0
for _, f in ipairs(live) do
  redis.call('ZREM', KEYS[1], f[1])
  if admit(keys, f[1], f[2], f[3], exp, now_s, fifo) == 'a' then admitted = admitted + 1 end
end
admitted_done(keys, queueing, admitted, fifo, now)
local waiting = redis.call('ZCARD', KEYS[1])
local measured = measure(KEYS[4], ARGV[4], queueing, waiting, admitted, now)
return {admitted, abandoned, expired, waiting, redis.call('ZCARD', KEYS[2]), tostring(measured), room, keys.lapsed}
`)

// The tick of a line of many shards is six steps, each one script on one
// tag, under a lease and a fencing number (the epoch) so that exactly one
// admitter replica's tick can hand fans over at a time. The lease is held
// for one tick only and given back at its end, so the replicas take turns
// (whoever ticks next) and a replica that dies between ticks costs nothing;
// one that dies within a tick holds the others off until the lease lapses
// (three tick intervals, at least a second):
//
//  1. tickBeginScript (global): take the lease (or find another replica
//     has it), a new epoch; steps 1 and 2; the watermark: the sequence
//     number given out by the previous tick's begin;
//  2. tickPrepareScript (each shard, at once): note the epoch (older ticks
//     are refused from now on), copy in the global figures the shard's polls
//     show, step 3 on the shard;
//  3. in Go: merge the shards' fronts by score into the one line and take
//     its first n, stopping at the first fan whose join is newer than the
//     watermark (its join's two phases may not both have landed: a fan
//     joined just before it might not be on its shard yet);
//  4. tickTakeScript (each shard with fans taken): move them from wait to
//     moving;
//  5. tickAcceptScript (global): if the epoch is still the newest, step 4
//     (within the cap, abandon deadlines checked again) and step 5, and
//     record each one's outcome;
//  6. tickDoneScript (each shard): clear moving, putting back in line any
//     fan not accepted, at its place.
//
// A tick that dies between 4 and 6 leaves a shard's moving set behind; the
// next tick's prepare finds it, and the outcomes recorded by 5 (or none:
// the epoch was never accepted, and now never can be) tell tickDoneScript
// what to do with each fan, before anyone else is taken from that shard.

// tickBeginScript: step 1.
//
// KEYS: 1 stats, 2 active, 3 bucket, 4 inventory, 5 holders, 6 claims,
// 7 lease, 8 tick, 9 lottery
// ARGV: 1 this replica's id, 2 lease ms, 3 mode, 4 opens_at ms or "",
// 5 closes_at ms or "", 6 rate (/s), 7 max_active, 8 passthrough batch,
// 9 shards
// Returns {"layout", k} | {"busy"} |
// {"go", epoch, n, expired, active, watermark, rate, available or -1,
// soldout 0|1, room, now ms, queueing 0|1, the draw's bound or "", lapsed,
// the line's mark if it may be lifted (shards.go) or ""}
var tickBeginScript = lua.Script("tick_begin", `
local now = clock()
local k = layout(KEYS[1], tonumber(ARGV[9]))
if k ~= tonumber(ARGV[9]) then return {'layout', k} end
local holder = redis.call('GET', KEYS[7])
if holder and holder ~= ARGV[1] then return {'busy'} end
redis.call('SET', KEYS[7], ARGV[1], 'PX', ARGV[2])
local epoch = redis.call('HINCRBY', KEYS[8], 'epoch', 1)
local mark = tonumber(redis.call('HGET', KEYS[8], 'mark')) or 0
redis.call('HSET', KEYS[8], 'mark', redis.call('HGET', KEYS[1], 'seq') or 0)

local keys = {active = KEYS[2], claims = KEYS[6], holders = KEYS[5], inventory = KEYS[4], stats = KEYS[1]}
local expired, active, queueing, passthrough, through = tick_start(keys, KEYS[9], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), now)
local auto = ARGV[3] == 'auto'
local n, room, soldout, avail = budget(KEYS[3], KEYS[4], tonumber(ARGV[6]), tonumber(ARGV[7]), active, nil, queueing, passthrough, tonumber(ARGV[8]), now, auto)
local q = 0
if queueing then q = 1 end
-- The line's mark may be lifted by this tick (once it finds every shard
-- empty, shards.go) if no place was sent to a shard for accountGraceMs:
-- every place sent before now is on its shard by now, or never will be.
local mark_seen = ''
if auto then
  local lined = redis.call('HGET', KEYS[1], 'lined')
  if lined and now - tonumber(lined) > `+accountGraceMs+` then mark_seen = lined end
end
-- Nobody to hand over: the lease is given back now (the shards' steps
-- that follow need no exclusivity; a newer epoch fences them).
if n == 0 then redis.call('DEL', KEYS[7]) end
return {'go', epoch, n, expired, active, mark, tostring(rate_for_eta(KEYS[1], ARGV[6])), avail, soldout, room, now, q, through or '', keys.lapsed, mark_seen}
`)

// tickPrepareScript: step 2, on one shard.
//
// KEYS: 1 wait, 2 seen, 3 stats, 4 info, 5 moving, 6 fence
// ARGV: 1 epoch, 2 n, 3 max_skip, 4 shards, 5 rate, 6 available or -1,
// 7 soldout 0|1, 8 the draw's bound or ""
// Returns {"fenced"} | {"stale", epoch, members…} (a dead tick's handover to
// finish first) | {"ok", waiting, abandoned, member, score, member, score…}
var tickPrepareScript = lua.Script("tick_prepare", `
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
local live, abandoned = front(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[8]), now_s)
local out = {'ok', redis.call('ZCARD', KEYS[1]), abandoned}
for _, f in ipairs(live) do
  out[#out + 1] = f[1]
  out[#out + 1] = f[4]
end
return out
`)

// tickTakeScript: step 4, on one shard.
//
// KEYS: 1 wait, 2 seen, 3 moving, 4 fence
// ARGV: 1 epoch, 2 shards, then the members to take
// Returns {"fenced"} | {member, abandon deadline (unix s), score, …} for
// those still waiting (a fan may have left since step 2).
var tickTakeScript = lua.Script("tick_take", `
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
    out[#out + 1] = s
  end
end
if #out > 0 then redis.call('HSET', KEYS[4], 'moving', ARGV[1]) end
return out
`)

// tickAcceptScript: step 5. An auto line's bucket is spent by its joins
// too, between the begin and this step: the fans let in here are held to
// what it holds now (auto_tokens), not to the begin's budget, and the
// line's mark is lifted here if the begin allowed it (ARGV 9), nobody is
// left in line after this step, and no place was sent to a shard since.
//
// KEYS: 1 stats, 2 active, 3 bucket, 4 inventory, 5 holders, 6 claims,
// 7 tick, 8 this epoch's outcomes, 9 lease, 10 report, 11 away, 12 away due,
// 13 the draw's ranks
// ARGV: 1 epoch, 2 queueing 0|1, 3 max_active, 4 access_ttl ms, 5 rate
// (/s, as configured), 6 fans still waiting after the take, 7 this
// replica's id, 8 away_claim_within ms, 9 the line's mark the begin may
// lift or "", 10 auto 0|1, then triples (member, abandon deadline, score)
// Returns {"fenced"} | {outcomes, active, measured rate}: outcomes one
// letter per member, a (admitted), r (refused: back in line), x (abandoned).
var tickAcceptScript = lua.Script("tick_accept", `
if redis.call('HGET', KEYS[7], 'epoch') ~= ARGV[1] then return {'fenced'} end
local now, now_s = clock()
local queueing, auto = ARGV[2] == '1', ARGV[10] == '1'
local cap, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local keys = {active = KEYS[2], claims = KEYS[6], holders = KEYS[5], inventory = KEYS[4], stats = KEYS[1], bucket = KEYS[3], report = KEYS[10]}
keys.holding = redis.call('EXISTS', KEYS[5]) == 1
away_start(keys, KEYS[11], KEYS[12], now, tonumber(ARGV[8]))
local limit = (#ARGV - 10) / 3
local tokens
if queueing then limit = math.min(limit, cap - redis.call('ZCARD', KEYS[2])) end
if queueing and auto then
  tokens = auto_tokens(KEYS[3], tonumber(ARGV[5]), now)
  limit = math.min(limit, math.floor(tokens))
end
local codes, admitted, abandoned = {}, 0, 0
local exp = now + ttl
local fifo = fifo_start(KEYS[10], KEYS[13])
for i = 11, #ARGV, 3 do
  local m, dl = ARGV[i], tonumber(ARGV[i + 1])
  local c
  if dl < now_s then
    c = 'x'
  elseif admitted < limit then
    c = admit(keys, m, tonumber(ARGV[i + 2]), dl, exp, now_s, fifo)
  else
    c = 'r'
  end
  if c == 'a' then admitted = admitted + 1 elseif c == 'x' then abandoned = abandoned + 1 end
  codes[#codes + 1] = c
  redis.call('HSET', KEYS[8], m, c)
end
redis.call('PEXPIRE', KEYS[8], 3600000)
if tokens then
  redis.call('HSET', KEYS[3], 'tokens', tokens - admitted, 'ts', int(now))
  admitted_done(keys, false, admitted, fifo, now)
else
  admitted_done(keys, queueing, admitted, fifo, now)
end
local waiting = tonumber(ARGV[6]) + (#codes - admitted - abandoned)
if waiting == 0 and ARGV[9] ~= '' and redis.call('HGET', KEYS[1], 'lined') == ARGV[9] then
  redis.call('HDEL', KEYS[1], 'lined')
end
local measured = measure(KEYS[1], ARGV[5], queueing, waiting, admitted, now)
if redis.call('GET', KEYS[9]) == ARGV[7] then redis.call('DEL', KEYS[9]) end
return {table.concat(codes), redis.call('ZCARD', KEYS[2]), tostring(measured)}
`)

// liftScript lifts an auto line's mark when a tick that found every shard
// empty handed nobody over (with fans to hand over, the accept lifts it):
// only the mark the tick's begin allowed, so not if a place was sent to a
// shard since (shards.go).
//
// KEYS: 1 stats
// ARGV: 1 the mark the begin allowed
// Returns 1 if lifted, else 0.
var liftScript = lua.Script("lift", `
if redis.call('HGET', KEYS[1], 'lined') ~= ARGV[1] then return 0 end
return redis.call('HDEL', KEYS[1], 'lined')
`)

// tickDoneScript: step 6, on one shard; also how a dead tick's handover is
// finished (with the outcomes it recorded, r for any it did not).
//
// KEYS: 1 wait, 2 moving, 3 stats, 4 fence
// ARGV: 1 the epoch whose handover this is, 2 outcomes (one letter per
// member), then the members
// Returns the fans put back in line, or -1 when that handover was finished
// already.
var tickDoneScript = lua.Script("tick_done", `
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
