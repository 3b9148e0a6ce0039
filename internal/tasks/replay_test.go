package tasks_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
)

// TestReplayEdit: an edit replaces what it sets before the replay and keeps
// the rest; a replay refused for the task's status edits nothing.
func TestReplayEdit(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	task := b.create(t, svc, time.Hour)
	b.exec(t, `UPDATE tasks SET status = 'dead', attempts = 2, next_attempt_at = NULL WHERE id = $1`, task.ID)

	edit := &model.TaskEdit{URL: ptr("https://moved.example/hook"), Body: []byte("v2")}
	got, err := svc.Replay(t.Context(), b.tenant, task.ID, edit)
	require.NoError(t, err)
	require.Equal(t, model.StatusScheduled, got.Status)
	require.Equal(t, "https://moved.example/hook", got.URL)
	require.Equal(t, []byte("v2"), got.Body)
	require.Equal(t, task.Method, got.Method, "what the edit leaves out is kept")
	require.Equal(t, task.Headers, got.Headers)
	require.Equal(t, []scheduled{{task.ID, *got.NextAttemptAt}}, b.announcer.scheduledCalls())

	// Scheduled now: a second edit is refused with the replay, and changes nothing.
	_, err = svc.Replay(t.Context(), b.tenant, task.ID, &model.TaskEdit{URL: ptr("https://again.example/")})
	var conflict *tasks.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, "https://moved.example/hook", conflict.Task.URL)
	read, err := svc.Get(t.Context(), b.tenant.ID, task.ID)
	require.NoError(t, err)
	require.Equal(t, "https://moved.example/hook", read.URL)
	require.Len(t, b.announcer.scheduledCalls(), 1)
}

// TestReplayMatching: a dry run counts the dead tasks matching and changes
// nothing; the replay then takes exactly those and hands each to the local
// dispatcher, due now.
func TestReplayMatching(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	dead := map[uuid.UUID]bool{}
	for i := range 5 {
		task := b.create(t, svc, time.Hour)
		status := model.StatusDead
		if i == 4 {
			status = model.StatusDelivered // never replayed in bulk
		} else {
			dead[task.ID] = true
		}
		b.exec(t, `UPDATE tasks SET status = $2, attempts = 1, next_attempt_at = NULL WHERE id = $1`, task.ID, status)
	}
	elsewhere := b.create(t, svc, time.Hour)
	b.exec(t, `UPDATE tasks SET status = 'dead', url = 'https://elsewhere.example/', next_attempt_at = NULL WHERE id = $1`, elsewhere.ID)
	filter := model.ReplayFilter{URLPrefix: ptr("https://example.com/")}

	matched, replayed, err := svc.ReplayMatching(t.Context(), b.tenant, filter, true, "key:test")
	require.NoError(t, err)
	require.Equal(t, 4, matched)
	require.Zero(t, replayed)
	require.Empty(t, b.announcer.scheduledCalls(), "a dry run announces nothing")
	matched, _, err = svc.ReplayMatching(t.Context(), b.tenant, filter, true, "key:test")
	require.NoError(t, err)
	require.Equal(t, 4, matched, "a dry run changes nothing")

	b.clock.Advance(1500 * time.Nanosecond)
	due := b.clock.Now().Truncate(time.Microsecond).Add(time.Microsecond)
	matched, replayed, err = svc.ReplayMatching(t.Context(), b.tenant, filter, false, "key:test")
	require.NoError(t, err)
	require.Equal(t, 4, matched)
	require.Equal(t, 4, replayed)
	calls := b.announcer.scheduledCalls()
	require.Len(t, calls, 4)
	for _, c := range calls {
		require.True(t, dead[c.ID], "announced %s", c.ID)
		require.Equal(t, due, c.At.UTC())
		got, err := svc.Get(t.Context(), b.tenant.ID, c.ID)
		require.NoError(t, err)
		require.Equal(t, model.StatusScheduled, got.Status)
		require.Equal(t, due, got.NextAttemptAt.UTC())
	}
	got, err := svc.Get(t.Context(), b.tenant.ID, elsewhere.ID)
	require.NoError(t, err)
	require.Equal(t, model.StatusDead, got.Status, "outside the filter")

	matched, replayed, err = svc.ReplayMatching(t.Context(), b.tenant, filter, false, "key:test")
	require.NoError(t, err)
	require.Zero(t, matched)
	require.Zero(t, replayed)
}

// TestReplayHoldsThePendingQuota: replayed tasks are pending again, so a
// tenant at its max_pending_tasks cannot bring dead tasks back past it, one
// at a time or in bulk.
func TestReplayHoldsThePendingQuota(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	var dead []uuid.UUID
	for range 5 {
		task := b.create(t, svc, time.Hour)
		b.exec(t, `UPDATE tasks SET status = 'dead', attempts = 1, next_attempt_at = NULL WHERE id = $1`, task.ID)
		dead = append(dead, task.ID)
	}
	waiting := b.create(t, svc, time.Hour)
	b.tenant.Limits.MaxPendingTasks = 3

	matched, replayed, err := svc.ReplayMatching(t.Context(), b.tenant, model.ReplayFilter{}, false, "key:test")
	require.NoError(t, err)
	require.Equal(t, 5, matched)
	require.Equal(t, 2, replayed, "room for two beside the waiting task")

	_, err = svc.Replay(t.Context(), b.tenant, dead[4], nil)
	var quota *tasks.QuotaError
	require.ErrorAs(t, err, &quota)
	matched, replayed, err = svc.ReplayMatching(t.Context(), b.tenant, model.ReplayFilter{}, false, "key:test")
	require.ErrorAs(t, err, &quota)
	require.Equal(t, 3, matched)
	require.Zero(t, replayed)

	_, err = svc.Cancel(t.Context(), b.tenant.ID, waiting.ID)
	require.NoError(t, err)
	got, err := svc.Replay(t.Context(), b.tenant, dead[4], nil)
	require.NoError(t, err, "room again once a task left")
	require.Equal(t, model.StatusScheduled, got.Status)
}

// TestNodes: the partitions no live node holds are the ones left over.
func TestNodes(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	nodes, unowned, err := svc.Nodes(t.Context())
	require.NoError(t, err)
	require.Empty(t, nodes)
	require.Equal(t, model.Partitions, unowned)

	node := uuid.Must(uuid.NewV7())
	_, err = b.db.Heartbeat(t.Context(), node, "host/1", time.Minute)
	require.NoError(t, err)
	b.exec(t, `UPDATE partitions SET owner = NULL, lease_expires_at = NULL WHERE id < 10`)
	nodes, unowned, err = svc.Nodes(t.Context())
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	require.Equal(t, node, nodes[0].ID)
	require.Len(t, nodes[0].Partitions, model.Partitions-10)
	require.Equal(t, 10, unowned)
}

func ptr[T any](v T) *T { return &v }
