package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/jackc/pgx/v5"
)

// DueTask is a waiting task and the instant its next attempt falls due: all a
// dispatcher keeps in memory per timer.
type DueTask struct {
	ID uuid.UUID
	At time.Time
}

func scanDueTask(r pgx.CollectableRow) (DueTask, error) {
	var d DueTask
	err := r.Scan(&d.ID, &d.At)
	return d, err
}

// DueCursor is a position in the due-time order: (at, id).
type DueCursor struct {
	At time.Time
	ID uuid.UUID
}

const queryListDue = `-- name: ListDue
SELECT id, next_attempt_at FROM tasks
WHERE status IN ('scheduled', 'retrying')
	AND partition = ANY($5)
	AND (next_attempt_at, id) > ($1, $2)
	AND next_attempt_at <= $3
ORDER BY next_attempt_at, id
LIMIT $4`

// ListDue pages through the waiting tasks of the given partitions falling due
// after the cursor and no later than until, in due order. It walks the
// tasks_due partial index, one range per partition, so its cost depends on
// how many tasks fall due in the window, not on how many wait further ahead.
func (db *DB) ListDue(ctx context.Context, partitions []int16, after DueCursor, until time.Time, limit int) ([]DueTask, error) {
	rows, err := db.pool.Query(ctx, queryListDue, after.At, after.ID, until, limit, partitions)
	if err != nil {
		return nil, fmt.Errorf("list due tasks: %w", err)
	}
	due, err := pgx.CollectRows(rows, scanDueTask)
	if err != nil {
		return nil, fmt.Errorf("list due tasks: %w", err)
	}
	return due, nil
}

// OFFSET 0 keeps the conditions out of the scan, which is by id alone, for
// the reason given at ClaimTasks: tasks_due would match them too.
const queryWaitingAfter = `-- name: WaitingAfter
SELECT id, next_attempt_at FROM (
	SELECT id, status, next_attempt_at FROM tasks WHERE id = ANY($1::uuid[]) OFFSET 0
) t
WHERE status IN ('scheduled', 'retrying') AND next_attempt_at > $2`

// WaitingAfter returns those of the given tasks that still wait for an
// attempt due after the given time: the tasks a claim left out because they
// were moved later.
func (db *DB) WaitingAfter(ctx context.Context, ids []uuid.UUID, after time.Time) ([]DueTask, error) {
	rows, err := db.pool.Query(ctx, queryWaitingAfter, ids, after)
	if err != nil {
		return nil, fmt.Errorf("read %d unclaimed tasks: %w", len(ids), err)
	}
	due, err := pgx.CollectRows(rows, scanDueTask)
	if err != nil {
		return nil, fmt.Errorf("read %d unclaimed tasks: %w", len(ids), err)
	}
	return due, nil
}

// The CTE locks the rows in id order before the update: two nodes claiming
// overlapping batches listed in different orders would otherwise lock rows in
// different orders and deadlock. It selects by id alone, the conditions are
// checked on what it locked (which no one can change until the claim
// commits), and the update finds each row by its ctid. So the only plan is a
// primary-key probe per id. With the conditions on the scanned table instead,
// the cached generic plan Postgres switches to after five executions could
// walk tasks_due through every due task and filter the ids out of them, a
// cost that grew with the backlog (35 ms a claim with 7,000 tasks due). A row
// changed after the statement's snapshot is skipped, like any claim lost to a
// concurrent writer.
const queryClaimTasks = `-- name: ClaimTasks
WITH due AS (
	SELECT ctid, status, next_attempt_at, partition, tenant_id FROM tasks
	WHERE id = ANY($1::uuid[])
	ORDER BY id
	FOR UPDATE
)
UPDATE tasks t
SET status = 'dispatching', attempts = t.attempts + 1, claim_token = $3, claimed_by = $5,
	lease_expires_at = now() + (t.timeout_ms * interval '1 millisecond') + $4::interval,
	updated_at = now()
FROM due, tenants tn
WHERE t.ctid = due.ctid AND tn.id = due.tenant_id
	AND due.status IN ('scheduled', 'retrying') AND due.next_attempt_at <= $2 AND due.partition = ANY($6)
RETURNING t.id, t.tenant_id, t.status, t.url, t.method, t.headers, t.body, t.run_at, t.next_attempt_at,
	t.timeout_ms, t.max_attempts, t.min_backoff_ms, t.max_backoff_ms, t.attempts, t.last_status_code, t.last_error,
	t.idempotency_key, t.request_hash, t.created_at, t.updated_at, t.attempt_base, tn.signing_secret, t.schedule_id`

// ClaimTasks moves the given tasks from waiting to dispatching for node in one
// statement, provided they still wait, are due at now and belong to one of
// the node's partitions. The status check is
// the compare-and-set that lets only one node own an attempt: a task already
// claimed, canceled or rescheduled later is silently left out of the result.
// The lease covers the attempt's timeout plus leaseMargin; a claim that
// outlives it is handed back by RecoverClaims.
//
// The claim commits without waiting for its WAL to reach disk
// (synchronous_commit off, for this transaction only): it is a lease, not an
// outcome, and waiting for the flush would add a disk sync to the lateness of
// every webhook. Other sessions see the claim at once, so the
// compare-and-set holds between nodes; only a crash of Postgres itself in the
// few milliseconds before the flush can forget a claim, and then the task is
// sent again with the same webhook-id, as after any crash mid-send. Outcomes
// (RecordAttempts) are committed synchronously.
func (db *DB) ClaimTasks(ctx context.Context, node uuid.UUID, partitions []int16, ids []uuid.UUID, now time.Time, leaseMargin time.Duration) (claimed []*model.ClaimedTask, err error) {
	token := uuid.New()
	// One round trip: the transaction, its setting and the claim travel in a
	// single pipeline.
	batch := &pgx.Batch{}
	batch.Queue(`BEGIN`)
	batch.Queue(`SET LOCAL synchronous_commit TO off`)
	batch.Queue(queryClaimTasks, ids, now, token, leaseMargin, node, partitions)
	batch.Queue(`COMMIT`)
	results := db.pool.SendBatch(ctx, batch)
	err = func() error {
		defer results.Close()
		for range 2 {
			if _, err := results.Exec(); err != nil {
				return err
			}
		}
		rows, err := results.Query()
		if err != nil {
			return err
		}
		if claimed, err = pgx.CollectRows(rows, scanClaimedTask(token)); err != nil {
			return err
		}
		_, err = results.Exec()
		return err
	}()
	if err != nil {
		return nil, fmt.Errorf("claim %d tasks: %w", len(ids), err)
	}
	return claimed, nil
}

func scanClaimedTask(token uuid.UUID) pgx.RowToFunc[*model.ClaimedTask] {
	return func(r pgx.CollectableRow) (*model.ClaimedTask, error) {
		var (
			c                          model.ClaimedTask
			timeoutMs                  int32
			minBackoffMs, maxBackoffMs int64
		)
		t := &c.Task
		err := r.Scan(&t.ID, &t.TenantID, &t.Status, &t.URL, &t.Method, &t.Headers, &t.Body, &t.RunAt, &t.NextAttemptAt,
			&timeoutMs, &t.MaxAttempts, &minBackoffMs, &maxBackoffMs, &t.Attempts, &t.LastStatusCode, &t.LastError,
			&t.IdempotencyKey, &t.RequestHash, &t.CreatedAt, &t.UpdatedAt, &t.AttemptBase, &c.SigningSecret, &t.ScheduleID)
		t.Timeout = time.Duration(timeoutMs) * time.Millisecond
		t.MinBackoff = time.Duration(minBackoffMs) * time.Millisecond
		t.MaxBackoff = time.Duration(maxBackoffMs) * time.Millisecond
		c.Attempt = t.Attempts
		c.ClaimToken = token
		return &c, err
	}
}

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
// claim away (ErrClaimLost either way).
const queryRecordAttempts = `-- name: RecordAttempts
WITH input AS (
	SELECT * FROM unnest($1::uuid[], $2::integer[], $3::timestamptz[], $4::integer[], $5::integer[], $6::text[],
		$7::text[], $8::text[], $9::text[], $10::timestamptz[], $11::uuid[])
		AS i(task_id, attempt, started_at, duration_ms, status_code, error, outcome, response_body, status,
			next_attempt_at, claim_token)
), claimed AS MATERIALIZED (
	SELECT ctid, id, status, claim_token, attempts FROM tasks WHERE id = ANY($1::uuid[])
), task AS (
	UPDATE tasks t SET status = i.status, next_attempt_at = i.next_attempt_at, last_status_code = i.status_code,
		last_error = i.error, claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
	FROM claimed c JOIN input i ON i.task_id = c.id
	WHERE t.ctid = c.ctid AND c.status = 'dispatching' AND c.claim_token = i.claim_token AND c.attempts = i.attempt
	RETURNING t.id
), recorded AS (
	INSERT INTO attempts (task_id, attempt, started_at, duration_ms, status_code, error, outcome, response_body)
	SELECT i.task_id, i.attempt, i.started_at, i.duration_ms, i.status_code, i.error, i.outcome, i.response_body
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
	)
	for i, r := range results {
		taskIDs[i], attempts[i], startedAt[i] = r.TaskID, int32(r.Attempt.Attempt), r.StartedAt
		durations[i] = int32(min(r.Duration.Milliseconds(), math.MaxInt32))
		statusCodes[i], errs[i], outcomes[i], bodies[i] = r.StatusCode, r.Error, r.Outcome, r.ResponseBody
		statuses[i], nextAttempts[i], tokens[i] = string(r.Status), r.NextAttemptAt, r.ClaimToken
	}
	rows, err := db.pool.Query(ctx, queryRecordAttempts, taskIDs, attempts, startedAt, durations, statusCodes, errs,
		outcomes, bodies, statuses, nextAttempts, tokens)
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

const queryDeferClaims = `-- name: DeferClaims
UPDATE tasks SET status = CASE WHEN attempts > attempt_base + 1 THEN 'retrying' ELSE 'scheduled' END,
	attempts = attempts - 1, next_attempt_at = greatest(next_attempt_at, $3),
	claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = ANY($1) AND status = 'dispatching' AND claim_token = $2`

// DeferClaims hands claimed tasks back unsent, as if never claimed, to wait
// again until notBefore (or their due time, if later): for claims a node
// shutting down will not send, or that it must not send yet. No attempt is
// spent.
func (db *DB) DeferClaims(ctx context.Context, ids []uuid.UUID, token uuid.UUID, notBefore time.Time) error {
	if _, err := db.pool.Exec(ctx, queryDeferClaims, ids, token, notBefore); err != nil {
		return fmt.Errorf("defer %d claims: %w", len(ids), err)
	}
	return nil
}

// staleClaim selects the dispatching tasks of partitions $2 whose owner is
// gone: the lease ran out, or the claiming node stopped heartbeating. A
// claim without a node (written by an older hookwheel) waits for its lease.
// StaleClaims and RecoverClaims must agree on it, so it is written once.
const staleClaim = `status = 'dispatching' AND partition = ANY($2)
	AND (lease_expires_at < now()
		OR (claimed_by IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = tasks.claimed_by AND n.expires_at > now())))`

const queryRecoverClaims = `-- name: RecoverClaims
WITH stale AS (
	SELECT id, claim_token, attempts FROM tasks
	WHERE ` + staleClaim + `
	ORDER BY lease_expires_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET status = CASE WHEN t.attempts > t.attempt_base + 1 THEN 'retrying' ELSE 'scheduled' END,
	attempts = t.attempts - 1, next_attempt_at = now(), claim_token = NULL, claimed_by = NULL,
	lease_expires_at = NULL, updated_at = now()
FROM stale
WHERE t.id = stale.id
RETURNING t.id, t.next_attempt_at, stale.attempts, stale.claim_token`

const queryStaleClaims = `-- name: StaleClaims
SELECT id, next_attempt_at, attempts, claim_token FROM tasks
WHERE ` + staleClaim + `
ORDER BY lease_expires_at
LIMIT $1`

// StaleClaims lists, without changing them, the claims RecoverClaims would
// hand back now: their fire-once claims in Redis must be freed first, so
// that a recovery cut short between the two cannot leave a task whose every
// new claim meets its dead owner's key.
func (db *DB) StaleClaims(ctx context.Context, partitions []int16, limit int) ([]RecoveredClaim, error) {
	rows, err := db.pool.Query(ctx, queryStaleClaims, limit, partitions)
	if err != nil {
		return nil, fmt.Errorf("list stale claims: %w", err)
	}
	stale, err := pgx.CollectRows(rows, scanRecoveredClaim)
	if err != nil {
		return nil, fmt.Errorf("list stale claims: %w", err)
	}
	return stale, nil
}

func scanRecoveredClaim(r pgx.CollectableRow) (RecoveredClaim, error) {
	var c RecoveredClaim
	err := r.Scan(&c.ID, &c.At, &c.Attempt, &c.Token)
	return c, err
}

// RecoveredClaim is a claim handed back to the queue, and the attempt and
// token it was held under.
type RecoveredClaim struct {
	DueTask
	Attempt int
	Token   uuid.UUID
}

// RecoverClaims returns to the queue the dispatching tasks of the given
// partitions whose owner is gone: its node stopped heartbeating (it died), or
// the attempt outlived its lease (it hung). The attempt number is given back,
// so the re-send carries the same attempt number and the same webhook-id and
// Idempotency-Key: a receiver that saw the first send can drop the second.
func (db *DB) RecoverClaims(ctx context.Context, partitions []int16, limit int) ([]RecoveredClaim, error) {
	rows, err := db.pool.Query(ctx, queryRecoverClaims, limit, partitions)
	if err != nil {
		return nil, fmt.Errorf("recover claims: %w", err)
	}
	recovered, err := pgx.CollectRows(rows, scanRecoveredClaim)
	if err != nil {
		return nil, fmt.Errorf("recover claims: %w", err)
	}
	return recovered, nil
}

// ListenDue calls fn for each task announced on DueNotifyChannel until ctx is
// done or the connection fails. It calls ready once listening, so the caller
// can rescan what it may have missed before.
func (db *DB) ListenDue(ctx context.Context, ready func(), fn func(DueTask)) error {
	pooled, err := db.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire listen connection: %w", err)
	}
	// A LISTENing connection must not go back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+DueNotifyChannel); err != nil {
		return fmt.Errorf("listen %s: %w", DueNotifyChannel, err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("wait for notification: %w", err)
		}
		d, err := parseDueNotification(n.Payload)
		if err != nil {
			db.logger.Warn("ignoring malformed due notification", "payload", n.Payload, "err", err)
			continue
		}
		fn(d)
	}
}

func parseDueNotification(payload string) (DueTask, error) {
	idText, atText, ok := strings.Cut(payload, " ")
	if !ok {
		return DueTask{}, errors.New("want \"<id> <unix micros>\"")
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return DueTask{}, fmt.Errorf("parse task id: %w", err)
	}
	micros, err := strconv.ParseInt(atText, 10, 64)
	if err != nil {
		return DueTask{}, fmt.Errorf("parse due time: %w", err)
	}
	return DueTask{ID: id, At: time.UnixMicro(micros)}, nil
}
