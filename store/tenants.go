package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// The plan's limits come with the tenant (a primary key probe), so every
// reader of a tenant sees a plan's change at once.
const tenantColumns = `id, name, signing_secrets, created_at, retry_max_attempts, retry_min_backoff_ms, retry_max_backoff_ms, limits,
	target_allow_cidrs, retention_ms, status, deletion_requested_at, deleted_rows, plan, operations_url, ` + tenantPlanLimits

// tenantPlanLimits is the limits of the tenant's plan, '{}' without one, for
// a statement reading tenants under that name.
const tenantPlanLimits = `coalesce((SELECT p.limits FROM plans p WHERE p.name = tenants.plan), '{}') AS plan_limits`

// tenantRow receives tenantColumns: scanTenant reads a row of them alone,
// GetAPIKey after the key's own columns.
type tenantRow struct {
	t                     model.Tenant
	minB, maxB, retention *int64
	deletionRequested     *time.Time
	deleted               map[string]int64
}

func (r *tenantRow) targets() []any {
	t := &r.t
	return []any{&t.ID, &t.Name, &t.SigningSecrets, &t.CreatedAt, &t.Retry.MaxAttempts, &r.minB, &r.maxB, &t.LimitOverrides,
		&t.TargetAllowCIDRs, &r.retention, &t.Status, &r.deletionRequested, &r.deleted, &t.Plan, &t.OperationsURL, &t.PlanLimits}
}

func (r *tenantRow) tenant() *model.Tenant {
	r.t.Retry.MinBackoff, r.t.Retry.MaxBackoff = millisToDuration(r.minB), millisToDuration(r.maxB)
	r.t.Retention = millisToDuration(r.retention)
	r.t.Limits = r.t.LimitOverrides.Resolve(r.t.PlanLimits)
	if r.t.Status == model.TenantDeleting {
		d := &model.TenantDeletion{Deleted: r.deleted}
		if r.deletionRequested != nil {
			d.RequestedAt = *r.deletionRequested
		}
		r.t.Deletion = d
	}
	return &r.t
}

func scanTenant(row pgx.Row) (*model.Tenant, error) {
	var r tenantRow
	if err := row.Scan(r.targets()...); err != nil {
		return nil, err
	}
	return r.tenant(), nil
}

func millisToDuration(ms *int64) *time.Duration {
	if ms == nil {
		return nil
	}
	d := time.Duration(*ms) * time.Millisecond
	return &d
}

func durationToMillis(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

const queryInsertTenant = `-- name: InsertTenant
INSERT INTO tenants (id, name, signing_secrets, plan) VALUES ($1, $2, $3, $4)
RETURNING created_at, ` + tenantPlanLimits

// CreateTenant stores a tenant (on t.Plan, when set) and its first API key
// in one transaction, so a tenant never exists without a way in, and
// records audit with it. model.ErrNoSuchPlan when t.Plan does not exist.
func (db *DB) CreateTenant(ctx context.Context, t *model.Tenant, key *model.APIKey, audit model.AuditEntry) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, queryInsertTenant, t.ID, t.Name, t.SigningSecrets, t.Plan).Scan(&t.CreatedAt, &t.PlanLimits); err != nil {
			if isForeignKeyViolation(err) {
				return model.ErrNoSuchPlan
			}
			return fmt.Errorf("insert tenant: %w", err)
		}
		key.TenantID = t.ID
		if err := insertAPIKey(ctx, tx, key); err != nil {
			return err
		}
		return insertAudit(ctx, tx, audit)
	})
	if errors.Is(err, model.ErrNoSuchPlan) {
		return err
	}
	if err != nil {
		return fmt.Errorf("create tenant %q: %w", t.Name, err)
	}
	t.Limits = t.LimitOverrides.Resolve(t.PlanLimits)
	return nil
}

const queryGetTenant = `-- name: GetTenant
SELECT ` + tenantColumns + ` FROM tenants WHERE id = $1`

// GetTenant reads one tenant.
func (db *DB) GetTenant(ctx context.Context, id uuid.UUID) (*model.Tenant, error) {
	t, err := scanTenant(db.pool.QueryRow(ctx, queryGetTenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get tenant %s: %w", id, err)
	}
	return t, nil
}

const querySetTenantRetry = `-- name: SetTenantRetry
UPDATE tenants SET retry_max_attempts = $2, retry_min_backoff_ms = $3, retry_max_backoff_ms = $4
WHERE id = $1
RETURNING ` + tenantColumns

// SetTenantRetry replaces a tenant's retry defaults.
func (db *DB) SetTenantRetry(ctx context.Context, id uuid.UUID, r model.RetryDefaults, audit model.AuditEntry) (*model.Tenant, error) {
	t, err := db.updateTenant(ctx, audit, querySetTenantRetry, id, r.MaxAttempts,
		durationToMillis(r.MinBackoff), durationToMillis(r.MaxBackoff))
	if err != nil {
		return nil, fmt.Errorf("set retry defaults of tenant %s: %w", id, err)
	}
	return t, nil
}

// updateTenant runs one statement that updates a tenant and returns
// tenantColumns, and records audit in the same transaction.
// model.ErrNotFound when there is no such tenant.
func (db *DB) updateTenant(ctx context.Context, audit model.AuditEntry, query string, args ...any) (*model.Tenant, error) {
	var t *model.Tenant
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		var err error
		if t, err = scanTenant(tx.QueryRow(ctx, query, args...)); err != nil {
			return err
		}
		if err := notifyTenantChanged(ctx, tx, t.ID); err != nil {
			return err
		}
		return insertAudit(ctx, tx, audit)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	return t, err
}

const querySetTenantLimits = `-- name: SetTenantLimits
UPDATE tenants SET limits = $2 WHERE id = $1
RETURNING ` + tenantColumns

// SetTenantLimits replaces a tenant's limits as a whole.
func (db *DB) SetTenantLimits(ctx context.Context, id uuid.UUID, l model.Limits, audit model.AuditEntry) (*model.Tenant, error) {
	t, err := db.updateTenant(ctx, audit, querySetTenantLimits, id, l)
	if err != nil {
		return nil, fmt.Errorf("set limits of tenant %s: %w", id, err)
	}
	return t, nil
}

const querySetTenantTargetGrants = `-- name: SetTenantTargetGrants
UPDATE tenants SET target_allow_cidrs = $2 WHERE id = $1
RETURNING ` + tenantColumns

// SetTenantTargetGrants replaces the private ranges granted to a tenant.
func (db *DB) SetTenantTargetGrants(ctx context.Context, id uuid.UUID, cidrs []netip.Prefix, audit model.AuditEntry) (*model.Tenant, error) {
	if cidrs == nil {
		cidrs = []netip.Prefix{}
	}
	t, err := db.updateTenant(ctx, audit, querySetTenantTargetGrants, id, cidrs)
	if err != nil {
		return nil, fmt.Errorf("set target grants of tenant %s: %w", id, err)
	}
	return t, nil
}

// The page is cut first, so that the waiting count, one bounded probe of
// tasks_tenant_status_recent per tenant (pendingStatuses, as the quota
// counts them), runs for the tenants of the page only: a tenant with
// millions of tasks waiting costs no more than one with upTo.
const queryListTenants = `-- name: ListTenants
SELECT page.*, waiting.n
FROM (
	SELECT ` + tenantColumns + ` FROM tenants WHERE id > $1 ORDER BY id LIMIT $2
) page
CROSS JOIN LATERAL (
	SELECT count(*) AS n FROM (
		SELECT 1 FROM tasks
		WHERE tasks.tenant_id = page.id AND tasks.status IN ` + pendingStatuses + `
		LIMIT $3
	) bounded
) waiting
ORDER BY page.id`

// ListTenants returns up to limit tenants, oldest first (ids are UUIDv7),
// after the tenant with id after when it is given, each with its waiting
// tasks counted up to upTo.
func (db *DB) ListTenants(ctx context.Context, after *uuid.UUID, limit, upTo int) ([]model.TenantSummary, error) {
	from := uuid.Nil // below every tenant's id
	if after != nil {
		from = *after
	}
	rows, err := db.pool.Query(ctx, queryListTenants, from, limit, upTo)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.TenantSummary, error) {
		var (
			row     tenantRow
			waiting int
		)
		if err := r.Scan(append(row.targets(), &waiting)...); err != nil {
			return model.TenantSummary{}, err
		}
		return model.TenantSummary{Tenant: *row.tenant(), WaitingTasks: waiting}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return list, nil
}
