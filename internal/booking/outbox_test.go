package booking_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/booking/postgres"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/queue"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/faultproxy"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// poolThroughProxy is a pool of n connections to the test's database
// through a fault proxy. The proxy closes first, its connections with it
// (pgxpool gives a black-holed one its goodbye for 15 s).
func (e *env) poolThroughProxy(n int32) (*pgxpool.Pool, *faultproxy.Proxy) {
	e.t.Helper()
	db, err := url.Parse(e.pool.Config().ConnString())
	if err != nil {
		e.t.Fatal(err)
	}
	px, err := faultproxy.Start(db.Host)
	if err != nil {
		e.t.Fatal(err)
	}
	db.Host = px.Addr
	pool, err := postgres.OpenPool(e.ctx(), db.String(), n)
	if err != nil {
		px.Close()
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	e.t.Cleanup(px.Close)
	return pool, px
}

// crashingLine publishes and completes tickets through the real queue, and
// kills the relay (cancels its context) after n completions: a crash
// mid-batch, after some events reached the stream and before the batch was
// marked published.
type crashingLine struct {
	*queue.Store
	n      int
	cancel context.CancelFunc
}

func (c *crashingLine) CompleteFor(ctx context.Context, event, ticket, account string) error {
	if c.n == 0 {
		c.cancel()
		return ctx.Err()
	}
	c.n--
	return c.Store.CompleteFor(ctx, event, ticket, account)
}

func TestOutboxRelayKilledMidBatchLosesNoEvent(t *testing.T) {
	e := setup(t)
	_, rdb := testenv.Redis(t)
	qs := queue.NewStore(rdb, []byte(testTicketSecret))
	const n = 25
	seats := seatCodes(10, 30)
	want := map[string]bool{}
	for i := range n {
		// A ticket id shaped as the queue makes them (sequence.random).
		p := fan(premiere, fmt.Sprintf("t%02d.%022d", i, i))
		// The fan's ticket is active in the waiting room until the relay completes it.
		rdb.ZAdd(e.ctx(), queuetest.Of(t, rdb, "premiere").Keys().Active, redisZ(p.Customer))
		_, c := e.holdAndCheckout(p, 42, booking.HoldInput{Seats: seats[i : i+1]})
		if out, err := e.svc.Settle(e.ctx(), c.PaymentID, payment.Succeeded); err != nil || out.Outcome != booking.Confirmed {
			t.Fatalf("settle: %+v %v", out, err)
		}
		want[c.BookingID] = true
	}

	ctx, cancel := context.WithCancel(context.Background())
	crash := &booking.Relay{Store: e.store, Line: &crashingLine{Store: qs, n: 7, cancel: cancel}, Batch: 10, Log: e.log}
	if err := crash.RelayOnce(ctx); err == nil {
		t.Fatal("the crashed relay reported success")
	}
	var published int
	e.q(&published, `SELECT count(*) FROM outbox WHERE published_at IS NOT NULL`)
	if published != 0 {
		t.Fatalf("%d rows marked published by a relay that crashed mid-batch", published)
	}

	relay := &booking.Relay{Store: e.store, Line: qs, Batch: 10, Log: e.log}
	if err := relay.RelayOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	msgs, err := rdb.XRange(e.ctx(), queue.BookingStream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	lastID := map[string]int64{}
	for _, m := range msgs {
		id := m.Values["bookingId"].(string)
		seen[id] = true
		oid, _ := strconv.ParseInt(m.Values["outboxId"].(string), 10, 64)
		if oid < lastID[id] {
			t.Fatalf("booking %s published out of order", id)
		}
		lastID[id] = oid
	}
	for id := range want {
		if !seen[id] {
			t.Fatalf("booking %s never reached the stream", id)
		}
	}
	e.q(&published, `SELECT count(*) FROM outbox WHERE published_at IS NULL`)
	active := queuetest.Of(t, rdb, "premiere").ActiveCount()
	if published != 0 || active != 0 {
		t.Fatalf("%d rows unpublished, %d tickets still active; want 0 and 0", published, active)
	}
	t.Logf("%d stream entries for %d bookings (at least once)", len(msgs), n)
}

func redisZ(member string) redis.Z {
	return redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: member}
}

// A pass of the relay is bounded: a statement on a connection that stopped
// answering (black-holed: nothing comes back, nothing is closed) held the
// relay, and every booking it had to publish, for ever (TestNetworkFaults:
// CONFIRMED bookings missing from the stream after a black hole between the
// booking core and PostgreSQL). Now the pass ends at its bound and the next
// one, on a new connection, publishes. And a connection black-holed in the
// middle of a pass, its transaction holding the relay's lock on the server,
// does not keep that lock from the passes after it: the server ends the
// transaction once it sat idle the pass's whole bound (it kept it until the
// client's close reached it, 15 s after the pass's bound, and 20 s after the
// black hole was too soon under load).
func TestRelayOutlivesABlackHoledConnection(t *testing.T) {
	e := setup(t)
	_, rdb := testenv.Redis(t)
	ln := &pausingLine{Store: queue.NewStore(rdb, []byte(testTicketSecret)), paused: make(chan struct{}), resume: make(chan struct{})}
	// Two connections: the one the black hole took is closed in the
	// background, the next pass dials.
	pool, px := e.poolThroughProxy(2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&booking.Relay{Store: postgres.New(pool), Line: ln, Batch: 10, Every: 50 * time.Millisecond, Log: e.log}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	// The longest the relay takes to come back from a black hole, by its own
	// bounds: the pass on the black-holed connection runs out its bound,
	// each other connection of the pool's black-holed may cost one more, and
	// a transaction left on the server ends after it sat idle one bound.
	// Three times that: a loaded machine is slow, a stuck relay never comes.
	within := 3 * (2*booking.PassBudget + booking.PassBudget)

	confirm := func(seat string) string {
		t.Helper()
		p := fan(premiere, "t"+seat+".0000000000000000000000")
		_, c := e.holdAndCheckout(p, 42, booking.HoldInput{Seats: []string{seat}})
		if out, err := e.svc.Settle(e.ctx(), c.PaymentID, payment.Succeeded); err != nil || out.Outcome != booking.Confirmed {
			t.Fatalf("settle: %+v %v", out, err)
		}
		return c.BookingID
	}
	published := func(id string) bool {
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			msgs, _ := rdb.XRange(e.ctx(), queue.BookingStream, "-", "+").Result()
			for _, m := range msgs {
				if m.Values["bookingId"] == id {
					return true
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false
	}
	if id := confirm("A1"); !published(id) {
		t.Fatalf("booking %s not published through the proxy", id)
	}
	if n := px.BlackHole(); n == 0 {
		t.Fatal("no connection of the relay's to black-hole")
	}
	began := time.Now()
	if id := confirm("A2"); !published(id) {
		t.Fatalf("booking %s confirmed after the black hole not published %v later: the relay is stuck on its connection", id, within)
	}
	t.Logf("published %v after the black hole between passes", time.Since(began).Round(time.Millisecond))

	// Black-hole the relay's connection in the middle of a pass: the pass
	// holds the lock, its publish is held until the black hole took it.
	ln.pause.Store(true)
	confirm("A3")
	select {
	case <-ln.paused:
	case <-time.After(within):
		t.Fatalf("no pass of the relay's published A3 within %v", within)
	}
	n := px.BlackHole()
	close(ln.resume)
	if n == 0 {
		t.Fatal("no connection of the relay's to black-hole in its pass")
	}
	began = time.Now()
	if id := confirm("A4"); !published(id) {
		t.Fatalf("booking %s confirmed after a black hole in a pass not published %v later: the relay's lock is held by the black-holed transaction", id, within)
	}
	t.Logf("published %v after the black hole in a pass", time.Since(began).Round(time.Millisecond))
}

// pausingLine holds the first publish after pause is set until resume is
// closed, and says so on paused: the relay is then in its transaction,
// holding its lock.
type pausingLine struct {
	*queue.Store
	pause          atomic.Bool
	paused, resume chan struct{}
}

func (l *pausingLine) PublishBookings(ctx context.Context, events []line.BookingEvent) error {
	if l.pause.CompareAndSwap(true, false) {
		l.paused <- struct{}{}
		<-l.resume
	}
	return l.Store.PublishBookings(ctx, events)
}
