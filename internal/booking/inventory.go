package booking

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/waitroom/waitroom/internal/gatekeeper"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/platform/breaker"
	"github.com/waitroom/waitroom/internal/platform/metrics"
)

// InventoryLine is the waiting room's copy of what is left, per event: the
// line reads it to admit nobody to nothing.
type InventoryLine interface {
	Reserve(ctx context.Context, event, holdID, ticket string, places int) (bool, error)
	// ReserveActive is Reserve only if ticket holds its active place in
	// event now (active false: nothing reserved), in one call: a hold's
	// check of its pass and its reservation are one round trip.
	ReserveActive(ctx context.Context, event, holdID, ticket string, places int) (active, known bool, err error)
	Release(ctx context.Context, event, holdID string) error
	// BookedFor tells a confirmed hold's sale: it frees the fan's place
	// and, in the same step, notes account ("" = none) as bought (a
	// presale's invitation buys once), so that no join of the account
	// falls between the two.
	BookedFor(ctx context.Context, event, holdID, account string) error
	PaymentOpened(ctx context.Context, event, paymentID string) error
	PaymentSettled(ctx context.Context, event, paymentID string) error
	SyncMark(ctx context.Context) (int64, error)
	SyncInventory(ctx context.Context, event string, mark int64, snap line.Snapshot) error
	Ping(ctx context.Context) error
}

// InventorySnapshot is an event's places as the database has them at one
// instant.
type InventorySnapshot struct {
	Free     int64 // seats and general-admission places AVAILABLE, or held but lapsed
	Holds    []LiveHold
	Payments []string // PENDING payment ids
	Booked   []string // holds confirmed lately (see line.Snapshot)
}

// LiveHold is a hold that counts now.
type LiveHold struct {
	ID       string
	Customer string
	Places   int
}

// Lapsed is a hold that lapsed (its expiry passed while it was HELD).
type Lapsed struct {
	Event     string
	HoldID    string
	ExpiresAt time.Time
}

var (
	inventoryErrors = metrics.Counter("booking_inventory_publish_errors_total",
		"Inventory changes the booking core could not tell Redis (the next sync repairs them).")
	inventorySyncs = metrics.Counter("booking_inventory_syncs_total",
		"Events whose inventory was rebuilt in Redis from PostgreSQL.")
)

// Inventory tells the waiting room what is left, for every event of the
// catalog, in the order that keeps Redis from ever showing more places than
// PostgreSQL has (see queue/inventory.go): a hold is reserved before its
// statement runs, everything that gives places back is told after it
// committed. A lapse has no request of its own: lapses are read from the
// database every lapseEvery; and the whole inventory is rebuilt from a
// snapshot at the start and every syncEvery (or at once when Redis lost it),
// which repairs what a crash or a Redis outage between the two stores left.
//
// Redis failing never fails a fan's request, nor holds it more than a
// second (a breaker: while Redis stays silent the next changes are not sent
// at all): the change is counted, logged, and the next sync puts it right.
type Inventory struct {
	line   InventoryLine
	redis  *breaker.Breaker
	store  Store
	events []string
	log    *slog.Logger
	dirty  chan struct{}

	mu    sync.Mutex
	since time.Time // lapses told up to here (the database's clock)
}

// Intervals of the inventory's background work.
const (
	lapseEvery = 250 * time.Millisecond // a lapse reaches Redis within this (the contract asks 1 s)
	syncEvery  = 2 * time.Second
)

// NewInventory publishes the inventory of events (every event of the
// catalog) through to.
func NewInventory(to InventoryLine, store Store, events []string, log *slog.Logger) *Inventory {
	return &Inventory{line: to, redis: gatekeeper.NewBreaker(to.Ping, log), store: store, events: events, log: log, dirty: make(chan struct{}, 1)}
}

// reserve counts a hold's places out before the hold is decided.
func (i *Inventory) reserve(ctx context.Context, event, holdID, customer string, places int) {
	var known bool
	err := i.redis.Do(ctx, func(ctx context.Context) (err error) {
		known, err = i.line.Reserve(ctx, event, holdID, customer, places)
		return err
	})
	switch {
	case err != nil:
		i.failed("reserve", event, err)
	case !known:
		i.resync() // Redis lost the inventory: rebuild it now
	}
}

// reserveActive is reserve for a hold whose pass is checked in the same
// call, asked by admit (the handler's gatekeeper, Admission): the places
// are counted out only if the pass's place is active. While Redis does not
// answer nothing is reserved (counted, as a failed reserve; the next sync
// repairs it) and admit decides alone.
func (i *Inventory) reserveActive(ctx context.Context, admit Admission, event, holdID, ticket string, places int) error {
	asked := false
	var known bool
	err := admit(ctx, func(ctx context.Context) (bool, error) {
		asked = true
		active, k, err := i.line.ReserveActive(ctx, event, holdID, ticket, places)
		known = k
		return active, err
	})
	switch {
	case err != nil:
		return err
	case !asked:
		i.failed("reserve", event, breaker.ErrOpen) // degraded: Redis away
	case !known:
		i.resync()
	}
	return nil
}

// released gives a refused, released or lapsed hold's places back.
func (i *Inventory) released(ctx context.Context, event, holdID string) {
	if err := i.redis.Do(ctx, func(ctx context.Context) error { return i.line.Release(ctx, event, holdID) }); err != nil {
		i.failed("release", event, err)
	}
}

// booked moves a confirmed hold's places to sold, frees its fan's place
// noting account ("" for a ticket's booking) as bought, and closes its
// payment ("" for a hold paid with points, which had none).
func (i *Inventory) booked(ctx context.Context, event, holdID, paymentID, account string) {
	if err := i.redis.Do(ctx, func(ctx context.Context) error { return i.line.BookedFor(ctx, event, holdID, account) }); err != nil {
		i.failed("booked", event, err)
	}
	if paymentID != "" {
		i.settled(ctx, event, paymentID)
	}
}

func (i *Inventory) opened(ctx context.Context, event, paymentID string) {
	if err := i.redis.Do(ctx, func(ctx context.Context) error { return i.line.PaymentOpened(ctx, event, paymentID) }); err != nil {
		i.failed("payment opened", event, err)
	}
}

func (i *Inventory) settled(ctx context.Context, event, paymentID string) {
	if err := i.redis.Do(ctx, func(ctx context.Context) error { return i.line.PaymentSettled(ctx, event, paymentID) }); err != nil {
		i.failed("payment settled", event, err)
	}
}

func (i *Inventory) failed(op, event string, err error) {
	inventoryErrors.Inc()
	i.log.Warn("inventory not told; the next sync repairs it", "op", op, "event", event, "err", err)
	i.resync()
}

func (i *Inventory) resync() {
	select {
	case i.dirty <- struct{}{}:
	default:
	}
}

// SyncOnce rebuilds every event's inventory in Redis from the database.
func (i *Inventory) SyncOnce(ctx context.Context) error {
	var errs []error
	for _, ev := range i.events {
		mark, err := i.line.SyncMark(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		snap, err := i.store.InventorySnapshot(ctx, ev, line.RecentlyBooked)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		q := line.Snapshot{Free: snap.Free, Payments: snap.Payments, Booked: snap.Booked, Holds: make([]line.LiveHold, len(snap.Holds))}
		for j, h := range snap.Holds {
			q.Holds[j] = line.LiveHold{HoldID: h.ID, Ticket: h.Customer, Places: h.Places}
		}
		if err := i.line.SyncInventory(ctx, ev, mark, q); err != nil {
			errs = append(errs, err)
			continue
		}
		inventorySyncs.Inc()
	}
	return errors.Join(errs...)
}

// LapsesOnce tells Redis about every hold that lapsed since the last pass.
func (i *Inventory) LapsesOnce(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	lapsed, now, err := i.store.LapsedHolds(ctx, i.since, lapsedPage)
	if err != nil {
		return err
	}
	for _, l := range lapsed {
		i.released(ctx, l.Event, l.HoldID)
	}
	// Lapses up to now were all read (the list is complete up to now, or,
	// when long, up to its last lapse).
	i.since = now
	if n := len(lapsed); n > 0 && n >= lapsedPage {
		i.since = lapsed[n-1].ExpiresAt
	}
	return nil
}

// lapsedPage is the most lapses read in one pass.
const lapsedPage = 1000

// Run syncs at once, then tells lapses every lapseEvery and syncs every
// syncEvery (and whenever a change could not be told), until ctx ends.
func (i *Inventory) Run(ctx context.Context) {
	sync := func() {
		if err := withinBudget(ctx, i.SyncOnce); err != nil && ctx.Err() == nil {
			i.log.Warn("inventory sync failed; retried", "err", err)
			i.resync()
		}
	}
	sync()
	lapses := time.NewTicker(lapseEvery)
	defer lapses.Stop()
	syncs := time.NewTicker(syncEvery)
	defer syncs.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lapses.C:
			if err := withinBudget(ctx, i.LapsesOnce); err != nil && ctx.Err() == nil {
				i.log.Warn("inventory lapses pass failed", "err", err)
			}
		case <-syncs.C:
			sync()
		case <-i.dirty:
			sync()
		}
	}
}
