package storetest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestPrivatePgBouncer: the private PgBouncer reaches the test's database,
// pools by transaction (a named prepared statement is lost once another
// client takes the server connection that prepared it, as with PgBouncer
// before 1.21), shares at most PgBouncerPoolSize server connections among
// more clients, and gives clients a cancel key of its own, which is how
// hookwheel detects it.
func TestPrivatePgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := storetest.DatabaseURL(t)
	pooled := storetest.PrivatePgBouncer(t, direct)
	require.NotEqual(t, direct, pooled)

	connect := func() *pgx.Conn {
		t.Helper()
		cfg, err := pgx.ParseConfig(pooled)
		require.NoError(t, err)
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		conn, err := pgx.ConnectConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}

	a := connect()
	var dbName string
	var pid uint32
	require.NoError(t, a.QueryRow(ctx, `SELECT current_database(), pg_backend_pid()`).Scan(&dbName, &pid))
	require.Contains(t, direct, "/"+dbName, "the pooled URL reaches the test's own database")
	require.NotEqual(t, pid, a.PgConn().PID(), "the pooler's cancel key names no backend")

	// Transaction pooling: a prepares on a server connection, b takes that
	// connection (PgBouncer hands out the one used last) and holds it in a
	// transaction, so a's next statement runs on another.
	_, err := a.Prepare(ctx, "probe", `SELECT 1`)
	require.NoError(t, err)
	b := connect()
	tx, err := b.Begin(ctx)
	require.NoError(t, err)
	var one int
	err = a.QueryRow(ctx, "probe", pgx.QueryExecModeCacheStatement).Scan(&one)
	require.ErrorContains(t, err, "prepared statement \"probe\" does not exist")
	require.NoError(t, tx.Rollback(ctx))

	// More clients than server connections, each inside a transaction in
	// turn: they share the pool's few backends.
	backends := map[uint32]bool{}
	for range 3 * storetest.PgBouncerPoolSize {
		c := connect()
		require.NoError(t, c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		backends[pid] = true
	}
	require.LessOrEqual(t, len(backends), storetest.PgBouncerPoolSize)
}
