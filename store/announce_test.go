package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestAnnounceDue: each task given is announced once on DueNotifyChannel,
// with its due time to the microsecond, in the payload the listeners parse;
// nothing given costs no statement and announces nothing.
func TestAnnounceDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	listener := listenDue(t, db, pool)

	require.NoError(t, db.AnnounceDue(ctx, nil))
	require.Empty(t, listener.drain(t))

	now := time.Now().Truncate(time.Microsecond)
	due := map[uuid.UUID]time.Time{
		uuid.Must(uuid.NewV7()): now.Add(30 * time.Second),
		uuid.Must(uuid.NewV7()): now.Add(31*time.Second + 123*time.Microsecond),
		uuid.Must(uuid.NewV7()): now.Add(-time.Second),
	}
	require.NoError(t, db.AnnounceDue(ctx, due))
	got := listener.drain(t)
	require.Len(t, got, len(due))
	for id, at := range due {
		require.Contains(t, got, id)
		require.True(t, at.Equal(got[id]), "task %s: announced due at %s, want %s", id, got[id], at)
	}
}

// TestAnnounceDueCanceled: a failed announcement says what failed.
func TestAnnounceDueCanceled(t *testing.T) {
	t.Parallel()
	db, _ := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := db.AnnounceDue(ctx, map[uuid.UUID]time.Time{uuid.New(): time.Now()})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "announce 1 due tasks")
}
