package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

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
