package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// recordFor is the result of the claimed attempt with the given outcome.
func recordFor(c *model.ClaimedTask, outcome string, code *int, errText *string, status model.TaskStatus, next *time.Time) model.AttemptResult {
	return model.AttemptResult{
		Attempt: model.Attempt{
			TaskID: c.ID, Attempt: c.Attempt, StartedAt: µs(time.Now().Add(-time.Second)), Duration: 250 * time.Millisecond,
			StatusCode: code, Error: errText, Outcome: outcome, ResponseBody: ptr("response of " + outcome),
		},
		ClaimToken:    c.ClaimToken,
		Status:        status,
		NextAttemptAt: next,
	}
}

func TestRecordAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	retryAt := µs(time.Now().Add(time.Hour))

	tests := []struct {
		name       string
		outcome    string
		code       *int
		errText    *string
		status     model.TaskStatus
		next       *time.Time
		wantStatus model.TaskStatus
	}{
		{"success", "success", ptr(200), nil, model.StatusDelivered, nil, model.StatusDelivered},
		{"retry on 503", "retry", ptr(503), nil, model.StatusRetrying, &retryAt, model.StatusRetrying},
		{"retry on network error", "retry", nil, ptr("dial tcp: connection refused"), model.StatusRetrying, &retryAt, model.StatusRetrying},
		{"final failure", "fail", ptr(404), nil, model.StatusDead, nil, model.StatusDead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
			r := recordFor(c, tt.outcome, tt.code, tt.errText, tt.status, tt.next)
			require.NoError(t, db.RecordAttempt(ctx, r))

			got, err := db.GetTask(ctx, tenant.ID, c.ID)
			require.NoError(t, err)
			require.Equal(t, tt.wantStatus, got.Status)
			require.Equal(t, 1, got.Attempts)
			require.Equal(t, tt.code, got.LastStatusCode)
			require.Equal(t, tt.errText, got.LastError)
			if tt.next == nil {
				require.Nil(t, got.NextAttemptAt)
			} else {
				require.NotNil(t, got.NextAttemptAt)
				require.Equal(t, tt.next.UnixMicro(), got.NextAttemptAt.UnixMicro())
			}
			row := readTaskRow(t, pool, c.ID)
			require.Nil(t, row.ClaimToken)
			require.Nil(t, row.LeaseExpiresAt)

			attempts, err := db.ListAttempts(ctx, tenant.ID, c.ID, 0, 1000)
			require.NoError(t, err)
			require.Len(t, attempts, 1)
			a := attempts[0]
			require.Equal(t, c.ID, a.TaskID)
			require.Equal(t, 1, a.Attempt)
			require.Equal(t, r.StartedAt.UnixMicro(), a.StartedAt.UnixMicro())
			require.Equal(t, 250*time.Millisecond, a.Duration)
			require.Equal(t, tt.code, a.StatusCode)
			require.Equal(t, tt.errText, a.Error)
			require.Equal(t, tt.outcome, a.Outcome)
			require.Equal(t, ptr("response of "+tt.outcome), a.ResponseBody)

			// Recording the same attempt again is refused and stores nothing.
			require.ErrorIs(t, db.RecordAttempt(ctx, r), model.ErrClaimLost)
			require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, c.ID))
		})
	}

	refused := []struct {
		name   string
		modify func(r *model.AttemptResult)
	}{
		{"wrong claim token", func(r *model.AttemptResult) { r.ClaimToken = uuid.New() }},
		{"wrong attempt number", func(r *model.AttemptResult) { r.Attempt.Attempt = 2 }},
		{"unknown task", func(r *model.AttemptResult) { r.TaskID = uuid.New() }},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
			before := readTaskRow(t, pool, c.ID)
			r := recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)
			tt.modify(&r)

			err := db.RecordAttempt(ctx, r)
			require.ErrorIs(t, err, model.ErrClaimLost)
			require.Equal(t, before, readTaskRow(t, pool, c.ID))
			require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, c.ID))
		})
	}

	t.Run("a sender whose lease was recovered cannot record", func(t *testing.T) {
		t.Parallel()
		task := insertDueTask(t, db, pool, tenant.ID)
		stale := claimOne(t, db, pool, task.ID)
		exec(t, pool, `UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, task.ID)
		// Other subtests' claims that share the partition are held by the
		// live testNode under live leases: only this one is recovered.
		recovered, err := db.RecoverClaims(ctx, []int16{model.PartitionOf(task.ID)}, 100)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{task.ID}, recoveredIDs(recovered))
		fresh := claimOne(t, db, pool, task.ID)
		require.Equal(t, stale.Attempt, fresh.Attempt, "the re-send keeps the attempt number")
		require.NotEqual(t, stale.ClaimToken, fresh.ClaimToken)

		require.ErrorIs(t, db.RecordAttempt(ctx, recordFor(stale, "success", ptr(200), nil, model.StatusDelivered, nil)), model.ErrClaimLost)
		require.Equal(t, "dispatching", readTaskRow(t, pool, task.ID).Status)
		require.NoError(t, db.RecordAttempt(ctx, recordFor(fresh, "fail", ptr(410), nil, model.StatusDead, nil)))

		attempts, err := db.ListAttempts(ctx, tenant.ID, task.ID, 0, 1000)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		require.Equal(t, ptr(410), attempts[0].StatusCode)
		got, err := db.GetTask(ctx, tenant.ID, task.ID)
		require.NoError(t, err)
		require.Equal(t, model.StatusDead, got.Status)
	})

	t.Run("one row per task and attempt number", func(t *testing.T) {
		t.Parallel()
		c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
		require.NoError(t, db.RecordAttempt(ctx, recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)))
		_, err := pool.Exec(ctx, `INSERT INTO attempts (task_id, attempt, started_at, duration_ms, outcome) VALUES ($1, 1, now(), 1, 'success')`, c.ID)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "got %v", err)
		require.Equal(t, "23505", pgErr.Code)
		require.Equal(t, "attempts_pkey", pgErr.ConstraintName)
	})
}

// TestRecordAttemptsBatch writes many attempts in one statement: each is
// judged on its own claim, and the results come back in input order.
func TestRecordAttemptsBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	var results []model.AttemptResult
	for i := range 50 {
		c := claimOne(t, db, pool, insertDueTask(t, db, pool, tenant.ID).ID)
		r := recordFor(c, "success", ptr(200), nil, model.StatusDelivered, nil)
		if i%10 == 3 {
			r.ClaimToken = uuid.New() // someone else's claim
		}
		results = append(results, r)
	}
	errs, err := db.RecordAttempts(ctx, results)
	require.NoError(t, err)
	require.Len(t, errs, len(results))
	for i, r := range results {
		row := readTaskRow(t, pool, r.TaskID)
		if i%10 == 3 {
			require.ErrorIs(t, errs[i], model.ErrClaimLost, "item %d", i)
			require.Equal(t, "dispatching", row.Status, "a lost claim leaves the task to its owner")
			require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, r.TaskID))
			continue
		}
		require.NoError(t, errs[i], "item %d", i)
		require.Equal(t, "delivered", row.Status)
		require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1 AND attempt = 1`, r.TaskID))
	}
}
