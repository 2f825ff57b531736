package rdb

// Prelude holds the Lua helpers every script of ours may use; a script
// starts with it (redis.NewScript(rdb.Prelude + `…`)).
//
//   - clock() is "now" from Redis TIME, in ms and in s: one clock for every
//     replica of every process;
//   - int(n) is an integer as the decimal string a command takes. A Lua
//     number given to redis.call is formatted by Redis with %.17g and one
//     joined by '..' with %.14g: the floating-point path of printf, the
//     costliest step of a hot script's per-fan work (docs/EDGE.md, fourth
//     round); '%d' is printf's integer path. Exact up to 2^53.
const Prelude = `
local function clock()
  local t = redis.call('TIME')
  local s = tonumber(t[1])
  return s * 1000 + math.floor(tonumber(t[2]) / 1000), s
end

local function int(n) return string.format('%d', n) end
`

// Base36 is b36(n): a positive integer in base 36, as Go's
// strconv.FormatInt(n, 36) writes it (the sequence number in front of a
// ticket's or a registration's id).
const Base36 = `
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
`
