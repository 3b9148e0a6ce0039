package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// callbackFor is the callback task a sender would attach to the outcome of
// c: in c's partition, due at once.
func callbackFor(t *testing.T, c *model.ClaimedTask, url string) *model.Task {
	t.Helper()
	id, err := model.NewTaskIDIn(model.PartitionOf(c.ID))
	require.NoError(t, err)
	return &model.Task{
		ID:         id,
		URL:        url,
		Method:     "POST",
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       []byte(`{"task_id": "` + c.ID.String() + `"}`),
		RunAt:      µs(time.Now()),
		CallbackOf: &c.ID,
	}
}

// insertCallbackSource stores a due task with both callback URLs and the
// retry settings its callback inherits, and claims it.
func insertCallbackSource(t *testing.T, db *store.DB, pool *pgxpool.Pool, tenantID uuid.UUID) *model.ClaimedTask {
	t.Helper()
	task := newTask(tenantID, dbNow(t, pool).Add(-time.Minute))
	task.Callback, task.FailureCallback = ptr("https://receiver.example/done"), ptr("https://receiver.example/failed")
	task.Timeout, task.MaxAttempts, task.MinBackoff, task.MaxBackoff = 7*time.Second, 4, 3*time.Second, 5*time.Minute
	_, created, err := db.InsertTask(context.Background(), task, false)
	require.NoError(t, err)
	require.True(t, created)
	c := claimOne(t, db, pool, task.ID)
	require.Equal(t, task.Callback, c.Callback, "the claim carries the callback URLs")
	require.Equal(t, task.FailureCallback, c.FailureCallback)
	return c
}

// TestRecordAttemptsInsertsCallbacks: the outcome that carries a callback
// task inserts exactly that one, in the statement that records it: with the
// source's tenant, timeout and retry policy, linked both ways, and
// announced on DueNotifyChannel. Outcomes without one insert none, in the
// same batch or alone.
func TestRecordAttemptsInsertsCallbacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	l := listenMembership(t, db, pool)
	retryAt := µs(time.Now().Add(time.Hour))

	tests := []struct {
		name     string
		status   model.TaskStatus
		outcome  string
		code     *int
		next     *time.Time
		callback string // the URL of the callback task the outcome carries; "" for none
	}{
		{name: "delivered", status: model.StatusDelivered, outcome: "success", code: ptr(200), callback: "https://receiver.example/done"},
		{name: "dead", status: model.StatusDead, outcome: "fail", code: ptr(500), callback: "https://receiver.example/failed"},
		{name: "retrying", status: model.StatusRetrying, outcome: "retry", code: ptr(503), next: &retryAt},
		{name: "delivered without a callback", status: model.StatusDelivered, outcome: "success", code: ptr(200)},
	}
	// One batch, as the recorder writes them: the outcomes with a callback
	// take the statement that inserts them, and the others in it are
	// recorded as ever.
	var (
		claims  []*model.ClaimedTask
		results []model.AttemptResult
	)
	for _, tt := range tests {
		c := insertCallbackSource(t, db, pool, tenant.ID)
		r := recordFor(c, tt.outcome, tt.code, nil, tt.status, tt.next)
		if tt.callback != "" {
			r.Callback = callbackFor(t, c, tt.callback)
		}
		claims, results = append(claims, c), append(results, r)
	}
	errs, err := db.RecordAttempts(ctx, results)
	require.NoError(t, err)
	for _, e := range errs {
		require.NoError(t, e)
	}

	announced := map[uuid.UUID]time.Time{}
	for range 2 {
		select {
		case d := <-l.due:
			announced[d.ID] = d.At
		case <-time.After(10 * time.Second):
			require.FailNow(t, "a callback task was not announced")
		}
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, r := claims[i], results[i]
			source, err := db.GetTask(ctx, tenant.ID, c.ID)
			require.NoError(t, err)
			require.Equal(t, tt.status, source.Status)
			callbacks, cut, err := db.ListTasksWithBodies(ctx, tenant.ID, model.TaskFilter{CallbackOf: &c.ID, Limit: 10}, 1<<20)
			require.NoError(t, err)
			require.False(t, cut)
			if tt.callback == "" {
				require.Empty(t, callbacks)
				require.Nil(t, source.CallbackTaskID)
				return
			}
			require.Len(t, callbacks, 1, "exactly one callback task")
			cb := callbacks[0]
			require.Equal(t, r.Callback.ID, cb.ID)
			require.Equal(t, &cb.ID, source.CallbackTaskID, "the source names its callback")
			require.Equal(t, &c.ID, cb.CallbackOf, "the callback names its source")
			require.Equal(t, tenant.ID, cb.TenantID)
			require.Equal(t, model.StatusScheduled, cb.Status)
			require.Equal(t, tt.callback, cb.URL)
			require.Equal(t, "POST", cb.Method)
			require.Equal(t, r.Callback.Headers, cb.Headers)
			require.Equal(t, r.Callback.Body, cb.Body)
			require.Equal(t, r.Callback.RunAt.UnixMicro(), cb.RunAt.UnixMicro())
			require.Equal(t, r.Callback.RunAt.UnixMicro(), cb.NextAttemptAt.UnixMicro(), "due at once")
			require.Equal(t, []any{7 * time.Second, 4, 3 * time.Second, 5 * time.Minute},
				[]any{cb.Timeout, cb.MaxAttempts, cb.MinBackoff, cb.MaxBackoff}, "the source's timeout and retry policy")
			require.Nil(t, cb.Callback, "a callback has no callbacks")
			require.Nil(t, cb.FailureCallback)
			require.Equal(t, model.PartitionOf(c.ID), model.PartitionOf(cb.ID))
			at, ok := announced[cb.ID]
			require.True(t, ok, "announced on commit")
			require.Equal(t, cb.RunAt.UnixMicro(), at.UnixMicro())
		})
	}
	require.Equal(t, 2, countRows(t, pool, `SELECT count(*) FROM tasks WHERE tenant_id = $1 AND callback_of IS NOT NULL`, tenant.ID))
}

// TestCallbackOnlyWithItsOutcome: a callback task exists exactly when the
// outcome that made it was recorded. A claim lost (another node took the
// task) records nothing and inserts no callback; a statement that fails
// records neither the outcome nor the callback; and recording the
// callback task's own outcome makes no further one.
func TestCallbackOnlyWithItsOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	t.Run("claim lost", func(t *testing.T) {
		c := insertCallbackSource(t, db, pool, tenant.ID)
		r := recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)
		r.Callback = callbackFor(t, c, *c.Callback)
		r.ClaimToken = uuid.New() // someone else's claim
		require.ErrorIs(t, db.RecordAttempt(ctx, r), model.ErrClaimLost)
		require.Zero(t, countRows(t, pool, `SELECT count(*) FROM tasks WHERE id = $1 OR callback_of = $2`, r.Callback.ID, c.ID))
	})

	t.Run("statement fails", func(t *testing.T) {
		c := insertCallbackSource(t, db, pool, tenant.ID)
		r := recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)
		r.Callback = callbackFor(t, c, *c.Callback)
		r.Callback.ID = insertDueTask(t, db, pool, tenant.ID).ID // taken: the insert fails
		err := db.RecordAttempt(ctx, r)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%v", err)
		require.Equal(t, "23505", pgErr.Code)
		require.Equal(t, "dispatching", readTaskRow(t, pool, c.ID).Status, "the outcome is not recorded without its callback")
		require.Zero(t, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, c.ID))
	})

	t.Run("a callback's outcome", func(t *testing.T) {
		c := insertCallbackSource(t, db, pool, tenant.ID)
		r := recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)
		r.Callback = callbackFor(t, c, *c.Callback)
		require.NoError(t, db.RecordAttempt(ctx, r))

		cc := claimOne(t, db, pool, r.Callback.ID)
		require.Nil(t, cc.Callback, "the callback task's claim names no callback")
		require.Nil(t, cc.FailureCallback)
		require.Equal(t, &c.ID, cc.CallbackOf)
		require.NoError(t, db.RecordAttempt(ctx, recordFor(cc, "success", ptr(200), nil, model.StatusDelivered, nil)))
		require.Zero(t, countRows(t, pool, `SELECT count(*) FROM tasks WHERE callback_of = $1`, cc.ID))
		got, err := db.GetTask(ctx, tenant.ID, cc.ID)
		require.NoError(t, err)
		require.Equal(t, model.StatusDelivered, got.Status)
		require.Nil(t, got.CallbackTaskID)

		// Nor can any writer give it callbacks: the table refuses them.
		_, err = pool.Exec(ctx, `UPDATE tasks SET callback = 'https://receiver.example/loop' WHERE id = $1`, cc.ID)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%v", err)
		require.Equal(t, "23514", pgErr.Code, "check violation")
		_, err = db.ReplayTask(ctx, tenant.ID, cc.ID, time.Now(), &model.TaskEdit{FailureCallback: ptr("https://receiver.example/loop")})
		require.True(t, errors.As(err, &pgErr), "%v", err)
		require.Equal(t, "23514", pgErr.Code)
	})
}

// TestCallbackURLsStored: a task's callback URLs are stored by every way in
// (a single insert, a batch, a schedule's occurrence), read back, and
// changed or removed by an edit-and-replay.
func TestCallbackURLsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)

	single := newTask(tenant.ID, now.Add(time.Hour))
	single.Callback = ptr("https://receiver.example/single-done")
	_, created, err := db.InsertTask(ctx, single, false)
	require.NoError(t, err)
	require.True(t, created)

	batched := []*model.Task{newTask(tenant.ID, now.Add(time.Hour)), newTask(tenant.ID, now.Add(time.Hour))}
	batched[0].FailureCallback = ptr("https://receiver.example/batch-failed")
	_, err = db.InsertTasks(ctx, batched, now)
	require.NoError(t, err)

	for _, tc := range []struct {
		task              *model.Task
		callback, failure *string
	}{
		{single, single.Callback, nil},
		{batched[0], nil, batched[0].FailureCallback},
		{batched[1], nil, nil},
	} {
		got, err := db.GetTask(ctx, tenant.ID, tc.task.ID)
		require.NoError(t, err)
		require.Equal(t, tc.callback, got.Callback)
		require.Equal(t, tc.failure, got.FailureCallback)
		require.Nil(t, got.CallbackOf)
		require.Nil(t, got.CallbackTaskID)
	}

	// An edit-and-replay changes one and removes the other ("").
	exec(t, pool, `UPDATE tasks SET status = 'dead', next_attempt_at = NULL WHERE id = $1`, single.ID)
	replayed, err := db.ReplayTask(ctx, tenant.ID, single.ID, time.Now(),
		&model.TaskEdit{Callback: ptr(""), FailureCallback: ptr("https://receiver.example/now-failed")})
	require.NoError(t, err)
	require.Nil(t, replayed.Callback)
	require.Equal(t, ptr("https://receiver.example/now-failed"), replayed.FailureCallback)

	// A schedule's occurrences carry its callbacks.
	sched := &model.Schedule{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenant.ID, Cron: "@every 1m", Timezone: "UTC",
		URL: "https://receiver.example/tick", Method: "POST", Timeout: 10 * time.Second, MaxAttempts: 3,
		MinBackoff: time.Second, MaxBackoff: time.Minute, NextRunAt: ptr(now.Add(-time.Second)), CreatedAt: now,
		Callback: ptr("https://receiver.example/tick-done"), FailureCallback: ptr("https://receiver.example/tick-failed"),
	}
	require.NoError(t, db.InsertSchedule(ctx, sched, nil))
	stored, err := db.GetSchedule(ctx, tenant.ID, sched.ID)
	require.NoError(t, err)
	require.Equal(t, sched.Callback, stored.Callback)
	require.Equal(t, sched.FailureCallback, stored.FailureCallback)
	done, err := db.MaterializeSchedules(ctx, model.MaterializeParams{
		Partitions: allPartitions(), Until: now, Limit: 10, NotifyUntil: now,
	}, func(s *model.Schedule) model.OccurrencePlan {
		return model.OccurrencePlan{Occurrences: []time.Time{*s.NextRunAt}, Next: ptr(s.NextRunAt.Add(time.Minute))}
	})
	require.NoError(t, err)
	require.Len(t, done.Created, 1)
	occurrence, err := db.GetTask(ctx, tenant.ID, done.Created[0].ID)
	require.NoError(t, err)
	require.Equal(t, sched.Callback, occurrence.Callback)
	require.Equal(t, sched.FailureCallback, occurrence.FailureCallback)

	// A change of the schedule changes them for later occurrences.
	updated, _, err := db.UpdateSchedule(ctx, tenant.ID, sched.ID, func(s *model.Schedule) (*model.Schedule, error) {
		changed := *s
		changed.Callback, changed.FailureCallback = nil, ptr("https://receiver.example/tick-failed-v2")
		return &changed, nil
	}, nil)
	require.NoError(t, err)
	require.Nil(t, updated.Callback)
	require.Equal(t, ptr("https://receiver.example/tick-failed-v2"), updated.FailureCallback)
}
