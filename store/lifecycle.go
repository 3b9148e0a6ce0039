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

// TenantNotifyChannel carries the id of a tenant whose row changed (its
// status, its limits, its grants...), sent in the transaction that changed
// it, so that every node hears it as the change commits: the tenants
// service drops the tenant's cached keys, the dispatcher rereads the
// tenants whose tasks it holds.
const TenantNotifyChannel = "hookwheel_tenants"

const queryNotifyTenantChanged = `-- name: NotifyTenantChanged
SELECT pg_notify('` + TenantNotifyChannel + `', $1::text)`

// notifyTenantChanged announces, on commit of the transaction q runs in,
// that tenant id changed.
func notifyTenantChanged(ctx context.Context, q execer, id uuid.UUID) error {
	if err := q.QueryRow(ctx, queryNotifyTenantChanged, id).Scan(nil); err != nil {
		return fmt.Errorf("announce change of tenant %s: %w", id, err)
	}
	return nil
}

// The update changes the row only from a status in $3, and never to the
// status it has: a repeat changes nothing, records nothing, announces
// nothing. A deletion notes when it was asked for.
const querySetTenantStatus = `-- name: SetTenantStatus
UPDATE tenants SET status = $2,
	deletion_requested_at = CASE WHEN $2 = 'deleting' THEN now() ELSE deletion_requested_at END
WHERE id = $1 AND status = ANY($3::text[]) AND status <> $2
RETURNING ` + tenantColumns

// SetTenantStatus moves a tenant to status to from one of the statuses in
// from, records audit and announces the change on TenantNotifyChannel, in
// one transaction. A tenant already in status to is returned unchanged
// (nothing recorded, nothing announced); one in a status outside from is
// model.ErrConflict, with the tenant as it is; an unknown tenant
// model.ErrNotFound. Which moves are allowed is the caller's rule.
func (db *DB) SetTenantStatus(ctx context.Context, id uuid.UUID, to model.TenantStatus, from []model.TenantStatus,
	audit model.AuditEntry,
) (*model.Tenant, error) {
	var t *model.Tenant
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		var err error
		t, err = scanTenant(tx.QueryRow(ctx, querySetTenantStatus, id, to, from))
		if errors.Is(err, pgx.ErrNoRows) {
			if t, err = scanTenant(tx.QueryRow(ctx, queryGetTenant, id)); err != nil {
				return err
			}
			if t.Status != to {
				return model.ErrConflict
			}
			return nil
		}
		if err != nil {
			return err
		}
		if err := notifyTenantChanged(ctx, tx, id); err != nil {
			return err
		}
		return insertAudit(ctx, tx, audit)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, model.ErrNotFound
	case errors.Is(err, model.ErrConflict):
		return t, fmt.Errorf("tenant %s is %s: %w", id, t.Status, model.ErrConflict)
	case err != nil:
		return nil, fmt.Errorf("set status of tenant %s to %s: %w", id, to, err)
	}
	return t, nil
}

// Few tenants are ever other than active, and tenants_not_active holds
// just those.
const queryTenantsWithStatus = `-- name: TenantsWithStatus
SELECT id, status FROM tenants WHERE status <> 'active'`

// InactiveTenants returns the tenants that are not active (suspended or
// being deleted), with their status.
func (db *DB) InactiveTenants(ctx context.Context) (map[uuid.UUID]model.TenantStatus, error) {
	rows, err := db.pool.Query(ctx, queryTenantsWithStatus)
	if err != nil {
		return nil, fmt.Errorf("read inactive tenants: %w", err)
	}
	out := map[uuid.UUID]model.TenantStatus{}
	var (
		id     uuid.UUID
		status model.TenantStatus
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		out[id] = status
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read inactive tenants: %w", err)
	}
	return out, nil
}

// A deleter takes (or renews) the tenant's deletion for lease: one deleter
// works on a tenant at a time, and when one stops renewing (its node died)
// another continues after the lease, from what is left. The update locks
// the row for the batch's transaction, in a mode (no key changes) that
// leaves the KEY SHARE locks of inserts naming the tenant alone: a task
// still inserted meanwhile (the materializer's) does not wait for the batch.
const queryTakeDeletion = `-- name: TakeDeletion
UPDATE tenants SET deleter = $2, deleter_until = now() + $3::interval
WHERE id = $1 AND status = 'deleting' AND (deleter IS NULL OR deleter = $2 OR deleter_until < now())`

// A batch of tasks goes with its attempts and the publishes the tasks were
// made for (publishes has no index by tenant: found through their tasks,
// they cost a primary-key probe each). The attempts are deleted by the
// statement rather than by the foreign key's cascade so that they are
// counted.
const queryDeleteTenantTasks = `-- name: DeleteTenantTasks
WITH doomed AS (
	SELECT id, publish_id FROM tasks WHERE tenant_id = $1 LIMIT $2
), gone_attempts AS (
	DELETE FROM attempts WHERE task_id IN (SELECT id FROM doomed) RETURNING 1
), gone_publishes AS (
	DELETE FROM publishes WHERE id IN (SELECT publish_id FROM doomed WHERE publish_id IS NOT NULL) AND tenant_id = $1
	RETURNING 1
), gone AS (
	DELETE FROM tasks WHERE id IN (SELECT id FROM doomed) RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM gone_attempts), (SELECT count(*) FROM gone_publishes)`

// The rest of a tenant's tables, in the order they are emptied, one
// bounded statement each. A schedule's tasks are gone by then (a late
// occurrence goes with its schedule, by the foreign key's cascade). The
// publishes left are those whose tasks retention had purged already.
// usage_days is not among them: a tenant's usage outlives it, as its audit
// entries do.
const (
	queryDeleteTenantSchedules = `-- name: DeleteTenantSchedules
DELETE FROM schedules WHERE id = ANY(ARRAY(SELECT id FROM schedules WHERE tenant_id = $1 LIMIT $2))`
	queryDeleteTenantTopics = `-- name: DeleteTenantTopics
DELETE FROM topics WHERE tenant_id = $1 AND name = ANY(ARRAY(SELECT name FROM topics WHERE tenant_id = $1 LIMIT $2))`
	queryDeleteTenantPublishes = `-- name: DeleteTenantPublishes
DELETE FROM publishes WHERE id = ANY(ARRAY(SELECT id FROM publishes WHERE tenant_id = $1 LIMIT $2))`
	queryDeleteTenantFlowLimits = `-- name: DeleteTenantFlowLimits
DELETE FROM flow_limits WHERE tenant_id = $1 AND key = ANY(ARRAY(SELECT key FROM flow_limits WHERE tenant_id = $1 LIMIT $2))`
	queryDeleteTenantIdempotencyKeys = `-- name: DeleteTenantIdempotencyKeys
DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(SELECT ctid FROM idempotency_keys WHERE tenant_id = $1 LIMIT $2))`
	queryDeleteTenantAPIKeys = `-- name: DeleteTenantAPIKeys
DELETE FROM api_keys WHERE id = ANY(ARRAY(SELECT id FROM api_keys WHERE tenant_id = $1 LIMIT $2))`
	queryDeleteTenantPortalLinks = `-- name: DeleteTenantPortalLinks
DELETE FROM portal_links WHERE id = ANY(ARRAY(SELECT id FROM portal_links WHERE tenant_id = $1 LIMIT $2))`
	queryDeleteTenantStats = `-- name: DeleteTenantStats
DELETE FROM task_stats_minutes WHERE tenant_id = $1
	AND minute = ANY(ARRAY(SELECT minute FROM task_stats_minutes WHERE tenant_id = $1 LIMIT $2))`
)

// tenantTables are the tables a deletion empties after the tasks, in order,
// by the name its progress counts them under.
func tenantTables() []struct{ name, query string } {
	return []struct{ name, query string }{
		{"schedules", queryDeleteTenantSchedules},
		{"topics", queryDeleteTenantTopics},
		{"publishes", queryDeleteTenantPublishes},
		{"flow_limits", queryDeleteTenantFlowLimits},
		{"idempotency_keys", queryDeleteTenantIdempotencyKeys},
		{"api_keys", queryDeleteTenantAPIKeys},
		{"portal_links", queryDeleteTenantPortalLinks},
		{"stats", queryDeleteTenantStats},
	}
}

const queryAddDeletedRows = `-- name: AddDeletedRows
UPDATE tenants SET deleted_rows = deleted_rows || (
	SELECT coalesce(jsonb_object_agg(k, coalesce((deleted_rows->>k)::bigint, 0) + n), '{}')
	FROM unnest($2::text[], $3::bigint[]) AS a(k, n) WHERE n > 0)
WHERE id = $1`

const queryTenantStatus = `-- name: TenantStatus
SELECT status FROM tenants WHERE id = $1`

const queryDeleteTenantRow = `-- name: DeleteTenantRow
DELETE FROM tenants WHERE id = $1 AND status = 'deleting'
RETURNING deleted_rows`

// DeleteTenantBatch deletes one bounded batch of a tenant being deleted
// (status 'deleting') for deleter, which takes or renews the tenant's
// deletion for lease, in one transaction under the tenant row's lock: up
// to limit of its tasks with their attempts, else, once it has none, up to
// limit rows of the first of its other tables that has any, else its row,
// with done (audit, recorded in that transaction; its entries, like its
// usage rows, are not the tenant's to delete). The rows deleted are added
// to the tenant's progress. Busy when another deleter holds the deletion;
// model.ErrNotFound when the tenant is gone, model.ErrConflict when it is
// not being deleted.
func (db *DB) DeleteTenantBatch(ctx context.Context, id, deleter uuid.UUID, lease time.Duration, limit int,
	done model.AuditEntry,
) (model.DeletionBatch, error) {
	var b model.DeletionBatch
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, queryTakeDeletion, id, deleter, lease)
		if err != nil {
			return fmt.Errorf("take the deletion: %w", err)
		}
		if tag.RowsAffected() == 0 {
			// Gone, not being deleted, or another deleter's.
			var status model.TenantStatus
			err := tx.QueryRow(ctx, queryTenantStatus, id).Scan(&status)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return model.ErrNotFound
			case err != nil:
				return err
			case status != model.TenantDeleting:
				return model.ErrConflict
			}
			b.Busy = true
			return nil
		}
		var tasks, attempts, publishes int64
		if err := tx.QueryRow(ctx, queryDeleteTenantTasks, id, limit).Scan(&tasks, &attempts, &publishes); err != nil {
			return fmt.Errorf("delete tasks: %w", err)
		}
		if tasks > 0 {
			b.Table, b.Rows, b.Attempts = "tasks", int(tasks), int(attempts)
			_, err := tx.Exec(ctx, queryAddDeletedRows, id,
				[]string{"tasks", "attempts", "publishes"}, []int64{tasks, attempts, publishes})
			return err
		}
		for _, table := range tenantTables() {
			tag, err := tx.Exec(ctx, table.query, id, limit)
			if err != nil {
				return fmt.Errorf("delete %s: %w", table.name, err)
			}
			if n := tag.RowsAffected(); n > 0 {
				b.Table, b.Rows = table.name, int(n)
				_, err := tx.Exec(ctx, queryAddDeletedRows, id, []string{table.name}, []int64{n})
				return err
			}
		}
		var deleted map[string]int64
		if err := tx.QueryRow(ctx, queryDeleteTenantRow, id).Scan(&deleted); err != nil {
			return fmt.Errorf("delete the tenant's row: %w", err)
		}
		b.Table, b.Rows, b.Done = "tenants", 1, true
		detail := map[string]any{"deleted": deleted}
		for k, v := range done.Detail {
			detail[k] = v
		}
		done.Detail = detail
		return insertAudit(ctx, tx, done)
	})
	if err != nil {
		return model.DeletionBatch{}, fmt.Errorf("delete a batch of tenant %s: %w", id, err)
	}
	return b, nil
}
