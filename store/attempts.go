package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Like ClaimTasks, it reads the rows by id alone, checks the claim on what it
// read and updates by ctid: with the status predicate on the scanned table,
// the generic plan read every dispatching task through an index to join
// the batch (MATERIALIZED keeps the predicate out of the CTE's scan). Like
// ClaimTasks, it locks the rows in id order first: updated in whatever
// order the plan meets them (the table's physical order, in a hash join),
// a batch could hold a row a claim waits for while waiting for a row that
// claim holds, and the two deadlocked. The lock returns a row's latest
// version, whose claim is then checked (model.ErrClaimLost if the row
// changed hands meanwhile). The response headers come as text
// (EncodeResponseHeaders' JSON) and are cast row by row: a text[] parameter
// is sent alike in every pgx query mode, the simple protocol a pooler may
// ask for included.
//
// The statement comes in two forms, built from the same parts: the plain one
// for a batch in which no outcome makes a callback task, which is nearly
// every batch, and one with five more arrays and a CTE that inserts the
// callback tasks of the outcomes it records. So a callback task exists
// exactly when the outcome that made it was recorded, in the same commit,
// and a batch without callbacks pays nothing for them. Both meter what
// they record (recordUsage).
const (
	recordInputArrays = `$1::uuid[], $2::integer[], $3::timestamptz[], $4::integer[], $5::integer[], $6::text[],
		$7::text[], $8::text[], $9::text[], $10::timestamptz[], $11::uuid[], $12::text[], $13::bigint[], $14::bigint[],
		$16::boolean[]`
	recordInputColumns = `task_id, attempt, started_at, duration_ms, status_code, error, outcome, response_body, status,
			next_attempt_at, claim_token, response_headers, bytes_sent, bytes_received, unattempted`
	recordClaimed = `claimed AS MATERIALIZED (
	SELECT ctid, id, claim_token, attempts FROM tasks WHERE id = ANY($1::uuid[])
	ORDER BY id
	FOR NO KEY UPDATE
)`
	recordOutcome = `status = i.status, next_attempt_at = i.next_attempt_at,
		last_status_code = CASE WHEN i.unattempted THEN t.last_status_code ELSE i.status_code END,
		attempts = CASE WHEN i.unattempted THEN t.attempts - 1 ELSE t.attempts END,
		last_error = i.error, claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()`
	recordClaimHeld   = `t.ctid = c.ctid AND c.claim_token = i.claim_token AND c.attempts = i.attempt`
	recordAttemptRows = `recorded AS (
	INSERT INTO attempts (task_id, attempt, started_at, duration_ms, status_code, error, outcome, response_body,
		response_headers)
	SELECT i.task_id, i.attempt, i.started_at, i.duration_ms, i.status_code, i.error, i.outcome, i.response_body,
		i.response_headers::jsonb
	FROM input i JOIN task ON task.id = i.task_id
	WHERE NOT i.unattempted
	ON CONFLICT (task_id, attempt) DO NOTHING
)`
	// recordUsage adds the attempts the statement records (those of the
	// task CTE, whose claims held) to their tenants' usage of the day, in
	// the recorder shard $15 (usage.go): one row per tenant, upserted in
	// tenant order. It commits with the attempts, so a count is made
	// exactly when its attempt is recorded, and a claim recorded twice
	// (a retried batch, a journal recovery) or no longer held counts nothing.
	recordUsage = `metered AS (
	INSERT INTO usage_days AS u (tenant_id, day, shard, deliveries, attempts, failed_attempts, bytes_sent,
		bytes_received)
	SELECT task.tenant_id, ` + usageDay + `, $15::smallint, count(*) FILTER (WHERE i.status = 'delivered'), count(*),
		count(*) FILTER (WHERE i.status <> 'delivered'), sum(i.bytes_sent), sum(i.bytes_received)
	FROM input i JOIN task ON task.id = i.task_id
	WHERE NOT i.unattempted
	GROUP BY task.tenant_id
	ORDER BY task.tenant_id
	ON CONFLICT (tenant_id, day, shard) DO UPDATE SET deliveries = u.deliveries + excluded.deliveries,
		attempts = u.attempts + excluded.attempts, failed_attempts = u.failed_attempts + excluded.failed_attempts,
		bytes_sent = u.bytes_sent + excluded.bytes_sent, bytes_received = u.bytes_received + excluded.bytes_received
)`
)

const queryRecordAttempts = `-- name: RecordAttempts
WITH input AS (
	SELECT * FROM unnest(` + recordInputArrays + `)
		AS i(` + recordInputColumns + `)
), ` + recordClaimed + `, task AS (
	UPDATE tasks t SET ` + recordOutcome + `
	FROM claimed c JOIN input i ON i.task_id = c.id
	WHERE ` + recordClaimHeld + `
	RETURNING t.id, t.tenant_id
), ` + recordAttemptRows + `, ` + recordUsage + `
SELECT id FROM task`

// The callback task takes the source's tenant, timeout and retry policy from
// the row the update returns, so they are the source's as recorded. It is
// due at once: pg_notify tells every dispatcher on commit, as InsertTask's
// statement does for a task due soon. The final SELECT reads the
// callbacks CTE so that its notifications are made whatever the planner
// does with an unread CTE; its rows carry the source's id in the second
// column.
const queryRecordAttemptsWithCallbacks = `-- name: RecordAttemptsWithCallbacks
WITH input AS (
	SELECT * FROM unnest(` + recordInputArrays + `,
		$17::uuid[], $18::text[], $19::text[], $20::bytea[], $21::timestamptz[])
		AS i(` + recordInputColumns + `,
			callback_id, callback_url, callback_headers, callback_body, callback_at)
), ` + recordClaimed + `, task AS (
	UPDATE tasks t SET ` + recordOutcome + `,
		callback_task_id = coalesce(i.callback_id, t.callback_task_id)
	FROM claimed c JOIN input i ON i.task_id = c.id
	WHERE ` + recordClaimHeld + `
	RETURNING t.id, t.tenant_id, t.timeout_ms, t.max_attempts, t.min_backoff_ms, t.max_backoff_ms
), ` + recordAttemptRows + `, ` + recordUsage + `, callbacks AS (
	INSERT INTO tasks (id, tenant_id, status, url, method, headers, body, run_at, next_attempt_at,
		timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, callback_of)
	SELECT i.callback_id, task.tenant_id, 'scheduled', i.callback_url, 'POST', i.callback_headers::jsonb,
		i.callback_body, i.callback_at, i.callback_at,
		task.timeout_ms, task.max_attempts, task.min_backoff_ms, task.max_backoff_ms, task.id
	FROM input i JOIN task ON task.id = i.task_id
	WHERE i.callback_id IS NOT NULL
	RETURNING id, callback_of, pg_notify('` + DueNotifyChannel + `',
		id::text || ' ' || (extract(epoch FROM next_attempt_at) * 1000000)::bigint::text) AS notified
)
SELECT id, NULL::uuid FROM task
UNION ALL
SELECT id, callback_of FROM callbacks`

// RecordAttempts stores attempts and moves their tasks on, all in one
// statement and one commit, each only while its claim still holds, so a
// sender whose lease expired cannot overwrite the outcome of the node that
// took over. The callback task of a result that carries one is inserted by
// the same statement, and only if its attempt is recorded; the source's
// callback_task_id names it. It returns, in input order, nil for each
// attempt recorded and model.ErrClaimLost for each whose claim was gone; err is
// for the statement as a whole, in which case nothing was recorded. The
// attempts recorded are metered in the same statement (recordUsage): the
// attempts, deliveries, failures and bytes of each tenant's day. A result
// marked Unattempted (a claim whose task expired before it was sent) ends
// its task the same way, fenced by the same claim, with neither an attempt
// row nor usage, and gives the claim's attempt number back.
func (db *DB) RecordAttempts(ctx context.Context, results []model.AttemptResult) ([]error, error) {
	n := len(results)
	var (
		taskIDs      = make([]uuid.UUID, n)
		attempts     = make([]int32, n)
		startedAt    = make([]time.Time, n)
		durations    = make([]int32, n)
		statusCodes  = make([]*int, n)
		errs         = make([]*string, n)
		outcomes     = make([]string, n)
		bodies       = make([]*string, n)
		statuses     = make([]string, n)
		nextAttempts = make([]*time.Time, n)
		tokens       = make([]uuid.UUID, n)
		headers      = make([]*string, n)
		sent         = make([]int64, n)
		received     = make([]int64, n)
		unattempted  = make([]bool, n)
		callbacks    = 0
	)
	for i, r := range results {
		taskIDs[i], attempts[i], startedAt[i] = r.TaskID, int32(r.Attempt.Attempt), r.StartedAt
		durations[i] = int32(min(r.Duration.Milliseconds(), math.MaxInt32))
		statusCodes[i], errs[i], outcomes[i], bodies[i] = r.StatusCode, r.Error, r.Outcome, r.ResponseBody
		statuses[i], nextAttempts[i], tokens[i] = string(r.Status), r.NextAttemptAt, r.ClaimToken
		headers[i], sent[i], received[i] = r.ResponseHeaders, r.BytesSent, r.BytesReceived
		unattempted[i] = r.Unattempted
		if r.Callback != nil {
			callbacks++
		}
	}
	args := []any{taskIDs, attempts, startedAt, durations, statusCodes, errs, outcomes, bodies, statuses,
		nextAttempts, tokens, headers, sent, received, recordShard(), unattempted}
	query := queryRecordAttempts
	if callbacks > 0 {
		query = queryRecordAttemptsWithCallbacks
		cb, err := callbackArgs(results)
		if err != nil {
			return nil, fmt.Errorf("record %d attempts: %w", n, err)
		}
		args = append(args, cb...)
	}
	rows, err := db.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("record %d attempts: %w", n, err)
	}
	// The recorded tasks' ids; with callbacks, the callback tasks' rows
	// follow, naming their source, and need nothing more.
	done := make(map[uuid.UUID]bool, n)
	var (
		id     uuid.UUID
		source *uuid.UUID
	)
	scan := []any{&id}
	if callbacks > 0 {
		scan = append(scan, &source)
	}
	_, err = pgx.ForEachRow(rows, scan, func() error {
		if source == nil {
			done[id] = true
		}
		source = nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record %d attempts: %w", n, err)
	}
	out := make([]error, n)
	for i, r := range results {
		if !done[r.TaskID] {
			out[i] = fmt.Errorf("record attempt %d of task %s: %w", r.Attempt.Attempt, r.TaskID, model.ErrClaimLost)
		}
	}
	return out, nil
}

// callbackArgs are the arrays of queryRecordAttemptsWithCallbacks that
// describe the callback tasks, one element per result: NULL id for a result
// without one.
func callbackArgs(results []model.AttemptResult) ([]any, error) {
	n := len(results)
	var (
		ids     = make([]*uuid.UUID, n)
		urls    = make([]*string, n)
		headers = make([]*string, n)
		bodies  = make([][]byte, n)
		ats     = make([]*time.Time, n)
	)
	for i, r := range results {
		cb := r.Callback
		if cb == nil {
			continue
		}
		h, err := json.Marshal(cb.Headers)
		if err != nil {
			return nil, fmt.Errorf("encode headers of callback task %s: %w", cb.ID, err)
		}
		text := string(h)
		body := cb.Body
		if body == nil {
			body = []byte{}
		}
		ids[i], urls[i], headers[i], bodies[i], ats[i] = &cb.ID, &cb.URL, &text, body, &cb.RunAt
	}
	return []any{ids, urls, headers, bodies, ats}, nil
}

// RecordAttempt records a single attempt; see RecordAttempts.
func (db *DB) RecordAttempt(ctx context.Context, r model.AttemptResult) error {
	errs, err := db.RecordAttempts(ctx, []model.AttemptResult{r})
	if err != nil {
		return err
	}
	return errs[0]
}

const queryListAttempts = `-- name: ListAttempts
SELECT a.task_id, a.attempt, a.started_at, a.duration_ms, a.status_code, a.error, a.outcome, a.response_body,
	a.response_headers::text
FROM attempts a JOIN tasks t ON t.id = a.task_id
WHERE t.tenant_id = $1 AND a.task_id = $2 AND a.attempt > $3
ORDER BY a.attempt
LIMIT $4`

// ListAttempts returns at most limit recorded attempts of a tenant's task,
// in order, those numbered after after (0: from the first). It is bounded
// because replays add attempts to a task without end.
func (db *DB) ListAttempts(ctx context.Context, tenantID, taskID uuid.UUID, after, limit int) ([]model.Attempt, error) {
	if _, err := db.GetTask(ctx, tenantID, taskID); err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, queryListAttempts, tenantID, taskID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list attempts of task %s: %w", taskID, err)
	}
	attempts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Attempt, error) {
		var (
			a          model.Attempt
			durationMs int32
		)
		err := r.Scan(&a.TaskID, &a.Attempt, &a.StartedAt, &durationMs, &a.StatusCode, &a.Error, &a.Outcome, &a.ResponseBody,
			&a.ResponseHeaders)
		a.Duration = time.Duration(durationMs) * time.Millisecond
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("list attempts of task %s: %w", taskID, err)
	}
	return attempts, nil
}
