package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Reading usage: every reader sums a day's shards (usage.go). A tenant's
// days come from the primary key's range (tenant_id, day); the operator's
// report from usage_days_day.

const usageSums = `sum(tasks_created)::bigint, sum(deliveries)::bigint, sum(attempts)::bigint,
	sum(failed_attempts)::bigint, sum(bytes_sent)::bigint, sum(bytes_received)::bigint`

const queryTenantUsage = `-- name: TenantUsage
SELECT day, ` + usageSums + `
FROM usage_days
WHERE tenant_id = $1 AND day BETWEEN $2::date AND $3::date
GROUP BY day
ORDER BY day`

// TenantUsage returns a tenant's usage of each day from from to to
// (inclusive, UTC days), the days it used nothing left out, in day order.
func (db *DB) TenantUsage(ctx context.Context, tenantID uuid.UUID, from, to time.Time) ([]model.UsageDay, error) {
	rows, err := db.pool.Query(ctx, queryTenantUsage, tenantID, dateOnly(from), dateOnly(to))
	if err != nil {
		return nil, fmt.Errorf("read usage of tenant %s: %w", tenantID, err)
	}
	days, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.UsageDay, error) {
		var d model.UsageDay
		err := r.Scan(&d.Date, &d.TasksCreated, &d.Deliveries, &d.Attempts, &d.FailedAttempts, &d.BytesSent, &d.BytesReceived)
		d.Date = dateOnly(d.Date)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read usage of tenant %s: %w", tenantID, err)
	}
	return days, nil
}

// The tenant's name and plan are its current ones; a deleted tenant's rows
// stay (no reference to tenants) and read with no name.
const queryUsageReport = `-- name: UsageReport
SELECT u.day, u.tenant_id, tn.name, tn.plan, u.tasks_created, u.deliveries, u.attempts, u.failed_attempts,
	u.bytes_sent, u.bytes_received
FROM (
	SELECT day, tenant_id, ` + usageSums + `
	FROM usage_days
	WHERE day BETWEEN $1::date AND $2::date AND ($3::uuid IS NULL OR tenant_id = $3)
		AND ($4::date IS NULL OR (day, tenant_id) > ($4::date, $5::uuid))
	GROUP BY day, tenant_id
	ORDER BY day, tenant_id
	LIMIT $6
) u (day, tenant_id, tasks_created, deliveries, attempts, failed_attempts, bytes_sent, bytes_received)
LEFT JOIN tenants tn ON tn.id = u.tenant_id
ORDER BY u.day, u.tenant_id`

// UsageReport returns every tenant's usage of each day of f's range (or
// one tenant's), in (day, tenant) order, a page of at most f.Limit rows.
func (db *DB) UsageReport(ctx context.Context, f model.UsageReportFilter) ([]model.TenantUsageDay, error) {
	var after *time.Time
	if !f.AfterDate.IsZero() {
		d := dateOnly(f.AfterDate)
		after = &d
	}
	rows, err := db.pool.Query(ctx, queryUsageReport, dateOnly(f.From), dateOnly(f.To), f.TenantID, after, f.AfterTenant, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("read usage report: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.TenantUsageDay, error) {
		var d model.TenantUsageDay
		err := r.Scan(&d.Date, &d.TenantID, &d.TenantName, &d.Plan, &d.TasksCreated, &d.Deliveries, &d.Attempts,
			&d.FailedAttempts, &d.BytesSent, &d.BytesReceived)
		d.Date = dateOnly(d.Date)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read usage report: %w", err)
	}
	return out, nil
}

const queryDeliveriesToday = `-- name: DeliveriesToday
SELECT ` + usageDay + `, t, coalesce((SELECT sum(deliveries) FROM usage_days
	WHERE tenant_id = t AND day = ` + usageDay + `), 0)::bigint
FROM unnest($1::uuid[]) t`

// DeliveriesToday reads how many deliveries each tenant has made today
// (Postgres's UTC day, which it returns: the day the counts are of), for
// the dispatcher's deliveries_per_day. One statement for any number of
// tenants, each a range of its primary key.
func (db *DB) DeliveriesToday(ctx context.Context, tenantIDs []uuid.UUID) (time.Time, map[uuid.UUID]int64, error) {
	rows, err := db.pool.Query(ctx, queryDeliveriesToday, tenantIDs)
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("read deliveries today of %d tenants: %w", len(tenantIDs), err)
	}
	var (
		day    time.Time
		id     uuid.UUID
		n      int64
		counts = make(map[uuid.UUID]int64, len(tenantIDs))
	)
	if _, err := pgx.ForEachRow(rows, []any{&day, &id, &n}, func() error {
		counts[id] = n
		return nil
	}); err != nil {
		return time.Time{}, nil, fmt.Errorf("read deliveries today of %d tenants: %w", len(tenantIDs), err)
	}
	return dateOnly(day), counts, nil
}

// Usage past the kept days goes oldest first, a bounded batch a statement
// (usage_days_day bounds the scan).
const queryPurgeUsage = `-- name: PurgeUsage
DELETE FROM usage_days
WHERE ctid = ANY (ARRAY(
	SELECT ctid FROM usage_days WHERE day < $1::date ORDER BY day LIMIT $2
))`

// PurgeUsage deletes up to limit usage rows of days before before, oldest
// first, and says how many: a pass that deletes limit may have left more.
func (db *DB) PurgeUsage(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := db.pool.Exec(ctx, queryPurgeUsage, dateOnly(before), limit)
	if err != nil {
		return 0, fmt.Errorf("purge usage before %s: %w", before.Format(time.DateOnly), err)
	}
	return int(tag.RowsAffected()), nil
}

// dateOnly is t's UTC day at midnight UTC.
func dateOnly(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// A past day's shards of each tenant go into its shard 0, a batch of
// tenants a statement: the day's rows then cost one row per tenant to keep
// and to read. The main query does not see the CTE's deletion, but shard 0
// is not deleted, so its upsert finds it. A writer still counting on that
// day (a transaction open since then) makes a new shard row again, which
// readers sum like any other.
const queryFoldUsage = `-- name: FoldUsage
WITH groups AS (
	SELECT tenant_id FROM usage_days WHERE day = $1::date
	GROUP BY tenant_id HAVING count(*) > 1
	ORDER BY tenant_id
	LIMIT $2
), gone AS (
	DELETE FROM usage_days u USING groups g
	WHERE u.tenant_id = g.tenant_id AND u.day = $1::date AND u.shard <> 0
	RETURNING u.tenant_id, u.tasks_created, u.deliveries, u.attempts, u.failed_attempts, u.bytes_sent, u.bytes_received
)
INSERT INTO usage_days AS u (tenant_id, day, shard, tasks_created, deliveries, attempts, failed_attempts, bytes_sent,
	bytes_received)
SELECT tenant_id, $1::date, 0, sum(tasks_created), sum(deliveries), sum(attempts), sum(failed_attempts), sum(bytes_sent),
	sum(bytes_received)
FROM gone
GROUP BY tenant_id
ORDER BY tenant_id
ON CONFLICT (tenant_id, day, shard) DO UPDATE SET tasks_created = u.tasks_created + excluded.tasks_created,
	deliveries = u.deliveries + excluded.deliveries, attempts = u.attempts + excluded.attempts,
	failed_attempts = u.failed_attempts + excluded.failed_attempts, bytes_sent = u.bytes_sent + excluded.bytes_sent,
	bytes_received = u.bytes_received + excluded.bytes_received`

// FoldUsage folds up to limit tenants' rows of day into one row each, and
// says how many tenants it folded: limit means more may be left. day must be
// past, so that nothing counts on it any more but a transaction opened then.
func (db *DB) FoldUsage(ctx context.Context, day time.Time, limit int) (int, error) {
	tag, err := db.pool.Exec(ctx, queryFoldUsage, dateOnly(day), limit)
	if err != nil {
		return 0, fmt.Errorf("fold usage of %s: %w", day.Format(time.DateOnly), err)
	}
	return int(tag.RowsAffected()), nil
}
