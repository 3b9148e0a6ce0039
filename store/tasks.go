package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tracing"
)

// DueNotifyChannel is the Postgres NOTIFY channel on which a node that stored
// a task falling due soon tells every dispatcher about it. The payload is
// "<task id> <next attempt at, Unix microseconds>".
const DueNotifyChannel = "hookwheel_due"

const taskColumns = taskColumnsHead + `body, ` + taskColumnsTail

// taskColumnsWithoutBody are taskColumns with a NULL in the body's place:
// what a list reads when its caller did not ask for bodies, so that Postgres
// neither reads nor sends them (a body may be a mebibyte, a page 500 tasks).
const taskColumnsWithoutBody = taskColumnsHead + `NULL::bytea, ` + taskColumnsTail

const (
	taskColumnsHead = `id, tenant_id, status, url, method, headers, `
	taskColumnsTail = `run_at, next_attempt_at,
	timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, attempts, last_status_code, last_error,
	idempotency_key, request_hash, created_at, updated_at, attempt_base, schedule_id, labels,
	callback, failure_callback, callback_of, callback_task_id, ordering_key,
	publish_id, topic, endpoint_name, flow_key, expires_at, claim_token`
)

// scanTask reads the taskColumns of row into a new task; columns the row has
// after them go to extra, in order.
func scanTask(row pgx.Row, extra ...any) (*model.Task, error) {
	var t model.Task
	if err := scanTaskInto(row, &t, extra...); err != nil {
		return nil, err
	}
	return &t, nil
}

// scanTaskInto reads the taskColumns of row into t; columns the row has after
// them go to extra, in order.
func scanTaskInto(row pgx.Row, t *model.Task, extra ...any) error {
	return scanTaskWith(row, t, &t.Headers, extra...)
}

// scanTaskWith is scanTaskInto with the headers column read into headers,
// which sets t.Headers.
func scanTaskWith(row pgx.Row, t *model.Task, headers any, extra ...any) error {
	var (
		timeoutMs                  int32
		minBackoffMs, maxBackoffMs int64
		// pgtype's own UUID: a *uuid.UUID would cost each row allocations
		// through uuid's sql.Scanner (400 per claim of 100).
		claim pgtype.UUID
	)
	err := row.Scan(append([]any{&t.ID, &t.TenantID, &t.Status, &t.URL, &t.Method, headers, &t.Body, &t.RunAt, &t.NextAttemptAt,
		&timeoutMs, &t.MaxAttempts, &minBackoffMs, &maxBackoffMs, &t.Attempts, &t.LastStatusCode, &t.LastError,
		&t.IdempotencyKey, &t.RequestHash, &t.CreatedAt, &t.UpdatedAt, &t.AttemptBase, &t.ScheduleID, &t.Labels,
		&t.Callback, &t.FailureCallback, &t.CallbackOf, &t.CallbackTaskID, &t.OrderingKey,
		&t.PublishID, &t.Topic, &t.EndpointName, &t.FlowKey, &t.ExpiresAt, &claim}, extra...)...)
	if err != nil {
		return err
	}
	// A claimed task is dispatching whatever status it keeps (ClaimTasks).
	if claim.Valid {
		t.Status = model.StatusDispatching
	}
	t.Timeout = time.Duration(timeoutMs) * time.Millisecond
	t.MinBackoff = time.Duration(minBackoffMs) * time.Millisecond
	t.MaxBackoff = time.Duration(maxBackoffMs) * time.Millisecond
	if t.Headers == nil {
		t.Headers = map[string]string{}
	}
	return nil
}

const queryInsertTask = `-- name: InsertTask
WITH inserted AS (
	INSERT INTO tasks (id, tenant_id, status, url, method, headers, body, run_at, next_attempt_at,
		timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, idempotency_key, request_hash, labels,
		callback, failure_callback, ordering_key, publish_id, topic, endpoint_name, flow_key, expires_at,
		trace_parent, trace_state)
	SELECT $1, $2, 'scheduled', $3, $4, $5, $6, $7, $7, $8, $9, $10, $11, $12, $13, $16, $17, $18, $19,
		$20, $21, $22, $23, $25, $26, $27
	WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys WHERE tenant_id = $2 AND kind = 'task' AND key = $12)
	ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING tenant_id, created_at, updated_at, $24::smallint AS shard
), ` + countTasksCreated + `
SELECT created_at, updated_at,
	CASE WHEN $14::boolean THEN pg_notify('` + DueNotifyChannel + `', $1::text || ' ' || $15::text) END
FROM inserted`

// The task holding a key, or the one retention purged while the key was
// still remembered (rememberedTasks).
const queryGetTaskByIdempotencyKey = `-- name: GetTaskByIdempotencyKey
SELECT ` + taskColumns + ` FROM tasks WHERE tenant_id = $1 AND idempotency_key = $2 AND idempotency_key IS NOT NULL
UNION ALL
SELECT ` + taskColumns + ` FROM (` + rememberedTasks + ` WHERE tenant_id = $1 AND kind = 'task' AND key = $2) r
LIMIT 1`

// rememberedTasks reads idempotency_keys' snapshots back as rows of tasks
// (without body and headers), for a WHERE on idempotency_keys' columns to
// follow: a repeat of a purged task's key answers that task.
const rememberedTasks = `SELECT (jsonb_populate_record(NULL::tasks, snapshot)).* FROM idempotency_keys`

// InsertTask stores a new scheduled task, counted in its tenant's tasks
// created today (usage_days) by the same statement. When the task carries an
// idempotency key that the tenant already used, nothing is written and the
// existing task is returned with created false: the unique constraint, not a
// read-then-write, decides, so concurrent duplicates create exactly one task.
// A key whose task retention purged is still used while idempotency_keys
// remembers it: the task returned is then the purged one, as it was when
// purged, without body or headers.
// notifyDue asks Postgres to tell every listening dispatcher about the task on
// commit, for tasks that fall inside the dispatchers' loaded window.
func (db *DB) InsertTask(ctx context.Context, t *model.Task, notifyDue bool) (existing *model.Task, created bool, err error) {
	return insertTask(ctx, db.pool, createShard(), t, notifyDue)
}

// insertTask is InsertTask through q: the pool, or a caller's transaction
// (TxStore), counting the task in shard of its tenant's usage.
func insertTask(ctx context.Context, q Querier, shard int16, t *model.Task, notifyDue bool) (existing *model.Task, created bool, err error) {
	ctx, span := startInsertSpan(ctx, "InsertTask", 1)
	defer func() { endInsertSpan(span, err) }()
	if span != nil {
		span.SetAttributes(tracing.TaskAttributes(t.ID, t.TenantID, model.TargetKey(t.URL))...)
	}
	t.Status = model.StatusScheduled
	if t.Body == nil {
		t.Body = []byte{}
	}
	if t.Headers == nil {
		t.Headers = map[string]string{}
	}
	next := t.RunAt
	t.NextAttemptAt = &next
	var ignored *string
	for tries := 1; ; tries++ {
		err = q.QueryRow(ctx, queryInsertTask,
			t.ID, t.TenantID, t.URL, t.Method, t.Headers, t.Body, t.RunAt,
			t.Timeout.Milliseconds(), t.MaxAttempts, t.MinBackoff.Milliseconds(), t.MaxBackoff.Milliseconds(),
			t.IdempotencyKey, t.RequestHash, notifyDue, fmt.Sprint(t.RunAt.UnixMicro()), labelsArg(t.Labels),
			t.Callback, t.FailureCallback, t.OrderingKey, t.PublishID, t.Topic, t.EndpointName, t.FlowKey, shard,
			t.ExpiresAt, nullIfEmpty(t.TraceParent), nullIfEmpty(t.TraceState),
		).Scan(&t.CreatedAt, &t.UpdatedAt, &ignored)
		if err == nil {
			return nil, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) || t.IdempotencyKey == nil {
			return nil, false, fmt.Errorf("insert task %s: %w", t.ID, err)
		}
		existing, err = scanTask(q.QueryRow(ctx, queryGetTaskByIdempotencyKey, t.TenantID, *t.IdempotencyKey))
		if err == nil {
			return existing, false, nil
		}
		// The key was held when the insert ran and is free now: the
		// retention pass forgot it (or its task was deleted) between the
		// two statements. The insert is tried again; a key that keeps
		// vanishing is an error, as before.
		if !errors.Is(err, pgx.ErrNoRows) || tries == keyVanishedTries {
			return nil, false, fmt.Errorf("read task with idempotency key %q: %w", *t.IdempotencyKey, err)
		}
	}
}

// keyVanishedTries bounds the inserts of a task whose idempotency key
// was held at the insert and gone at the read that followed.
const keyVanishedTries = 3

const queryGetTask = `-- name: GetTask
SELECT ` + taskColumns + ` FROM tasks WHERE tenant_id = $1 AND id = $2`

// GetTask reads one of a tenant's tasks; another tenant's id is ErrNotFound.
func (db *DB) GetTask(ctx context.Context, tenantID, id uuid.UUID) (*model.Task, error) {
	t, err := scanTask(db.pool.QueryRow(ctx, queryGetTask, tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}

const queryCancelTask = `-- name: CancelTask
UPDATE tasks SET status = 'canceled', next_attempt_at = NULL, updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND status IN ('scheduled', 'retrying') AND claim_token IS NULL
RETURNING ` + taskColumns

// CancelTask cancels a task that still waits for an attempt. A task that is
// dispatching or finished gives ErrConflict (with the task as it is).
func (db *DB) CancelTask(ctx context.Context, tenantID, id uuid.UUID) (*model.Task, error) {
	t, err := scanTask(db.pool.QueryRow(ctx, queryCancelTask, tenantID, id))
	if err == nil {
		return t, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("cancel task %s: %w", id, err)
	}
	current, err := db.GetTask(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	return current, model.ErrConflict
}

const queryRescheduleTask = `-- name: RescheduleTask
WITH moved AS (
	UPDATE tasks SET next_attempt_at = $3,
		run_at = CASE WHEN status = 'scheduled' THEN $3 ELSE run_at END,
		updated_at = now()
	WHERE tenant_id = $1 AND id = $2 AND status IN ('scheduled', 'retrying') AND claim_token IS NULL
		AND (expires_at IS NULL OR expires_at > $3)
	RETURNING ` + taskColumns + `
)
SELECT ` + taskColumns + `,
	CASE WHEN $4::boolean THEN pg_notify('` + DueNotifyChannel + `', id::text || ' ' || $5::text) END
FROM moved`

// RescheduleTask moves a waiting task's next attempt to at (rounded up to the
// microsecond Postgres keeps). A scheduled task's run_at moves with it, since
// its first attempt is still to come; a retrying task keeps the run_at its
// first attempt was due at. notifyDue announces the task on DueNotifyChannel
// on commit, for a time that falls inside the dispatchers' loaded window.
//
// A dispatcher still holding a timer for the old time is harmless: its claim
// requires next_attempt_at to have come, and the update that moved it later
// holds the row lock the claim waits for. A task in any other status, or
// whose expires_at is not after at (it could never be attempted), gives
// ErrConflict (with the task as it is); another tenant's or an unknown id
// gives ErrNotFound.
func (db *DB) RescheduleTask(ctx context.Context, tenantID, id uuid.UUID, at time.Time, notifyDue bool) (*model.Task, error) {
	at = model.RoundUpToMicro(at)
	var ignored *string
	row := db.pool.QueryRow(ctx, queryRescheduleTask, tenantID, id, at, notifyDue, strconv.FormatInt(at.UnixMicro(), 10))
	t, err := scanTask(row, &ignored)
	if err == nil {
		return t, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("reschedule task %s: %w", id, err)
	}
	current, err := db.GetTask(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	return current, model.ErrConflict
}

// cancelChunk bounds the rows one statement of CancelTasks locks and changes.
const cancelChunk = 1000

// Each chunk takes its rows in id order, like the claim does, so that the two
// never lock the same rows in opposite orders; one status at a time lets the
// scan walk tasks_tenant_status_recent in id order instead of sorting every
// match of every chunk. FOR UPDATE waits for a claim in progress and then
// re-checks the status, so a task the claim took is left alone.
const queryCancelTasksChunk = `-- name: CancelTasksChunk
WITH victims AS (
	SELECT id FROM tasks
	WHERE tenant_id = $1 AND status = $2 AND claim_token IS NULL AND id > $3
		AND ($4::uuid IS NULL OR schedule_id = $4)
		AND ($5::timestamptz IS NULL OR created_at >= $5)
		AND ($6::timestamptz IS NULL OR created_at < $6)
		AND ($8::uuid IS NULL OR publish_id = $8)
		AND ($9::text IS NULL OR topic = $9)
	ORDER BY id
	LIMIT $7
	FOR UPDATE
)
UPDATE tasks t SET status = 'canceled', next_attempt_at = NULL, updated_at = now()
FROM victims
WHERE t.id = victims.id
RETURNING t.id`

// CancelTasks cancels every scheduled or retrying task of the tenant matching
// f and returns their ids. It works in chunks of cancelChunk tasks, each its
// own statement and commit, so that canceling a million tasks neither holds a
// million row locks (which the dispatcher's claims would queue behind) nor
// builds one huge transaction. It is therefore not atomic: a task created
// while it runs may or may not be canceled, and on an error the ids canceled
// so far are returned with it.
func (db *DB) CancelTasks(ctx context.Context, tenantID uuid.UUID, f model.CancelFilter) ([]uuid.UUID, error) {
	statuses := []model.TaskStatus{model.StatusScheduled, model.StatusRetrying}
	if f.Status != nil {
		if *f.Status != model.StatusScheduled && *f.Status != model.StatusRetrying {
			return nil, fmt.Errorf("cancel tasks: status %q is not a waiting status", *f.Status)
		}
		statuses = []model.TaskStatus{*f.Status}
	}
	var canceled []uuid.UUID
	for _, status := range statuses {
		ids, err := inChunks(0, cancelChunk, func(after uuid.UUID, limit int) ([]uuid.UUID, error) {
			rows, err := db.pool.Query(ctx, queryCancelTasksChunk, tenantID, status, after,
				f.ScheduleID, f.CreatedAfter, f.CreatedBefore, limit, f.PublishID, f.Topic)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		})
		canceled = append(canceled, ids...)
		if err != nil {
			return canceled, fmt.Errorf("cancel %s tasks: %w", status, err)
		}
	}
	return canceled, nil
}

// inChunks walks a change made chunk by chunk in id order: chunk changes up
// to limit rows with ids above after and returns their ids. A chunk shorter
// than its limit is the last: the statements' LIMIT sits above their row
// locks, so a row another transaction changed meanwhile is passed over, not
// counted against it. most bounds the rows changed in all (0: no bound).
func inChunks(most, chunkSize int, chunk func(after uuid.UUID, limit int) ([]uuid.UUID, error)) ([]uuid.UUID, error) {
	var done []uuid.UUID
	after := uuid.Nil
	for {
		limit := chunkSize
		if most > 0 {
			limit = min(limit, most-len(done))
			if limit <= 0 {
				return done, nil
			}
		}
		ids, err := chunk(after, limit)
		done = append(done, ids...)
		if err != nil || len(ids) < limit {
			return done, err
		}
		for _, id := range ids {
			if bytes.Compare(id[:], after[:]) > 0 {
				after = id
			}
		}
	}
}
