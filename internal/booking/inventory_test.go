package booking_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/line"
	"github.com/waitroom/waitroom/internal/payment"
	"github.com/waitroom/waitroom/internal/queue/queuetest"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

var tiny = booking.Pass{Event: "tiny"}

// invEnv is env with the service wired to a waiting room on a private
// Redis, synced once.
type invEnv struct {
	*env
	inv *booking.Inventory
}

func setupInventory(t *testing.T, opts ...option) *invEnv {
	t.Helper()
	e := setup(t, append(opts, func(o *options) { o.inventory = true })...)
	if err := e.inv.SyncOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	return &invEnv{env: e, inv: e.inv}
}

// truth is an event's inventory counted in PostgreSQL.
func (e *invEnv) truth(event string) (free, held, pending int64) {
	e.t.Helper()
	e.q(&free, `
SELECT (SELECT count(*) FROM seats s JOIN showtimes st ON st.id = s.showtime_id
         WHERE st.event_id = $1 AND (s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= now())))
     + (SELECT coalesce(sum(b.capacity), 0) FROM ga_blocks b JOIN showtimes st ON st.id = b.showtime_id WHERE st.event_id = $1)
     - (SELECT coalesce(sum(p.places), 0) FROM ga_places p JOIN showtimes st ON st.id = p.showtime_id
         WHERE st.event_id = $1 AND (p.status = 'BOOKED' OR (p.status = 'HELD' AND p.expires_at > now())))`, event)
	e.q(&held, `SELECT coalesce(sum(places), 0) FROM holds WHERE event_id = $1 AND status = 'HELD' AND expires_at > now()`, event)
	e.q(&pending, `SELECT count(*) FROM payments p JOIN bookings b ON b.id = p.booking_id WHERE b.event_id = $1 AND p.status = 'PENDING'`, event)
	return
}

func (e *invEnv) published(event string) line.Inventory {
	e.t.Helper()
	i, err := e.line.InventoryOf(e.ctx(), event)
	if err != nil {
		e.t.Fatal(err)
	}
	return i
}

// lapseNow ends a hold's time now (not in the past: lapses are read from
// the last pass on, as time moves forward), in one statement, as time does:
// its seats, places and row lapse at the same instant.
func (e *invEnv) lapseNow(holdID string) {
	e.t.Helper()
	e.exec(`
WITH s AS (UPDATE seats SET hold_expires_at = now() WHERE hold_id = $1 AND status = 'HELD'),
     g AS (UPDATE ga_places SET expires_at = now() WHERE hold_id = $1)
UPDATE holds SET expires_at = now() WHERE id = $1`, holdID)
}

func (e *invEnv) checkMatches(event string) {
	e.t.Helper()
	free, held, pending := e.truth(event)
	got := e.published(event)
	if got.Available != free || got.Held != held || got.Pending != pending {
		e.t.Fatalf("%s: Redis says %v; PostgreSQL %d free, %d held, %d pending", event, got, free, held, pending)
	}
}

// The published inventory follows holds, releases, lapses and
// confirmations, however many race: afterwards it is what PostgreSQL
// counts, with no sync in between.
func TestInventoryFollowsTheDatabase(t *testing.T) {
	e := setupInventory(t, withSettings(func(s *booking.Settings) { s.HoldsPerMinute, s.HoldAttemptsPerMinute = 100, 100 }))
	e.checkMatches("live")
	var lapsed []string
	var mu sync.Mutex
	race(120, func(i int) error {
		rng := rand.New(rand.NewPCG(uint64(i), 3))
		p := fan(live, fmt.Sprintf("c%03d", i))
		in := booking.HoldInput{Seats: []string{fmt.Sprintf("%c%d", 'A'+rng.IntN(5), 1+rng.IntN(30))}}
		if rng.IntN(2) == 0 {
			in.GeneralAdmission = map[string]int{[]string{"FLOOR", "BALCONY"}[rng.IntN(2)]: 1 + rng.IntN(3)}
		}
		h, err := e.svc.Hold(e.ctx(), p, 43, in)
		if errors.Is(err, booking.ErrSeatsUnavailable) || errors.Is(err, booking.ErrSoldOut) {
			return nil
		}
		if err != nil {
			return err
		}
		switch rng.IntN(4) {
		case 0:
			return e.svc.Release(e.ctx(), p, h.ID)
		case 1:
			c, err := e.svc.Checkout(e.ctx(), p, h.ID, "k"+h.ID)
			if err != nil {
				return err
			}
			_, err = e.svc.Settle(e.ctx(), c.PaymentID, payment.Succeeded)
			return err
		case 2:
			_, err := e.svc.Checkout(e.ctx(), p, h.ID, "k"+h.ID) // pending
			return err
		}
		mu.Lock()
		lapsed = append(lapsed, h.ID)
		mu.Unlock()
		return nil
	})
	e.checkMatches("live")
	for _, id := range lapsed {
		e.lapseNow(id)
	}
	if err := e.inv.LapsesOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	e.checkMatches("live")
	t.Logf("%d holds lapsed; Redis: %v", len(lapsed), e.published("live"))
}

// Redis flushed (or the booking core started on an empty Redis): the next
// hold finds no inventory, the inventory is rebuilt from PostgreSQL.
func TestInventoryRebuiltAfterAFlush(t *testing.T) {
	e := setupInventory(t)
	if _, err := e.svc.Hold(e.ctx(), fan(tiny, "a"), 44, booking.HoldInput{Seats: []string{"A1"}, GeneralAdmission: map[string]int{"PIT": 2}}); err != nil {
		t.Fatal(err)
	}
	e.rdb.FlushAll(e.ctx())
	if i := e.published("tiny"); i.Known {
		t.Fatalf("after the flush: %v; want unknown", i)
	}
	if err := e.inv.SyncOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	e.checkMatches("tiny")
	if got := e.published("tiny"); got.Available != 11 || got.Held != 3 {
		t.Fatalf("rebuilt: %v; want 11 available (10 seats + 4 PIT − 3 held), 3 held", got)
	}
}

// Sold out follows the database: every place booked and no payment open.
func TestSoldOutFollowsTheDatabase(t *testing.T) {
	e := setupInventory(t)
	all := []string{"A1", "A2", "A3", "A4", "A5", "B1", "B2", "B3", "B4", "B5"}
	var payments []string
	for i := 0; i < len(all); i += 2 {
		p := fan(tiny, fmt.Sprintf("f%d", i))
		in := booking.HoldInput{Seats: all[i : i+2]}
		if i == 0 {
			in.GeneralAdmission = map[string]int{"PIT": 4}
		}
		h, err := e.svc.Hold(e.ctx(), p, 44, in)
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.svc.Checkout(e.ctx(), p, h.ID, "k")
		if err != nil {
			t.Fatal(err)
		}
		payments = append(payments, c.PaymentID)
	}
	if i := e.published("tiny"); i.Available != 0 || i.SoldOut() {
		t.Fatalf("every place held, payments open: %v; want 0 available, not sold out", i)
	}
	for i, id := range payments {
		if _, err := e.svc.Settle(e.ctx(), id, payment.Succeeded); err != nil {
			t.Fatal(err)
		}
		if got := e.published("tiny").SoldOut(); got != (i == len(payments)-1) {
			t.Fatalf("after %d of %d payments: sold out %v", i+1, len(payments), got)
		}
	}
	e.checkMatches("tiny")
}

// The promise: nobody is admitted to nothing. 60 fans wait for 10 seats and
// 4 standing places; three admitters tick at once as fast as they can; each
// admitted fan takes one place and then pays, gives it back, or lets it
// lapse, and leaves; the inventory syncs in the background all the while.
// Every fan admitted found a place to hold, and no more fans were admitted
// than places ever came free.
func TestNobodyIsAdmittedToNothing(t *testing.T) {
	e := setupInventory(t, withSettings(func(s *booking.Settings) { s.HoldsPerMinute, s.HoldAttemptsPerMinute = 100, 100 }))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	set := line.Settings{Mode: "queue", AdmitPerSecond: 10000, MaxActive: 1000, AccessTTL: time.Minute, AbandonAfter: time.Minute}
	const fans = 60
	tickets := make([]line.JoinResult, fans)
	for i := range tickets {
		r, err := e.line.Join(ctx, "tiny", set)
		if err != nil {
			t.Fatal(err)
		}
		tickets[i] = r
	}
	bg, stop := context.WithCancel(ctx)
	var bgDone sync.WaitGroup
	bgDone.Add(1)
	go func() { defer bgDone.Done(); e.inv.Run(bg) }()
	for range 3 { // three admitters
		bgDone.Add(1)
		go func() {
			defer bgDone.Done()
			for bg.Err() == nil {
				if _, err := e.line.Tick(bg, "tiny", set); err != nil && bg.Err() == nil {
					t.Error(err)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}

	var admitted, found, nothing, back atomic.Int64
	var wg sync.WaitGroup
	for i, tk := range tickets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				st, err := e.line.Status(ctx, "tiny", tk.Ticket, set)
				if err != nil {
					t.Error(err)
					return
				}
				if st.State == line.SoldOut || ctx.Err() != nil {
					return
				}
				if st.State == line.Admitted {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			admitted.Add(1)
			p := fan(tiny, tk.ID)
			var h booking.Hold
			got := false
			tries := 0
			for try := 0; try < 50 && !got; try++ {
				tries++
				free := freePlaces(e.env, p)
				if len(free) == 0 {
					break
				}
				pick := free[rand.IntN(len(free))]
				in := booking.HoldInput{Seats: []string{pick}}
				if pick == "PIT" {
					in = booking.HoldInput{GeneralAdmission: map[string]int{"PIT": 1}}
				}
				var err error
				h, err = e.svc.Hold(ctx, p, 44, in)
				switch {
				case err == nil:
					got = true
				case errors.Is(err, booking.ErrSeatsUnavailable), errors.Is(err, booking.ErrSoldOut):
				default:
					t.Error(err)
					return
				}
			}
			if !got {
				nothing.Add(1)
				inv, _ := e.line.InventoryOf(ctx, "tiny")
				free, held, pending := e.truth("tiny")
				t.Errorf("fan %d was admitted and found nothing to hold after %d tries (Redis now: %v; PostgreSQL %d free, %d held, %d pending)", i, tries, inv, free, held, pending)
				e.dumpInventory(ctx, "tiny")
				return
			}
			found.Add(1)
			switch i % 3 {
			case 0:
				c, err := e.svc.Checkout(ctx, p, h.ID, "k")
				if err == nil {
					_, err = e.svc.Settle(ctx, c.PaymentID, payment.Succeeded)
				}
				if err != nil {
					t.Error(err)
				}
			case 1:
				if err := e.svc.Release(ctx, p, h.ID); err != nil {
					t.Error(err)
				}
				back.Add(1)
			case 2:
				e.lapseNow(h.ID) // the background pass tells the line
				back.Add(1)
			}
			_ = e.line.Leave(ctx, "tiny", tk.Ticket)
		}()
	}
	wg.Wait()
	stop()
	bgDone.Wait()
	if n := nothing.Load(); n != 0 {
		t.Fatalf("%d fans admitted to nothing", n)
	}
	if a := admitted.Load(); a > 14+back.Load() {
		t.Fatalf("%d fans admitted; only %d places ever came free (14 + %d given back)", a, 14+back.Load(), back.Load())
	}
	if err := e.inv.SyncOnce(e.ctx()); err != nil {
		t.Fatal(err)
	}
	e.checkMatches("tiny")
	t.Logf("%d fans admitted, %d found a place, %d places given back or lapsed; Redis %v", admitted.Load(), found.Load(), back.Load(), e.published("tiny"))
}

// dumpInventory logs what Redis counts for event (inventory, places,
// ended, holders, the active set) and every hold, seat and
// general-admission place PostgreSQL has for it: the evidence a failure of
// the counts needs.
func (e *invEnv) dumpInventory(ctx context.Context, event string) {
	t := e.t
	t.Helper()
	k := queuetest.Of(t, e.rdb, event).Keys()
	for _, h := range [][2]string{{"inventory", k.Inventory}, {"places", k.Places}, {"ended", k.Ended}, {"holders", k.Holders}} {
		m, err := e.rdb.HGetAll(ctx, h[1]).Result()
		t.Logf("Redis %s: %v %v", h[0], m, err)
	}
	act, err := e.rdb.ZRangeWithScores(ctx, k.Active, 0, -1).Result()
	t.Logf("Redis active: %v %v", act, err)
	for _, q := range []struct{ what, sql string }{
		{"hold", `SELECT h.id::text || ' ' || h.status || ' ' || h.places || ' ' || coalesce(h.ticket_id, '') || ' ' || h.created_at::text || ' ' || h.expires_at::text || ' ' || array_to_string(h.seats, ',') || ' ' || h.ga::text || ' ' || coalesce(b.status, '-')
  FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id WHERE h.event_id = $1 ORDER BY h.created_at`},
		{"seat", `SELECT s.seat_code || ' ' || s.status || ' ' || coalesce(s.hold_id::text, '') || ' ' || coalesce(s.hold_expires_at::text, '')
  FROM seats s JOIN showtimes st ON st.id = s.showtime_id WHERE st.event_id = $1 ORDER BY s.showtime_id, s.seat_code`},
		{"place", `SELECT p.block_code || ' ' || p.hold_id::text || ' ' || p.status || ' ' || p.places || ' ' || p.expires_at::text
  FROM ga_places p JOIN showtimes st ON st.id = p.showtime_id WHERE st.event_id = $1`},
	} {
		rows, err := e.pool.Query(ctx, q.sql, event)
		if err != nil {
			t.Logf("PostgreSQL %ss: %v", q.what, err)
			continue
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, l := range lines {
			t.Logf("PostgreSQL %s %s", q.what, l)
		}
		if err != nil {
			t.Logf("PostgreSQL %ss: %v", q.what, err)
		}
	}
}

// freePlaces lists what the seat map offers p: free seats, and "PIT" while
// the pit has room.
func freePlaces(e *env, p booking.Pass) []string {
	e.t.Helper()
	m, err := e.svc.SeatMap(e.ctx(), p, 44)
	if err != nil {
		e.t.Fatal(err)
	}
	var free []string
	for _, s := range m.Seats {
		if s.Status == booking.Available {
			free = append(free, s.Code)
		}
	}
	for _, b := range m.GeneralAdmission {
		if b.Available > 0 {
			free = append(free, b.Code)
		}
	}
	return free
}

// A hold asks the line once: its pass's check and its reservation are one
// function call (reserve, with the ticket's active place checked in it),
// where they were two (the gate's check, then the reservation). The
// booking core answers the hold's expiry in a header for the gate
// (line.HoldExpiresHeader), the body's expiresAt. A pass whose place is
// gone gets 401 and reserves nothing, also when its request was bad.
func TestAHoldAsksTheLineOnce(t *testing.T) {
	e := setupInventory(t)
	p, _ := e.admit("premiere", "")
	fcalls := func() (stop func() int) {
		return testenv.Monitor(t, e.redis.Addr, e.rdb, func(l string) bool {
			return strings.Contains(strings.ToUpper(l), `"FCALL"`) && strings.Contains(l, `"`+p.Ticket+`"`)
		})
	}
	stop := fcalls()
	code, h, hdr := e.call(p, http.MethodPost, "/api/v1/booking/showtimes/42/holds", map[string]any{"seats": []string{"A1"}}, nil)
	if code != http.StatusCreated {
		t.Fatalf("hold: %d %v", code, h)
	}
	if n := stop(); n != 1 {
		t.Errorf("the hold called Redis functions %d times with its ticket; want 1 (check and reserve in one)", n)
	}
	if got, want := hdr.Get(line.HoldExpiresHeader), h["expiresAt"]; got == "" || !sameInstant(t, got, want.(string)) {
		t.Errorf("%s = %q; want the hold's expiresAt %v", line.HoldExpiresHeader, got, want)
	}
	if _, held, _ := e.truth("premiere"); e.published("premiere").Held != held {
		t.Errorf("held %d in Redis, %d in PostgreSQL", e.published("premiere").Held, held)
	}

	e.endWindow(p)
	before := e.redisState("premiere")
	for _, body := range []any{map[string]any{"seats": []string{"A2"}}, map[string]any{"seats": []string{"Z999"}}, "{"} {
		code, out, _ := e.call(p, http.MethodPost, "/api/v1/booking/showtimes/42/holds", body, nil)
		if code != http.StatusUnauthorized || out["error"] != "admission_required" {
			t.Errorf("hold %v after the window: %d %v; want 401 admission_required", body, code, out)
		}
	}
	if e.redisState("premiere") != before {
		t.Error("a refused hold changed the line's keys in Redis")
	}
}

func sameInstant(t *testing.T, a, b string) bool {
	t.Helper()
	ta, err1 := time.Parse(time.RFC3339Nano, a)
	tb, err2 := time.Parse(time.RFC3339Nano, b)
	return err1 == nil && err2 == nil && ta.Equal(tb)
}
