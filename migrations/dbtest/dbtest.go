package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zerolayer/zerolayer/migrations"
)

// DefaultURL is the database used when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// connectTimeout bounds the wait for the database, so that a missing
// server skips the test quickly.
const connectTimeout = 5 * time.Second

// URL returns the test database URL: TEST_DATABASE_URL, or DefaultURL.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Pool returns a connection pool whose connections use a fresh schema
// (through search_path) with every zerolayer and River migration applied.
// The schema is dropped and the pool closed by t.Cleanup; anything using
// the pool must stop in a cleanup registered after Pool (cleanups run
// last-registered first), such as a River client stopped in its own
// t.Cleanup.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := EmptyPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatalf("dbtest: migrate the test schema: %v", err)
	}
	return pool
}

// EmptyPool is Pool without the migrations: the schema is empty.
func EmptyPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := URL()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	admin, err := pgx.Connect(ctx, url)
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		msg := fmt.Sprintf("dbtest: Postgres at %s is unreachable (%v); start it or set TEST_DATABASE_URL", redact(url), err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}

	schema := newSchemaName()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close(context.Background())
		t.Fatalf("dbtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dbtest: drop schema %s: %v", schema, err)
		}
	})

	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("dbtest: parse %s: %v", redact(url), err)
	}
	// search_path as a startup parameter applies to every connection the
	// pool opens, including River's listener.
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// SchemaURL returns the test database URL with pool's schema as its
// search_path: for code under test that opens its own connections (a
// dev stack, a command given --database-url) and must see only the
// test's schema. pool is one of Pool or EmptyPool.
func SchemaURL(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	u, err := url.Parse(URL())
	if err != nil {
		t.Fatalf("dbtest: parse %s: %v", redact(URL()), err)
	}
	q := u.Query()
	q.Set("search_path", pool.Config().ConnConfig.RuntimeParams["search_path"])
	u.RawQuery = q.Encode()
	return u.String()
}

// newSchemaName returns a random schema name, short enough for River's
// notification channels (<schema>.<topic> must fit in 63 bytes).
func newSchemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "zltest_" + hex.EncodeToString(b[:])
}

// redact hides a password in a URL for messages.
func redact(url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil || cfg.Password == "" {
		return url
	}
	return fmt.Sprintf("postgres://%s:***@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
