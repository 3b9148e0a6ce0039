package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

const queryReplayTask = `-- name: ReplayTask
WITH replayed AS (
	UPDATE tasks SET status = 'scheduled', next_attempt_at = $3, attempt_base = attempts, updated_at = now(),
		expires_at = CASE WHEN expires_at > $3 THEN expires_at END,
		url = coalesce($5::text, url), method = coalesce($6::text, method),
		headers = coalesce($7::jsonb, headers), body = coalesce($8::bytea, body),
		labels = CASE WHEN $9::jsonb IS NULL THEN labels ELSE nullif($9::jsonb, '{}'::jsonb) END,
		callback = CASE WHEN $10::text IS NULL THEN callback ELSE nullif($10, '') END,
		failure_callback = CASE WHEN $11::text IS NULL THEN failure_callback ELSE nullif($11, '') END
	WHERE tenant_id = $1 AND id = $2 AND status IN ('dead', 'delivered')
	RETURNING ` + taskColumns + `
)
SELECT ` + taskColumns + `, pg_notify('` + DueNotifyChannel + `', id::text || ' ' || $4::text)
FROM replayed`

// ReplayTask schedules a dead or delivered task again, due at at (rounded up
// to the microsecond Postgres keeps). The task keeps its id, run_at and
// idempotency key, so the webhook goes out with the same webhook-id and
// Idempotency-Key; its attempts keep counting, and AttemptBase becomes
// Attempts so that the retry policy grants MaxAttempts attempts afresh.
// last_status_code and last_error keep describing the latest attempt until
// the next one is recorded. An expires_at the replay's due time has reached
// is dropped: the replay asks for a send now, which the old deadline would
// end at once; a later one stays.
//
// edit, when not nil, replaces the fields it sets in the same statement, so
// a task is never replayed half edited, nor edited without the replay. Its
// request_hash stays the fingerprint of the request that created it: a
// repeat of that request with the same idempotency key still finds this
// task, as it is now. Claims measure the body when they take it, so an
// edited body needs nothing else changed.
//
// The same statement announces the task on DueNotifyChannel, since a replayed
// task is due at once: every dispatcher learns of it on commit. A task in any
// other status gives ErrConflict (with the task as it is, unedited); another
// tenant's or an unknown id gives ErrNotFound.
func (db *DB) ReplayTask(ctx context.Context, tenantID, id uuid.UUID, at time.Time, edit *model.TaskEdit) (*model.Task, error) {
	at = model.RoundUpToMicro(at)
	// Untyped nils, so that what the edit leaves out is NULL and not a JSON
	// null or an empty body.
	var url, method, headers, body, labels, callback, failureCallback any
	if edit != nil {
		if edit.URL != nil {
			url = *edit.URL
		}
		if edit.Method != nil {
			method = *edit.Method
		}
		if edit.Headers != nil {
			headers = edit.Headers
		}
		if edit.Body != nil {
			body = edit.Body
		}
		if edit.Labels != nil {
			labels = edit.Labels // empty clears them: stored as NULL
		}
		if edit.Callback != nil {
			callback = *edit.Callback // empty removes it: stored as NULL
		}
		if edit.FailureCallback != nil {
			failureCallback = *edit.FailureCallback
		}
	}
	var ignored *string
	row := db.pool.QueryRow(ctx, queryReplayTask, tenantID, id, at, fmt.Sprint(at.UnixMicro()), url, method, headers, body, labels,
		callback, failureCallback)
	t, err := scanTask(row, &ignored)
	if err == nil {
		return t, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("replay task %s: %w", id, err)
	}
	current, err := db.GetTask(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	return current, model.ErrConflict
}

// replayMatch is the condition on a dead task of tenant $1 that
// CountDeadTasks counts and ReplayTasks replays, with a ReplayFilter in $2 to
// $8 (the URL prefix as a LIKE pattern, the labels as a JSON object). Written
// once so that a dry run counts exactly what the replay would take.
const replayMatch = `tenant_id = $1 AND status = 'dead'
		AND ($2::uuid IS NULL OR schedule_id = $2)
		AND ($3::timestamptz IS NULL OR created_at >= $3)
		AND ($4::timestamptz IS NULL OR created_at < $4)
		AND ($5::text IS NULL OR url LIKE $5)
		AND ($6::jsonb IS NULL OR (labels IS NOT NULL AND ` + labelsIndexed + ` @> (` + tenantLabels + ` || $6::jsonb)))
		AND ($7::uuid IS NULL OR publish_id = $7)
		AND ($8::text IS NULL OR topic = $8)`

// Both statements walk the tenant's dead tasks in tasks_tenant_status_recent,
// which retention keeps to the last days' worth.
const queryCountDeadTasks = `-- name: CountDeadTasks
SELECT count(*) FROM tasks WHERE ` + replayMatch

// As in CancelTasksChunk, the chunk takes its rows in id order, like the
// claim, and FOR UPDATE re-checks the status of a row another statement
// changed meanwhile (a replay of the task alone, say), leaving it out.
const queryReplayTasksChunk = `-- name: ReplayTasksChunk
WITH victims AS (
	SELECT id FROM tasks
	WHERE ` + replayMatch + ` AND id > $9
	ORDER BY id
	LIMIT $10
	FOR UPDATE
)
UPDATE tasks t SET status = 'scheduled', next_attempt_at = $11, attempt_base = t.attempts, updated_at = now(),
	expires_at = CASE WHEN t.expires_at > $11 THEN t.expires_at END
FROM victims
WHERE t.id = victims.id
RETURNING t.id, pg_notify('` + DueNotifyChannel + `', t.id::text || ' ' || $12::text)`

// replayChunk bounds the rows one statement of ReplayTasks locks and changes.
const replayChunk = 1000

// CountDeadTasks counts the tenant's dead tasks matching f: what ReplayTasks
// would replay now.
func (db *DB) CountDeadTasks(ctx context.Context, tenantID uuid.UUID, f model.ReplayFilter) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, queryCountDeadTasks, tenantID, f.ScheduleID, f.CreatedAfter, f.CreatedBefore,
		likePrefix(f.URLPrefix, 0), labelsArg(f.Labels), f.PublishID, f.Topic).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count dead tasks of tenant %s: %w", tenantID, err)
	}
	return n, nil
}

// ReplayTasks replays every dead task of the tenant matching f, as
// ReplayTask does one without an edit: each becomes due at at (rounded up
// to the microsecond) with a fresh retry budget, and is announced on
// DueNotifyChannel on commit. It returns their ids and the instant they are
// due. Like CancelTasks it works in chunks of replayChunk tasks, each its own
// statement and commit, and is therefore not atomic: a task that dies while
// it runs may or may not be replayed, and on an error the ids replayed so
// far are returned with it.
func (db *DB) ReplayTasks(ctx context.Context, tenantID uuid.UUID, f model.ReplayFilter, at time.Time) ([]uuid.UUID, time.Time, error) {
	at = model.RoundUpToMicro(at)
	micros := fmt.Sprint(at.UnixMicro())
	pattern, labels := likePrefix(f.URLPrefix, 0), labelsArg(f.Labels)
	replayed, err := inChunks(f.Most, replayChunk, func(after uuid.UUID, limit int) ([]uuid.UUID, error) {
		rows, err := db.pool.Query(ctx, queryReplayTasksChunk, tenantID, f.ScheduleID, f.CreatedAfter, f.CreatedBefore,
			pattern, labels, f.PublishID, f.Topic, after, limit, at, micros)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(r pgx.CollectableRow) (uuid.UUID, error) {
			var (
				id      uuid.UUID
				ignored *string
			)
			err := r.Scan(&id, &ignored)
			return id, err
		})
	})
	if err != nil {
		return replayed, at, fmt.Errorf("replay dead tasks of tenant %s: %w", tenantID, err)
	}
	return replayed, at, nil
}
