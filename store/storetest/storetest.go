// Package storetest gives each test its own Postgres database and Redis key
// space on the real services named by DATABASE_URL and REDIS_URL (defaults:
// the local services on their standard ports), so tests run in parallel and
// again and again without anyone cleaning up by hand.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/store"
)

const (
	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultRedisURL    = "redis://127.0.0.1:6379/0"
	dbPrefix           = "hwtest_"
	// templatePrefix names the migrated template databases, one per schema
	// version; they are kept between runs.
	templatePrefix = "hwtemplate_"
	// Databases older than this were left by a test binary that crashed or was
	// killed; no test runs this long, so they are safe to drop.
	staleAfter = time.Hour
)

// AdminDatabaseURL is the connection string tests create their databases through.
func AdminDatabaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return defaultDatabaseURL
}

// RedisURL is the Redis that tests share, each under its own key prefix.
func RedisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return defaultRedisURL
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// DatabaseURL creates a migrated database for this test, drops it when the
// test ends, and returns its connection string. The database is a copy of a
// template migrated once per schema version (CREATE DATABASE … TEMPLATE), so
// a test pays for a file copy, not for running every migration.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, AdminDatabaseURL())
	require.NoError(t, err, "connect to Postgres at %s (set DATABASE_URL, or run make test)", AdminDatabaseURL())
	defer admin.Close(ctx)
	dropStale(ctx, t, admin)
	template := migratedTemplate(ctx, t, admin)

	name := fmt.Sprintf("%s%d_%s", dbPrefix, time.Now().Unix(), randomSuffix(t))
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize())
	require.NoError(t, err, "create test database from %s", template)
	t.Cleanup(func() {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, AdminDatabaseURL())
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	return databaseURLOf(t, name)
}

func databaseURLOf(t testing.TB, name string) string {
	u, err := url.Parse(AdminDatabaseURL())
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

// migratedTemplate returns the name of the template database of the current
// schema, building it first if no test binary has yet. Test binaries of
// several packages run at once: an advisory lock lets one build it while the
// others wait, and the template appears under its name only once complete (a
// rename is atomic), so a crash mid-build leaves nothing that looks usable.
func migratedTemplate(ctx context.Context, t testing.TB, admin *pgx.Conn) string {
	t.Helper()
	name := templatePrefix + store.SchemaVersion()
	exists := func() bool {
		var ok bool
		require.NoError(t, admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&ok))
		return ok
	}
	if exists() {
		return name
	}
	_, err := admin.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, name)
	require.NoError(t, err, "lock the template database")
	defer func() { _, _ = admin.Exec(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, name) }()
	if exists() {
		return name
	}

	building := fmt.Sprintf("%s%d_%s", dbPrefix, time.Now().Unix(), randomSuffix(t))
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize())
	require.NoError(t, err, "create the template database")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := store.Open(ctx, store.Config{DatabaseURL: databaseURLOf(t, building), MaxConns: 2, Logger: quiet})
	require.NoError(t, err)
	err = db.Migrate(ctx)
	db.Close()
	require.NoError(t, err, "migrate the template database")
	// No one may connect to a template while it is copied; refusing
	// connections keeps a stray session from failing every CREATE.
	for _, stmt := range []string{
		"ALTER DATABASE " + pgx.Identifier{building}.Sanitize() + " WITH ALLOW_CONNECTIONS false IS_TEMPLATE true",
		"ALTER DATABASE " + pgx.Identifier{building}.Sanitize() + " RENAME TO " + pgx.Identifier{name}.Sanitize(),
	} {
		_, err = admin.Exec(ctx, stmt)
		require.NoError(t, err, "finish the template database")
	}
	return name
}

// dropStale removes databases that crashed test runs left behind.
func dropStale(ctx context.Context, t testing.TB, admin *pgx.Conn) {
	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE $1`, dbPrefix+"%")
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for _, name := range names {
		created, _, _ := strings.Cut(strings.TrimPrefix(name, dbPrefix), "_")
		secs, err := strconv.ParseInt(created, 10, 64)
		if err != nil || time.Since(time.Unix(secs, 0)) < staleAfter {
			continue
		}
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
}

// DB opens a fresh migrated database for this test, closed and dropped when it ends.
func DB(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: DatabaseURL(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return db
}

// RedisPrefix returns a key prefix no other test uses, and deletes its keys
// when the test ends. REDIS_URL may name any deployment store.OpenRedis takes;
// on a Redis Cluster the keys are looked for on every master.
func RedisPrefix(t testing.TB) string {
	t.Helper()
	prefix := "hwtest:" + randomSuffix(t) + ":"
	t.Cleanup(func() {
		client, _, err := store.NewRedisClient(RedisURL())
		if err != nil {
			return
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = DeleteRedisKeys(ctx, client, prefix+"*")
	})
	return prefix
}

// DeleteRedisKeys deletes the keys matching a SCAN pattern: on each master of
// a Redis Cluster, else on the one server (or Sentinel's master).
func DeleteRedisKeys(ctx context.Context, client redis.UniversalClient, pattern string) error {
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	switch c := client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, del)
	case *redis.Client:
		return del(ctx, c)
	default:
		return fmt.Errorf("delete redis keys %s: unsupported client %T", pattern, client)
	}
}

// Redis opens the shared Redis under a key prefix of this test's own.
func Redis(t testing.TB) *store.Redis {
	t.Helper()
	r, err := store.OpenRedis(store.RedisConfig{URL: RedisURL(), KeyPrefix: RedisPrefix(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.NoError(t, r.Ping(context.Background()), "reach Redis at %s (set REDIS_URL, or run make test)", RedisURL())
	return r
}
