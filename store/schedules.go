package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/jackc/pgx/v5"
)

const scheduleColumns = `id, tenant_id, cron, timezone, paused, url, method, headers, body, timeout_ms, max_attempts,
	min_backoff_ms, max_backoff_ms, next_run_at, last_run_at, created_at, updated_at`

func scanSchedule(row pgx.Row) (*model.Schedule, error) {
	var (
		s                          model.Schedule
		timeoutMs                  int32
		minBackoffMs, maxBackoffMs int64
	)
	err := row.Scan(&s.ID, &s.TenantID, &s.Cron, &s.Timezone, &s.Paused, &s.URL, &s.Method, &s.Headers, &s.Body,
		&timeoutMs, &s.MaxAttempts, &minBackoffMs, &maxBackoffMs, &s.NextRunAt, &s.LastRunAt, &s.CreatedAt, &s.UpdatedAt)
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

// roundUpToMicro rounds up to the microsecond Postgres keeps, so that a stored
// occurrence is never earlier than the one computed.
func roundUpToMicro(t time.Time) time.Time {
	if r := t.Truncate(time.Microsecond); !r.Equal(t) {
		return r.Add(time.Microsecond)
	}
	return t
}

func roundUpToMicroPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	r := roundUpToMicro(*t)
	return &r
}

const queryInsertSchedule = `-- name: InsertSchedule
INSERT INTO schedules (id, tenant_id, cron, timezone, paused, url, method, headers, body, timeout_ms, max_attempts,
	min_backoff_ms, max_backoff_ms, next_run_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)
RETURNING created_at, updated_at`

// InsertSchedule stores a new schedule. s.CreatedAt is stored as given (the
// API's clock, the anchor it computed NextRunAt from); s.NextRunAt must be
// the first occurrence, or nil for a schedule created paused.
func (db *DB) InsertSchedule(ctx context.Context, s *model.Schedule) error {
	if s.Body == nil {
		s.Body = []byte{}
	}
	if s.Headers == nil {
		s.Headers = map[string]string{}
	}
	s.NextRunAt = roundUpToMicroPtr(s.NextRunAt)
	err := db.pool.QueryRow(ctx, queryInsertSchedule,
		s.ID, s.TenantID, s.Cron, s.Timezone, s.Paused, s.URL, s.Method, s.Headers, s.Body,
		s.Timeout.Milliseconds(), s.MaxAttempts, s.MinBackoff.Milliseconds(), s.MaxBackoff.Milliseconds(),
		s.NextRunAt, s.CreatedAt,
	).Scan(&s.CreatedAt, &s.UpdatedAt)
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
SELECT ` + scheduleColumns + ` FROM schedules
WHERE tenant_id = $1 AND deleted_at IS NULL AND ($2::uuid IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3`

// ListSchedules returns up to f.Limit of the tenant's schedules that are not
// deleted, newest first (ids are UUIDv7).
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
WHERE schedule_id = $1 AND status IN ('scheduled', 'retrying')
RETURNING id`

// PauseSchedule stops a schedule: no occurrence is materialised until it is
// resumed (NextRunAt becomes nil), and its occurrences that wait for an
// attempt (scheduled or retrying) are canceled; their ids are returned. An
// occurrence already being sent is left to finish. Pausing a paused schedule
// changes nothing. Another tenant's, a deleted or an unknown id is
// ErrNotFound.
func (db *DB) PauseSchedule(ctx context.Context, tenantID, id uuid.UUID) (*model.Schedule, []uuid.UUID, error) {
	s, canceled, err := db.stopSchedule(ctx, tenantID, id, false)
	if err != nil {
		return nil, nil, fmt.Errorf("pause schedule %s: %w", id, err)
	}
	return s, canceled, nil
}

// DeleteSchedule deletes a schedule (it is kept, marked deleted, so that its
// tasks keep their schedule_id) and cancels its waiting occurrences, whose
// ids are returned. It returns the schedule as it was before. Another
// tenant's, a deleted or an unknown id is ErrNotFound.
func (db *DB) DeleteSchedule(ctx context.Context, tenantID, id uuid.UUID) (*model.Schedule, []uuid.UUID, error) {
	s, canceled, err := db.stopSchedule(ctx, tenantID, id, true)
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
func (db *DB) stopSchedule(ctx context.Context, tenantID, id uuid.UUID, del bool) (out *model.Schedule, canceled []uuid.UUID, err error) {
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
		return nil
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
// Resuming a schedule that is not paused changes nothing. Another tenant's,
// a deleted or an unknown id is ErrNotFound.
func (db *DB) ResumeSchedule(ctx context.Context, tenantID, id uuid.UUID, next func(*model.Schedule) (*time.Time, error)) (*model.Schedule, error) {
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
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resume schedule %s: %w", id, err)
	}
	return out, nil
}

// Plan is what a materialiser decided for one due schedule: the occurrences
// to make into tasks now, and where the schedule goes on from.
type Plan struct {
	// Occurrences become tasks, each due at its occurrence. One already a
	// task (another node got there first) is left alone.
	Occurrences []time.Time
	// Next becomes the schedule's NextRunAt: the first occurrence not
	// materialised. nil stops the schedule (it has no occurrence left).
	Next *time.Time
}

// MaterializeParams selects the schedules a MaterializeSchedules pass works on.
type MaterializeParams struct {
	// Partitions are those this node owns; a schedule's partition is the
	// last byte of its id, like a task's.
	Partitions []int16
	// Until: schedules whose NextRunAt is at or before it are due.
	Until time.Time
	// Limit caps the schedules of one pass (one transaction).
	Limit int
	// NotifyUntil: tasks due at or before it are announced on
	// DueNotifyChannel on commit (they fall inside the loaded window).
	NotifyUntil time.Time
}

const queryLockDueSchedules = `-- name: LockDueSchedules
SELECT ` + scheduleColumns + ` FROM schedules
WHERE partition = ANY($1) AND NOT paused AND deleted_at IS NULL AND next_run_at <= $2
ORDER BY next_run_at
LIMIT $3
FOR UPDATE SKIP LOCKED`

// The unique index on (schedule_id, occurrence_at), not the row lock, is what
// guarantees one task per occurrence: two nodes that both believe they own a
// partition (one's view a heartbeat stale) may each materialise the same
// occurrence in turn, and the second insert does nothing.
const queryInsertOccurrences = `-- name: InsertOccurrences
WITH input AS (
	SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS i(schedule_id, id, at)
), inserted AS (
	INSERT INTO tasks (id, tenant_id, status, url, method, headers, body, run_at, next_attempt_at,
		timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, schedule_id, occurrence_at)
	SELECT i.id, s.tenant_id, 'scheduled', s.url, s.method, s.headers, s.body, i.at, i.at,
		s.timeout_ms, s.max_attempts, s.min_backoff_ms, s.max_backoff_ms, s.id, i.at
	FROM input i JOIN schedules s ON s.id = i.schedule_id
	ON CONFLICT (schedule_id, occurrence_at) WHERE schedule_id IS NOT NULL DO NOTHING
	RETURNING id, run_at
)
SELECT id, run_at,
	CASE WHEN run_at <= $4 THEN pg_notify('` + DueNotifyChannel + `',
		id::text || ' ' || (extract(epoch FROM run_at) * 1000000)::bigint::text) END
FROM inserted`

const queryAdvanceSchedules = `-- name: AdvanceSchedules
UPDATE schedules s SET next_run_at = u.next, last_run_at = greatest(s.last_run_at, u.last), updated_at = now()
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS u(id, next, last)
WHERE s.id = u.id`

// MaterializeSchedules makes tasks of the occurrences of due schedules, in
// one transaction: it locks up to p.Limit due schedules of p.Partitions
// (skipping those another node holds), asks plan what to materialise for
// each, inserts those occurrences as tasks, and moves each schedule's
// NextRunAt and LastRunAt on. It returns the tasks it created (occurrences
// that were already tasks are not), for the caller to arm.
//
// An occurrence's task gets a UUIDv7 id in its schedule's partition, so the
// node that materialises a schedule also owns its tasks; the tasks are
// announced on DueNotifyChannel too, in case ownership moves meanwhile.
// plan runs inside the transaction, holding the schedule's row lock: it must
// be quick and must not touch the database.
func (db *DB) MaterializeSchedules(ctx context.Context, p MaterializeParams, plan func(*model.Schedule) Plan) ([]DueTask, error) {
	var created []DueTask
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, queryLockDueSchedules, p.Partitions, p.Until, p.Limit)
		if err != nil {
			return fmt.Errorf("lock due schedules: %w", err)
		}
		due, err := collectSchedules(rows)
		if err != nil {
			return fmt.Errorf("lock due schedules: %w", err)
		}
		if len(due) == 0 {
			return nil
		}
		var (
			occSchedules, occIDs []uuid.UUID
			occAts               []time.Time
			ids                  = make([]uuid.UUID, len(due))
			nexts, lasts         = make([]*time.Time, len(due)), make([]*time.Time, len(due))
		)
		for i, s := range due {
			pl := plan(s)
			ids[i], nexts[i], lasts[i] = s.ID, roundUpToMicroPtr(pl.Next), s.LastRunAt
			for _, at := range pl.Occurrences {
				at = roundUpToMicro(at)
				id, err := newTaskIDIn(model.PartitionOf(s.ID))
				if err != nil {
					return err
				}
				occSchedules, occIDs, occAts = append(occSchedules, s.ID), append(occIDs, id), append(occAts, at)
				if lasts[i] == nil || at.After(*lasts[i]) {
					lasts[i] = &at
				}
			}
		}
		if len(occIDs) > 0 {
			rows, err := tx.Query(ctx, queryInsertOccurrences, occSchedules, occIDs, occAts, p.NotifyUntil)
			if err != nil {
				return fmt.Errorf("insert occurrences: %w", err)
			}
			created, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DueTask, error) {
				var (
					d        DueTask
					notified *string
				)
				err := r.Scan(&d.ID, &d.At, &notified)
				return d, err
			})
			if err != nil {
				return fmt.Errorf("insert occurrences: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, queryAdvanceSchedules, ids, nexts, lasts); err != nil {
			return fmt.Errorf("advance schedules: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("materialize schedules: %w", err)
	}
	return created, nil
}

// newTaskIDIn returns a UUIDv7 whose last byte, and so whose partition, is
// partition; the other random bits stay random.
func newTaskIDIn(partition int16) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, fmt.Errorf("new task id: %w", err)
	}
	id[15] = byte(partition)
	return id, nil
}
