package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// TestExpiresAtTravelsWithTheTask: a task's expires_at is stored by the
// single and the batch insert alike, read back, and carried by the claim,
// which the sender checks it on; a task without one has none.
func TestExpiresAtTravelsWithTheTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)
	expires := µs(now.Add(time.Hour))

	single := newTask(tenant.ID, now.Add(-time.Minute))
	single.ExpiresAt = &expires
	_, created, err := db.InsertTask(ctx, single, false)
	require.NoError(t, err)
	require.True(t, created)

	batched, plain := newTask(tenant.ID, now.Add(-time.Minute)), newTask(tenant.ID, now.Add(-time.Minute))
	batched.ExpiresAt = &expires
	results, err := db.InsertTasks(ctx, []*model.Task{batched, plain}, time.Time{})
	require.NoError(t, err)
	for _, r := range results {
		require.True(t, r.Created)
	}

	for _, tc := range []struct {
		name string
		id   uuid.UUID
		want *time.Time
	}{{"single insert", single.ID, &expires}, {"batch insert", batched.ID, &expires}, {"none", plain.ID, nil}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := db.GetTask(ctx, tenant.ID, tc.id)
			require.NoError(t, err)
			requireSameInstant(t, tc.want, got.ExpiresAt)
			c := claimOne(t, db, pool, tc.id)
			requireSameInstant(t, tc.want, c.ExpiresAt)
		})
	}
}

// TestRecordExpiryBeforeAttempt: a claim whose task expired before its send
// started ends the task expired under the claim, as an outcome does, but
// with no attempt: no attempt row, none metered, the claim's attempt number
// given back, the previous attempt's status code kept, and the failure
// callback inserted in the same commit. A claim no longer held ends nothing.
func TestRecordExpiryBeforeAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	t.Run("before the first attempt", func(t *testing.T) {
		c := insertCallbackSource(t, db, pool, tenant.ID)
		require.Equal(t, 1, c.Attempt)
		r := expiryFor(c)
		r.Callback = callbackFor(t, c, *c.FailureCallback)
		require.NoError(t, db.RecordAttempt(ctx, r))

		got, err := db.GetTask(ctx, tenant.ID, c.ID)
		require.NoError(t, err)
		require.Equal(t, model.StatusExpired, got.Status)
		require.Zero(t, got.Attempts, "the claim's attempt is given back")
		require.Nil(t, got.NextAttemptAt)
		require.Nil(t, got.LastStatusCode)
		require.Equal(t, r.Error, got.LastError)
		require.Equal(t, &r.Callback.ID, got.CallbackTaskID)
		row := readTaskRow(t, pool, c.ID)
		require.Nil(t, row.ClaimToken, "the claim is cleared")
		require.Zero(t, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, c.ID))
		require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM tasks WHERE callback_of = $1`, c.ID))
		require.Zero(t, meteredAttempts(t, pool, tenant.ID), "no attempt is metered")
	})

	t.Run("before a retry", func(t *testing.T) {
		task := insertDueTask(t, db, pool, tenant.ID)
		first := claimOne(t, db, pool, task.ID)
		retryAt := µs(dbNow(t, pool).Add(-time.Second))
		require.NoError(t, db.RecordAttempt(ctx, recordFor(first, "retry", ptr(503), ptr("receiver answered 503"),
			model.StatusRetrying, &retryAt)))
		second := claimOne(t, db, pool, task.ID)
		require.Equal(t, 2, second.Attempt)
		require.NoError(t, db.RecordAttempt(ctx, expiryFor(second)))

		got, err := db.GetTask(ctx, tenant.ID, task.ID)
		require.NoError(t, err)
		require.Equal(t, model.StatusExpired, got.Status)
		require.Equal(t, 1, got.Attempts, "only the attempt made counts")
		require.Equal(t, ptr(503), got.LastStatusCode, "the last status code is the attempt's that was made")
		require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, task.ID))
		require.Equal(t, 1, meteredAttempts(t, pool, tenant.ID), "the one attempt made, and no more")
	})

	t.Run("claim lost", func(t *testing.T) {
		task := insertDueTask(t, db, pool, tenant.ID)
		c := claimOne(t, db, pool, task.ID)
		r := expiryFor(c)
		r.ClaimToken = uuid.New()
		require.ErrorIs(t, db.RecordAttempt(ctx, r), model.ErrClaimLost)
		require.Equal(t, "dispatching", readTaskRow(t, pool, task.ID).Status)
	})
}

// TestRecordExpiryAtRetry: an attempt whose retry would start past the
// task's expiry is recorded as its final one (an attempt row, metered as a
// failure) and leaves the task expired, not retrying.
func TestRecordExpiryAtRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	task := insertDueTask(t, db, pool, tenant.ID)
	c := claimOne(t, db, pool, task.ID)

	require.NoError(t, db.RecordAttempt(ctx, recordFor(c, "fail", ptr(503), ptr("receiver answered 503; not retried"),
		model.StatusExpired, nil)))

	got, err := db.GetTask(ctx, tenant.ID, task.ID)
	require.NoError(t, err)
	require.Equal(t, model.StatusExpired, got.Status)
	require.Equal(t, 1, got.Attempts)
	require.Nil(t, got.NextAttemptAt)
	require.Equal(t, ptr(503), got.LastStatusCode)
	attempts, err := db.ListAttempts(ctx, tenant.ID, task.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	require.Equal(t, "fail", attempts[0].Outcome)
	var failed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum(failed_attempts), 0) FROM usage_days WHERE tenant_id = $1`,
		tenant.ID).Scan(&failed))
	require.Equal(t, 1, failed)
}

// TestExpiredIsFinished: expired tasks are listed by their status, counted
// by it, not canceled or replayed; a replay of a dead task drops an
// expires_at it has reached and keeps a later one.
func TestExpiredIsFinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	expired := insertDueTask(t, db, pool, tenant.ID)
	require.NoError(t, db.RecordAttempt(ctx, expiryFor(claimOne(t, db, pool, expired.ID))))
	insertDueTask(t, db, pool, tenant.ID)

	status := model.StatusExpired
	listed, err := db.ListTasks(ctx, tenant.ID, model.TaskFilter{Status: &status, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{expired.ID}, taskIDs(listed))
	counts, err := db.CountTasksByStatus(ctx, tenant.ID, 100)
	require.NoError(t, err)
	require.Equal(t, 1, counts[model.StatusExpired])
	require.Equal(t, 1, counts[model.StatusScheduled])

	_, err = db.CancelTask(ctx, tenant.ID, expired.ID)
	require.ErrorIs(t, err, model.ErrConflict)
	_, err = db.ReplayTask(ctx, tenant.ID, expired.ID, time.Now(), nil)
	require.ErrorIs(t, err, model.ErrConflict)

	now := dbNow(t, pool)
	for _, tc := range []struct {
		name    string
		expires time.Time
		kept    bool
	}{{"reached", now.Add(time.Minute), false}, {"later", now.Add(time.Hour), true}} {
		t.Run(tc.name, func(t *testing.T) {
			task := newTask(tenant.ID, now.Add(-time.Minute))
			task.ExpiresAt = ptr(µs(tc.expires))
			_, created, err := db.InsertTask(ctx, task, false)
			require.NoError(t, err)
			require.True(t, created)
			exec(t, pool, `UPDATE tasks SET status = 'dead', next_attempt_at = NULL, attempts = 1 WHERE id = $1`, task.ID)
			replayed, err := db.ReplayTask(ctx, tenant.ID, task.ID, now.Add(10*time.Minute), nil)
			require.NoError(t, err)
			if tc.kept {
				requireSameInstant(t, task.ExpiresAt, replayed.ExpiresAt)
			} else {
				require.Nil(t, replayed.ExpiresAt)
			}
		})
	}
}

// expiryFor is the result a sender records for a claim whose task expired
// before its send started.
func expiryFor(c *model.ClaimedTask) model.AttemptResult {
	return model.AttemptResult{
		Attempt: model.Attempt{
			TaskID: c.ID, Attempt: c.Attempt, StartedAt: µs(time.Now()), Outcome: "fail",
			Error: ptr("expired before attempt " + time.Now().Format(time.RFC3339)),
		},
		ClaimToken:  c.ClaimToken,
		Status:      model.StatusExpired,
		Unattempted: true,
	}
}

// meteredAttempts is the tenant's attempts in usage_days, every day and shard.
func meteredAttempts(t *testing.T, pool *pgxpool.Pool, tenantID uuid.UUID) int {
	t.Helper()
	return countRows(t, pool, `SELECT coalesce(sum(attempts), 0)::int FROM usage_days WHERE tenant_id = $1`, tenantID)
}

// requireSameInstant compares optional instants to the microsecond.
func requireSameInstant(t *testing.T, want, got *time.Time) {
	t.Helper()
	if want == nil {
		require.Nil(t, got)
		return
	}
	require.NotNil(t, got)
	require.Equal(t, want.UnixMicro(), got.UnixMicro())
}

// TestRescheduleKeepsBeforeExpiry: a waiting task moves to any time before
// its expiry, and not to one at or after it: that is refused as a
// conflict, with the task unchanged.
func TestRescheduleKeepsBeforeExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool)
	task := newTask(tenant.ID, now.Add(time.Hour))
	task.ExpiresAt = ptr(µs(now.Add(2 * time.Hour)))
	_, created, err := db.InsertTask(ctx, task, false)
	require.NoError(t, err)
	require.True(t, created)

	moved, err := db.RescheduleTask(ctx, tenant.ID, task.ID, now.Add(90*time.Minute), false)
	require.NoError(t, err)
	require.Equal(t, model.RoundUpToMicro(now.Add(90*time.Minute)).UnixMicro(), moved.RunAt.UnixMicro())

	for _, at := range []time.Time{*task.ExpiresAt, now.Add(3 * time.Hour)} {
		current, err := db.RescheduleTask(ctx, tenant.ID, task.ID, at, false)
		require.ErrorIs(t, err, model.ErrConflict)
		require.Equal(t, moved.RunAt, current.RunAt, "unchanged")
		requireSameInstant(t, task.ExpiresAt, current.ExpiresAt)
	}
}
