package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Tenant is one customer of a hookwheel installation.
type Tenant struct {
	ID            uuid.UUID
	Name          string
	SigningSecret string
	CreatedAt     time.Time
}

// APIKey is the stored form of a tenant's API key: its public id and the hash
// of its secret, never the secret itself.
type APIKey struct {
	ID         string
	TenantID   uuid.UUID
	SecretHash []byte
	CreatedAt  time.Time
	RevokedAt  *time.Time
}

const queryInsertTenant = `-- name: InsertTenant
INSERT INTO tenants (id, name, signing_secret) VALUES ($1, $2, $3)
RETURNING created_at`

const queryInsertAPIKey = `-- name: InsertAPIKey
INSERT INTO api_keys (id, tenant_id, secret_hash) VALUES ($1, $2, $3)
RETURNING created_at`

// CreateTenant stores a tenant and its first API key in one transaction, so a
// tenant never exists without a way in.
func (db *DB) CreateTenant(ctx context.Context, t *Tenant, key *APIKey) error {
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
func (db *DB) CreateAPIKey(ctx context.Context, key *APIKey) error {
	if err := db.pool.QueryRow(ctx, queryInsertAPIKey, key.ID, key.TenantID, key.SecretHash).Scan(&key.CreatedAt); err != nil {
		return fmt.Errorf("insert api key for tenant %s: %w", key.TenantID, err)
	}
	return nil
}

const queryGetAPIKey = `-- name: GetAPIKey
SELECT id, tenant_id, secret_hash, created_at, revoked_at FROM api_keys WHERE id = $1`

// GetAPIKey finds a key by its public id.
func (db *DB) GetAPIKey(ctx context.Context, id string) (*APIKey, error) {
	var k APIKey
	err := db.pool.QueryRow(ctx, queryGetAPIKey, id).Scan(&k.ID, &k.TenantID, &k.SecretHash, &k.CreatedAt, &k.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get api key %s: %w", id, err)
	}
	return &k, nil
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
		return ErrNotFound
	}
	return nil
}

const queryGetTenant = `-- name: GetTenant
SELECT id, name, signing_secret, created_at FROM tenants WHERE id = $1`

// GetTenant reads one tenant.
func (db *DB) GetTenant(ctx context.Context, id uuid.UUID) (*Tenant, error) {
	var t Tenant
	err := db.pool.QueryRow(ctx, queryGetTenant, id).Scan(&t.ID, &t.Name, &t.SigningSecret, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get tenant %s: %w", id, err)
	}
	return &t, nil
}
