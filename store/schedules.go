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

const scheduleColumns = scheduleColumnsHead + `body, ` + scheduleColumnsTail

// scheduleColumnsWithoutBody are scheduleColumns with a NULL in the body's
// place: what a list reads when its caller did not ask for bodies.
const scheduleColumnsWithoutBody = scheduleColumnsHead + `NULL::bytea, ` + scheduleColumnsTail

const (
	scheduleColumnsHead = `id, tenant_id, cron, timezone, paused, url, method, headers, `
	scheduleColumnsTail = `timeout_ms, max_attempts,
	min_backoff_ms, max_backoff_ms, next_run_at, last_run_at, created_at, updated_at, skipped_occurrences, last_skipped_at,
	labels, callback, failure_callback, ordering_key, flow_key`
)

// scanSchedule reads the scheduleColumns of row into a new schedule; columns
// the row has after them go to extra, in order.
func scanSchedule(row pgx.Row, extra ...any) (*model.Schedule, error) {
	var (
		s                          model.Schedule
		timeoutMs                  int32
		minBackoffMs, maxBackoffMs int64
	)
	err := row.Scan(append([]any{&s.ID, &s.TenantID, &s.Cron, &s.Timezone, &s.Paused, &s.URL, &s.Method, &s.Headers, &s.Body,
		&timeoutMs, &s.MaxAttempts, &minBackoffMs, &maxBackoffMs, &s.NextRunAt, &s.LastRunAt, &s.CreatedAt, &s.UpdatedAt,
		&s.SkippedOccurrences, &s.LastSkippedAt, &s.Labels, &s.Callback, &s.FailureCallback, &s.OrderingKey, &s.FlowKey}, extra...)...)
	if err != nil {
		return nil, err
	}
	s.Timeout = time.Duration(timeoutMs) * time.Millisecond
	s.MinBackoff = time.Duration(minBackoffMs) * time.Millisecond
	s.MaxBackoff = time.Duration(maxBackoffMs) * time.Millisecond
	if s.Headers == nil {
		s.Headers = map[string]string{}
	}
	return &s, nil
}

func collectSchedules(rows pgx.Rows) ([]*model.Schedule, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Schedule, error) { return scanSchedule(r) })
}

// roundUpToMicroPtr is model.RoundUpToMicro for an instant that may be absent.
func roundUpToMicroPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	r := model.RoundUpToMicro(*t)
	return &r
}

const queryInsertSchedule = `-- name: InsertSchedule
INSERT INTO schedules (id, tenant_id, cron, timezone, paused, url, method, headers, body, timeout_ms, max_attempts,
	min_backoff_ms, max_backoff_ms, next_run_at, created_at, updated_at, labels, callback, failure_callback, ordering_key,
	flow_key, trace_parent, trace_state)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15, $16, $17, $18, $19, $20, $21, $22)
RETURNING created_at, updated_at`

// InsertSchedule stores a new schedule. s.CreatedAt is stored as given (the
// API's clock, the anchor it computed NextRunAt from); s.NextRunAt must be
// the first occurrence, or nil for a schedule created paused. audit, when
// given, is recorded in the same transaction.
func (db *DB) InsertSchedule(ctx context.Context, s *model.Schedule, audit *model.AuditEntry) error {
	if s.Body == nil {
		s.Body = []byte{}
	}
	if s.Headers == nil {
		s.Headers = map[string]string{}
	}
	s.NextRunAt = roundUpToMicroPtr(s.NextRunAt)
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, queryInsertSchedule,
			s.ID, s.TenantID, s.Cron, s.Timezone, s.Paused, s.URL, s.Method, s.Headers, s.Body,
			s.Timeout.Milliseconds(), s.MaxAttempts, s.MinBackoff.Milliseconds(), s.MaxBackoff.Milliseconds(),
			s.NextRunAt, s.CreatedAt, labelsArg(s.Labels), s.Callback, s.FailureCallback, s.OrderingKey, s.FlowKey,
			nullIfEmpty(s.TraceParent), nullIfEmpty(s.TraceState),
		).Scan(&s.CreatedAt, &s.UpdatedAt)
		if err != nil {
			return err
		}
		return insertAuditOf(ctx, tx, audit)
	})
	if err != nil {
		return fmt.Errorf("insert schedule %s: %w", s.ID, err)
	}
	return nil
}

const queryGetSchedule = `-- name: GetSchedule
SELECT ` + scheduleColumns + ` FROM schedules WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL`

// GetSchedule reads one of a tenant's schedules. A deleted schedule, another
// tenant's or an unknown id is ErrNotFound.
func (db *DB) GetSchedule(ctx context.Context, tenantID, id uuid.UUID) (*model.Schedule, error) {
	s, err := scanSchedule(db.pool.QueryRow(ctx, queryGetSchedule, tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", id, err)
	}
	return s, nil
}

const queryListSchedules = `-- name: ListSchedules
SELECT ` + scheduleColumnsWithoutBody + ` FROM schedules
WHERE tenant_id = $1 AND deleted_at IS NULL AND ($2::uuid IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3`

// queryListSchedulesWithBodies is ListSchedules with the bodies, within a
// budget of $4 bytes, read in two steps as listbodies.go tells.
const queryListSchedulesWithBodies = `-- name: ListSchedulesWithBodies
WITH page AS (
	SELECT ` + pageBodyBytes + ` FROM schedules
	WHERE tenant_id = $1 AND deleted_at IS NULL AND ($2::uuid IS NULL OR id < $2)
	ORDER BY id DESC
	LIMIT $3
), ` + fittingPage + `
SELECT ` + scheduleColumns + `, page_rows FROM fitting JOIN schedules ON schedules.tenant_id = $1 AND schedules.id = fitting.page_id
WHERE n = 1 OR running <= $4
ORDER BY id DESC`

// ListSchedules returns up to f.Limit of the tenant's schedules that are not
// deleted, newest first (ids are UUIDv7), without their bodies (Body nil).
func (db *DB) ListSchedules(ctx context.Context, tenantID uuid.UUID, f model.ScheduleFilter) ([]*model.Schedule, error) {
	rows, err := db.pool.Query(ctx, queryListSchedules, tenantID, f.Before, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	schedules, err := collectSchedules(rows)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return schedules, nil
}

// ListSchedulesWithBodies is ListSchedules with each schedule's body, while
// the bodies read stay within budget bytes, as ListTasksWithBodies: cut says
// that the budget ended the list early; the caller continues after the last
// schedule returned.
func (db *DB) ListSchedulesWithBodies(ctx context.Context, tenantID uuid.UUID, f model.ScheduleFilter, budget int64) (schedules []*model.Schedule, cut bool, err error) {
	schedules, cut, err = listWithinBudget(ctx, db.pool, queryListSchedulesWithBodies,
		[]any{tenantID, f.Before, f.Limit, budget}, scanSchedule)
	if err != nil {
		return nil, false, fmt.Errorf("list schedules with bodies: %w", err)
	}
	return schedules, cut, nil
}

const queryLockSchedule = `-- name: LockSchedule
SELECT ` + scheduleColumns + ` FROM schedules WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL FOR UPDATE`

const queryStopSchedule = `-- name: StopSchedule
UPDATE schedules SET paused = paused OR $2, next_run_at = NULL,
	deleted_at = CASE WHEN $3::boolean THEN now() ELSE deleted_at END, updated_at = now()
WHERE id = $1
RETURNING ` + scheduleColumns

// Its own statement, after the one that locked the schedule: under READ
// COMMITTED it then sees every occurrence a materialiser committed while the
// lock was awaited (one statement would read with a snapshot from before).
const queryCancelOccurrences = `-- name: CancelOccurrences
UPDATE tasks SET status = 'canceled', next_attempt_at = NULL, updated_at = now()
WHERE schedule_id = $1 AND status IN ('scheduled', 'retrying') AND claim_token IS NULL
RETURNING id`

// PauseSchedule stops a schedule: no occurrence is materialised until it is
// resumed (NextRunAt becomes nil), and its occurrences that wait for an
// attempt (scheduled or retrying) are canceled; their ids are returned. An
// occurrence already being sent is left to finish. Pausing a paused schedule
// changes nothing (and records no audit). Another tenant's, a deleted or an
// unknown id is ErrNotFound. audit, when given, is recorded in the same
// transaction as the change.
func (db *DB) PauseSchedule(ctx context.Context, tenantID, id uuid.UUID, audit *model.AuditEntry) (*model.Schedule, []uuid.UUID, error) {
	s, canceled, err := db.stopSchedule(ctx, tenantID, id, false, audit)
	if err != nil {
		return nil, nil, fmt.Errorf("pause schedule %s: %w", id, err)
	}
	return s, canceled, nil
}

// DeleteSchedule deletes a schedule (it is kept, marked deleted, so that its
// tasks keep their schedule_id) and cancels its waiting occurrences, whose
// ids are returned. It returns the schedule as it was before. Another
// tenant's, a deleted or an unknown id is ErrNotFound. audit, when given,
// is recorded in the same transaction.
func (db *DB) DeleteSchedule(ctx context.Context, tenantID, id uuid.UUID, audit *model.AuditEntry) (*model.Schedule, []uuid.UUID, error) {
	s, canceled, err := db.stopSchedule(ctx, tenantID, id, true, audit)
	if err != nil {
		return nil, nil, fmt.Errorf("delete schedule %s: %w", id, err)
	}
	return s, canceled, nil
}

// stopSchedule pauses (or deletes) a schedule and cancels its waiting
// occurrences in one transaction. The row lock taken first waits for a
// materialiser working on the schedule to commit, so none of the occurrences
// it adds escapes the cancel; after the commit, the materialiser skips the
// schedule.
func (db *DB) stopSchedule(ctx context.Context, tenantID, id uuid.UUID, del bool, audit *model.AuditEntry) (out *model.Schedule, canceled []uuid.UUID, err error) {
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		before, err := scanSchedule(tx.QueryRow(ctx, queryLockSchedule, tenantID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return model.ErrNotFound
		}
		if err != nil {
			return err
		}
		if before.Paused && !del {
			out = before
			return nil
		}
		after, err := scanSchedule(tx.QueryRow(ctx, queryStopSchedule, id, !del, del))
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, queryCancelOccurrences, id)
		if err != nil {
			return err
		}
		canceled, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		out = after
		if del {
			out = before
		}
		return insertAuditOf(ctx, tx, audit)
	})
	if err != nil {
		return nil, nil, err
	}
	return out, canceled, nil
}

const queryResumeSchedule = `-- name: ResumeSchedule
UPDATE schedules SET paused = false, next_run_at = $2, updated_at = now()
WHERE id = $1
RETURNING ` + scheduleColumns

// Occurrences from next on that the pause canceled before they were ever
// attempted are forgotten, so that the unique (schedule_id, occurrence_at)
// lets them be materialised again.
const queryForgetCanceledOccurrences = `-- name: ForgetCanceledOccurrences
DELETE FROM tasks
WHERE schedule_id = $1 AND status = 'canceled' AND attempts = 0 AND occurrence_at >= $2`

// ResumeSchedule restarts a paused schedule from next(s), which returns the
// schedule's first occurrence after now (nil if it has none left): the
// occurrences it missed while paused are not made up for. Canceled,
// never-attempted occurrences from then on (materialised ahead of time
// before the pause) are removed so that they are materialised afresh.
// Resuming a schedule that is not paused changes nothing (and records no
// audit). Another tenant's, a deleted or an unknown id is ErrNotFound. audit,
// when given, is recorded in the same transaction as the change.
func (db *DB) ResumeSchedule(ctx context.Context, tenantID, id uuid.UUID, next func(*model.Schedule) (*time.Time, error), audit *model.AuditEntry) (*model.Schedule, error) {
	var out *model.Schedule
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		s, err := scanSchedule(tx.QueryRow(ctx, queryLockSchedule, tenantID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return model.ErrNotFound
		}
		if err != nil {
			return err
		}
		if !s.Paused {
			out = s
			return nil
		}
		at, err := next(s)
		if err != nil {
			return err
		}
		at = roundUpToMicroPtr(at)
		if out, err = scanSchedule(tx.QueryRow(ctx, queryResumeSchedule, id, at)); err != nil {
			return err
		}
		if at != nil {
			if _, err := tx.Exec(ctx, queryForgetCanceledOccurrences, id, *at); err != nil {
				return err
			}
		}
		return insertAuditOf(ctx, tx, audit)
	})
	if err != nil {
		return nil, fmt.Errorf("resume schedule %s: %w", id, err)
	}
	return out, nil
}

const queryUpdateSchedule = `-- name: UpdateSchedule
UPDATE schedules SET cron = $2, timezone = $3, paused = $4, url = $5, method = $6, headers = $7, body = $8,
	timeout_ms = $9, max_attempts = $10, min_backoff_ms = $11, max_backoff_ms = $12, next_run_at = $13,
	labels = $14, callback = $15, failure_callback = $16, ordering_key = $17, flow_key = $18, updated_at = now()
WHERE id = $1
RETURNING ` + scheduleColumns

// UpdateSchedule changes a schedule in place under its row lock: change
// gets the schedule as it is now and returns it as it is to be (cron,
// timezone, paused, the request, retry policy, labels, callbacks, ordering key and NextRunAt are written; the
// other fields are the materialiser's), or the very schedule it was given to
// write nothing. change runs inside the transaction, holding the lock, so
// that it decides on what a materialiser committed last and no materialiser
// works on the schedule until the commit; it must be quick and must not
// touch the database. Its error is returned wrapped, for errors.As.
//
// A change that pauses the schedule cancels its waiting occurrences, as
// PauseSchedule does, and returns their ids; one that resumes it forgets the
// occurrences that pause canceled from the new NextRunAt on, as
// ResumeSchedule does. Other occurrences already materialised are left as
// they are: they keep their time and the request they were made with.
// Another tenant's, a deleted or an unknown id is ErrNotFound.
//
// audit, when not nil, gives the entry recording a change from the
// schedule as written, in the same transaction; a change that writes
// nothing records nothing.
func (db *DB) UpdateSchedule(ctx context.Context, tenantID, id uuid.UUID, change func(*model.Schedule) (*model.Schedule, error),
	audit func(*model.Schedule) *model.AuditEntry) (out *model.Schedule, canceled []uuid.UUID, err error) {
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		before, err := scanSchedule(tx.QueryRow(ctx, queryLockSchedule, tenantID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return model.ErrNotFound
		}
		if err != nil {
			return err
		}
		// Read before change runs, in case it edits the schedule it is given.
		wasPaused := before.Paused
		after, err := change(before)
		if err != nil {
			return err
		}
		if after == before {
			out = before
			return nil
		}
		if after.Body == nil {
			after.Body = []byte{}
		}
		if after.Headers == nil {
			after.Headers = map[string]string{}
		}
		next := roundUpToMicroPtr(after.NextRunAt)
		out, err = scanSchedule(tx.QueryRow(ctx, queryUpdateSchedule, id,
			after.Cron, after.Timezone, after.Paused, after.URL, after.Method, after.Headers, after.Body,
			after.Timeout.Milliseconds(), after.MaxAttempts, after.MinBackoff.Milliseconds(), after.MaxBackoff.Milliseconds(),
			next, labelsArg(after.Labels), after.Callback, after.FailureCallback, after.OrderingKey, after.FlowKey))
		if err != nil {
			return err
		}
		switch {
		case after.Paused && !wasPaused:
			rows, err := tx.Query(ctx, queryCancelOccurrences, id)
			if err != nil {
				return err
			}
			if canceled, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID]); err != nil {
				return err
			}
		case !after.Paused && wasPaused && next != nil:
			if _, err := tx.Exec(ctx, queryForgetCanceledOccurrences, id, *next); err != nil {
				return err
			}
		}
		return recordAudit(ctx, tx, audit, out)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("update schedule %s: %w", id, err)
	}
	return out, canceled, nil
}
