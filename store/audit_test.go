package store_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// auditAt records an audit entry of the tenant as if made at at: its
// UUIDv7 id and its at both say so.
func auditAt(t *testing.T, db *store.DB, pool *pgxpool.Pool, tenantID uuid.UUID, at time.Time) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	_, err := rand.Read(id[:])
	require.NoError(t, err)
	ms := uint64(at.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	require.NoError(t, db.RecordAudit(context.Background(), model.AuditEntry{
		ID: id, TenantID: &tenantID, Actor: model.ActorOperator, Action: "tenant.limits_changed",
	}))
	exec(t, pool, `UPDATE audit_log SET at = $2 WHERE id = $1`, id, at)
	return id
}

// TestPurgeAudit: entries recorded before the cutoff go, oldest first, at
// most limit a statement; those after it stay.
func TestPurgeAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenantID := uuid.New()
	now := time.Now()
	cutoff := now.Add(-400 * 24 * time.Hour)
	var old []uuid.UUID
	for i := range 5 {
		old = append(old, auditAt(t, db, pool, tenantID, cutoff.Add(-time.Duration(5-i)*time.Hour)))
	}
	kept := []uuid.UUID{
		auditAt(t, db, pool, tenantID, cutoff.Add(time.Second)),
		auditAt(t, db, pool, tenantID, now),
	}
	left := func() []uuid.UUID {
		entries, err := db.ListAudit(ctx, model.AuditFilter{TenantID: &tenantID, Limit: 100})
		require.NoError(t, err)
		var ids []uuid.UUID
		for _, e := range entries {
			ids = append(ids, e.ID)
		}
		sortUUIDs(ids)
		return ids
	}

	for i, want := range []int{2, 2, 1, 0} {
		n, err := db.PurgeAudit(ctx, cutoff, 2)
		require.NoError(t, err)
		require.Equal(t, want, n)
		if i == 0 {
			require.Equal(t, append(old[2:], kept...), left(), "oldest first")
		}
	}
	require.Equal(t, kept, left())
}
