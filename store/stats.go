package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// The histograms travel as one flat array, each row's slice taken by its
// ordinal: Postgres unnests a two-dimensional array into its elements, not
// its rows. On conflict the counts and the histograms add up, bucket by
// bucket (unnest of two arrays pads the shorter with NULLs, so a histogram
// written before a change in the number of buckets still adds). Rows go in
// the order given, which AddTaskStats makes the same on every node: two
// nodes adding the same minutes lock them in the same order and never
// deadlock.
const queryAddTaskStats = `-- name: AddTaskStats
INSERT INTO task_stats_minutes AS s (tenant_id, minute, delivered, retried, dead, lateness)
SELECT i.tenant_id, i.minute, i.delivered, i.retried, i.dead,
	($6::bigint[])[(i.n::integer - 1) * $7::integer + 1 : i.n::integer * $7::integer]
FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::bigint[])
	WITH ORDINALITY AS i(tenant_id, minute, delivered, retried, dead, n)
ORDER BY i.n
ON CONFLICT (tenant_id, minute) DO UPDATE SET
	delivered = s.delivered + EXCLUDED.delivered,
	retried = s.retried + EXCLUDED.retried,
	dead = s.dead + EXCLUDED.dead,
	lateness = ARRAY(
		SELECT coalesce(a, 0) + coalesce(b, 0)
		FROM unnest(s.lateness, EXCLUDED.lateness) WITH ORDINALITY AS u(a, b, k)
		ORDER BY k)`

// AddTaskStats adds counts to the statistics of their tenants' minutes, in
// one statement whatever their number; rows already there (this node's
// earlier counts, other nodes') are added to. Each tenant and minute may
// appear once. It sorts rows in place.
func (db *DB) AddTaskStats(ctx context.Context, rows []model.TenantMinuteStats) error {
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(a, b model.TenantMinuteStats) int {
		if c := bytes.Compare(a.TenantID[:], b.TenantID[:]); c != 0 {
			return c
		}
		return a.Start.Compare(b.Start)
	})
	n := len(rows)
	var (
		tenants   = make([]uuid.UUID, n)
		minutes   = make([]time.Time, n)
		delivered = make([]int64, n)
		retried   = make([]int64, n)
		dead      = make([]int64, n)
		lateness  = make([]int64, 0, n*model.LatenessBuckets)
	)
	for i, r := range rows {
		tenants[i], minutes[i] = r.TenantID, r.Start
		delivered[i], retried[i], dead[i] = r.Delivered, r.Retried, r.Dead
		lateness = append(lateness, r.Lateness[:]...)
	}
	if _, err := db.pool.Exec(ctx, queryAddTaskStats, tenants, minutes, delivered, retried, dead, lateness,
		model.LatenessBuckets); err != nil {
		return fmt.Errorf("add statistics of %d tenant minutes: %w", n, err)
	}
	return nil
}

// A range of the primary key: one tenant's minutes, at most a day's 1,440.
const queryTaskStatsBetween = `-- name: TaskStatsBetween
SELECT minute, delivered, retried, dead, lateness FROM task_stats_minutes
WHERE tenant_id = $1 AND minute >= $2 AND minute < $3
ORDER BY minute`

// TaskStatsBetween returns the statistics of a tenant's minutes from from
// (inclusive) to to (exclusive), oldest first; minutes without attempts
// have no entry.
func (db *DB) TaskStatsBetween(ctx context.Context, tenantID uuid.UUID, from, to time.Time) ([]model.MinuteStats, error) {
	rows, err := db.pool.Query(ctx, queryTaskStatsBetween, tenantID, from, to)
	if err != nil {
		return nil, fmt.Errorf("read statistics of tenant %s: %w", tenantID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.MinuteStats, error) {
		var (
			m        model.MinuteStats
			lateness []int64
		)
		err := r.Scan(&m.Start, &m.Delivered, &m.Retried, &m.Dead, &lateness)
		copy(m.Lateness[:], lateness)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("read statistics of tenant %s: %w", tenantID, err)
	}
	return out, nil
}

// The rows to delete are found through task_stats_minutes_minute and
// deleted by ctid, so a pass reads only what it deletes however many rows
// are kept. The ORDER BY is what keeps the generic plan on the index: without
// it, a range whose bound the plan cannot see looked a third of the table,
// and a sequential scan with a limit cheaper, and read the whole table when
// nothing was old enough. A row another node updated since the statement's
// snapshot has moved to a new ctid and is left for the next pass.
const queryPurgeTaskStats = `-- name: PurgeTaskStats
DELETE FROM task_stats_minutes
WHERE ctid = ANY (ARRAY(
	SELECT ctid FROM task_stats_minutes WHERE minute < $1 ORDER BY minute LIMIT $2
)) AND minute < $1`

// PurgeTaskStats deletes up to limit minutes of statistics, of any tenant,
// that began before before, and says how many it deleted: limit means there
// may be more.
func (db *DB) PurgeTaskStats(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := db.pool.Exec(ctx, queryPurgeTaskStats, before, limit)
	if err != nil {
		return 0, fmt.Errorf("purge statistics: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// One bounded probe of tasks_tenant_status_recent (tenant_id, status, id)
// per status: each reads at most $2 index entries (plus the tenant's claimed
// tasks of that status), so the statement costs the same for a tenant with
// millions of tasks as for one with $2 of each. count(*) over all of a
// tenant's tasks would read them all.
//
// A claimed task without an ordering key keeps its waiting status
// (ClaimTasks), so the claimed tasks are counted apart and moved from their
// stored status to dispatching. They are found as the stale-claim scan finds
// them, among the tasks due by now()+claimReach (tasks_due, one range per
// partition $3), reading at most $4 of those, a buffer each, in partition
// order: all of them unless a backlog of more than $4 tasks is due at once,
// when a claimed task it misses is counted under its stored status.
const queryCountTasksByStatus = `-- name: CountTasksByStatus
WITH claimed AS MATERIALIZED (
	SELECT due.status, count(*) AS n FROM (
		SELECT status, tenant_id, claim_token FROM tasks
		WHERE status IN ('scheduled', 'retrying') AND partition = ANY($3)
			AND next_attempt_at <= now() + interval '` + claimReach + `'
		LIMIT $4
	) due
	WHERE due.tenant_id = $1 AND due.claim_token IS NOT NULL
	GROUP BY due.status
), stored AS (
	SELECT s.status, coalesce(c.n, 0) AS claimed, (
		SELECT count(*) FROM (
			SELECT 1 FROM tasks t WHERE t.tenant_id = $1 AND t.status = s.status LIMIT $2 + coalesce(c.n, 0)
		) n
	) AS n
	FROM unnest('{scheduled,dispatching,retrying,delivered,dead,canceled,expired}'::text[]) AS s(status)
		LEFT JOIN claimed c ON c.status = s.status
)
SELECT status, CASE WHEN status = 'dispatching' THEN least(n + (SELECT coalesce(sum(n), 0) FROM claimed), $2)
	ELSE n - claimed END
FROM stored`

// countDueAtMost is how many due tasks CountTasksByStatus reads looking for
// claimed ones.
const countDueAtMost = 10_000

// CountTasksByStatus counts a tenant's tasks in each status, up to upTo
// each: a count of upTo means at least that many.
func (db *DB) CountTasksByStatus(ctx context.Context, tenantID uuid.UUID, upTo int) (map[model.TaskStatus]int, error) {
	rows, err := db.pool.Query(ctx, queryCountTasksByStatus, tenantID, upTo, everyPartition(), countDueAtMost)
	if err != nil {
		return nil, fmt.Errorf("count tasks of tenant %s by status: %w", tenantID, err)
	}
	out := make(map[model.TaskStatus]int, 7)
	var (
		status string
		count  int
	)
	if _, err := pgx.ForEachRow(rows, []any{&status, &count}, func() error {
		out[model.TaskStatus(status)] = count
		return nil
	}); err != nil {
		return nil, fmt.Errorf("count tasks of tenant %s by status: %w", tenantID, err)
	}
	return out, nil
}

// everyPartition lists every partition, for a statement that reads one range
// of a partition-led index (tasks_due) in each.
func everyPartition() []int16 {
	all := make([]int16, model.Partitions)
	for i := range all {
		all[i] = int16(i)
	}
	return all
}
