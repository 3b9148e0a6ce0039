package store_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// appliedMigrations is how many times each migration version was applied.
func appliedMigrations(t *testing.T, db *store.DB) map[int64]int {
	t.Helper()
	rows, err := db.Pool().Query(context.Background(),
		`SELECT version_id, count(*) FROM hookwheel_schema_migrations WHERE is_applied GROUP BY version_id`)
	require.NoError(t, err)
	defer rows.Close()
	got := map[int64]int{}
	for rows.Next() {
		var version int64
		var n int
		require.NoError(t, rows.Scan(&version, &n))
		got[version] = n
	}
	require.NoError(t, rows.Err())
	return got
}

func userTables(t *testing.T, db *store.DB) []string {
	t.Helper()
	rows, err := db.Pool().Query(context.Background(),
		`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		names = append(names, name)
	}
	require.NoError(t, rows.Err())
	return names
}

var wantTables = []string{"api_keys", "attempts", "audit_log", "flow_limits", "hookwheel_schema_migrations", "idempotency_keys", "invites", "nodes", "partitions", "plans", "portal_links", "publishes",
	"schedules", "shared_secrets", "target_health", "target_pauses", "task_stats_minutes", "tasks", "tenants", "topics", "usage_days"}

// wantMigrations is goose's version 0 and the version of each migration file,
// each applied once.
func wantMigrations(t *testing.T) map[int64]int {
	t.Helper()
	files, err := filepath.Glob("migrations/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	want := map[int64]int{0: 1}
	for _, f := range files {
		version, _, ok := strings.Cut(filepath.Base(f), "_")
		require.True(t, ok, f)
		v, err := strconv.ParseInt(version, 10, 64)
		require.NoError(t, err, f)
		want[v] = 1
	}
	return want
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t) // storetest already migrated it once

	tenant := createTenant(t, db)
	task := insertTask(t, db, tenant.ID, time.Now().Add(time.Hour))

	require.NoError(t, db.Migrate(ctx))
	require.NoError(t, db.Migrate(ctx))

	require.Equal(t, wantMigrations(t), appliedMigrations(t, db))
	require.Equal(t, wantTables, userTables(t, db))
	require.Equal(t, model.Partitions, countRows(t, db.Pool(), `SELECT count(*) FROM partitions`))
	// Data survives a re-run.
	got, err := db.GetTask(ctx, tenant.ID, task.ID)
	require.NoError(t, err)
	require.Equal(t, task.ID, got.ID)
}

func TestMigrateConcurrentlyOnFreshDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := emptyDatabaseURL(t)

	// Several nodes starting at once, each with its own pool.
	const nodes = 5
	dbs := make([]*store.DB, nodes)
	for i := range dbs {
		db, err := store.Open(ctx, store.Config{DatabaseURL: dbURL, MaxConns: 3})
		require.NoError(t, err)
		t.Cleanup(db.Close)
		dbs[i] = db
	}
	start := make(chan struct{})
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() {
			<-start
			errs[i] = db.Migrate(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "node %d", i)
	}

	require.Equal(t, wantMigrations(t), appliedMigrations(t, dbs[0]))
	require.Equal(t, wantTables, userTables(t, dbs[0]))
	require.Equal(t, model.Partitions, countRows(t, dbs[0].Pool(), `SELECT count(*) FROM partitions`))
	// The schema works.
	tenant := createTenant(t, dbs[1])
	insertTask(t, dbs[2], tenant.ID, time.Now())
}
