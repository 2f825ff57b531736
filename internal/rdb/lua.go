package rdb

// Prelude holds the Lua helpers every script of ours may use; a script
// library includes it (rdb.NewLibrary(name, rdb.Prelude, …)).
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
-- base36 of a positive integer, as Go's strconv.FormatInt(n, 36). Up to
-- 36^6 it is one concatenation of two-digit strings made when the library
-- loads (B36P, B36D; no string library then, so the digits are written
-- out): no table and no string per digit at each call (a string per
-- digit made this the join's costliest line; a table of digits, unpack,
-- string.char and string.reverse still cost 4 % of a join's instructions
-- in Redis, docs/EDGE.md).
local B36D = {[0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f',
  'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y', 'z'}
local B36P = {}
for i = 0, 1295 do B36P[i] = B36D[(i - i % 36) / 36] .. B36D[i % 36] end

-- n < 1296, without leading zeros
local function b36top(n)
  if n < 36 then return B36D[n] end
  return B36P[n]
end

local function b36(n)
  if n < 1296 then return b36top(n) end
  local lo = n % 1296
  local m = (n - lo) / 1296
  if m < 1296 then return b36top(m) .. B36P[lo] end
  local mid = m % 1296
  m = (m - mid) / 1296
  if m < 1296 then return b36top(m) .. B36P[mid] .. B36P[lo] end
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
