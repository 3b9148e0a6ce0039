package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

func newPortalLink(t *testing.T, tenantID uuid.UUID, value string, expiresIn time.Duration) *model.PortalLink {
	t.Helper()
	return &model.PortalLink{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenantID, SecretHash: []byte("hash-" + value),
		LabelKey: "customer", LabelValue: value, Name: "link " + value, CreatedBy: model.ActorCLI,
		ExpiresAt: time.Now().Add(expiresIn).UTC().Truncate(time.Microsecond),
	}
}

// TestPortalLinks: a link is stored with its audit entry and read back by
// id with its tenant; lists hold the tenant's live links only, newest
// first, a page at a time; a revocation is recorded once, ends the link for
// lists, and is another tenant's 404.
func TestPortalLinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	created := model.AuditEntry{TenantID: &tenant.ID, Actor: model.ActorCLI, Action: "portal_link.created"}

	var links []*model.PortalLink
	for _, v := range []string{"1", "2", "3"} {
		l := newPortalLink(t, tenant.ID, v, time.Hour)
		require.NoError(t, db.CreatePortalLink(ctx, l, "", 100, created))
		require.False(t, l.CreatedAt.IsZero())
		links = append(links, l)
	}
	expired := newPortalLink(t, tenant.ID, "expired", time.Hour)
	require.NoError(t, db.CreatePortalLink(ctx, expired, "", 100, created))
	exec(t, pool, `UPDATE portal_links SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.ID)
	require.NoError(t, db.CreatePortalLink(ctx, newPortalLink(t, other.ID, "1", time.Hour), "", 100,
		model.AuditEntry{TenantID: &other.ID, Actor: model.ActorCLI, Action: "portal_link.created"}))
	require.ErrorIs(t, db.CreatePortalLink(ctx, newPortalLink(t, uuid.New(), "1", time.Hour), "", 100, created), model.ErrNotFound)

	got, gotTenant, err := db.GetPortalLink(ctx, links[0].ID)
	require.NoError(t, err)
	require.Equal(t, tenant.ID, gotTenant.ID)
	require.Equal(t, links[0].SecretHash, got.SecretHash)
	require.Equal(t, "customer:1", got.Label())
	require.True(t, links[0].ExpiresAt.Equal(got.ExpiresAt))
	require.True(t, got.Usable(time.Now()))
	_, _, err = db.GetPortalLink(ctx, uuid.New())
	require.ErrorIs(t, err, model.ErrNotFound)

	page, err := db.ListPortalLinks(ctx, tenant.ID, nil, 2)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{links[2].ID, links[1].ID}, portalLinkIDs(page), "live links, newest first")
	page, err = db.ListPortalLinks(ctx, tenant.ID, &page[1].ID, 2)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{links[0].ID}, portalLinkIDs(page), "the expired link is not listed")

	revoke := model.AuditEntry{TenantID: &tenant.ID, Actor: model.ActorCLI, Action: "portal_link.revoked"}
	_, err = db.RevokePortalLink(ctx, other.ID, links[1].ID, revoke)
	require.ErrorIs(t, err, model.ErrNotFound, "another tenant's link")
	first, err := db.RevokePortalLink(ctx, tenant.ID, links[1].ID, revoke)
	require.NoError(t, err)
	require.NotNil(t, first.RevokedAt)
	require.False(t, first.Usable(time.Now()))
	again, err := db.RevokePortalLink(ctx, tenant.ID, links[1].ID, revoke)
	require.NoError(t, err)
	require.Equal(t, first.RevokedAt, again.RevokedAt, "revoking again keeps the first revocation")
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = 'portal_link.revoked'`, tenant.ID))
	require.Equal(t, 4, countRows(t, pool, `SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = 'portal_link.created'`, tenant.ID))
	page, err = db.ListPortalLinks(ctx, tenant.ID, nil, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{links[2].ID, links[0].ID}, portalLinkIDs(page))
}

// TestPortalLinkQuotaAndCleanUp: a tenant holds at most maxLive live links
// (expired and revoked ones do not count), and links that ended over a
// week ago are deleted by the tenant's next link.
func TestPortalLinkQuotaAndCleanUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	audit := model.AuditEntry{TenantID: &tenant.ID, Actor: model.ActorCLI, Action: "portal_link.created"}

	a, b := newPortalLink(t, tenant.ID, "a", time.Hour), newPortalLink(t, tenant.ID, "b", time.Hour)
	require.NoError(t, db.CreatePortalLink(ctx, a, "", 2, audit))
	require.NoError(t, db.CreatePortalLink(ctx, b, "", 2, audit))
	require.ErrorIs(t, db.CreatePortalLink(ctx, newPortalLink(t, tenant.ID, "c", time.Hour), "", 2, audit), model.ErrPortalLinkQuota)

	_, err := db.RevokePortalLink(ctx, tenant.ID, a.ID, audit)
	require.NoError(t, err)
	require.NoError(t, db.CreatePortalLink(ctx, newPortalLink(t, tenant.ID, "c", time.Hour), "", 2, audit), "a revoked link leaves room")
	require.Equal(t, 3, countRows(t, pool, `SELECT count(*) FROM portal_links WHERE tenant_id = $1`, tenant.ID))

	exec(t, pool, `UPDATE portal_links SET revoked_at = now() - interval '8 days', created_at = now() - interval '9 days' WHERE id = $1`, a.ID)
	exec(t, pool, `UPDATE portal_links SET expires_at = now() - interval '8 days' WHERE id = $1`, b.ID)
	require.NoError(t, db.CreatePortalLink(ctx, newPortalLink(t, tenant.ID, "d", time.Hour), "", 2, audit))
	require.Equal(t, 2, countRows(t, pool, `SELECT count(*) FROM portal_links WHERE tenant_id = $1`, tenant.ID),
		"the links that ended over a week ago are gone")
}

// TestPortalLinkGrantor: a link created by a key is refused once that key
// is revoked.
func TestPortalLinkGrantor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant, keyID := createTenantWithKey(t, db)
	audit := model.AuditEntry{TenantID: &tenant.ID, Actor: model.KeyActor(keyID), Action: "portal_link.created"}
	require.NoError(t, db.CreatePortalLink(ctx, newPortalLink(t, tenant.ID, "1", time.Hour), keyID, 10, audit))
	_, err := db.RevokeAPIKey(ctx, tenant.ID, keyID, audit)
	require.NoError(t, err)
	require.ErrorIs(t, db.CreatePortalLink(ctx, newPortalLink(t, tenant.ID, "2", time.Hour), keyID, 10, audit), model.ErrGrantorUnusable)
}

func portalLinkIDs(links []model.PortalLink) []uuid.UUID {
	out := make([]uuid.UUID, len(links))
	for i := range links {
		out[i] = links[i].ID
	}
	return out
}
