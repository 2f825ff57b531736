package presale

import (
	"github.com/waitroom/waitroom/internal/draw"
	"github.com/waitroom/waitroom/internal/rdb"
)

// lua is the presale's function library (rdb.Library).
var lua = rdb.NewLibrary("presale", rdb.Prelude, rdb.Base36, draw.Lua, selectionLua)

// GateLua is the presale's gate, for the line's join script (package
// queue): presale_gate(k, acct, now) is nil when the account may make a new
// place now (invited, inside its window, its invitation not used), else
// the refusal: "account_required", "not_invited", {"window", opens ms,
// closes ms}, or "invitation_used". k holds the keys presale, registered,
// ranks, topups and bought (rdb.Keys' Presale, PresaleAccounts,
// PresaleRanks, PresaleTopUps, Bought). It needs rdb.Prelude's int.
//
// An account's invitation: its registration's rank (the ranks table, by
// the registration's sequence number) is at most the invitations made so
// far. Ranks 1…selected are the selection's groups of groupSize, group g's
// window opening at opensAt + g × window; the ranks above are the top-up
// groups, each with its own window (topups).
//
// An invitation buys once: once a booking of a place of the account was
// confirmed (the line notes it in bought as it frees the place: queue's
// giveScript at the sale, completeScript at its relay), the account makes
// no new place in its window. A place that ended without a booking (left,
// abandoned, expired) leaves the invitation unused, as the top-ups count
// it.
const GateLua = `
local function presale_gate(k, acct, now)
  if acct == '' then return 'account_required' end
  local reg = redis.call('HGET', k.registered, acct)
  if not reg then return 'not_invited' end
  local p = redis.call('HMGET', k.presale, 'drawn', 'selected', 'invited', 'groupSize', 'window', 'opensAt')
  if not p[1] then return 'not_invited' end
  local seq = tonumber(string.match(reg, '^(%w+)%.'), 36)
  local rank = redis.call('BITFIELD_RO', k.pranks, 'GET', 'u32', '#' .. int(seq))[1]
  if rank == 0 or rank > tonumber(p[3]) then return 'not_invited' end
  local opens, closes
  if rank <= tonumber(p[2]) then
    local w = tonumber(p[5])
    opens = tonumber(p[6]) + math.floor((rank - 1) / tonumber(p[4])) * w
    closes = opens + w
  else
    for _, g in ipairs(redis.call('LRANGE', k.topups, 0, -1)) do
      local a, b, o, c = string.match(g, '^(%d+) (%d+) (%d+) (%d+)$')
      if rank >= tonumber(a) and rank <= tonumber(b) then
        opens, closes = tonumber(o), tonumber(c)
        break
      end
    end
    if not opens then return 'not_invited' end
  end
  if now < opens or now >= closes then return {'window', int(opens), int(closes)} end
  if redis.call('HEXISTS', k.bought, acct) == 1 then return 'invitation_used' end
  return nil
end
`

// CodeLua is the access codes' part of the line's join script:
// code_check(k, code) is nil when code (its HMAC, Store.CodeHash) has a use
// left, else "code_required", "invalid_code" or "code_used";
// code_spend(k, code) spends one use, in the script that makes the place.
// k holds the keys codes and codesinfo (rdb.Keys' Codes, CodesInfo).
//
// The join judges a code only after it spent the join's proof of work (a
// missing code it refuses before: nothing to judge), so every guess costs
// a proof, and one proof raced by many guesses gets one of them judged
// (DESIGN.md, Fair play, third round: a wrong code costs its proof).
const CodeLua = `
local function code_check(k, code)
  if code == '' then return 'code_required' end
  local left = redis.call('HGET', k.codes, code)
  if not left then return 'invalid_code' end
  if tonumber(left) <= 0 then return 'code_used' end
  return nil
end

local function code_spend(k, code)
  redis.call('HINCRBY', k.codes, code, -1)
  redis.call('HINCRBY', k.codesinfo, 'used', 1)
end
`

// selectionLua is the selection's step of the draw's lifecycle (draw.Lua):
// selection_step(k, now, opens, closes, commitment, nonce) commits the
// selection once registration is open (the commitment and nonce the caller
// drew, if nobody committed), and freezes the registrations at its close
// (by Redis TIME; once frozen, for good): every registration made by then
// is an entry, withdrawn ones too (DESIGN.md: withdrawing moves nothing),
// so the entries are the sequence so far, and the log's length then says
// which they are. k holds the keys presale, registered and log. It returns
// draw_step's reply.
const selectionLua = `
local function selection_step(k, now, opens, closes, commitment, nonce)
  local function freeze()
    redis.call('HSET', k.presale, 'log', redis.call('LLEN', k.log))
    return tonumber(redis.call('HGET', k.presale, 'seq')) or 0, closes
  end
  return draw_step(k.presale, 'drawn', now, opens, closes, commitment, nonce, freeze)
end
`

// registerScript registers an account (one registration per account,
// whatever the race) while registration is open, committing the
// selection first if nobody has (selection_step). An account makes at
// most ARGV[7] registrations per event, withdrawn ones included: each is
// an entry of the selection for good, so this bounds them by the accounts.
//
// Every registration is also appended to the log ("<id> <account>"; a
// withdrawal appends "-<id>"): the selection reads the log, in pages of
// LRANGE, rather than scanning the hash.
//
// KEYS: 1 presale, 2 registered, 3 log, 4 made
// ARGV: 1 registration opens ms, 2 closes ms, 3 a nonce (hex), 4 the
// commitment it gives (draw.Secret.Commit), 5 the random part of a new id,
// 6 the account, 7 registrations an account may make
// Returns {"closed"} | {"had", id} | {"new", id} | {"limited"}.
var registerScript = lua.Script("register", `
local k = {presale = KEYS[1], registered = KEYS[2], log = KEYS[3]}
local st = selection_step(k, clock(), tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4], ARGV[3])
if st[1] ~= 'open' then return {'closed'} end
local had = redis.call('HGET', KEYS[2], ARGV[6])
if had then return {'had', had} end
if (tonumber(redis.call('HGET', KEYS[4], ARGV[6])) or 0) >= tonumber(ARGV[7]) then return {'limited'} end
redis.call('HINCRBY', KEYS[4], ARGV[6], 1)
local id = b36(redis.call('HINCRBY', KEYS[1], 'seq', 1)) .. '.' .. ARGV[5]
redis.call('HSET', KEYS[2], ARGV[6], id)
redis.call('RPUSH', KEYS[3], id .. ' ' .. ARGV[6])
return {'new', id}
`)

// withdrawScript withdraws an account's registration before the close.
//
// KEYS: 1 presale, 2 registered, 3 log
// ARGV: 1 registration opens ms, 2 closes ms, 3 the account
// Returns "closed", or how many registrations went (0 or 1).
var withdrawScript = lua.Script("withdraw", `
local now = clock()
if now < tonumber(ARGV[1]) or now >= tonumber(ARGV[2]) or redis.call('HEXISTS', KEYS[1], 'frozen') == 1 then
  return 'closed'
end
local id = redis.call('HGET', KEYS[2], ARGV[3])
if not id then return 0 end
redis.call('HDEL', KEYS[2], ARGV[3])
redis.call('RPUSH', KEYS[3], '-' .. id)
return 1
`)

// stepScript is the admitter's step of the selection (selection_step).
//
// KEYS: 1 presale, 2 registered, 3 log
// ARGV: 1 registration opens ms, 2 closes ms, 3 a nonce (hex), 4 the
// commitment it gives
// Returns draw_step's reply, then the log's length at the freeze.
var stepScript = lua.Script("step", `
local k = {presale = KEYS[1], registered = KEYS[2], log = KEYS[3]}
local r = selection_step(k, clock(), tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4], ARGV[3])
r[#r + 1] = tonumber(redis.call('HGET', KEYS[1], 'log')) or 0
return r
`)

// topUpScript settles a group whose window closed: k more ranks are
// invited (at most the wait list left), as a new group whose window opens
// at the closed one's close. Once per group (a second admitter finds it
// settled), only by the holder of the lease (two admitters never count
// places for two top-ups at once), and only once the window has closed by
// Redis TIME, the clock the joins are let in by (an admitter whose clock
// runs ahead gives no invitation away while its fans may still join).
//
// KEYS: 1 presale, 2 topups, 3 drawing (the lease)
// ARGV: 1 the group's name, 2 k, 3 the closed window's close (the new
// window's opening) ms, 4 the new window's close ms, 5 the lease's owner
// Returns {applied (0|1), k invited}, or {-1, 0} before the close.
var topUpScript = lua.Script("top_up", `
if redis.call('GET', KEYS[3]) ~= ARGV[5] then return {0, 0} end
if clock() < tonumber(ARGV[3]) then return {-1, 0} end
local field = 'settled:' .. ARGV[1]
if redis.call('HEXISTS', KEYS[1], field) == 1 then return {0, 0} end
local p = redis.call('HMGET', KEYS[1], 'invited', 'entries')
local invited = tonumber(p[1])
local k = math.max(0, math.min(tonumber(ARGV[2]), tonumber(p[2]) - invited))
redis.call('HSET', KEYS[1], field, k)
redis.call('HINCRBY', KEYS[1], 'settled', 1)
if k > 0 then
  redis.call('RPUSH', KEYS[2], int(invited + 1) .. ' ' .. int(invited + k) .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])
  redis.call('HINCRBY', KEYS[1], 'invited', k)
  redis.call('HINCRBY', KEYS[1], 'toppedUp', k)
end
return {1, k}
`)
