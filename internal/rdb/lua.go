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
