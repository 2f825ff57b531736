package queue

import (
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// The hot scripts (statusScript, joinScript) take the settings they need
// as their first arguments, the same for every request of an event while
// its settings stand. Boxing and formatting them for every request was a
// good part of a poll's allocations: they are built once per event and
// settings, and shared (read-only) by every call until the settings change.

// headerKey is what the headers are made of.
type headerKey struct {
	mode                    string
	prequeue, opens, closes int64 // unix ms; noTime when not set
	rate                    float64
	ttl, abandon            time.Duration
	shards                  int
	gate                    string // the presale's gate (gateArg)
	codes                   bool
}

const noTime = -1 << 63

// headers are one event's shared script arguments, for one headerKey, and
// the KEYS of the scripts of the event's tag that take them.
type headers struct {
	key         headerKey
	status      []any // statusScript's ARGV 1–6
	statusShard []any // statusShardScript's ARGV 1–6
	join        []any // joinScript's ARGV 1–9
	joinGlobal  []any // joinGlobalScript's ARGV 1–9

	// statusScript's, joinScript's and joinGlobalScript's KEYS (never
	// modified: a proof's set is appended to a copy).
	statusKeys, joinKeys, joinGlobalKeys []string
}

func headerKeyOf(set line.Settings) headerKey {
	ms := func(t *time.Time) int64 {
		if t == nil {
			return noTime
		}
		return t.UnixMilli()
	}
	return headerKey{mode: set.Mode, prequeue: ms(set.PrequeueOpensAt), opens: ms(set.OpensAt), closes: ms(set.ClosesAt),
		rate: set.AdmitPerSecond, ttl: set.AccessTTL, abandon: set.AbandonAfter, shards: shardsOf(set),
		gate: gateArg(set), codes: set.Codes}
}

// headersOf returns event's headers for set, built on first use and again
// whenever the settings differ from those they were built for.
func (s *Store) headersOf(event string, set line.Settings) *headers {
	key := headerKeyOf(set)
	if h, ok := s.headers.Load(event); ok && h.(*headers).key == key {
		return h.(*headers)
	}
	rate := rateArg(set.AdmitPerSecond)
	k := rdb.KeysOf(event)
	h := &headers{
		key:        key,
		statusKeys: []string{k.Wait, k.Active, k.Seen, k.Stats, k.Inventory, k.Claims},
		joinKeys: []string{k.Wait, k.Active, k.Seen, k.Stats, k.Inventory, k.Lottery, k.Entries, k.Accounts, k.Claims,
			k.Presale, k.PresaleAccounts, k.PresaleRanks, k.PresaleTopUps, k.Codes, k.CodesInfo, k.Bought, k.Bucket, k.Report},
		joinGlobalKeys: []string{k.Stats, k.Active, k.Inventory, k.Claims, k.Lottery, k.Entries, k.Accounts,
			k.Presale, k.PresaleAccounts, k.PresaleRanks, k.PresaleTopUps, k.Codes, k.CodesInfo, k.Bought, k.Bucket, k.Report},
		status: []any{set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rate,
			set.AbandonAfter.Milliseconds(), set.AccessTTL.Milliseconds()},
		statusShard: []any{set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rate,
			set.AbandonAfter.Milliseconds(), shardsOf(set)},
		join: []any{set.Mode, msArg(set.PrequeueOpensAt), msArg(set.OpensAt), msArg(set.ClosesAt),
			rate, set.AccessTTL.Milliseconds(), set.AbandonAfter.Milliseconds(), key.gate, boolArg(set.Codes)},
		joinGlobal: []any{set.Mode, msArg(set.PrequeueOpensAt), msArg(set.OpensAt), msArg(set.ClosesAt),
			rate, set.AccessTTL.Milliseconds(), shardsOf(set), key.gate, boolArg(set.Codes)},
	}
	s.headers.Store(event, h)
	return h
}

// gateArg is the presale's gate as the join scripts take it: "" none,
// "inf" for ever, else until general_sale_at (unix ms, by Redis TIME).
func gateArg(set line.Settings) string {
	switch {
	case !set.Presale:
		return ""
	case set.GeneralSaleAt == nil:
		return "inf"
	}
	return itoa(set.GeneralSaleAt.UnixMilli())
}

// withHeader is header followed by a request's own arguments, in a slice
// of its own.
func withHeader(header []any, own ...any) []any {
	return append(append(make([]any, 0, len(header)+len(own)), header...), own...)
}
