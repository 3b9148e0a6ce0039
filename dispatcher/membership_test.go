package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/testenv"
	"github.com/hookwheel/hookwheel/store"
)

// TestOwnership runs one heartbeat of a lone node: it comes to own every
// partition, has them all loaded as gained, and recovers the claims a dead
// node left in them, freeing their fire-once keys in Redis.
func TestOwnership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, redis := testenv.DB(t), testenv.Redis(t)
	tenant := createTenant(t, db, model.Limits{})
	task := insertTask(t, db, tenant, "https://receiver.example/x", time.Now().Add(-time.Second))
	dead := claimNow(t, db, task.ID)[0] // claimed by a node that never registered
	key := store.AttemptClaim{TaskID: dead.ID, Attempt: dead.Attempt, Token: dead.ClaimToken, TTL: time.Minute}
	held, err := redis.ClaimAttempts(ctx, []store.AttemptClaim{key})
	require.NoError(t, err)
	require.True(t, held[0])

	m := testMetrics(t)
	gained := make(chan []int16, 1)
	scheduled := make(chan dueAt, 16)
	o := newOwnership(ownershipConfig{
		Store: db, FireOnce: redis, NodeID: uuid.New(), NodeName: "test", NodeTTL: 1500 * time.Millisecond,
		HeartbeatInterval: 300 * time.Millisecond, Clock: clock.NewFake(time.Now()), Logger: quietLogger(), Metrics: m,
		Gained:   func(p []int16) { gained <- p },
		Schedule: func(id uuid.UUID, at time.Time) { scheduled <- dueAt{id, at} },
	})
	require.False(t, o.owns(task.ID))
	require.Empty(t, o.partitions())

	runCtx, cancel := context.WithCancel(ctx)
	ready, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); o.Run(runCtx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	receive(t, ready)

	require.Equal(t, allPartitions(), receive(t, gained))
	require.Equal(t, allPartitions(), o.partitions())
	require.True(t, o.owns(task.ID))
	require.Equal(t, float64(model.Partitions), counterValue(t, m.ownedPartitions))
	require.Equal(t, 1.0, counterValue(t, m.liveNodes))

	require.Equal(t, task.ID, receive(t, scheduled).id)
	require.Equal(t, model.StatusScheduled, taskOf(t, db, tenant, task.ID).Status)
	require.Equal(t, 1.0, counterValue(t, m.recovered))
	key.Token = uuid.New()
	held, err = redis.ClaimAttempts(ctx, []store.AttemptClaim{key})
	require.NoError(t, err)
	require.True(t, held[0], "the dead node's fire-once key is gone")
}
