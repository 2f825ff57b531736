package rdb

import (
	"strconv"
	"sync"
)

// Keys are the Redis keys of one event. Every one carries the event's hash
// tag {<event>}, so a script touching several of them stays on one Cluster
// slot. wait and active are fixed by the contract (operators read them with
// redis-cli); the rest are ours.
type Keys struct {
	Wait     string // ZSET member = ticket id, score = place in line
	Active   string // ZSET member = ticket id, score = access expiry (ms)
	Seen     string // string: u32 per sequence number (abandon deadline, see scripts.go)
	Stats    string // HASH seq, joined, admitted, abandoned, left, rate, rate_ts, rate_cfg
	Bucket   string // HASH tokens, ts: the admission token bucket
	Settings string // JSON Settings published by the admitter

	// The operators' (operators.go).
	Overrides string // HASH field (mode, admitPerSecond, maxActive) → JSON Override
	Adaptive  string // HASH factor, at (ms): the adaptive admitter's share of the rate

	// The inventory the booking core publishes (inventory.go).
	Inventory string // HASH available, held, pending, engaged, updatedAt (the contract's name)
	Places    string // HASH hold id → "<ticket> <places> <reserved at ms>"
	Holders   string // HASH ticket id → live holds
	Ended     string // HASH hold id → "<r|b> <places> <told at ms>": holds given back or booked lately
	Payments  string // HASH payment id → opened at ms

	// accounts: HASH account id → "<ticket id> <joined at ms> <ETA told ms + 1, 0 = none, ? = not yet known>",
	// the account's place (accounts.go).
	Accounts string

	// The fans who stepped away from the page (queue's away.go): HASH
	// ticket id → "<lang> <email> <place>" (the place: the ticket's id and
	// facts and a seal, never the ticket); and those of them
	// admitted whose email is still to be queued, ZSET ticket id → admitted
	// at (ms).
	Away    string
	AwayDue string

	// The event's email outbox (package notify): ZSET message id → when it
	// is next due (ms), HASH message id → the message and its state, and
	// HASH message id → the sender whose claim to send it is the last
	// taken (while it sends).
	Outbox     string
	Mail       string
	MailClaims string

	// Ends: STREAM of the active places that ended before their window did
	// (left, revoked, completed by a booking), each {t: ticket id, e: the
	// window's end in ms}, trimmed from the front once that passed; every
	// gate and the booking core follow it while Redis answers, to keep
	// refusing those passes when it does not (queue's gatekeeper.go).
	Ends string

	// A sharded event's global keys (shards.go); a one-shard event has none.
	Claims string // HASH ticket id → claim time (unix s; 1 = admitted, unclaimed)
	Lease  string // STRING the admitter replica ticking the event, with an expiry
	Tick   string // HASH epoch (the tick's fencing number), mark (the sequence at the last tick)

	// The committed lottery and the sale's report (lottery.go, report.go).
	Lottery string // HASH commitment, nonce, committedAt; frozen, entries, drawAt, opensAt, prequeueOpensAt; drawn, digest, seed (never before), last; through, applied
	Entries string // LIST the ticket ids placed in the pre-queue, in the order placed (the draw's entries)
	Ranks   string // string: u32 per sequence number (BITFIELD #seq), an entry's rank in the draw (1 = first)
	Drawing string // STRING the admitter drawing now, with an expiry (one draw at a time)
	Report  string // HASH the sale's figures per minute and its wait histograms
	Booked  string // HASH ticket id → when its booking was confirmed (ms): a place that bought
	Bought  string // HASH account id → when a booking of one of its places was confirmed (ms): an invitation that bought

	// The presale (package presale) and the access codes.
	Presale         string // HASH the selection's commitment, nonce, times, counts and state; its seed once drawn, never before
	PresaleAccounts string // HASH account id → registration id (one per account)
	PresaleMade     string // HASH account id → registrations it made, withdrawn ones too (at most presale.MaxRegistrations)
	PresaleLog      string // LIST "<id> <account>" per registration, "-<id>" per withdrawal, in order
	PresaleContacts string // HASH account id → "<lang> <email>": where a selected registrant is told its window
	PresaleRanks    string // string: u32 per registration's sequence number (BITFIELD #seq), its rank
	PresaleTopUps   string // LIST the top-up groups, "<first rank> <last rank> <opens ms> <closes ms>"
	PresaleDrawing  string // STRING the admitter drawing the selection, with an expiry
	Codes           string // HASH HMAC of an access code → uses left
	CodesInfo       string // HASH codes, uses, used: the codes' counts

	// The event's webhooks (package webhook).
	Hooks          string // HASH the state last announced per aspect (sale, booking, lottery, selection), config (the config's values announced), seq (moments made)
	HookMoments    string // HASH moment id → its body
	HookDeliveries string // HASH "<moment id> <endpoint id>" → the delivery's state
	HookPending    string // ZSET "<moment id> <endpoint id>" → the moment's seq: the deliveries still to make, in order
	HookLog        string // ZSET "<moment id> <endpoint id>" → the moment's seq: the deliveries kept for the log
}

// ShardKeys are the keys of one shard of a sharded event, under the
// shard's own hash tag (slots.go): everything a waiting fan touches.
type ShardKeys struct {
	Wait   string // ZSET as the one-shard wait: member = ticket id, score = place
	Seen   string // string: u32 per ticket, at seq div K (the abandon deadline)
	Stats  string // HASH joined, left, abandoned (this shard's share)
	Info   string // HASH rate, available, soldout: the tick's copy of the global figures
	Moving string // ZSET the tickets one tick is handing to the active set, with their scores
	Fence  string // HASH epoch (the newest tick seen), moving (the tick moving owns)
}

func shardKeysOf(tag string) ShardKeys {
	p := "wr:{" + tag + "}:"
	return ShardKeys{Wait: p + "wait", Seen: p + "seen", Stats: p + "stats", Info: p + "info", Moving: p + "moving", Fence: p + "fence"}
}

// ShardKeysFor returns the keys of every shard of event spread over k
// (built once per event and layout, and kept).
func ShardKeysFor(event string, k int) []ShardKeys {
	key := event + "/" + strconv.Itoa(k)
	if v, ok := layoutCache.Load(key); ok {
		return v.([]ShardKeys)
	}
	out := make([]ShardKeys, k)
	for i := range out {
		out[i] = shardKeysOf(shardTag(event, i, k))
	}
	layoutCache.Store(key, out)
	return out
}

var layoutCache sync.Map // "<event>/<k>" → []ShardKeys

// ShardTags lists the hash tags of event's shards when spread over k (for
// operators and tests: wr:{<tag>}:wait is shard i's line).
func ShardTags(event string, k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = shardTag(event, i, k)
	}
	return out
}

// OutcomeKey records what one tick's handover decided for each ticket
// (shards.go: how a tick that died halfway is finished).
func OutcomeKey(event string, epoch int64) string {
	return "wr:{" + event + "}:outcome:" + strconv.FormatInt(epoch, 10)
}

// KeysOf and the functions below are the one place key names are built.
//
// An event's keys are built once and kept (a request of the line would
// otherwise build some fifteen strings for the two or three it sends); the
// events are the config's, so the cache stays small.
func KeysOf(event string) Keys {
	if k, ok := keyCache.Load(event); ok {
		return *k.(*Keys)
	}
	k := buildKeys(event)
	keyCache.Store(event, &k)
	return k
}

var keyCache sync.Map // event → *Keys

func buildKeys(event string) Keys {
	p := "wr:{" + event + "}:"
	k := Keys{
		Wait:     p + "wait",
		Active:   p + "active",
		Seen:     p + "seen",
		Stats:    p + "stats",
		Bucket:   p + "bucket",
		Settings: p + "settings",

		Overrides: p + "overrides",
		Adaptive:  p + "adaptive",

		Inventory: p + "inventory",
		Places:    p + "places",
		Holders:   p + "holders",
		Ended:     p + "ended",
		Payments:  p + "payments",
		Accounts:  p + "accounts",

		Away:    p + "away",
		AwayDue: p + "away:due",
		Outbox:  p + "outbox",
		Mail:    p + "outbox:mail",

		MailClaims: p + "outbox:claims",

		Ends: p + "ends",

		Claims: p + "claims",
		Lease:  p + "lease",
		Tick:   p + "tick",

		Lottery: p + "lottery",
		Entries: p + "lottery:entries",
		Ranks:   p + "lottery:ranks",
		Drawing: p + "lottery:drawing",
		Report:  p + "report",
		Booked:  p + "booked",
		Bought:  p + "bought",

		Presale:         p + "presale",
		PresaleAccounts: p + "presale:accounts",
		PresaleMade:     p + "presale:made",
		PresaleLog:      p + "presale:log",
		PresaleContacts: p + "presale:contacts",
		PresaleRanks:    p + "presale:ranks",
		PresaleTopUps:   p + "presale:topups",
		PresaleDrawing:  p + "presale:drawing",
		Codes:           p + "codes",
		CodesInfo:       p + "codes:info",

		Hooks:          p + "hooks",
		HookMoments:    p + "hooks:moments",
		HookDeliveries: p + "hooks:deliveries",
		HookPending:    p + "hooks:pending",
		HookLog:        p + "hooks:log",
	}
	return k
}

// DrawKeys are the keys of one committed draw (package draw): the
// lottery's (LotteryDraw) or the presale's selection (SelectionDraw).
type DrawKeys struct {
	Hash  string // HASH the draw's commitment, seed, times, entries, digest and state
	Lease string // STRING the process drawing now, with an expiry (one draw at a time)
	Ranks string // string: u32 per sequence number (BITFIELD #seq), an entry's rank (1 = first)

	ranked string // the published list's parts, this followed by the part's number
}

// Ranked is part i of the published list, the entries' ids in rank order:
// draw.PartSize ids, each followed by "\n" (the last part may be shorter),
// so the list is written and streamed part by part.
func (d DrawKeys) Ranked(i int) string { return d.ranked + strconv.Itoa(i) }

// LotteryDraw are the keys of event's lottery (the pre-queue's draw).
func LotteryDraw(event string) DrawKeys {
	k := KeysOf(event)
	return DrawKeys{Hash: k.Lottery, Lease: k.Drawing, Ranks: k.Ranks, ranked: "wr:{" + event + "}:lottery:ranked:"}
}

// SelectionDraw are the keys of event's presale selection.
func SelectionDraw(event string) DrawKeys {
	k := KeysOf(event)
	return DrawKeys{Hash: k.Presale, Lease: k.PresaleDrawing, Ranks: k.PresaleRanks, ranked: "wr:{" + event + "}:presale:ranked:"}
}

// RankedKey is part i of the lottery's published list (LotteryDraw's
// Ranked).
func RankedKey(event string, i int) string { return LotteryDraw(event).Ranked(i) }

// PresaleRankedKey is part i of the selection's published list
// (SelectionDraw's Ranked).
func PresaleRankedKey(event string, i int) string { return SelectionDraw(event).Ranked(i) }

// PresaleHoldersKey is part i of the accounts behind the selection's
// ranks, in rank order, one per line: never published (the gateway reads
// an account's rank from PresaleAccounts and PresaleRanks; the admitter
// reads a group's accounts from here).
func PresaleHoldersKey(event string, i int) string {
	return "wr:{" + event + "}:presale:holders:" + strconv.Itoa(i)
}

// ProofsKey is the set of join proofs spent (their challenges' ids) whose
// challenges expire in one unix minute: one key per event and minute, never
// one per challenge, and each is dropped a second after its minute ends
// (see Store.JoinProved), so no spent proof outlives its challenge by more
// than a minute.
func ProofsKey(event string, minute int64) string {
	return "wr:{" + event + "}:proofs:" + strconv.FormatInt(minute, 10)
}

// JoinLimitKey counts one address's joins in one calendar minute (unix
// minute), shared by every gateway replica. Its own hash tag: an address is
// not an event.
func JoinLimitKey(addr string, minute int64) string {
	return "wr:joinlimit:{" + addr + "}:" + strconv.FormatInt(minute, 10)
}

// ListLimitKey counts the published lists' downloads (a lottery's or a
// selection's entries) from one address in one unix minute, shared by
// every gateway replica. Its own hash tag: an address is not an event.
func ListLimitKey(addr string, minute int64) string {
	return "wr:listlimit:{" + addr + "}:" + strconv.FormatInt(minute, 10)
}

// AwayLimitKey counts one account's steps away in one unix hour, shared
// by every gateway replica. Its own hash tag: an account is not an event.
func AwayLimitKey(account string, hour int64) string {
	return "wr:awaylimit:{" + account + "}:" + strconv.FormatInt(hour, 10)
}

// SenderLease is the lease of the one email sender at a time (package
// notify), whichever admitter replica holds it.
const SenderLease = "wr:{notify}:sender"

// HooksGoneKey is the webhooks' receivers that answered 410 Gone (package
// webhook): HASH endpoint identity → when (ms). Its own tag: a receiver is
// no event's.
const HooksGoneKey = "wr:{hooks}:gone"

// The operators' keys that belong to no event, each under a tag of its
// own: the audit trail (a STREAM at, event, change, source, capped), the
// marks that let a change be audited once by many replicas, and the booking
// core's health summaries (HASH replica → JSON BookingHealth).
const (
	AuditKey         = "wr:{admin}:audit"
	BookingHealthKey = "wr:{booking}:health"
)

func AuditOnceKey(once string) string { return "wr:{admin}:once:" + once }

// BookingStream is the Redis stream confirmed bookings are published to
// (DESIGN.md: booking-events, one entry per booking, keyed by bookingId).
const BookingStream = "booking-events"

// ReturnKey holds the way back to a site behind the room (forward auth)
// that the fan of ticket id came from: a STRING with an expiry.
func ReturnKey(event, id string) string { return "wr:{" + event + "}:return:" + id }

// SitePortsKey holds the ports a site of event is served on besides its
// scheme's default: a SET of "<host>:<port>" (lower case) that a site's
// proxy named in X-Forwarded-Host when forward auth sent a fan to the
// event's room. A way back may name only those ports (the gateway's
// forwardauth.go).
func SitePortsKey(event string) string { return "wr:{" + event + "}:siteports" }

// SpentKey marks the return token jti as spent: a STRING with an expiry
// past the token's own.
func SpentKey(event, jti string) string { return "wr:{" + event + "}:spent:" + jti }
