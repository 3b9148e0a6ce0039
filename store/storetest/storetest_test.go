package storetest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestDatabaseURL checks that each test gets a migrated database of its own,
// copied from the template, and that the template itself stays untouched.
func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	connect := func(url string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(ctx) })
		return conn
	}
	a, b := connect(DatabaseURL(t)), connect(DatabaseURL(t))

	var migrations int
	require.NoError(t, a.QueryRow(ctx, `SELECT count(*) FROM hookwheel_schema_migrations WHERE version_id > 0`).Scan(&migrations))
	require.Positive(t, migrations, "the copy is migrated")

	_, err := a.Exec(ctx, `INSERT INTO tenants (id, name) VALUES (gen_random_uuid(), 'only-in-a')`)
	require.NoError(t, err)
	var inB int
	require.NoError(t, b.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE name = 'only-in-a'`).Scan(&inB))
	require.Zero(t, inB, "databases are not shared between tests")

	c := connect(DatabaseURL(t))
	var inC int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM tenants`).Scan(&inC))
	require.Zero(t, inC, "the template stays empty")
}
