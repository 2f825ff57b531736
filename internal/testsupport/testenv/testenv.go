// Package testenv gives each test real servers of its own: a private
// redis-server (or Redis Cluster) per test, which no other running test
// uses and which holds nothing when the test gets it (a server of the test
// binary's pool, emptied between tests: pool.go), and a private PostgreSQL
// database per test, cloned from a migrated template and dropped by
// t.Cleanup.
//
// Under `make test` the PostgreSQL server is the one devstack started
// (WAITROOM_TEST_POSTGRES_URL); a plain `go test` starts one per test binary.
// A server that cannot be started fails the test: it is never skipped.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
)

// PostgresURLEnv names the admin URL of a PostgreSQL server that tests may
// create databases on. devstack sets it under `make test`.
const PostgresURLEnv = "WAITROOM_TEST_POSTGRES_URL"

// Redis gives this test a private redis-server (empty, no other running
// test's: see pool.go) and a client of it, closed when the test ends.
func Redis(t testing.TB) (*localsvc.Redis, *redis.Client) {
	t.Helper()
	srv := RedisServer(t, localsvc.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	t.Cleanup(func() { rdb.Close() })
	return srv, rdb
}

// RedisServer gives this test a private redis-server shaped by opts: with
// the zero options an empty one of the pool (pool.go), else one started
// for it alone (Dir defaults to a test temp folder) and stopped when the
// test ends.
func RedisServer(t testing.TB, opts localsvc.RedisOptions) *localsvc.Redis {
	t.Helper()
	if opts == (localsvc.RedisOptions{}) {
		return leaseRedis(t)
	}
	if opts.Dir == "" {
		opts.Dir = tempDir(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := localsvc.StartRedis(ctx, opts)
	if err != nil {
		t.Fatalf("testenv: redis: %v", err)
	}
	t.Cleanup(srv.Kill)
	return srv
}

// tempDir is a short temp folder (unix socket paths have a 107-byte limit).
func tempDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "wr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Migrate prepares a fresh database at url.
type Migrate func(ctx context.Context, url string) error

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error

	templatesMu sync.Mutex
	templates   = map[string]bool{}
)

// PostgresServer returns the admin URL of the shared test server, starting a
// private one when devstack did not.
func PostgresServer(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() {
		if u := os.Getenv(PostgresURLEnv); u != "" {
			serverURL = u
			return
		}
		dir, err := os.MkdirTemp("", "wr-pg-")
		if err != nil {
			serverErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pg, err := localsvc.StartPostgres(ctx, localsvc.PostgresOptions{Dir: dir, Fast: true})
		if err != nil {
			serverErr = err
			return
		}
		// Lives as long as the test binary; Pdeathsig ends it with us.
		serverURL = pg.URL("postgres")
	})
	if serverErr != nil {
		t.Fatalf("testenv: postgres: %v", serverErr)
	}
	return serverURL
}

// PrivatePostgres starts a PostgreSQL server of this test's own, for a test
// that stops, kills, pauses or restarts it (the shared test server must
// never be), with an empty database named db; it is stopped when the test
// ends. fast trades durability for speed (synchronous_commit off): not for
// a test that kills the server and then counts what it committed.
func PrivatePostgres(t testing.TB, db string, fast bool) *localsvc.Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := localsvc.StartPostgres(ctx, localsvc.PostgresOptions{Dir: tempDir(t), Fast: fast})
	if err != nil {
		t.Fatalf("testenv: postgres: %v", err)
	}
	// Resumed first: a paused server would not hear the stop.
	t.Cleanup(func() { _ = pg.Resume(); pg.Stop() })
	admin, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatalf("testenv: postgres: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		t.Fatalf("testenv: create database %s: %v", db, err)
	}
	return pg
}

// Database creates a private database for this test, cloned from a template
// that migrate prepared once (named by name), and returns its URL. The
// database is dropped when the test ends.
func Database(t testing.TB, name string, migrate Migrate) string {
	t.Helper()
	admin := PostgresServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmpl := "tmpl_" + name
	if err := ensureTemplate(ctx, admin, tmpl, migrate); err != nil {
		t.Fatalf("testenv: template %s: %v", tmpl, err)
	}
	db := "t_" + randHex(8)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer conn.Close(ctx)
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+db+" TEMPLATE "+tmpl)
		var pgErr *pgconn.PgError
		// Another CREATE DATABASE reading the same template: try again.
		if err != nil && errors.As(err, &pgErr) && pgErr.Code == "55006" && attempt < 50 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		break
	}
	if err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	u := withDB(admin, db)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
	})
	return u
}

// Pool is Database plus a pgx pool on it, closed when the test ends.
//
// open makes the pool: postgres.Open, so that tests use the pool production
// uses (testenv cannot import the store: the store's own tests import
// testenv).
func Pool(t testing.TB, name string, open Open, migrate Migrate) (*pgxpool.Pool, string) {
	t.Helper()
	u := Database(t, name, migrate)
	pool, err := open(context.Background(), u)
	if err != nil {
		t.Fatalf("testenv: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, u
}

// Open makes a pool on a database URL (postgres.Open).
type Open func(ctx context.Context, url string) (*pgxpool.Pool, error)

func ensureTemplate(ctx context.Context, admin, tmpl string, migrate Migrate) error {
	templatesMu.Lock()
	defer templatesMu.Unlock()
	if templates[tmpl] {
		return nil
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// Several test binaries share the server: one of them builds the template.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", tmpl); err != nil {
		return err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext($1))", tmpl)
	var ready bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", tmpl).Scan(&ready)
	if err != nil {
		return err
	}
	if !ready {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+tmpl+" WITH (FORCE)"); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+tmpl); err != nil {
			return err
		}
		if migrate != nil {
			if err := migrate(ctx, withDB(admin, tmpl)); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		// Mark it a template only once it is complete.
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+tmpl+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", tmpl); err != nil {
			return err
		}
	}
	templates[tmpl] = true
	return nil
}

func withDB(admin, db string) string {
	u, err := url.Parse(admin)
	if err != nil {
		return admin
	}
	u.Path = "/" + db
	return u.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Repo returns the repository root (where go.mod is), for tests that need
// files such as configs/ or dashboards/.
func Repo(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			t.Fatalf("testenv: no go.mod above %s", dir)
		}
	}
}

// PauseRedis stops r (SIGSTOP: its connections stay open and nothing
// answers, as a server wedged or cut off would) until the returned resume
// is called; the test's end resumes it too. resume may be called again.
func PauseRedis(t testing.TB, r *localsvc.Redis) (resume func()) {
	t.Helper()
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := r.Resume(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}
