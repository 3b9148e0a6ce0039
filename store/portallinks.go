package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Portal links (migration 00034): a tenant's read-only views of one label's
// tasks, each behind a token of its own, read on every portal call.

const portalLinkColumns = `id, tenant_id, secret_hash, label_key, label_value, name, description, created_by, created_at,
	expires_at, revoked_at`

func portalLinkTargets(l *model.PortalLink) []any {
	return []any{&l.ID, &l.TenantID, &l.SecretHash, &l.LabelKey, &l.LabelValue, &l.Name, &l.Description, &l.CreatedBy,
		&l.CreatedAt, &l.ExpiresAt, &l.RevokedAt}
}

// portalLinkKeep is how long a link stays stored once it expired or was
// revoked: its tenant's next link deletes it after that, so that a tenant
// minting a link per visit does not grow the table without end.
const portalLinkKeep = `interval '7 days'`

const queryDeleteStalePortalLinks = `-- name: DeleteStalePortalLinks
DELETE FROM portal_links WHERE id = ANY(ARRAY(
	SELECT id FROM portal_links
	WHERE tenant_id = $1 AND (expires_at < now() - ` + portalLinkKeep + ` OR revoked_at < now() - ` + portalLinkKeep + `)
	LIMIT 100))`

const queryCountLivePortalLinks = `-- name: CountLivePortalLinks
SELECT count(*) FROM (
	SELECT 1 FROM portal_links WHERE tenant_id = $1 AND revoked_at IS NULL AND expires_at > now() LIMIT $2
) live`

const queryInsertPortalLink = `-- name: InsertPortalLink
INSERT INTO portal_links (id, tenant_id, secret_hash, label_key, label_value, name, description, created_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING created_at`

// CreatePortalLink stores a tenant's new link with its audit entry, unless
// the tenant holds maxLive live links already (model.ErrPortalLinkQuota;
// checked, not reserved, so concurrent creations may pass it by a few). A
// link created by a key (grantorID, "" for none) is created only while that
// key is usable, as CreateAPIKey checks it (model.ErrGrantorUnusable). The
// tenant's links that ended long ago are deleted on the way, a bounded
// batch each time. model.ErrNotFound when the tenant does not exist.
func (db *DB) CreatePortalLink(ctx context.Context, link *model.PortalLink, grantorID string, maxLive int, audit model.AuditEntry) error {
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
		if _, err := tx.Exec(ctx, queryDeleteStalePortalLinks, link.TenantID); err != nil {
			return fmt.Errorf("delete ended portal links: %w", err)
		}
		var live int
		if err := tx.QueryRow(ctx, queryCountLivePortalLinks, link.TenantID, maxLive).Scan(&live); err != nil {
			return fmt.Errorf("count live portal links: %w", err)
		}
		if live >= maxLive {
			return model.ErrPortalLinkQuota
		}
		err := tx.QueryRow(ctx, queryInsertPortalLink, link.ID, link.TenantID, link.SecretHash, link.LabelKey, link.LabelValue,
			link.Name, link.Description, link.CreatedBy, link.ExpiresAt).Scan(&link.CreatedAt)
		if err != nil {
			return fmt.Errorf("insert portal link: %w", err)
		}
		return insertAudit(ctx, tx, audit)
	})
	switch {
	case isForeignKeyViolation(err):
		return model.ErrNotFound
	case errors.Is(err, model.ErrGrantorUnusable), errors.Is(err, model.ErrPortalLinkQuota):
		return err
	case err != nil:
		return fmt.Errorf("create portal link for tenant %s: %w", link.TenantID, err)
	}
	return nil
}

const queryGetPortalLink = `-- name: GetPortalLink
SELECT l.*, tn.*
FROM (SELECT ` + portalLinkColumns + ` FROM portal_links WHERE id = $1) l,
	LATERAL (SELECT ` + tenantColumns + ` FROM tenants WHERE id = l.tenant_id) tn`

// GetPortalLink finds a link by its id, with its tenant (limits included),
// in one round trip: every portal call reads both.
func (db *DB) GetPortalLink(ctx context.Context, id uuid.UUID) (*model.PortalLink, *model.Tenant, error) {
	var (
		l model.PortalLink
		t tenantRow
	)
	err := db.pool.QueryRow(ctx, queryGetPortalLink, id).Scan(append(portalLinkTargets(&l), t.targets()...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, model.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get portal link %s: %w", id, err)
	}
	return &l, t.tenant(), nil
}

const queryListLivePortalLinks = `-- name: ListLivePortalLinks
SELECT ` + portalLinkColumns + ` FROM portal_links
WHERE tenant_id = $1 AND revoked_at IS NULL AND expires_at > now() AND ($2::uuid IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3`

// ListPortalLinks returns up to limit of a tenant's live links (neither
// revoked nor expired), newest first, older than the link before when it is
// given.
func (db *DB) ListPortalLinks(ctx context.Context, tenantID uuid.UUID, before *uuid.UUID, limit int) ([]model.PortalLink, error) {
	rows, err := db.pool.Query(ctx, queryListLivePortalLinks, tenantID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list portal links of tenant %s: %w", tenantID, err)
	}
	links, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.PortalLink, error) {
		var l model.PortalLink
		err := r.Scan(portalLinkTargets(&l)...)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("list portal links of tenant %s: %w", tenantID, err)
	}
	return links, nil
}

const queryRevokePortalLink = `-- name: RevokePortalLink
UPDATE portal_links SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 AND tenant_id = $2
RETURNING ` + portalLinkColumns + `, revoked_at = now()`

// RevokePortalLink ends one of a tenant's links and returns it; revoking a
// revoked link changes nothing (and records nothing). ErrNotFound when the
// tenant has no such link.
func (db *DB) RevokePortalLink(ctx context.Context, tenantID, id uuid.UUID, audit model.AuditEntry) (*model.PortalLink, error) {
	var l model.PortalLink
	if err := db.revokeAudited(ctx, queryRevokePortalLink, []any{id, tenantID}, portalLinkTargets(&l), audit); err != nil {
		return nil, fmt.Errorf("revoke portal link %s: %w", id, err)
	}
	return &l, nil
}
