package queue

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/rdb"
)

// BookingStream is the Redis stream confirmed bookings are published to
// (DESIGN.md: booking-events, one entry per booking, keyed by bookingId).
const BookingStream = rdb.BookingStream

// PublishBookings appends events to BookingStream, in order: one pipeline
// on one connection keeps them in the order given. At least once: a caller
// that fails after this returned publishes them again.
func (s *Store) PublishBookings(ctx context.Context, events []line.BookingEvent) error {
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range events {
			p.XAdd(ctx, &redis.XAddArgs{Stream: BookingStream, Values: []any{
				"bookingId", e.BookingID, "type", e.Type, "outboxId", strconv.FormatInt(e.OutboxID, 10), "payload", string(e.Payload),
			}})
		}
		return nil
	})
	return rdb.Interpret("publish bookings", err)
}
