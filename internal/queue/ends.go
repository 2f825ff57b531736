package queue

import (
	"context"
	"fmt"
	"strconv"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// The line's ends (DESIGN.md, "Fans cannot open the gate"): every place
// that ends before its window (left, revoked, completed) is noted by the
// script that ends it in the event's ends stream, with its window's end;
// every process's gatekeeper (package gatekeeper) follows them.

// Ends reads up to count of event's ends written after the stream id after
// ("" = from the first kept), oldest first.
func (s *Store) Ends(ctx context.Context, event, after string, count int64) ([]line.End, error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	msgs, err := s.c.XRangeN(ctx, rdb.KeysOf(event).Ends, start, "+", count).Result()
	if err != nil {
		return nil, rdb.Interpret("ends", err)
	}
	out := make([]line.End, 0, len(msgs))
	for _, m := range msgs {
		ticket, _ := m.Values["t"].(string)
		ms, err := strconv.ParseInt(fmt.Sprint(m.Values["e"]), 10, 64)
		if ticket == "" || err != nil {
			return nil, fmt.Errorf("ends: entry %s of %s: %v", m.ID, event, m.Values)
		}
		out = append(out, line.End{ID: m.ID, Ticket: ticket, Until: msToTime(ms)})
	}
	return out, nil
}
