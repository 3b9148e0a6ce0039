package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

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
//
// Occurrences count against their tenant's max_pending_tasks and
// tasks_per_day as tasks created through the API do (each the tenant's own,
// else its plan's, else the node's default: $6 and $5): those that
// would take the tenant over either, the latest first, are skipped (not
// inserted) and returned as such, for the schedule to count. Like the API's
// pending check, the pending one checks and does not reserve: concurrent
// creations of one tenant may together overshoot it. The daily one is
// exact: MaterializeSchedules holds the tenants' counts of tasks created
// today (LockTasksCreated) from before this statement to its commit, and
// the statement adds what it inserted to them.
const queryInsertOccurrences = `-- name: InsertOccurrences
WITH input AS (
	SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS i(schedule_id, id, at)
), ranked AS (
	SELECT i.schedule_id, i.id, i.at, s.tenant_id,
		row_number() OVER (PARTITION BY s.tenant_id ORDER BY i.at, i.id) AS nth
	FROM input i JOIN schedules s ON s.id = i.schedule_id
), quotas AS (
	SELECT tn.id AS tenant_id,
		coalesce(nullif((tn.limits->>'max_pending_tasks')::int, 0), nullif((pl.limits->>'max_pending_tasks')::int, 0), $6::int)
			AS max_pending,
		coalesce(nullif((tn.limits->>'tasks_per_day')::int, 0), nullif((pl.limits->>'tasks_per_day')::int, 0), $5::int) AS per_day
	FROM tenants tn LEFT JOIN plans pl ON pl.name = tn.plan
	WHERE tn.id IN (SELECT tenant_id FROM ranked)
), room AS (
	-- least() skips the NULL of a quota the tenant does not have.
	SELECT q.tenant_id, least(
		CASE WHEN q.max_pending > 0 THEN q.max_pending - (
			SELECT count(*) FROM (
				SELECT 1 FROM tasks t WHERE t.tenant_id = q.tenant_id AND t.status IN ` + pendingStatuses + ` LIMIT q.max_pending
			) pending) END,
		CASE WHEN q.per_day > 0 THEN q.per_day - (
			SELECT coalesce(sum(u.tasks_created), 0) FROM usage_days u WHERE u.tenant_id = q.tenant_id AND u.day = ` + usageDay + `
		) END) AS left_
	FROM quotas q
	WHERE q.max_pending > 0 OR q.per_day > 0
), admitted AS (
	SELECT r.* FROM ranked r LEFT JOIN room USING (tenant_id)
	WHERE room.left_ IS NULL OR r.nth <= room.left_
), inserted AS (
	INSERT INTO tasks (id, tenant_id, status, url, method, headers, body, run_at, next_attempt_at,
		timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, schedule_id, occurrence_at, labels,
		callback, failure_callback, ordering_key, flow_key, trace_parent, trace_state)
	SELECT a.id, s.tenant_id, 'scheduled', s.url, s.method, s.headers, s.body, a.at, a.at,
		s.timeout_ms, s.max_attempts, s.min_backoff_ms, s.max_backoff_ms, s.id, a.at, s.labels,
		s.callback, s.failure_callback, s.ordering_key, s.flow_key, s.trace_parent, s.trace_state
	FROM admitted a JOIN schedules s ON s.id = a.schedule_id
	ON CONFLICT (schedule_id, occurrence_at) WHERE schedule_id IS NOT NULL DO NOTHING
	RETURNING id, run_at, schedule_id, tenant_id, 0::smallint AS shard
), ` + countTasksCreated + `
SELECT id, run_at, schedule_id, false AS skipped,
	CASE WHEN run_at <= $4 THEN pg_notify('` + DueNotifyChannel + `',
		id::text || ' ' || (extract(epoch FROM run_at) * 1000000)::bigint::text) END
FROM inserted
UNION ALL
SELECT r.id, r.at, r.schedule_id, true, NULL
FROM ranked r
WHERE NOT EXISTS (SELECT 1 FROM admitted a WHERE a.id = r.id)
	-- Another node's task for the occurrence already: not skipped.
	AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.schedule_id = r.schedule_id AND t.occurrence_at = r.at)`

const queryAdvanceSchedules = `-- name: AdvanceSchedules
UPDATE schedules s SET next_run_at = u.next, last_run_at = greatest(s.last_run_at, u.last),
	skipped_occurrences = s.skipped_occurrences + u.skipped,
	last_skipped_at = greatest(s.last_skipped_at, u.last_skipped),
	updated_at = now()
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::bigint[], $5::timestamptz[])
	AS u(id, next, last, skipped, last_skipped)
WHERE s.id = u.id`

// MaterializeSchedules makes tasks of the occurrences of due schedules, in
// one transaction: it locks up to p.Limit due schedules of p.Partitions
// (skipping those another node holds), asks plan what to materialise for
// each, inserts those occurrences as tasks (skipping those over their
// tenant's max_pending_tasks or tasks_per_day, counting the others in its
// tasks created today), and moves each schedule's NextRunAt,
// LastRunAt and skip count on.
//
// An occurrence's task gets a UUIDv7 id in its schedule's partition, so the
// node that materialises a schedule also owns its tasks; the tasks are
// announced on DueNotifyChannel too, in case ownership moves meanwhile.
// plan runs inside the transaction, holding the schedule's row lock: it must
// be quick and must not touch the database.
func (db *DB) MaterializeSchedules(ctx context.Context, p model.MaterializeParams, plan func(*model.Schedule) model.OccurrencePlan) (model.Materialized, error) {
	var done model.Materialized
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
			nexts                = make([]*time.Time, len(due))
			index                = make(map[uuid.UUID]int, len(due))
		)
		for i, s := range due {
			pl := plan(s)
			ids[i], nexts[i], index[s.ID] = s.ID, roundUpToMicroPtr(pl.Next), i
			for _, at := range pl.Occurrences {
				id, err := model.NewTaskIDIn(model.PartitionOf(s.ID))
				if err != nil {
					return err
				}
				occSchedules, occIDs, occAts = append(occSchedules, s.ID), append(occIDs, id), append(occAts, model.RoundUpToMicro(at))
			}
		}
		lasts, skipped, lastSkipped := make([]*time.Time, len(due)), make([]int64, len(due)), make([]*time.Time, len(due))
		skippedIDs := map[uuid.UUID]bool{}
		for i, s := range due {
			lasts[i] = s.LastRunAt
		}
		if len(occIDs) > 0 {
			tenantIDs := make([]uuid.UUID, 0, len(due))
			for _, s := range due {
				tenantIDs = append(tenantIDs, s.TenantID)
			}
			if _, err := lockTasksCreated(ctx, tx, tenantIDs); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, queryInsertOccurrences, occSchedules, occIDs, occAts, p.NotifyUntil, p.DefaultTasksPerDay,
				p.DefaultMaxPendingTasks)
			if err != nil {
				return fmt.Errorf("insert occurrences: %w", err)
			}
			var (
				d          model.DueTask
				scheduleID uuid.UUID
				skip       bool
				notified   *string
			)
			_, err = pgx.ForEachRow(rows, []any{&d.ID, &d.At, &scheduleID, &skip, &notified}, func() error {
				i := index[scheduleID]
				at := d.At
				if skip {
					skippedIDs[d.ID] = true
					skipped[i]++
					done.Skipped++
					if lastSkipped[i] == nil || at.After(*lastSkipped[i]) {
						lastSkipped[i] = &at
					}
					return nil
				}
				done.Created = append(done.Created, d)
				return nil
			})
			if err != nil {
				return fmt.Errorf("insert occurrences: %w", err)
			}
		}
		// The latest occurrence that is a task now: created here, or by
		// another node before.
		for k, id := range occIDs {
			if i, at := index[occSchedules[k]], occAts[k]; !skippedIDs[id] && (lasts[i] == nil || at.After(*lasts[i])) {
				lasts[i] = &at
			}
		}
		if _, err := tx.Exec(ctx, queryAdvanceSchedules, ids, nexts, lasts, skipped, lastSkipped); err != nil {
			return fmt.Errorf("advance schedules: %w", err)
		}
		return nil
	})
	if err != nil {
		return model.Materialized{}, fmt.Errorf("materialize schedules: %w", err)
	}
	return done, nil
}
