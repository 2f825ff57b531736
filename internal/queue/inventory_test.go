package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/queue"
)

func inv(t testing.TB, s *queue.Store) line.Inventory {
	t.Helper()
	i, err := s.InventoryOf(context.Background(), event)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func sync0(t testing.TB, s *queue.Store, snap line.Snapshot) {
	t.Helper()
	ctx := context.Background()
	mark, err := s.SyncMark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SyncInventory(ctx, event, mark, snap); err != nil {
		t.Fatal(err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The inventory follows every change, each counted once however often it
// is told.
func TestInventoryFollowsItsChanges(t *testing.T) { onEach(t, testInventoryFollowsItsChanges) }

func testInventoryFollowsItsChanges(t *testing.T, e env) {
	ctx := context.Background()
	if i := inv(t, e.store); i.Known {
		t.Fatalf("before the booking core published: %+v; want unknown", i)
	}
	if known, err := e.store.Reserve(ctx, event, "h0", "1.x", 1); err != nil || known {
		t.Fatalf("Reserve before any sync = %v, %v; want false (sync first)", known, err)
	}
	sync0(t, e.store, line.Snapshot{Free: 10})
	steps := []struct {
		name        string
		do          func() error
		avail, held int64
	}{
		{"reserve 2", func() error { _, err := e.store.Reserve(ctx, event, "h1", "1.a", 2); return err }, 8, 2},
		{"reserve 1", func() error { _, err := e.store.Reserve(ctx, event, "h2", "2.b", 1); return err }, 7, 3},
		{"reserve h1 again", func() error { _, err := e.store.Reserve(ctx, event, "h1", "1.a", 2); return err }, 7, 3},
		{"release h1", func() error { return e.store.Release(ctx, event, "h1") }, 9, 1},
		{"release h1 again", func() error { return e.store.Release(ctx, event, "h1") }, 9, 1},
		{"h2 booked", func() error { return e.store.Booked(ctx, event, "h2") }, 9, 0},
		{"h2 booked again", func() error { return e.store.Booked(ctx, event, "h2") }, 9, 0},
		{"unknown hold", func() error { return e.store.Release(ctx, event, "nope") }, 9, 0},
	}
	for _, st := range steps {
		must(t, st.do())
		if i := inv(t, e.store); i.Available != st.avail || i.Held != st.held {
			t.Fatalf("after %s: %+v; want %d available, %d held", st.name, i, st.avail, st.held)
		}
	}
	must(t, e.store.PaymentOpened(ctx, event, "p1"))
	must(t, e.store.PaymentOpened(ctx, event, "p1"))
	if i := inv(t, e.store); i.Pending != 1 {
		t.Fatalf("pending = %d; want 1", i.Pending)
	}
	must(t, e.store.PaymentSettled(ctx, event, "p1"))
	if i := inv(t, e.store); i.Pending != 0 || i.SoldOut() {
		t.Fatalf("%+v; want no payment pending, not sold out", i)
	}
	c, err := e.store.Counts(ctx, event)
	if err != nil || c.Inventory.Available != 9 || !c.Inventory.Known {
		t.Fatalf("Counts = %+v, %v; want the inventory with it", c, err)
	}
}

// tickUntilStill ticks until the tick admits nobody more.
func tickUntilStill(t testing.TB, s *queue.Store, set line.Settings) line.TickResult {
	t.Helper()
	var last line.TickResult
	for i := range 50 {
		r := tick(t, s, set)
		if i >= 3 && r.Admitted == 0 && last.Admitted == 0 && last.Active == r.Active {
			return r
		}
		last = r
		time.Sleep(5 * time.Millisecond)
	}
	return last
}

// Nobody is admitted to nothing: the tick admits while the places
// available are more than the admitted fans who hold nothing yet, waits
// when every place is held, and resumes by itself when one comes back.
func TestTickAdmitsNobodyToNothing(t *testing.T) { onEachLayout(t, testTickAdmitsNobodyToNothing) }

func testTickAdmitsNobodyToNothing(t *testing.T, e env) {
	ctx := context.Background()
	set := e.open()
	set.AdmitPerSecond = 1000
	var fans []line.JoinResult
	for range 10 {
		fans = append(fans, join(t, e.store, set))
	}
	sync0(t, e.store, line.Snapshot{Free: 3})
	if r := tickUntilStill(t, e.store, set); r.Active != 3 {
		t.Fatalf("3 places: %d active; want 3", r.Active)
	}
	// A fan holds one: 2 places, 2 idle fans: nobody more.
	_, err := e.store.Reserve(ctx, event, "h1", fans[0].ID, 1)
	must(t, err)
	if r := tickUntilStill(t, e.store, set); r.Active != 3 || r.Room != 0 {
		t.Fatalf("after a hold: %+v; want still 3 active, room 0", r)
	}
	// It books: it leaves the active set at once, and its place is sold.
	must(t, e.store.Booked(ctx, event, "h1"))
	if ok, _ := e.store.Active(ctx, event, fans[0].ID); ok {
		t.Fatal("a fan whose hold was booked is still active")
	}
	if r := tickUntilStill(t, e.store, set); r.Active != 2 {
		t.Fatalf("after the booking: %+v; want 2 active (2 places, 2 idle fans)", r)
	}
	// Every place held: 2 fans hold one each; nobody is admitted.
	_, err = e.store.Reserve(ctx, event, "h2", fans[1].ID, 1)
	must(t, err)
	_, err = e.store.Reserve(ctx, event, "h3", fans[2].ID, 1)
	must(t, err)
	if i := inv(t, e.store); i.Available != 0 || i.SoldOut() {
		t.Fatalf("every place held: %+v; want 0 available, not sold out", i)
	}
	if r := tickUntilStill(t, e.store, set); r.Active != 2 {
		t.Fatalf("every place held: %+v; want nobody admitted", r)
	}
	// One lapses (told by the booking core): its fan is idle again and the
	// place is back: still nobody (1 place, 1 idle fan). The fan leaves:
	// one more comes in.
	must(t, e.store.Release(ctx, event, "h2"))
	if r := tickUntilStill(t, e.store, set); r.Active != 2 {
		t.Fatalf("after a lapse: %+v; want 2 active", r)
	}
	must(t, e.store.Leave(ctx, event, statusTicket(fans[1])))
	if r := tickUntilStill(t, e.store, set); r.Active != 2 {
		t.Fatalf("after its fan left: %+v; want one more in (2 active)", r)
	}
	// The last place is booked: sold out; waiting fans are told, joins refused.
	must(t, e.store.Booked(ctx, event, "h3"))
	r := tickUntilStill(t, e.store, set)
	i := inv(t, e.store)
	if i.Available != 1 || r.Active != 1 {
		t.Fatalf("after the last booking: %+v, %+v; want 1 available (the lapsed one), 1 active", i, r)
	}
	_, err = e.store.Reserve(ctx, event, "h4", activeFan(t, e, fans), 1)
	must(t, err)
	must(t, e.store.Booked(ctx, event, "h4"))
	if i := inv(t, e.store); !i.SoldOut() {
		t.Fatalf("every place sold: %+v; want sold out", i)
	}
	if _, err := e.store.Join(ctx, event, set); !errors.Is(err, line.ErrSoldOut) {
		t.Fatalf("join when sold out: %v; want ErrSoldOut", err)
	}
	if st := status(t, e.store, fans[9].Ticket, set); st.State != line.SoldOut {
		t.Fatalf("a waiting fan when sold out: %v; want soldout", st.State)
	}
	checkBooks(t, e)
}

func statusTicket(j line.JoinResult) line.Ticket { return j.Ticket }

// activeFan is one of fans in the active set.
func activeFan(t testing.TB, e env, fans []line.JoinResult) string {
	t.Helper()
	for _, f := range fans {
		if ok, _ := e.store.Active(context.Background(), event, f.ID); ok {
			return f.ID
		}
	}
	t.Fatal("no fan active")
	return ""
}

// A payment pending is not sold out; passthrough lets fans in until sold out.
func TestSoldOutAndPassthrough(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	set := open()
	set.Mode = "passthrough"
	sync0(t, e.store, line.Snapshot{Free: 0, Payments: []string{"p1"}})
	if r := join(t, e.store, set); r.State != line.Admitted {
		t.Fatalf("passthrough with a payment pending: %v; want admitted (not sold out, no bound)", r.State)
	}
	must(t, e.store.PaymentSettled(ctx, event, "p1"))
	if _, err := e.store.Join(ctx, event, set); !errors.Is(err, line.ErrSoldOut) {
		t.Fatalf("passthrough when sold out: %v; want ErrSoldOut", err)
	}
}

// A sync keeps what may be in flight and drops what is not: a reservation
// younger than the mark's in-flight window stays; an old one absent from
// the snapshot goes; the snapshot's holds are all counted.
func TestSyncKeepsInFlightReservations(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	sync0(t, e.store, line.Snapshot{Free: 10})
	_, err := e.store.Reserve(ctx, event, "flying", "1.a", 2) // its statement runs now
	must(t, err)
	k := e.state(t).Keys()
	e.rdb.HSet(ctx, k.Places, "orphan", "2.b 3 1000") // reserved in 1970: its hold never was
	sync0(t, e.store, line.Snapshot{Free: 7, Holds: []line.LiveHold{{HoldID: "real", Ticket: "3.c", Places: 1}}})
	i := inv(t, e.store)
	if i.Available != 5 || i.Held != 3 {
		t.Fatalf("after the sync: %+v; want 7 free − 2 in flight = 5 available, 2 + 1 held", i)
	}
	if n := e.rdb.HLen(ctx, k.Places).Val(); n != 2 {
		t.Fatalf("%d holds counted; want 2 (the orphan dropped)", n)
	}
}

// Under a race of every change at once, the counters stay what the sets
// they count say: held is the places reserved, engaged the active tickets
// that hold something, available the free places less those held.
func TestInventoryCountersUnderRace(t *testing.T) { onEachLayout(t, testInventoryCountersUnderRace) }

func testInventoryCountersUnderRace(t *testing.T, e env) {
	ctx, k := context.Background(), e.state(t).Keys()
	set := e.open()
	set.AdmitPerSecond, set.MaxActive = 10000, 10000
	var fans []line.JoinResult
	for range 60 {
		fans = append(fans, join(t, e.store, set))
	}
	const free = 1000
	sync0(t, e.store, line.Snapshot{Free: free})
	tickUntilStill(t, e.store, set)
	var wg sync.WaitGroup
	var soldPlaces atomic.Int64 // each goroutine owns its hold ids: it knows what it booked
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 60 {
				f := fans[rng.IntN(len(fans))]
				hold := fmt.Sprintf("h%d-%d", g, i%8)
				var err error
				switch rng.IntN(7) {
				case 0, 1:
					_, err = e.store.Reserve(ctx, event, hold, f.ID, 1+rng.IntN(3))
				case 2:
					err = e.store.Release(ctx, event, hold)
				case 3:
					if v, _ := e.rdb.HGet(ctx, k.Places, hold).Result(); v != "" {
						n, _ := strconv.ParseInt(strings.Fields(v)[1], 10, 64)
						soldPlaces.Add(n)
					}
					err = e.store.Booked(ctx, event, hold)
				case 4:
					err = e.store.Leave(ctx, event, f.Ticket)
				case 5:
					err = e.store.Complete(ctx, event, f.ID)
				case 6:
					_, err = e.store.Tick(ctx, event, set)
				}
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	// Recount from the sets themselves.
	places := e.rdb.HGetAll(ctx, k.Places).Val()
	var held int64
	holders := map[string]int{}
	for _, v := range places {
		f := strings.Fields(v)
		n, _ := strconv.ParseInt(f[1], 10, 64)
		held += n
		holders[f[0]]++
	}
	engaged := 0
	for tk := range holders {
		if e.state(t).IsActive(tk) {
			engaged++
		}
	}
	got := e.rdb.HMGet(ctx, k.Inventory, "available", "held", "engaged").Val()
	want := []string{strconv.FormatInt(free-held-soldPlaces.Load(), 10), strconv.FormatInt(held, 10), strconv.Itoa(engaged)}
	for i, name := range []string{"available", "held", "engaged"} {
		if fmt.Sprint(got[i]) != want[i] {
			t.Errorf("%s = %v; the sets say %s", name, got[i], want[i])
		}
	}
	if hl := e.rdb.HLen(ctx, k.Holders).Val(); hl != int64(len(holders)) {
		t.Errorf("holders = %d; the places say %d", hl, len(holders))
	}
}

// A sync reads a snapshot taken a moment before: holds that ended since
// must be read right. A hold taken and booked after the snapshot was
// counted free by it: taken off; a live hold of the snapshot given back
// since is free now: added; one booked since is sold: not counted again.
func TestSyncReadsHoldsThatEndedSince(t *testing.T) {
	cases := []struct {
		name  string
		snap  line.Snapshot // what PostgreSQL showed before the hold ended
		end   func(e env) error
		avail int64
		held  int64
	}{
		{"taken and booked after the snapshot", line.Snapshot{Free: 10},
			func(e env) error { return e.store.Booked(context.Background(), event, "h") }, 9, 0},
		{"booked after the snapshot, which knew it booked", line.Snapshot{Free: 9, Booked: []string{"h"}},
			func(e env) error { return e.store.Booked(context.Background(), event, "h") }, 9, 0},
		{"live in the snapshot, booked since", line.Snapshot{Free: 9, Holds: []line.LiveHold{{HoldID: "h", Ticket: "1.a", Places: 1}}},
			func(e env) error { return e.store.Booked(context.Background(), event, "h") }, 9, 0},
		{"live in the snapshot, released since", line.Snapshot{Free: 9, Holds: []line.LiveHold{{HoldID: "h", Ticket: "1.a", Places: 1}}},
			func(e env) error { return e.store.Release(context.Background(), event, "h") }, 10, 0},
		{"taken and released after the snapshot", line.Snapshot{Free: 10},
			func(e env) error { return e.store.Release(context.Background(), event, "h") }, 10, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			ctx := context.Background()
			sync0(t, e.store, line.Snapshot{Free: 10})
			mark, err := e.store.SyncMark(ctx)
			must(t, err)
			_, err = e.store.Reserve(ctx, event, "h", "1.a", 1)
			must(t, err)
			must(t, c.end(e))
			must(t, e.store.SyncInventory(ctx, event, mark, c.snap))
			if i := inv(t, e.store); i.Available != c.avail || i.Held != c.held {
				t.Fatalf("after the sync: %v; want %d available, %d held", i, c.avail, c.held)
			}
		})
	}
}

// A payment settled after the snapshot that still showed it open is not
// reopened by the sync (sold out would wait for nothing).
func TestSyncDoesNotReopenSettledPayments(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	sync0(t, e.store, line.Snapshot{Free: 0})
	mark, err := e.store.SyncMark(ctx)
	must(t, err)
	must(t, e.store.PaymentOpened(ctx, event, "p1"))
	must(t, e.store.PaymentSettled(ctx, event, "p1"))
	must(t, e.store.PaymentOpened(ctx, event, "p1")) // a late repeat of the checkout's news
	must(t, e.store.SyncInventory(ctx, event, mark, line.Snapshot{Free: 0, Payments: []string{"p1"}}))
	if i := inv(t, e.store); i.Pending != 0 || !i.SoldOut() {
		t.Fatalf("after the sync: %v; want no payment open, sold out", i)
	}
}
