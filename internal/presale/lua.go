package presale

import (
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/rdb"
)

// GateLua is the presale's gate, for the line's join script (package
// queue): presale_gate(k, acct, now) is nil when the account may make a new
// place now (invited, inside its window), else the refusal:
// "account_required", "not_invited", or {"window", opens ms, closes ms}. k
// holds the keys presale, registered, ranks and topups (rdb.Keys'
// Presale, PresaleAccounts, PresaleRanks, PresaleTopUps). It needs
// rdb.Prelude's int.
//
// An account's invitation: its registration's rank (the ranks table, by
// the registration's sequence number) is at most the invitations made so
// far. Ranks 1…selected are the selection's groups of groupSize, group g's
// window opening at opensAt + g × window; the ranks above are the top-up
// groups, each with its own window (topups).
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
  return nil
end
`

// CodeLua is the access codes' part of the line's join script:
// code_check(k, code) is nil when code (its HMAC, Store.CodeHash) has a use
// left, else "code_required", "invalid_code" or "code_used";
// code_spend(k, code) spends one use, in the script that makes the place.
// k holds the keys codes and codesinfo (rdb.Keys' Codes, CodesInfo).
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

// registerScript registers an account (one registration per account,
// whatever the race), committing the selection's seed first if nobody has.
//
// Every registration is also appended to the log ("<id> <account>"; a
// withdrawal appends "-<id>"): the selection reads the log, in pages of
// LRANGE, rather than scanning the hash.
//
// KEYS: 1 presale, 2 registered, 3 log
// ARGV: 1 registration opens ms, 2 closes ms, 3 a seed (hex), 4 its
// SHA-256 (hex), 5 the random part of a new id, 6 the account
// Returns {"closed"} | {"had", id} | {"new", id}.
var registerScript = redis.NewScript(rdb.Prelude + rdb.Base36 + `
local now = clock()
if now < tonumber(ARGV[1]) or now >= tonumber(ARGV[2]) then return {'closed'} end
local p = redis.call('HMGET', KEYS[1], 'commitment', 'frozen')
if p[2] then return {'closed'} end
if not p[1] then redis.call('HSET', KEYS[1], 'commitment', ARGV[4], 'seed', ARGV[3], 'committedAt', int(now)) end
local had = redis.call('HGET', KEYS[2], ARGV[6])
if had then return {'had', had} end
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
var withdrawScript = redis.NewScript(rdb.Prelude + `
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

// stepScript commits the selection once registration is open (with the
// seed the caller drew, only if none is), freezes the registrations at its
// close (by Redis TIME; once frozen, for good), and says what is due.
//
// KEYS: 1 presale, 2 registered, 3 log
// ARGV: 1 registration opens ms, 2 closes ms, 3 seed (hex), 4 its SHA-256
// Returns {"early"} | {"open"} | {"draw", seed, entries, log length} |
// {"drawn"}.
var stepScript = redis.NewScript(rdb.Prelude + `
local now = clock()
local p = redis.call('HMGET', KEYS[1], 'commitment', 'frozen', 'drawn', 'seed', 'entries')
if not p[1] then
  if now < tonumber(ARGV[1]) then return {'early'} end
  redis.call('HSET', KEYS[1], 'commitment', ARGV[4], 'seed', ARGV[3], 'committedAt', int(now))
  p = {ARGV[4], false, false, ARGV[3], false}
end
if p[3] then return {'drawn'} end
if not p[2] then
  if now < tonumber(ARGV[2]) then return {'open'} end
  p[5] = redis.call('HLEN', KEYS[2])
  redis.call('HSET', KEYS[1], 'frozen', int(now), 'entries', p[5], 'closesAt', ARGV[2], 'log', redis.call('LLEN', KEYS[3]))
end
return {'draw', p[4], tonumber(p[5]), tonumber(redis.call('HGET', KEYS[1], 'log'))}
`)

// drawnScript publishes the selection (once) with the plan it pins: a
// reload that changes the plan afterwards changes no invitation or window.
// It gives back the lease.
//
// KEYS: 1 presale, 2 drawing
// ARGV: 1 digest (hex), 2 selected, 3 group size, 4 window ms, 5 opens_at
// ms, 6 the lease's owner
var drawnScript = redis.NewScript(rdb.Prelude + `
if redis.call('HEXISTS', KEYS[1], 'drawn') == 0 then
  redis.call('HSET', KEYS[1], 'drawn', int(clock()), 'digest', ARGV[1], 'selected', ARGV[2], 'invited', ARGV[2],
    'toppedUp', 0, 'settled', 0, 'groupSize', ARGV[3], 'window', ARGV[4], 'opensAt', ARGV[5])
end
if redis.call('GET', KEYS[2]) == ARGV[6] then redis.call('DEL', KEYS[2]) end
return 1
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
var topUpScript = redis.NewScript(rdb.Prelude + `
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
