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

const tenantColumns = `id, name, signing_secret, created_at, retry_max_attempts, retry_min_backoff_ms, retry_max_backoff_ms, limits,
	target_allow_cidrs`

func scanTenant(row pgx.Row) (*model.Tenant, error) {
	var (
		t          model.Tenant
		minB, maxB *int64
	)
	if err := row.Scan(&t.ID, &t.Name, &t.SigningSecret, &t.CreatedAt, &t.Retry.MaxAttempts, &minB, &maxB, &t.Limits,
		&t.TargetAllowCIDRs); err != nil {
		return nil, err
	}
	t.Retry.MinBackoff, t.Retry.MaxBackoff = millisToDuration(minB), millisToDuration(maxB)
	return &t, nil
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
INSERT INTO tenants (id, name, signing_secret) VALUES ($1, $2, $3)
RETURNING created_at`

const queryInsertAPIKey = `-- name: InsertAPIKey
INSERT INTO api_keys (id, tenant_id, secret_hash) VALUES ($1, $2, $3)
RETURNING created_at`

// CreateTenant stores a tenant and its first API key in one transaction, so a
// tenant never exists without a way in.
func (db *DB) CreateTenant(ctx context.Context, t *model.Tenant, key *model.APIKey) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, queryInsertTenant, t.ID, t.Name, t.SigningSecret).Scan(&t.CreatedAt); err != nil {
			return fmt.Errorf("insert tenant: %w", err)
		}
		key.TenantID = t.ID
		if err := tx.QueryRow(ctx, queryInsertAPIKey, key.ID, key.TenantID, key.SecretHash).Scan(&key.CreatedAt); err != nil {
			return fmt.Errorf("insert api key: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create tenant %q: %w", t.Name, err)
	}
	return nil
}

// CreateAPIKey adds another key to an existing tenant.
func (db *DB) CreateAPIKey(ctx context.Context, key *model.APIKey) error {
	if err := db.pool.QueryRow(ctx, queryInsertAPIKey, key.ID, key.TenantID, key.SecretHash).Scan(&key.CreatedAt); err != nil {
		return fmt.Errorf("insert api key for tenant %s: %w", key.TenantID, err)
	}
	return nil
}

const queryGetAPIKey = `-- name: GetAPIKey
SELECT k.id, k.tenant_id, k.secret_hash, k.created_at, k.revoked_at,
	t.id, t.name, t.signing_secret, t.created_at, t.retry_max_attempts, t.retry_min_backoff_ms, t.retry_max_backoff_ms, t.limits,
	t.target_allow_cidrs
FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
WHERE k.id = $1`

// GetAPIKey finds a key by its public id, with its tenant (limits included):
// authenticating a call reads both in one round trip.
func (db *DB) GetAPIKey(ctx context.Context, id string) (*model.APIKey, *model.Tenant, error) {
	var (
		k          model.APIKey
		t          model.Tenant
		minB, maxB *int64
	)
	err := db.pool.QueryRow(ctx, queryGetAPIKey, id).Scan(&k.ID, &k.TenantID, &k.SecretHash, &k.CreatedAt, &k.RevokedAt,
		&t.ID, &t.Name, &t.SigningSecret, &t.CreatedAt, &t.Retry.MaxAttempts, &minB, &maxB, &t.Limits,
		&t.TargetAllowCIDRs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, model.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get api key %s: %w", id, err)
	}
	t.Retry.MinBackoff, t.Retry.MaxBackoff = millisToDuration(minB), millisToDuration(maxB)
	return &k, &t, nil
}

const queryRevokeAPIKey = `-- name: RevokeAPIKey
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 AND tenant_id = $2`

// RevokeAPIKey makes a key unusable from now on.
func (db *DB) RevokeAPIKey(ctx context.Context, tenantID uuid.UUID, keyID string) error {
	tag, err := db.pool.Exec(ctx, queryRevokeAPIKey, keyID, tenantID)
	if err != nil {
		return fmt.Errorf("revoke api key %s: %w", keyID, err)
	}
	if tag.RowsAffected() == 0 {
		return model.ErrNotFound
	}
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
func (db *DB) SetTenantRetry(ctx context.Context, id uuid.UUID, r model.RetryDefaults) (*model.Tenant, error) {
	t, err := scanTenant(db.pool.QueryRow(ctx, querySetTenantRetry, id, r.MaxAttempts,
		durationToMillis(r.MinBackoff), durationToMillis(r.MaxBackoff)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("set retry defaults of tenant %s: %w", id, err)
	}
	return t, nil
}

const querySetTenantLimits = `-- name: SetTenantLimits
UPDATE tenants SET limits = $2 WHERE id = $1
RETURNING ` + tenantColumns

// SetTenantLimits replaces a tenant's limits as a whole.
func (db *DB) SetTenantLimits(ctx context.Context, id uuid.UUID, l model.Limits) (*model.Tenant, error) {
	t, err := scanTenant(db.pool.QueryRow(ctx, querySetTenantLimits, id, l))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("set limits of tenant %s: %w", id, err)
	}
	return t, nil
}

const querySetTenantTargetGrants = `-- name: SetTenantTargetGrants
UPDATE tenants SET target_allow_cidrs = $2 WHERE id = $1
RETURNING ` + tenantColumns

// SetTenantTargetGrants replaces the private ranges granted to a tenant.
func (db *DB) SetTenantTargetGrants(ctx context.Context, id uuid.UUID, cidrs []netip.Prefix) (*model.Tenant, error) {
	if cidrs == nil {
		cidrs = []netip.Prefix{}
	}
	t, err := scanTenant(db.pool.QueryRow(ctx, querySetTenantTargetGrants, id, cidrs))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("set target grants of tenant %s: %w", id, err)
	}
	return t, nil
}
