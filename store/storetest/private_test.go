package storetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestPrivatePostgres: a private cluster accepts connections, keeps its data
// across a restart, refuses connections while stopped, and comes back on the
// same URL.
func TestPrivatePostgres(t *testing.T) {
	t.Parallel()
	started := time.Now()
	pg := storetest.PrivatePostgres(t)
	t.Logf("private Postgres up in %s at %s", time.Since(started).Round(time.Millisecond), pg.URL())
	ctx := context.Background()

	connect := func() *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, pg.URL())
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	conn := connect()
	_, err := conn.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before restart')`)
	require.NoError(t, err)

	url := pg.URL()
	started = time.Now()
	pg.Restart()
	t.Logf("restart took %s", time.Since(started).Round(time.Millisecond))
	require.Equal(t, url, pg.URL(), "a restart keeps the address")
	require.Error(t, conn.Ping(ctx), "a restart ends the sessions")

	var v string
	require.NoError(t, connect().QueryRow(ctx, `SELECT v FROM kept`).Scan(&v))
	require.Equal(t, "before restart", v)

	pg.Stop()
	require.False(t, pg.Running())
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = pgx.Connect(short, pg.URL())
	require.Error(t, err, "a stopped Postgres accepts no connection")

	pg.Start()
	require.True(t, pg.Running())
	require.NoError(t, connect().QueryRow(ctx, `SELECT v FROM kept`).Scan(&v))
	require.Equal(t, "before restart", v)
}

// TestPrivateRedis: a private Redis answers, Flush empties it, it refuses
// connections while stopped, and it comes back empty on the same URL.
func TestPrivateRedis(t *testing.T) {
	t.Parallel()
	started := time.Now()
	rd := storetest.PrivateRedis(t)
	t.Logf("private Redis up in %s at %s", time.Since(started).Round(time.Millisecond), rd.URL())
	ctx := context.Background()

	opts, err := redis.ParseURL(rd.URL())
	require.NoError(t, err)
	opts.MaxRetries = -1
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })

	require.NoError(t, client.Set(ctx, "k", "v", 0).Err())
	rd.Flush()
	require.ErrorIs(t, client.Get(ctx, "k").Err(), redis.Nil, "Flush deletes every key")

	require.NoError(t, client.Set(ctx, "k", "v", 0).Err())
	url := rd.URL()
	rd.Stop()
	require.False(t, rd.Running())
	require.Error(t, client.Ping(ctx).Err(), "a stopped Redis answers nothing")

	rd.Start()
	require.Equal(t, url, rd.URL())
	require.NoError(t, client.Ping(ctx).Err(), "the client reconnects to the restarted Redis")
	require.ErrorIs(t, client.Get(ctx, "k").Err(), redis.Nil, "the private Redis keeps nothing across a restart")

	rd.Restart()
	require.NoError(t, client.Ping(ctx).Err())
}
