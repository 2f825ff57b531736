package queue

import (
	"strconv"
	"sync"
)

// keys are the Redis keys of one event. Every one carries the event's hash
// tag {<event>}, so a script touching several of them stays on one Cluster
// slot. wait and active are fixed by the contract (operators read them with
// redis-cli); the rest are ours.
type keys struct {
	wait     string // ZSET member = ticket id, score = place in line
	active   string // ZSET member = ticket id, score = access expiry (ms)
	seen     string // string: u32 per sequence number (abandon deadline, see scripts.go)
	stats    string // HASH seq, joined, admitted, abandoned, left, rate, rate_ts, rate_cfg
	bucket   string // HASH tokens, ts: the admission token bucket
	settings string // JSON Settings published by the admitter

	// The operators' (operators.go).
	overrides string // HASH field (mode, admitPerSecond, maxActive) → JSON Override
	adaptive  string // HASH factor, at (ms): the adaptive admitter's share of the rate

	// The inventory the booking core publishes (inventory.go).
	inventory string // HASH available, held, pending, engaged, updatedAt (the contract's name)
	places    string // HASH hold id → "<ticket> <places> <reserved at ms>"
	holders   string // HASH ticket id → live holds
	ended     string // HASH hold id → "<r|b> <places> <told at ms>": holds given back or booked lately
	payments  string // HASH payment id → opened at ms

	// accounts: HASH account id → "<ticket id> <joined at ms> <ETA told ms + 1, 0 = none, ? = not yet known>",
	// the account's place (accounts.go).
	accounts string

	// A sharded event's global keys (shards.go); a one-shard event has none.
	claims string // HASH ticket id → claim time (unix s; 1 = admitted, unclaimed)
	lease  string // STRING the admitter replica ticking the event, with an expiry
	tick   string // HASH epoch (the tick's fencing number), mark (the sequence at the last tick)

	// The committed lottery and the sale's report (lottery.go, report.go).
	lottery string // HASH commitment, seed, committedAt, frozen, opensAt, prequeueOpensAt, entries, digest, drawn, last
	entries string // LIST the ticket ids placed in the pre-queue, in the order placed (the draw's entries)
	ranks   string // string: u32 per sequence number (BITFIELD #seq), an entry's rank in the draw (1 = first)
	drawing string // STRING the admitter drawing now, with an expiry (one draw at a time)
	report  string // HASH the sale's figures per minute and its wait histograms

	// statusScript's and joinScript's KEYS, built once (never modified).
	status, join []string
}

// shardKeys are the keys of one shard of a sharded event, under the
// shard's own hash tag (slots.go): everything a waiting fan touches.
type shardKeys struct {
	wait   string // ZSET as the one-shard wait: member = ticket id, score = place
	seen   string // string: u32 per ticket, at seq div K (the abandon deadline)
	stats  string // HASH joined, left, abandoned (this shard's share)
	info   string // HASH rate, available, soldout: the tick's copy of the global figures
	moving string // ZSET the tickets one tick is handing to the active set, with their scores
	fence  string // HASH epoch (the newest tick seen), moving (the tick moving owns)
}

func shardKeysOf(tag string) shardKeys {
	p := "wr:{" + tag + "}:"
	return shardKeys{wait: p + "wait", seen: p + "seen", stats: p + "stats", info: p + "info", moving: p + "moving", fence: p + "fence"}
}

// outcomeKey records what one tick's handover decided for each ticket
// (shards.go: how a tick that died halfway is finished).
func outcomeKey(event string, epoch int64) string {
	return "wr:{" + event + "}:outcome:" + strconv.FormatInt(epoch, 10)
}

// keysOf and the functions below are the one place key names are built.
//
// An event's keys are built once and kept (a request of the line would
// otherwise build some fifteen strings for the two or three it sends); the
// events are the config's, so the cache stays small.
func keysOf(event string) keys {
	if k, ok := keyCache.Load(event); ok {
		return *k.(*keys)
	}
	k := buildKeys(event)
	keyCache.Store(event, &k)
	return k
}

var keyCache sync.Map // event → *keys

func buildKeys(event string) keys {
	p := "wr:{" + event + "}:"
	k := keys{
		wait:     p + "wait",
		active:   p + "active",
		seen:     p + "seen",
		stats:    p + "stats",
		bucket:   p + "bucket",
		settings: p + "settings",

		overrides: p + "overrides",
		adaptive:  p + "adaptive",

		inventory: p + "inventory",
		places:    p + "places",
		holders:   p + "holders",
		ended:     p + "ended",
		payments:  p + "payments",
		accounts:  p + "accounts",

		claims: p + "claims",
		lease:  p + "lease",
		tick:   p + "tick",

		lottery: p + "lottery",
		entries: p + "lottery:entries",
		ranks:   p + "lottery:ranks",
		drawing: p + "lottery:drawing",
		report:  p + "report",
	}
	k.status = []string{k.wait, k.active, k.seen, k.stats, k.inventory}
	k.join = []string{k.wait, k.active, k.seen, k.stats, k.inventory, k.lottery, k.entries, k.accounts}
	return k
}

// rankedKey is part i of the draw's entries in rank order: rankedPart
// ticket ids, each followed by "\n" (the last part may be shorter), so the
// published list streams part by part (lottery.go).
func rankedKey(event string, i int) string {
	return "wr:{" + event + "}:lottery:ranked:" + strconv.Itoa(i)
}

// proofsKey is the set of join proofs spent (their challenges' ids) whose
// challenges expire in one unix minute: one key per event and minute, never
// one per challenge, and each is dropped a second after its minute ends
// (see Store.JoinProved), so no spent proof outlives its challenge by more
// than a minute.
func proofsKey(event string, minute int64) string {
	return "wr:{" + event + "}:proofs:" + strconv.FormatInt(minute, 10)
}

// joinLimitKey counts one address's joins in one calendar minute (unix
// minute), shared by every gateway replica. Its own hash tag: an address is
// not an event.
func joinLimitKey(addr string, minute int64) string {
	return "wr:joinlimit:{" + addr + "}:" + strconv.FormatInt(minute, 10)
}

// The operators' keys that belong to no event, each under a tag of its
// own: the audit trail (a STREAM at, event, change, source, capped), the
// marks that let a change be audited once by many replicas, and the booking
// core's health summaries (HASH replica → JSON BookingHealth).
const (
	auditKey         = "wr:{admin}:audit"
	bookingHealthKey = "wr:{booking}:health"
)

func auditOnceKey(once string) string { return "wr:{admin}:once:" + once }

// BookingStream is the Redis stream confirmed bookings are published to
// (DESIGN.md: booking-events, one entry per booking, keyed by bookingId).
const BookingStream = "booking-events"
