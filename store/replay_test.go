package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// recordOne records the outcome of a claimed attempt and requires that it held.
func recordOne(t *testing.T, db *store.DB, c *model.ClaimedTask, statusCode int, errMsg *string, outcome string,
	status model.TaskStatus, next *time.Time) {
	t.Helper()
	require.NoError(t, db.RecordAttempt(context.Background(), model.AttemptResult{
		Attempt: model.Attempt{TaskID: c.ID, Attempt: c.Attempt, StartedAt: time.Now(), Duration: time.Millisecond,
			StatusCode: &statusCode, Error: errMsg, Outcome: outcome},
		ClaimToken:    c.ClaimToken,
		Status:        status,
		NextAttemptAt: next,
	}))
}

// deadTask is a task of the tenant that made two attempts, a retried 503 and
// a final 404, and is dead.
func deadTask(t *testing.T, db *store.DB, pool *pgxpool.Pool, tenantID uuid.UUID) *model.Task {
	t.Helper()
	task := insertDueTask(t, db, pool, tenantID)
	first := claimOne(t, db, pool, task.ID)
	recordOne(t, db, first, 503, ptr("receiver answered 503 Service Unavailable"), "retry", model.StatusRetrying,
		ptr(dbNow(t, pool).Add(-time.Second)))
	second := claimOne(t, db, pool, task.ID)
	require.Equal(t, 2, second.Attempt)
	recordOne(t, db, second, 404, ptr("receiver answered 404 Not Found"), "fail", model.StatusDead, nil)
	got, err := db.GetTask(context.Background(), tenantID, task.ID)
	require.NoError(t, err)
	require.Equal(t, model.StatusDead, got.Status)
	require.Equal(t, 2, got.Attempts)
	return got
}

// deliveredTask is a task of the tenant delivered at its first attempt.
func deliveredTask(t *testing.T, db *store.DB, pool *pgxpool.Pool, tenantID uuid.UUID) *model.Task {
	t.Helper()
	task := insertDueTask(t, db, pool, tenantID)
	recordOne(t, db, claimOne(t, db, pool, task.ID), 200, nil, "success", model.StatusDelivered, nil)
	got, err := db.GetTask(context.Background(), tenantID, task.ID)
	require.NoError(t, err)
	require.Equal(t, model.StatusDelivered, got.Status)
	return got
}

func TestReplayTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	tests := []struct {
		name  string
		setup func(t *testing.T) *model.Task
	}{
		{"dead", func(t *testing.T) *model.Task { return deadTask(t, db, pool, tenant.ID) }},
		{"delivered", func(t *testing.T) *model.Task { return deliveredTask(t, db, pool, tenant.ID) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := tt.setup(t)
			require.Zero(t, before.AttemptBase, "never replayed")

			// A time with nanoseconds is rounded up, never down: no attempt before it.
			at := dbNow(t, pool).Add(-time.Second).Add(500 * time.Nanosecond)
			want := at.Truncate(time.Microsecond).Add(time.Microsecond)
			got, err := db.ReplayTask(ctx, tenant.ID, before.ID, at, nil)
			require.NoError(t, err)
			require.Equal(t, model.StatusScheduled, got.Status)
			require.NotNil(t, got.NextAttemptAt)
			require.True(t, got.NextAttemptAt.Equal(want), "next_attempt_at %s, want %s", got.NextAttemptAt, want)
			require.Equal(t, before.Attempts, got.Attempts, "attempts continue their count")
			require.Equal(t, before.Attempts, got.AttemptBase)
			require.True(t, got.UpdatedAt.After(before.UpdatedAt) || got.UpdatedAt.Equal(before.UpdatedAt))

			// Everything else is as it was, the latest outcome included.
			require.True(t, got.RunAt.Equal(before.RunAt), "run_at is history, kept")
			require.Equal(t, before.LastStatusCode, got.LastStatusCode)
			require.Equal(t, before.LastError, got.LastError)
			require.Equal(t, before.IdempotencyKey, got.IdempotencyKey)
			require.Equal(t, before.URL, got.URL)
			require.Equal(t, before.Headers, got.Headers)
			require.Equal(t, before.Body, got.Body)
			require.Equal(t, before.MaxAttempts, got.MaxAttempts)
			require.True(t, got.CreatedAt.Equal(before.CreatedAt))

			// What the store returned is what it stored.
			read, err := db.GetTask(ctx, tenant.ID, before.ID)
			require.NoError(t, err)
			require.Equal(t, got, read)
			row := readTaskRow(t, pool, before.ID)
			require.Equal(t, "scheduled", row.Status)
			require.Nil(t, row.ClaimToken)

			// The task waits again: it is claimed, as the next attempt.
			claim := claimOne(t, db, pool, before.ID)
			require.Equal(t, before.Attempts+1, claim.Attempt, "attempt numbers never repeat")

			// A replay of a task that is now dispatching is refused.
			_, err = db.ReplayTask(ctx, tenant.ID, before.ID, at, nil)
			require.ErrorIs(t, err, model.ErrConflict)

			// The replayed attempt is recorded after the earlier ones, and the
			// task can be replayed again from its new count.
			recordOne(t, db, claim, 500, ptr("receiver answered 500"), "fail", model.StatusDead, nil)
			attempts, err := db.ListAttempts(ctx, tenant.ID, before.ID, 0, 1000)
			require.NoError(t, err)
			require.Len(t, attempts, before.Attempts+1)
			for i, a := range attempts {
				require.Equal(t, i+1, a.Attempt)
			}
			again, err := db.ReplayTask(ctx, tenant.ID, before.ID, at, nil)
			require.NoError(t, err)
			require.Equal(t, before.Attempts+1, again.AttemptBase)
			require.Equal(t, before.Attempts+1, again.Attempts)
			require.Equal(t, ptr(500), again.LastStatusCode)
		})
	}
}

func TestReplayTaskNewTaskHasNoBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant := createTenant(t, db)
	task := insertTask(t, db, tenant.ID, time.Now().Add(time.Hour))
	got, err := db.GetTask(ctx, tenant.ID, task.ID)
	require.NoError(t, err)
	require.Zero(t, got.AttemptBase)
	listed, err := db.ListTasks(ctx, tenant.ID, model.TaskFilter{Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Zero(t, listed[0].AttemptBase)
}

func TestReplayTaskRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	tests := []struct {
		name       string
		setup      func(t *testing.T) uuid.UUID
		wantStatus model.TaskStatus
	}{
		{"scheduled", func(t *testing.T) uuid.UUID {
			return insertTask(t, db, tenant.ID, time.Now().Add(time.Hour)).ID
		}, model.StatusScheduled},
		{"retrying", func(t *testing.T) uuid.UUID {
			c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
			recordOne(t, db, c, 503, ptr("503"), "retry", model.StatusRetrying, ptr(time.Now().Add(time.Hour)))
			return c.ID
		}, model.StatusRetrying},
		{"dispatching", func(t *testing.T) uuid.UUID {
			return claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID).ID
		}, model.StatusDispatching},
		{"canceled", func(t *testing.T) uuid.UUID {
			id := insertTask(t, db, tenant.ID, time.Now().Add(time.Hour)).ID
			_, err := db.CancelTask(ctx, tenant.ID, id)
			require.NoError(t, err)
			return id
		}, model.StatusCanceled},
		{"already replayed", func(t *testing.T) uuid.UUID {
			id := deadTask(t, db, pool, tenant.ID).ID
			_, err := db.ReplayTask(ctx, tenant.ID, id, time.Now().Add(time.Hour), nil)
			require.NoError(t, err)
			return id
		}, model.StatusScheduled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := tt.setup(t)
			before := readTaskRow(t, pool, id)
			beforeTask, err := db.GetTask(ctx, tenant.ID, id)
			require.NoError(t, err)

			got, err := db.ReplayTask(ctx, tenant.ID, id, time.Now(), nil)
			require.ErrorIs(t, err, model.ErrConflict)
			require.NotNil(t, got, "the task comes back as it is")
			require.Equal(t, id, got.ID)
			require.Equal(t, tt.wantStatus, got.Status)

			require.Equal(t, before, readTaskRow(t, pool, id), "a refused replay changes nothing")
			afterTask, err := db.GetTask(ctx, tenant.ID, id)
			require.NoError(t, err)
			require.Equal(t, beforeTask.AttemptBase, afterTask.AttemptBase)
		})
	}
}

func TestReplayTaskTenantScoped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	owner, other := createTenant(t, db), createTenant(t, db)
	task := deadTask(t, db, pool, owner.ID)
	before := readTaskRow(t, pool, task.ID)

	for name, call := range map[string]func() (*model.Task, error){
		"another tenant's task": func() (*model.Task, error) { return db.ReplayTask(ctx, other.ID, task.ID, time.Now(), nil) },
		"unknown id": func() (*model.Task, error) {
			return db.ReplayTask(ctx, owner.ID, uuid.Must(uuid.NewV7()), time.Now(), nil)
		},
		"unknown tenant": func() (*model.Task, error) {
			return db.ReplayTask(ctx, uuid.Must(uuid.NewV7()), task.ID, time.Now(), nil)
		},
	} {
		got, err := call()
		require.ErrorIs(t, err, model.ErrNotFound, name)
		require.Nil(t, got, name)
	}
	require.Equal(t, before, readTaskRow(t, pool, task.ID), "nothing another tenant did touched the task")
	require.Equal(t, "dead", before.Status)
}

func TestReplayTaskAnnounced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t) // NOTIFY is per database: only this test's statements arrive
	tenant := createTenant(t, db)
	dead := deadTask(t, db, pool, tenant.ID)
	scheduled := insertTask(t, db, tenant.ID, time.Now().Add(time.Hour))

	listenCtx, stop := context.WithCancel(ctx)
	defer stop()
	ready := make(chan struct{})
	got := make(chan model.DueTask, 16)
	done := make(chan error, 1)
	go func() {
		done <- db.ListenDue(listenCtx, func() { close(ready) }, func(d model.DueTask) { got <- d })
	}()
	select {
	case <-ready:
	case err := <-done:
		require.FailNow(t, "ListenDue returned before listening", "%v", err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "ListenDue never became ready")
	}

	// A refused replay announces nothing; the replay that follows does.
	_, err := db.ReplayTask(ctx, tenant.ID, scheduled.ID, time.Now(), nil)
	require.ErrorIs(t, err, model.ErrConflict)
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	replayed, err := db.ReplayTask(ctx, tenant.ID, dead.ID, at, nil)
	require.NoError(t, err)

	select {
	case d := <-got:
		require.Equal(t, dead.ID, d.ID)
		require.Equal(t, int64(1893553445123456), d.At.UnixMicro())
		require.True(t, d.At.Equal(*replayed.NextAttemptAt))
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the replay was not announced")
	}

	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "ListenDue did not return after cancel")
	}
	require.Empty(t, got, "nothing else was announced")
}
