package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

const queryLockSigningSecrets = `-- name: LockSigningSecrets
SELECT signing_secrets FROM tenants WHERE id = $1 FOR UPDATE`

const querySetSigningSecrets = `-- name: SetSigningSecrets
UPDATE tenants SET signing_secrets = $2 WHERE id = $1
RETURNING ` + tenantColumns

// UpdateSigningSecrets replaces a tenant's signing secrets by what change
// makes of them, under the row's lock, so that two rotations (or a rotation
// and a rekey) never lose each other's secret. change returning
// model.ErrUnchanged leaves the row as it is; audit, when given, is recorded in the
// same transaction. ErrNotFound when the tenant does not exist.
func (db *DB) UpdateSigningSecrets(ctx context.Context, tenantID uuid.UUID,
	change func(current []model.SigningSecret) ([]model.SigningSecret, error), audit *model.AuditEntry,
) (*model.Tenant, error) {
	var t *model.Tenant
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		var current []model.SigningSecret
		if err := tx.QueryRow(ctx, queryLockSigningSecrets, tenantID).Scan(&current); err != nil {
			return err
		}
		next, err := change(current)
		if err != nil {
			return err
		}
		if t, err = scanTenant(tx.QueryRow(ctx, querySetSigningSecrets, tenantID, next)); err != nil {
			return err
		}
		if audit != nil {
			return insertAudit(ctx, tx, *audit)
		}
		return nil
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, model.ErrNotFound
	case errors.Is(err, model.ErrUnchanged):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("update signing secrets of tenant %s: %w", tenantID, err)
	}
	return t, nil
}

const queryTenantIDsAfter = `-- name: TenantIDsAfter
SELECT id FROM tenants WHERE id > $1 ORDER BY id LIMIT $2`

// TenantIDsAfter pages through every tenant's id in id order, for passes
// over all tenants (rekey).
func (db *DB) TenantIDsAfter(ctx context.Context, after uuid.UUID, limit int) ([]uuid.UUID, error) {
	rows, err := db.pool.Query(ctx, queryTenantIDsAfter, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list tenant ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("list tenant ids: %w", err)
	}
	return ids, nil
}

const querySigningSecrets = `-- name: SigningSecrets
SELECT signing_secrets FROM tenants WHERE id = $1`

// SigningSecrets reads a tenant's signing secrets as stored, for a claim
// that waited long enough for them to have been rotated since.
func (db *DB) SigningSecrets(ctx context.Context, tenantID uuid.UUID) ([]model.SigningSecret, error) {
	var secrets []model.SigningSecret
	err := db.pool.QueryRow(ctx, querySigningSecrets, tenantID).Scan(&secrets)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read signing secrets of tenant %s: %w", tenantID, err)
	}
	return secrets, nil
}
