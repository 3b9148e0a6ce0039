package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// AttemptResult is what became of one claimed attempt.
type AttemptResult struct {
	model.Attempt
	ClaimToken uuid.UUID
	// Status is the task's status after the attempt: delivered, retrying or dead.
	Status model.TaskStatus
	// NextAttemptAt is set when Status is retrying.
	NextAttemptAt *time.Time
}

// Like ClaimTasks, it reads the rows by id alone, checks the claim on what it
// read and updates by ctid: with the status predicate on the scanned table,
// the generic plan read every dispatching task through tasks_leased to join
// the batch (MATERIALIZED keeps the predicate out of the CTE's scan, which a
// lock did in ClaimTasks). It takes no lock first: a row changed since the statement's
// snapshot has a new ctid, so the update's recheck drops it, and the only
// writers of a claimed row besides its owner are the ones that took the
// claim away (ErrClaimLost either way). The response headers come as text
// (EncodeResponseHeaders' JSON) and are cast row by row: a text[] parameter
// is sent alike in every pgx query mode, the simple protocol a pooler may
// ask for included.
const queryRecordAttempts = `-- name: RecordAttempts
WITH input AS (
	SELECT * FROM unnest($1::uuid[], $2::integer[], $3::timestamptz[], $4::integer[], $5::integer[], $6::text[],
		$7::text[], $8::text[], $9::text[], $10::timestamptz[], $11::uuid[], $12::text[])
		AS i(task_id, attempt, started_at, duration_ms, status_code, error, outcome, response_body, status,
			next_attempt_at, claim_token, response_headers)
), claimed AS MATERIALIZED (
	SELECT ctid, id, status, claim_token, attempts FROM tasks WHERE id = ANY($1::uuid[])
), task AS (
	UPDATE tasks t SET status = i.status, next_attempt_at = i.next_attempt_at, last_status_code = i.status_code,
		last_error = i.error, claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
	FROM claimed c JOIN input i ON i.task_id = c.id
	WHERE t.ctid = c.ctid AND c.status = 'dispatching' AND c.claim_token = i.claim_token AND c.attempts = i.attempt
	RETURNING t.id
), recorded AS (
	INSERT INTO attempts (task_id, attempt, started_at, duration_ms, status_code, error, outcome, response_body,
		response_headers)
	SELECT i.task_id, i.attempt, i.started_at, i.duration_ms, i.status_code, i.error, i.outcome, i.response_body,
		i.response_headers::jsonb
	FROM input i JOIN task ON task.id = i.task_id
	ON CONFLICT (task_id, attempt) DO NOTHING
)
SELECT id FROM task`

// ErrClaimLost is returned when an attempt is recorded by a sender that no
// longer owns the task (its lease expired and another node took over).
var ErrClaimLost = errors.New("claim lost")

// RecordAttempts stores attempts and moves their tasks on, all in one
// statement and one commit, each only while its claim still holds, so a
// sender whose lease expired cannot overwrite the outcome of the node that
// took over. It returns, in input order, nil for each attempt recorded and
// ErrClaimLost for each whose claim was gone; err is for the statement as a
// whole, in which case nothing was recorded.
func (db *DB) RecordAttempts(ctx context.Context, results []AttemptResult) ([]error, error) {
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
	)
	for i, r := range results {
		taskIDs[i], attempts[i], startedAt[i] = r.TaskID, int32(r.Attempt.Attempt), r.StartedAt
		durations[i] = int32(min(r.Duration.Milliseconds(), math.MaxInt32))
		statusCodes[i], errs[i], outcomes[i], bodies[i] = r.StatusCode, r.Error, r.Outcome, r.ResponseBody
		statuses[i], nextAttempts[i], tokens[i] = string(r.Status), r.NextAttemptAt, r.ClaimToken
		headers[i] = r.ResponseHeaders
	}
	rows, err := db.pool.Query(ctx, queryRecordAttempts, taskIDs, attempts, startedAt, durations, statusCodes, errs,
		outcomes, bodies, statuses, nextAttempts, tokens, headers)
	if err != nil {
		return nil, fmt.Errorf("record %d attempts: %w", n, err)
	}
	recorded, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("record %d attempts: %w", n, err)
	}
	done := make(map[uuid.UUID]bool, len(recorded))
	for _, id := range recorded {
		done[id] = true
	}
	out := make([]error, n)
	for i, r := range results {
		if !done[r.TaskID] {
			out[i] = fmt.Errorf("record attempt %d of task %s: %w", r.Attempt.Attempt, r.TaskID, ErrClaimLost)
		}
	}
	return out, nil
}

// RecordAttempt records a single attempt; see RecordAttempts.
func (db *DB) RecordAttempt(ctx context.Context, r AttemptResult) error {
	errs, err := db.RecordAttempts(ctx, []AttemptResult{r})
	if err != nil {
		return err
	}
	return errs[0]
}

const queryListAttempts = `-- name: ListAttempts
SELECT a.task_id, a.attempt, a.started_at, a.duration_ms, a.status_code, a.error, a.outcome, a.response_body,
	a.response_headers::text
FROM attempts a JOIN tasks t ON t.id = a.task_id
WHERE t.tenant_id = $1 AND a.task_id = $2
ORDER BY a.attempt`

// ListAttempts returns every recorded attempt of a tenant's task, in order.
func (db *DB) ListAttempts(ctx context.Context, tenantID, taskID uuid.UUID) ([]model.Attempt, error) {
	if _, err := db.GetTask(ctx, tenantID, taskID); err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, queryListAttempts, tenantID, taskID)
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
