package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrations embed.FS

const (
	sqlMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    text        PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
	// One migrator at a time, whatever the number of replicas starting.
	sqlMigrateLock   = `SELECT pg_advisory_lock(hashtext('booking-migrate'))`
	sqlMigrateUnlock = `SELECT pg_advisory_unlock(hashtext('booking-migrate'))`
	sqlMigrationDone = `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`
	sqlRecordMigrate = `INSERT INTO schema_migrations (version) VALUES ($1)`
)

// Migrate applies the embedded migrations that the database at url has not
// recorded yet, each in its own transaction, in file-name order. Running it
// again changes nothing.
func Migrate(ctx context.Context, url string) error { return migrateUpTo(ctx, url, "") }

// migrateUpTo is Migrate stopping after version last ("" = all): tests use it
// to build a database as an older release left it.
func migrateUpTo(ctx context.Context, url, last string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sqlMigrateLock); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	defer conn.Exec(context.Background(), sqlMigrateUnlock)
	if _, err := conn.Exec(ctx, sqlMigrationsTable); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		version := strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		if err := apply(ctx, conn, version, string(body)); err != nil {
			return fmt.Errorf("migrate %s: %w", version, err)
		}
		if version == last {
			break
		}
	}
	return nil
}

func apply(ctx context.Context, conn *pgx.Conn, version, body string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var done bool
	if err := tx.QueryRow(ctx, sqlMigrationDone, version).Scan(&done); err != nil {
		return err
	}
	if done {
		return nil
	}
	// No arguments: pgx sends it over the simple protocol, so a file may
	// hold several statements.
	if _, err := tx.Exec(ctx, body); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sqlRecordMigrate, version); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
