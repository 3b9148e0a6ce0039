package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Rate limits and quotas: what a tenant may do, kept with the tenant in
// Postgres, and the decisions, taken in Redis by Lua scripts (one round trip
// each, atomic, shared by every node).

const queryTenantLimits = `-- name: TenantLimits
SELECT limits, ` + tenantPlanLimits + ` FROM tenants WHERE id = $1`

// TenantLimits reads a tenant's limits alone, for the dispatcher's cache: its
// own over its plan's, as set (the caller resolves them over the node's
// defaults).
func (db *DB) TenantLimits(ctx context.Context, tenantID uuid.UUID) (model.Limits, error) {
	var l, plan model.Limits
	err := db.pool.QueryRow(ctx, queryTenantLimits, tenantID).Scan(&l, &plan)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.Limits{}, model.ErrNotFound
	}
	if err != nil {
		return model.Limits{}, fmt.Errorf("get limits of tenant %s: %w", tenantID, err)
	}
	return l.Over(plan), nil
}

// The inner LIMIT bounds the scan: a quota check needs to know only whether
// the count reaches the quota, not by how much it exceeds it. NULL counts all.
// Both walk tasks_tenant_status_recent, one range per status.
// pendingStatuses are the statuses of a pending task, as max_pending_tasks
// counts them.
const pendingStatuses = `('scheduled', 'retrying', 'dispatching')`

const queryCountPendingTasks = `-- name: CountPendingTasks
SELECT count(*) FROM (
	SELECT 1 FROM tasks
	WHERE tenant_id = $1 AND status IN ` + pendingStatuses + `
	LIMIT $2
) pending`

const queryCountSchedules = `-- name: CountSchedules
SELECT count(*) FROM (
	SELECT 1 FROM schedules WHERE tenant_id = $1 AND deleted_at IS NULL LIMIT $2
) s`

// CountSchedules counts the tenant's schedules (paused ones included),
// stopping at upTo.
func (db *DB) CountSchedules(ctx context.Context, tenantID uuid.UUID, upTo int) (int, error) {
	var n int
	if err := db.pool.QueryRow(ctx, queryCountSchedules, tenantID, upTo).Scan(&n); err != nil {
		return 0, fmt.Errorf("count schedules of tenant %s: %w", tenantID, err)
	}
	return n, nil
}

// CountPendingTasks counts the tenant's waiting tasks (scheduled, retrying
// or dispatching), stopping at upTo when upTo > 0. It costs an index range
// scan over those tasks: proportional to the count, so bounded by the quota
// when one is checked.
func (db *DB) CountPendingTasks(ctx context.Context, tenantID uuid.UUID, upTo int) (int, error) {
	return countPendingTasks(ctx, db.pool, tenantID, upTo)
}

// countPendingTasks is CountPendingTasks through q.
func countPendingTasks(ctx context.Context, q Querier, tenantID uuid.UUID, upTo int) (int, error) {
	var limit *int64
	if upTo > 0 {
		n := int64(upTo)
		limit = &n
	}
	var n int
	if err := q.QueryRow(ctx, queryCountPendingTasks, tenantID, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending tasks of tenant %s: %w", tenantID, err)
	}
	return n, nil
}

const queryHasIdempotencyKey = `-- name: HasIdempotencyKey
SELECT EXISTS (SELECT 1 FROM tasks WHERE tenant_id = $1 AND idempotency_key = $2 AND idempotency_key IS NOT NULL)
	OR EXISTS (SELECT 1 FROM idempotency_keys WHERE tenant_id = $1 AND kind = 'task' AND key = $2)`

// HasIdempotencyKey reports whether the tenant already created a task with
// this Idempotency-Key: a repeat of that request creates nothing, so no
// quota stands in its way.
func (db *DB) HasIdempotencyKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error) {
	return hasIdempotencyKey(ctx, db.pool, tenantID, key)
}

// hasIdempotencyKey is HasIdempotencyKey through q.
func hasIdempotencyKey(ctx context.Context, q Querier, tenantID uuid.UUID, key string) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, queryHasIdempotencyKey, tenantID, key).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up idempotency key of tenant %s: %w", tenantID, err)
	}
	return ok, nil
}
