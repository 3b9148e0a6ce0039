package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestSucceedDeadNamesakes: a node restarted in place ends at once the
// leases of its predecessor under the same name once the predecessor's
// heartbeat connection is gone, and says so; a namesake whose connection
// lives (a frozen process), a node of another name and the caller itself
// are left alone.
func TestSucceedDeadNamesakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DatabaseURL(t)
	open := func() *store.DB {
		db, err := store.Open(ctx, store.Config{DatabaseURL: url, MaxConns: 2})
		require.NoError(t, err)
		t.Cleanup(db.Close)
		return db
	}
	db := open()
	l := listenMembership(t, db, db.Pool())
	const name, otherName = "host/127.0.0.1:8080", "other/127.0.0.1:8080"
	dead, frozen, other, successor := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	deadDB, frozenDB, otherDB := open(), open(), open()
	m, err := deadDB.Heartbeat(ctx, dead, name, nodeTTL)
	require.NoError(t, err)
	require.Len(t, m.Owned, model.Partitions)
	_, err = frozenDB.Heartbeat(ctx, frozen, name, nodeTTL)
	require.NoError(t, err)
	_, err = otherDB.Heartbeat(ctx, other, otherName, nodeTTL)
	require.NoError(t, err)
	_, err = db.Heartbeat(ctx, successor, name, nodeTTL)
	require.NoError(t, err)
	l.drain(t)

	got, err := db.SucceedDeadNamesakes(ctx, successor, name)
	require.NoError(t, err)
	require.Empty(t, got, "every namesake's connection lives")

	// Postgres ends a backend once its client's socket closes: the
	// predecessor's is gone a moment after.
	deadDB.Close()
	otherDB.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(got) == 0 {
		require.True(t, time.Now().Before(deadline), "the closed connection's backend never ended")
		got, err = db.SucceedDeadNamesakes(ctx, successor, name)
		require.NoError(t, err)
	}
	require.Equal(t, []uuid.UUID{dead}, got)
	require.Equal(t, []model.MembershipChange{{Node: dead, Event: model.MembershipLeft}}, l.drain(t))
	pool := db.Pool()
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM nodes WHERE id = $1 AND expires_at > now()`, dead))
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM partitions WHERE owner = $1`, dead))
	require.Equal(t, model.Partitions, countRows(t, pool, `SELECT count(*) FROM partitions WHERE owner IS NULL`),
		"its partitions are free for the others at once")
	require.Equal(t, 3, countRows(t, pool, `SELECT count(*) FROM nodes WHERE id = ANY($1) AND expires_at > now()`,
		[]uuid.UUID{frozen, other, successor}), "the live namesake, the other name's node and the caller stay")

	got, err = db.SucceedDeadNamesakes(ctx, successor, name)
	require.NoError(t, err)
	require.Empty(t, got, "succeeding again finds nothing")
	require.Empty(t, l.drain(t))
}
