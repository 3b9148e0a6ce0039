package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Plans: named sets of limits. A tenant's row names its plan (tenants.plan,
// a foreign key that refuses deleting a plan in use), and every read of a
// tenant reads its plan's limits with it (tenantColumns), so a changed plan
// reaches its tenants wherever tenants are read, caches included, within
// their time.

const planColumns = `name, limits, created_at, updated_at`

func scanPlan(row pgx.Row) (*model.Plan, error) {
	var p model.Plan
	if err := row.Scan(&p.Name, &p.Limits, &p.CreatedAt, &p.UpdatedAt); err != nil {
		return nil, err
	}
	return &p, nil
}

const queryPutPlan = `-- name: PutPlan
INSERT INTO plans (name, limits) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET limits = excluded.limits, updated_at = now()
RETURNING ` + planColumns + `, xmax = 0 AS inserted`

// PutPlan creates the plan p.Name with p.Limits, or replaces the limits of
// the plan of that name, and records audit with it. It fills p's times;
// created tells whether the plan is new.
func (db *DB) PutPlan(ctx context.Context, p *model.Plan, audit model.AuditEntry) (created bool, err error) {
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		// xmax is 0 on a row version this statement inserted, not updated.
		if err := tx.QueryRow(ctx, queryPutPlan, p.Name, p.Limits).Scan(&p.Name, &p.Limits, &p.CreatedAt, &p.UpdatedAt, &created); err != nil {
			return err
		}
		// Its tenants' limits change with it: every node drops what it
		// cached of any tenant (uuid.Nil), as a tenant's own change would.
		if err := notifyTenantChanged(ctx, tx, uuid.Nil); err != nil {
			return err
		}
		return insertAudit(ctx, tx, audit)
	})
	if err != nil {
		return false, fmt.Errorf("put plan %q: %w", p.Name, err)
	}
	return created, nil
}

const queryListPlans = `-- name: ListPlans
SELECT ` + planColumns + ` FROM plans ORDER BY name`

// ListPlans returns every plan by name. Plans are an operator's few
// offerings, not a customer's data: the list is not paged.
func (db *DB) ListPlans(ctx context.Context) ([]model.Plan, error) {
	rows, err := db.pool.Query(ctx, queryListPlans)
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Plan, error) {
		p, err := scanPlan(r)
		if err != nil {
			return model.Plan{}, err
		}
		return *p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	return list, nil
}

const queryGetPlan = `-- name: GetPlan
SELECT ` + planColumns + ` FROM plans WHERE name = $1`

// GetPlan reads one plan; model.ErrNotFound when there is none of that name.
func (db *DB) GetPlan(ctx context.Context, name string) (*model.Plan, error) {
	p, err := scanPlan(db.pool.QueryRow(ctx, queryGetPlan, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get plan %q: %w", name, err)
	}
	return p, nil
}

const queryDeletePlan = `-- name: DeletePlan
DELETE FROM plans WHERE name = $1`

// DeletePlan deletes a plan and records audit with it: model.ErrNotFound
// when there is none of that name, model.ErrPlanInUse while a tenant is on
// it (the foreign key decides, so a tenant given the plan concurrently
// cannot be left on a deleted one).
func (db *DB) DeletePlan(ctx context.Context, name string, audit model.AuditEntry) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, queryDeletePlan, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return model.ErrNotFound
		}
		return insertAudit(ctx, tx, audit)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, model.ErrNotFound):
		return err
	case isForeignKeyViolation(err):
		return model.ErrPlanInUse
	default:
		return fmt.Errorf("delete plan %q: %w", name, err)
	}
}

const querySetTenantPlan = `-- name: SetTenantPlan
UPDATE tenants SET plan = $2 WHERE id = $1
RETURNING ` + tenantColumns

// SetTenantPlan puts a tenant on a plan, or on none with nil:
// model.ErrNoSuchPlan when the plan does not exist.
func (db *DB) SetTenantPlan(ctx context.Context, id uuid.UUID, plan *string, audit model.AuditEntry) (*model.Tenant, error) {
	t, err := db.updateTenant(ctx, audit, querySetTenantPlan, id, plan)
	if isForeignKeyViolation(err) {
		return nil, model.ErrNoSuchPlan
	}
	if err != nil {
		return nil, fmt.Errorf("set plan of tenant %s: %w", id, err)
	}
	return t, nil
}
