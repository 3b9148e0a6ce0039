package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

func TestAPIKeyRevocationAndUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant, keyID := createTenantWithKey(t, db)
	audits := func() int {
		t.Helper()
		entries, err := db.ListAudit(ctx, model.AuditFilter{TenantID: &tenant.ID, Limit: 100})
		require.NoError(t, err)
		n := 0
		for _, e := range entries {
			if e.Action == "key.revoked" {
				n++
			}
		}
		return n
	}
	revoke := model.AuditEntry{TenantID: &tenant.ID, Actor: model.ActorOperator, Action: "key.revoked"}

	_, err := db.RevokeAPIKey(ctx, uuid.New(), keyID, revoke)
	require.ErrorIs(t, err, model.ErrNotFound, "another tenant's key")
	require.Equal(t, 0, audits(), "nothing revoked, nothing recorded")

	first, err := db.RevokeAPIKey(ctx, tenant.ID, keyID, revoke)
	require.NoError(t, err)
	require.NotNil(t, first.RevokedAt)
	again, err := db.RevokeAPIKey(ctx, tenant.ID, keyID, revoke)
	require.NoError(t, err)
	require.Equal(t, first.RevokedAt, again.RevokedAt, "revoking again keeps the first revocation")
	require.Equal(t, 1, audits(), "and records it once")

	// last_used_at only moves forward, whatever order batches land in.
	later := time.Now().UTC().Truncate(time.Microsecond)
	require.NoError(t, db.TouchAPIKeys(ctx, map[string]time.Time{keyID: later, "no-such-key": later}))
	require.NoError(t, db.TouchAPIKeys(ctx, map[string]time.Time{keyID: later.Add(-time.Minute)}))
	keys, err := db.ListAPIKeys(ctx, tenant.ID)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.True(t, later.Equal(*keys[0].LastUsedAt), "last used %s, want %s", keys[0].LastUsedAt, later)
}

func TestUpdateSigningSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant := createTenant(t, db)

	_, err := db.UpdateSigningSecrets(ctx, tenant.ID, func([]model.SigningSecret) ([]model.SigningSecret, error) {
		return nil, model.ErrUnchanged
	}, nil)
	require.ErrorIs(t, err, model.ErrUnchanged)

	added := model.SigningSecret{ID: "ss_new", Value: "whsec_new", CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	updated, err := db.UpdateSigningSecrets(ctx, tenant.ID, func(current []model.SigningSecret) ([]model.SigningSecret, error) {
		require.Equal(t, tenant.SigningSecrets[0].ID, current[0].ID)
		return append([]model.SigningSecret{added}, current...), nil
	}, &model.AuditEntry{TenantID: &tenant.ID, Actor: model.ActorCLI, Action: "signing_secret.rotated"})
	require.NoError(t, err)
	require.Equal(t, []string{"ss_new", tenant.SigningSecrets[0].ID}, secretIDs(updated.SigningSecrets))

	_, err = db.UpdateSigningSecrets(ctx, uuid.New(), func(c []model.SigningSecret) ([]model.SigningSecret, error) { return c, nil }, nil)
	require.ErrorIs(t, err, model.ErrNotFound)
}
