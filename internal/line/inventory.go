package line

import (
	"fmt"
	"time"
)

// The line knows what is left (DESIGN.md, "Inventory"): the booking core,
// the source of truth, publishes each event's inventory to the line, which
// admits nobody to nothing; it relays its confirmed bookings through the
// line too.

// Inventory is what the booking core publishes for an event.
type Inventory struct {
	Known     bool // false until the booking core published the event
	Available int64
	Held      int64
	Pending   int64
	UpdatedAt time.Time
}

// SoldOut reports whether every place is sold: nothing available, held or
// waiting on a payment.
func (i Inventory) SoldOut() bool {
	return i.Known && i.Available <= 0 && i.Held <= 0 && i.Pending <= 0
}

// String is for logs.
func (i Inventory) String() string {
	if !i.Known {
		return "inventory unknown"
	}
	return fmt.Sprintf("%d available, %d held, %d pending", i.Available, i.Held, i.Pending)
}

// LiveHold is one hold of a snapshot.
type LiveHold struct {
	HoldID string
	Ticket string // the customer: the ticket id
	Places int
}

// Snapshot is an event's inventory as the booking core's database had it
// at one instant.
type Snapshot struct {
	Free     int64 // places AVAILABLE or held but lapsed
	Holds    []LiveHold
	Payments []string // PENDING payment ids
	// Booked are the holds confirmed in the last RecentlyBooked: those the
	// snapshot already counts as sold.
	Booked []string
}

// InFlight is how long a reservation may wait for its hold's statement: a
// reservation younger than that at a sync's start, and absent from its
// snapshot, may belong to a hold still being decided, and is kept. It
// exceeds every timeout a hold runs under (the gateway gives up after 10 s).
const InFlight = 15 * time.Second

// RecentlyBooked is how far back a snapshot's Booked must reach: past every
// hold a sync may find ended lately (InFlight), with room to spare.
const RecentlyBooked = 2 * InFlight

// BookingEvent is one confirmed booking the booking core publishes to the
// booking-events stream (DESIGN.md: one entry per booking, keyed by
// bookingId).
type BookingEvent struct {
	BookingID string
	Type      string // "BookingConfirmed"
	OutboxID  int64  // the booking core's outbox row: consumers de-duplicate by it
	Payload   []byte // JSON
}
