package draw

import (
	"github.com/waitroom/waitroom/internal/rdb"
)

// lua is the draw's own function library (rdb.Library).
var lua = rdb.NewLibrary("draw", rdb.Prelude)

// Lua is the draw's lifecycle as the step scripts of its kinds run it (the
// lottery's in package queue, the selection's in package presale): each
// kind's script is its own few lines around draw_step, which needs
// rdb.Prelude's int.
//
// A draw's hash (rdb.DrawKeys' Hash) holds:
//
//	commitment, nonce, committedAt  from the commitment on
//	frozen, entries, drawAt         from the freeze on (ms, count, ms)
//	drawn, digest, seed             once published (publishScript)
//	done                            the kind's field that says the whole
//	                                draw is applied (the lottery's
//	                                "applied"; the selection's "drawn")
//
// The seed itself is never in Redis before it is published (secret.go):
// the commitment is SHA-256 of a seed derived from the draw secret and the
// nonce.
//
// draw_step(h, done, now, opens, freezes, commitment, nonce, freeze) moves
// the draw on at now (ms) and says where it is:
//
//   - no commitment: before opens (or opens nil: the kind has none to
//     make), "early"; else it commits the commitment and nonce the caller
//     drew (Secret.Commit), the first caller only (each script runs alone,
//     so there is exactly one commitment, never replaced);
//   - committed, not frozen: before freezes, "open"; from freezes on (or at
//     once when freezes is nil), it freezes the entries for good: freeze(now)
//     writes the kind's own fields and returns how many entries froze and
//     when the draw was due (ms);
//   - frozen, done not set: "draw" (the draw is due, or under way);
//   - done set: "done".
//
// Its reply is {phase, nonce or "", entries, digest or "", commitment or
// ""}: a kind's script appends what it adds and returns it.
const Lua = `
local function draw_step(h, done, now, opens, freezes, commitment, nonce, freeze)
  local d = redis.call('HMGET', h, 'commitment', 'frozen', done, 'nonce', 'entries', 'digest')
  if not d[1] then
    if not opens or now < opens then return {'early', '', 0, '', ''} end
    redis.call('HSET', h, 'commitment', commitment, 'nonce', nonce, 'committedAt', int(now))
    d = {commitment, false, false, nonce, false, false}
  end
  local phase = 'draw'
  if d[3] then
    phase = 'done'
  elseif not d[2] then
    if freezes and now < freezes then return {'open', d[4], 0, '', d[1]} end
    local n, at = freeze(now)
    redis.call('HSET', h, 'frozen', int(now), 'entries', n, 'drawAt', int(at))
    d[5] = n
  end
  return {phase, d[4], tonumber(d[5]), d[6] or '', d[1]}
end
`

// publishScript publishes a draw, once (the first caller): from then on its
// seed, nonce, digest, ranks and list are shown.
//
// KEYS: 1 the draw's hash
// ARGV: 1 the digest (hex), 2 the seed (hex), then the kind's own fields,
// name and value
// Returns 1 if this call published it, 0 if it was already.
var publishScript = lua.Script("publish", `
if redis.call('HEXISTS', KEYS[1], 'drawn') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'drawn', int(clock()), 'digest', ARGV[1], 'seed', ARGV[2], unpack(ARGV, 3))
return 1
`)
