package testenv_test

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/internal/testsupport/testenv"
)

func TestRedisAndPostgresAreRealAndPrivate(t *testing.T) {
	_, rdb := testenv.Redis(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("redis set: %v", err)
	}
	if got := rdb.DBSize(ctx).Val(); got != 1 {
		t.Fatalf("private redis has %d keys; want 1", got)
	}
	migrate := func(ctx context.Context, url string) error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "CREATE TABLE marker (id int); INSERT INTO marker VALUES (1)")
		return err
	}
	a, _ := testenv.Pool(t, "testenv", pgxpool.New, migrate)
	b, _ := testenv.Pool(t, "testenv", pgxpool.New, migrate)
	if _, err := a.Exec(ctx, "INSERT INTO marker VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	var na, nb int
	a.QueryRow(ctx, "SELECT count(*) FROM marker").Scan(&na)
	b.QueryRow(ctx, "SELECT count(*) FROM marker").Scan(&nb)
	if na != 2 || nb != 1 {
		t.Fatalf("rows: a=%d b=%d; want 2 and 1 (databases must be separate clones)", na, nb)
	}
}
