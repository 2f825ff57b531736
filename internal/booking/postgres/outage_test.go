package postgres

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waitroom/waitroom/internal/booking"
	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

// outageDB is a private PostgreSQL server (the shared test server must never
// be stopped, paused or crashed) with a migrated, seeded database, and the
// store on it.
type outageDB struct {
	pg    *localsvc.Postgres
	url   string
	store *Store
}

func startOutageDB(t *testing.T) *outageDB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg := testenv.PrivatePostgres(t, "outage", true)
	url := pg.URL("outage")
	if err := Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	pool, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := New(pool)
	if _, err := store.Seed(ctx, showtimes(1)); err != nil {
		t.Fatal(err)
	}
	return &outageDB{pg: pg, url: url, store: store}
}

// warm has the store serve once, so that its pool holds live connections
// when the fault comes (the harder case: a fresh pool only connects).
func (d *outageDB) warm(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, err := d.store.SeatMap(ctx, 1)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the database does not serve again: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// blockedHold starts a hold of seat A1 that waits on a row lock the test
// holds, and returns the pid of the backend serving it and where its error
// will come.
func (d *outageDB) blockedHold(t *testing.T) (pid uint32, done <-chan error) {
	t.Helper()
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, d.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close(context.Background()) })
	if _, err := locker.Exec(ctx, "BEGIN; SELECT 1 FROM seats WHERE showtime_id = 1 AND seat_code = 'A1' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := d.store.Hold(ctx, holdReq(1, "fan-"+booking.NewID(), []string{"A1"}, nil))
		errc <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		err := locker.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
		                               WHERE datname = current_database() AND wait_event_type = 'Lock' LIMIT 1`).Scan(&pid)
		if err == nil {
			return pid, errc
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the hold never waited on the seat's lock")
	return 0, nil
}

// sqlState is the SQLSTATE err carries, "" for none.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// However PostgreSQL fails, the store says booking.ErrUnavailable (the HTTP
// table's 503 with Retry-After), decided by the error it got, never by a
// ping afterwards: refused connections (the server stopped), a database in
// recovery (57P03), a backend terminated by an operator (57P01) or crashed
// (the connection cut mid-statement, then 57P02 and crash recovery), and a
// server that stops answering (the caller's deadline, here 1 s).
func TestOutageIsUnavailable(t *testing.T) {
	d := startOutageDB(t)
	ctx := context.Background()
	call := func(t *testing.T, within time.Duration) error {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		_, err := d.store.SeatMap(c, 1)
		return err
	}
	unavailable := func(t *testing.T, what string, err error, state string) {
		t.Helper()
		switch {
		case err == nil:
			t.Fatalf("%s: no error", what)
		case !errors.Is(err, booking.ErrUnavailable):
			t.Fatalf("%s: %v (SQLSTATE %q); want booking.ErrUnavailable", what, err, sqlState(err))
		case state != "" && sqlState(err) != state:
			t.Fatalf("%s: %v; want SQLSTATE %s (the fault under test)", what, err, state)
		}
	}

	t.Run("refused", func(t *testing.T) {
		d.warm(t)
		d.pg.Stop()
		defer func() {
			if err := d.pg.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}()
		// The pool's connections were closed by the shutdown; new ones are refused.
		for range 3 {
			unavailable(t, "seat map", call(t, 5*time.Second), "")
			_, err := d.store.Hold(ctx, holdReq(1, "refused", []string{"B1"}, nil))
			unavailable(t, "hold", err, "")
		}
	})

	t.Run("in recovery", func(t *testing.T) {
		d.warm(t)
		d.pg.Stop()
		if err := d.pg.StartInRecovery(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			d.pg.Stop()
			if err := d.pg.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}()
		// The first calls may meet the old connections' end; then every
		// new connection is refused with 57P03.
		var err error
		for range 3 {
			err = call(t, 5*time.Second)
			unavailable(t, "seat map", err, "")
		}
		unavailable(t, "seat map", err, "57P03")
	})

	t.Run("terminated", func(t *testing.T) {
		d.warm(t)
		pid, done := d.blockedHold(t)
		var ok bool
		if err := d.store.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("pg_terminate_backend(%d): %v %v", pid, ok, err)
		}
		unavailable(t, "hold whose backend was terminated", <-done, "57P01")
	})

	t.Run("backend crashed", func(t *testing.T) {
		d.warm(t)
		pid, done := d.blockedHold(t)
		// The postmaster ends every other backend (57P02) and replays its
		// WAL; meanwhile connections are refused (57P03).
		if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		unavailable(t, "hold whose backend crashed", <-done, "")
		for range 3 {
			if err := call(t, 5*time.Second); err != nil {
				unavailable(t, "seat map during crash recovery", err, "")
			}
		}
	})

	t.Run("stops answering", func(t *testing.T) {
		d.warm(t)
		if err := d.pg.Pause(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := d.pg.Resume(); err != nil {
				t.Fatal(err)
			}
		}()
		for range 2 {
			start := time.Now()
			err := call(t, time.Second)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("seat map took %s with a 1s deadline", took)
			}
			unavailable(t, "seat map", err, "")
			start = time.Now()
			c, cancel := context.WithTimeout(ctx, time.Second)
			_, err = d.store.Hold(c, holdReq(1, "paused", []string{"C1"}, nil))
			cancel()
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("hold took %s with a 1s deadline", took)
			}
			unavailable(t, "hold", err, "")
		}
	})
	d.warm(t)
}

// A hold that runs out of time is rolled back for certain, never committed
// after its caller gave up (boundByServer). The hold waits on a seat lock
// the test holds past the caller's 1 s; the caller gets ErrUnavailable (a
// 503) in about that time; then the lock is let go, and 2 s later the hold
// is still nowhere. Bounded by the client alone, the waiting backend took
// the lock when it was let go and committed a hold nobody was told of.
func TestHoldOutOfTimeIsRolledBack(t *testing.T) {
	d := startOutageDB(t)
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, d.url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	if _, err := locker.Exec(ctx, "BEGIN; SELECT 1 FROM seats WHERE showtime_id = 1 AND seat_code = 'A1' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	req := holdReq(1, "fan-late", []string{"A1"}, nil)
	c, cancel := context.WithTimeout(ctx, time.Second)
	_, err = d.store.Hold(c, req)
	cancel()
	if !errors.Is(err, booking.ErrUnavailable) {
		t.Fatalf("hold past its deadline: %v; want booking.ErrUnavailable", err)
	}
	if _, err := locker.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // a backend still waiting would have taken the lock and committed by now
	var n int
	if err := locker.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id = $1`, req.HoldID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var status string
	if err := locker.QueryRow(ctx, `SELECT status FROM seats WHERE showtime_id = 1 AND seat_code = 'A1'`).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if n != 0 || status != "AVAILABLE" {
		t.Fatalf("after the caller was answered 503: %d holds of its id, seat A1 %s; want none, AVAILABLE", n, status)
	}
}
