package queue

import (
	"time"

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
}

const noTime = -1 << 63

// headers are one event's shared script arguments, for one headerKey, and
// the hot scripts' KEYS.
type headers struct {
	key    headerKey
	status []any // statusScript's ARGV 1–6
	join   []any // joinScript's ARGV 1–7

	statusKeys, joinKeys []string // statusScript's and joinScript's KEYS (never modified)
}

func headerKeyOf(set Settings) headerKey {
	ms := func(t *time.Time) int64 {
		if t == nil {
			return noTime
		}
		return t.UnixMilli()
	}
	return headerKey{mode: set.Mode, prequeue: ms(set.PrequeueOpensAt), opens: ms(set.OpensAt), closes: ms(set.ClosesAt),
		rate: set.AdmitPerSecond, ttl: set.AccessTTL, abandon: set.AbandonAfter}
}

// headersOf returns event's headers for set, built on first use and again
// whenever the settings differ from those they were built for.
func (s *Store) headersOf(event string, set Settings) *headers {
	key := headerKeyOf(set)
	if h, ok := s.headers.Load(event); ok && h.(*headers).key == key {
		return h.(*headers)
	}
	rate := rateArg(set.AdmitPerSecond)
	k := rdb.KeysOf(event)
	h := &headers{
		key:        key,
		statusKeys: []string{k.Wait, k.Active, k.Seen, k.Stats, k.Inventory},
		joinKeys:   []string{k.Wait, k.Active, k.Seen, k.Stats, k.Inventory, k.Lottery, k.Entries, k.Accounts},
		status: []any{set.Mode, msArg(set.OpensAt), msArg(set.ClosesAt), rate,
			set.AbandonAfter.Milliseconds(), set.AccessTTL.Milliseconds()},
		join: []any{set.Mode, msArg(set.PrequeueOpensAt), msArg(set.OpensAt), msArg(set.ClosesAt),
			rate, set.AccessTTL.Milliseconds(), set.AbandonAfter.Milliseconds()},
	}
	s.headers.Store(event, h)
	return h
}

// withHeader is header followed by a request's own arguments, in a slice
// of its own.
func withHeader(header []any, own ...any) []any {
	return append(append(make([]any, 0, len(header)+len(own)), header...), own...)
}
