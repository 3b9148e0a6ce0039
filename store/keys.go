package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookwheel/hookwheel/internal/model"
)

// isForeignKeyViolation reports whether err is Postgres refusing a row whose
// reference names nothing.
func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

// execer is what both a pool and a transaction offer: statements that take
// part in a caller's transaction accept either.
type execer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const apiKeyColumns = `id, tenant_id, secret_hash, name, scopes, created_at, created_by, expires_at, revoked_at, last_used_at`

func apiKeyTargets(k *model.APIKey) []any {
	return []any{&k.ID, &k.TenantID, &k.SecretHash, &k.Name, &k.Scopes, &k.CreatedAt, &k.CreatedBy, &k.ExpiresAt,
		&k.RevokedAt, &k.LastUsedAt}
}

const queryInsertAPIKey = `-- name: InsertAPIKey
INSERT INTO api_keys (id, tenant_id, secret_hash, name, scopes, created_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING created_at`

func insertAPIKey(ctx context.Context, q execer, key *model.APIKey) error {
	err := q.QueryRow(ctx, queryInsertAPIKey, key.ID, key.TenantID, key.SecretHash, key.Name, key.Scopes, key.CreatedBy,
		key.ExpiresAt).Scan(&key.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert api key %s: %w", key.ID, err)
	}
	return nil
}

const queryLockUsableKey = `-- name: LockUsableKey
SELECT 1 FROM api_keys WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
FOR SHARE`

// CreateAPIKey adds a key to an existing tenant, with its audit entry. A
// key created by another key (grantorID, "" for the operator) is created
// only while that key is still usable: the check holds the grantor's row
// until the new key commits, so a revocation cannot slip between them.
// ErrNotFound when the tenant does not exist, ErrGrantorUnusable when the
// grantor is revoked or expired.
func (db *DB) CreateAPIKey(ctx context.Context, key *model.APIKey, grantorID string, audit model.AuditEntry) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if grantorID != "" {
			var one int
			err := tx.QueryRow(ctx, queryLockUsableKey, grantorID).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return model.ErrGrantorUnusable
			}
			if err != nil {
				return fmt.Errorf("check creating key %s: %w", grantorID, err)
			}
		}
		if err := insertAPIKey(ctx, tx, key); err != nil {
			return err
		}
		return insertAudit(ctx, tx, audit)
	})
	if isForeignKeyViolation(err) {
		return model.ErrNotFound
	}
	if errors.Is(err, model.ErrGrantorUnusable) {
		return err
	}
	if err != nil {
		return fmt.Errorf("create api key for tenant %s: %w", key.TenantID, err)
	}
	return nil
}

const queryGetAPIKey = `-- name: GetAPIKey
SELECT k.*, tn.*
FROM (SELECT ` + apiKeyColumns + ` FROM api_keys WHERE id = $1) k,
	LATERAL (SELECT ` + tenantColumns + ` FROM tenants WHERE id = k.tenant_id) tn`

// GetAPIKey finds a key by its public id, with its tenant (limits included):
// authenticating a call reads both in one round trip.
func (db *DB) GetAPIKey(ctx context.Context, id string) (*model.APIKey, *model.Tenant, error) {
	var (
		k model.APIKey
		t tenantRow
	)
	err := db.pool.QueryRow(ctx, queryGetAPIKey, id).Scan(append(apiKeyTargets(&k), t.targets()...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, model.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get api key %s: %w", id, err)
	}
	return &k, t.tenant(), nil
}

const queryListAPIKeys = `-- name: ListAPIKeys
SELECT ` + apiKeyColumns + ` FROM api_keys WHERE tenant_id = $1 ORDER BY created_at DESC, id`

// ListAPIKeys returns all of a tenant's keys, revoked and expired ones
// included, newest first.
func (db *DB) ListAPIKeys(ctx context.Context, tenantID uuid.UUID) ([]model.APIKey, error) {
	rows, err := db.pool.Query(ctx, queryListAPIKeys, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list api keys of tenant %s: %w", tenantID, err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.APIKey, error) {
		var k model.APIKey
		err := r.Scan(apiKeyTargets(&k)...)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list api keys of tenant %s: %w", tenantID, err)
	}
	return keys, nil
}

const queryRevokeAPIKey = `-- name: RevokeAPIKey
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 AND tenant_id = $2
RETURNING ` + apiKeyColumns + `, revoked_at = now()`

// RevokeAPIKey makes a key unusable from now on and returns it; revoking a
// revoked key changes nothing (and records nothing). ErrNotFound when the
// tenant has no such key.
func (db *DB) RevokeAPIKey(ctx context.Context, tenantID uuid.UUID, keyID string, audit model.AuditEntry) (*model.APIKey, error) {
	var k model.APIKey
	if err := db.revokeAudited(ctx, queryRevokeAPIKey, []any{keyID, tenantID}, apiKeyTargets(&k), audit); err != nil {
		return nil, fmt.Errorf("revoke api key %s: %w", keyID, err)
	}
	return &k, nil
}

const queryTouchAPIKeys = `-- name: TouchAPIKeys
UPDATE api_keys k SET last_used_at = u.at
FROM unnest($1::text[], $2::timestamptz[]) AS u(id, at)
WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`

// TouchAPIKeys records when keys were last used, many in one statement:
// writing last_used_at on every request would add an UPDATE (and a dead
// row) to each call.
func (db *DB) TouchAPIKeys(ctx context.Context, lastUsed map[string]time.Time) error {
	if len(lastUsed) == 0 {
		return nil
	}
	ids := make([]string, 0, len(lastUsed))
	ats := make([]time.Time, 0, len(lastUsed))
	for id, at := range lastUsed {
		ids = append(ids, id)
		ats = append(ats, at)
	}
	if _, err := db.pool.Exec(ctx, queryTouchAPIKeys, ids, ats); err != nil {
		return fmt.Errorf("record last use of %d api keys: %w", len(ids), err)
	}
	return nil
}
