package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hookwheel/hookwheel/internal/model"
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
	publish_id, topic, endpoint_name, flow_key, claim_token`
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
		&t.PublishID, &t.Topic, &t.EndpointName, &t.FlowKey, &claim}, extra...)...)
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
		callback, failure_callback, ordering_key, publish_id, topic, endpoint_name, flow_key)
	SELECT $1, $2, 'scheduled', $3, $4, $5, $6, $7, $7, $8, $9, $10, $11, $12, $13, $16, $17, $18, $19,
		$20, $21, $22, $23
	WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys WHERE tenant_id = $2 AND kind = 'task' AND key = $12)
	ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING created_at, updated_at
)
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

// InsertTask stores a new scheduled task. When the task carries an
// idempotency key that the tenant already used, nothing is written and the
// existing task is returned with created false: the unique constraint, not a
// read-then-write, decides, so concurrent duplicates create exactly one task.
// A key whose task retention purged is still used while idempotency_keys
// remembers it: the task returned is then the purged one, as it was when
// purged, without body or headers.
// notifyDue asks Postgres to tell every listening dispatcher about the task on
// commit, for tasks that fall inside the dispatchers' loaded window.
func (db *DB) InsertTask(ctx context.Context, t *model.Task, notifyDue bool) (existing *model.Task, created bool, err error) {
	return insertTask(ctx, db.pool, t, notifyDue)
}

// insertTask is InsertTask through q: the pool, or a caller's transaction
// (TxStore).
func insertTask(ctx context.Context, q Querier, t *model.Task, notifyDue bool) (existing *model.Task, created bool, err error) {
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
	err = q.QueryRow(ctx, queryInsertTask,
		t.ID, t.TenantID, t.URL, t.Method, t.Headers, t.Body, t.RunAt,
		t.Timeout.Milliseconds(), t.MaxAttempts, t.MinBackoff.Milliseconds(), t.MaxBackoff.Milliseconds(),
		t.IdempotencyKey, t.RequestHash, notifyDue, fmt.Sprint(t.RunAt.UnixMicro()), labelsArg(t.Labels),
		t.Callback, t.FailureCallback, t.OrderingKey, t.PublishID, t.Topic, t.EndpointName, t.FlowKey,
	).Scan(&t.CreatedAt, &t.UpdatedAt, &ignored)
	if err == nil {
		return nil, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) || t.IdempotencyKey == nil {
		return nil, false, fmt.Errorf("insert task %s: %w", t.ID, err)
	}
	existing, err = scanTask(q.QueryRow(ctx, queryGetTaskByIdempotencyKey, t.TenantID, *t.IdempotencyKey))
	if err != nil {
		return nil, false, fmt.Errorf("read task with idempotency key %q: %w", *t.IdempotencyKey, err)
	}
	return existing, false, nil
}

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

// Ids are UUIDv7, so id order is creation order; but created_at is the
// database's clock at insert and the id the API's, so the time filters read
// created_at itself (index tasks_tenant_created) rather than bounding ids.
// The URL prefix is matched twice: on left(url, urlIndexChars), which
// tasks_tenant_url indexes (migration 00013 says why not the whole URL), and
// on the URL itself. Labels are matched in the form tasks_tenant_labels
// indexes (labelsMatch). A publish's tasks are found through tasks_publish,
// a topic's through tasks_tenant_topic (migration 00021).
const queryListTasks = `-- name: ListTasks
SELECT ` + taskColumnsWithoutBody + ` FROM tasks
WHERE ` + listTasksWhere + `
ORDER BY id DESC
LIMIT $4`

// listTasksWhere is the condition of a task listing, on the parameters
// listTasksArgs gives.
const listTasksWhere = `tenant_id = $1
	AND ($2::text IS NULL OR ` + statusIs + `)
	AND ($3::uuid IS NULL OR id < $3)
	AND ($5::uuid IS NULL OR schedule_id = $5)
	AND ($6::timestamptz IS NULL OR created_at >= $6)
	AND ($7::timestamptz IS NULL OR created_at < $7)
	AND ($8::text IS NULL OR (left(url, ` + urlIndexChars + `) LIKE $9 AND url LIKE $8))
	AND ($10::text IS NULL OR idempotency_key = $10)
	AND ($11::jsonb IS NULL OR (labels IS NOT NULL AND ` + labelsIndexed + ` @> (` + tenantLabels + ` || $11::jsonb)))
	AND ($12::uuid IS NULL OR callback_of = $12)
	AND ($13::uuid IS NULL OR publish_id = $13)
	AND ($14::text IS NULL OR topic = $14)`

// queryListTasksWithBodies is ListTasks with the bodies, within a budget of
// $15 bytes, read in two steps as listbodies.go tells.
const queryListTasksWithBodies = `-- name: ListTasksWithBodies
WITH page AS (
	SELECT ` + pageBodyBytes + ` FROM tasks
	WHERE ` + listTasksWhere + `
	ORDER BY id DESC
	LIMIT $4
), ` + fittingPage + `
SELECT ` + taskColumns + `, page_rows FROM fitting JOIN tasks ON tasks.tenant_id = $1 AND tasks.id = fitting.page_id
WHERE n = 1 OR running <= $15
ORDER BY id DESC`

// statusIs matches the tasks whose status, as they are read, is $2: a
// claimed task is dispatching whatever status it keeps (ClaimTasks). Each
// ListTasks call is planned for its values, so the CASE folds to its one
// branch and a waiting or finished status still reads its range of
// tasks_tenant_status_recent.
const statusIs = `CASE WHEN $2 = 'dispatching'
		THEN status = 'dispatching' OR (status IN ('scheduled', 'retrying') AND claim_token IS NOT NULL)
		ELSE status = $2 AND claim_token IS NULL END`

// A task of tenant $1 carries every label of a JSON object when
// labelsIndexed @> (tenantLabels || object): labelsIndexed is the very
// expression migration 00017's tasks_tenant_labels indexes, the labels with
// the tenant id under the key "" (which no label has), so that GIN reads
// only this tenant's entries. "labels IS NOT NULL" beside it matches the
// index's predicate.
const (
	labelsIndexed = `(jsonb_object(ARRAY['', tenant_id::text]) || labels)`
	tenantLabels  = `jsonb_object(ARRAY['', $1::uuid::text])`
)

// labelsArg is labels as a statement parameter: NULL for none, so that a
// task without labels stores NULL (and stays out of tasks_tenant_labels) and
// a filter without labels sets no condition.
func labelsArg(labels map[string]string) any {
	if len(labels) == 0 {
		return nil
	}
	return labels
}

// urlIndexCharCount is how many characters of a URL tasks_tenant_url
// holds (migration 00013); urlIndexChars spells it for the SQL. Change both
// with a new migration.
const (
	urlIndexCharCount = 256
	urlIndexChars     = "256"
)

// likeEscaper makes text match itself in a LIKE pattern, whose default
// escape character is the backslash.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// likePrefix is the LIKE pattern of the texts that start with the first
// chars characters of prefix (all of it when chars is 0), or nil for nil.
func likePrefix(prefix *string, chars int) *string {
	if prefix == nil {
		return nil
	}
	p, n := *prefix, 0
	for i := range p { // i: where each character starts
		if chars > 0 && n == chars {
			p = p[:i]
			break
		}
		n++
	}
	pattern := likeEscaper.Replace(p) + "%"
	return &pattern
}

// listTasksArgs are the parameters of queryListTasks.
func listTasksArgs(tenantID uuid.UUID, f model.TaskFilter) []any {
	return []any{tenantID, f.Status, f.Before, f.Limit, f.ScheduleID, f.CreatedAfter, f.CreatedBefore,
		likePrefix(f.URLPrefix, 0), likePrefix(f.URLPrefix, urlIndexCharCount), f.IdempotencyKey, labelsArg(f.Labels),
		f.CallbackOf, f.PublishID, f.Topic}
}

// ListTasks returns up to f.Limit tasks, newest first, without their bodies
// (Body nil): ListTasksWithBodies reads them.
//
// Its plan is made for each call's values (an unnamed statement) rather
// than cached: which index serves a page depends on them. A rare URL prefix
// status or label reads its few matches through tasks_tenant_url,
// tasks_tenant_status_recent or tasks_tenant_labels, a common one walks tasks_tenant_recent and
// stops at the page's end; the plan Postgres caches after five calls could
// only do the walk, through every task of the tenant when nothing matches.
func (db *DB) ListTasks(ctx context.Context, tenantID uuid.UUID, f model.TaskFilter) ([]*model.Task, error) {
	args := append([]any{pgx.QueryExecModeCacheDescribe}, listTasksArgs(tenantID, f)...)
	rows, err := db.pool.Query(ctx, queryListTasks, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Task, error) { return scanTask(r) })
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return tasks, nil
}

// ListTasksWithBodies is ListTasks with each task's body, while the bodies
// read stay within budget bytes: the list stops before the first task whose
// body would pass it, though it always holds the page's first task. cut says
// that the budget ended the list before f.Limit tasks, or before the last
// task that matched; the caller continues after the last task returned.
//
// The bodies are measured before any is read, so one call holds at most
// budget bytes of bodies, plus one body when the first task's alone passes it.
func (db *DB) ListTasksWithBodies(ctx context.Context, tenantID uuid.UUID, f model.TaskFilter, budget int64) (tasks []*model.Task, cut bool, err error) {
	args := append([]any{pgx.QueryExecModeCacheDescribe}, listTasksArgs(tenantID, f)...)
	tasks, cut, err = listWithinBudget(ctx, db.pool, queryListTasksWithBodies, append(args, budget), scanTask)
	if err != nil {
		return nil, false, fmt.Errorf("list tasks with bodies: %w", err)
	}
	return tasks, cut, nil
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
// holds the row lock the claim waits for. A task in any other status gives
// ErrConflict (with the task as it is); another tenant's or an unknown id
// gives ErrNotFound.
func (db *DB) RescheduleTask(ctx context.Context, tenantID, id uuid.UUID, at time.Time, notifyDue bool) (*model.Task, error) {
	at = ceilMicro(at)
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

const queryReplayTask = `-- name: ReplayTask
WITH replayed AS (
	UPDATE tasks SET status = 'scheduled', next_attempt_at = $3, attempt_base = attempts, updated_at = now(),
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
// the next one is recorded.
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
	at = ceilMicro(at)
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

// ceilMicro rounds up to the microsecond Postgres keeps, so that a task is
// never due before the instant asked.
func ceilMicro(at time.Time) time.Time {
	if r := at.Truncate(time.Microsecond); !r.Equal(at) {
		return r.Add(time.Microsecond)
	}
	return at
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
UPDATE tasks t SET status = 'scheduled', next_attempt_at = $11, attempt_base = t.attempts, updated_at = now()
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
	at = ceilMicro(at)
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
