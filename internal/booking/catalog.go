package booking

import (
	"strconv"
	"time"
)

// Catalog is what the booking core sells: every event's showtimes, their
// reserved seats (rows × seats per row), their general-admission blocks, and
// the prices. The process builds it from its config (cmd/booking); the store
// seeds the database from it, and the service validates every request
// against it. It does not change while the process runs.
type Catalog struct {
	events    []Event
	showtimes map[int64]*Showtime
}

// Event is one sale of the catalog.
type Event struct {
	ID        string
	Showtimes []Showtime
}

// Showtime is one performance: its seats are rows lettered from A, each
// numbered from 1 (row F seat 5 is "F5"), plus its standing blocks.
type Showtime struct {
	ID          int64
	Event       string // filled by NewCatalog
	Title       string
	StartsAt    time.Time
	Rows        int // at most 26 (A..Z)
	SeatsPerRow int
	PriceCents  int64 // each reserved seat, in the currency's minor unit
	Blocks      []GABlock
}

// GABlock is a general-admission (standing) block, sold by count.
type GABlock struct {
	Code       string
	Capacity   int
	PriceCents int64
}

// NewCatalog holds events (and fills each showtime's Event).
func NewCatalog(events []Event) *Catalog {
	c := &Catalog{events: events, showtimes: map[int64]*Showtime{}}
	for i := range c.events {
		ev := &c.events[i]
		for j := range ev.Showtimes {
			st := &ev.Showtimes[j]
			st.Event = ev.ID
			c.showtimes[st.ID] = st
		}
	}
	return c
}

// Events are the catalog's events, in the config's order.
func (c *Catalog) Events() []Event { return c.events }

// StockedEventIDs are the ids of the events that sell places (with a
// showtime at least): the ones whose inventory the line is told. An event
// with none, such as one that guards a site of its own (forward auth),
// has no inventory, and is never sold out.
func (c *Catalog) StockedEventIDs() []string {
	var ids []string
	for _, ev := range c.events {
		if len(ev.Showtimes) > 0 {
			ids = append(ids, ev.ID)
		}
	}
	return ids
}

// HasEvent reports whether the catalog sells event.
func (c *Catalog) HasEvent(id string) bool {
	for _, ev := range c.events {
		if ev.ID == id {
			return true
		}
	}
	return false
}

// Showtime finds a showtime by id.
func (c *Catalog) Showtime(id int64) (*Showtime, bool) {
	st, ok := c.showtimes[id]
	return st, ok
}

// HasSeat reports whether code names a seat of st: a row letter within
// st.Rows and a number 1..SeatsPerRow written without leading zeros.
func (st *Showtime) HasSeat(code string) bool {
	if len(code) < 2 || code[0] < 'A' || int(code[0]-'A') >= st.Rows || code[1] == '0' {
		return false
	}
	n, err := strconv.Atoi(code[1:])
	return err == nil && strconv.Itoa(n) == code[1:] && n >= 1 && n <= st.SeatsPerRow
}

// Block finds one of st's general-admission blocks.
func (st *Showtime) Block(code string) (GABlock, bool) {
	for _, b := range st.Blocks {
		if b.Code == code {
			return b, true
		}
	}
	return GABlock{}, false
}

// RowLabels are st's row letters: A, B, …
func (st *Showtime) RowLabels() []string {
	rows := make([]string, st.Rows)
	for i := range rows {
		rows[i] = string(rune('A' + i))
	}
	return rows
}
