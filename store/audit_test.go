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

// TestAuditWithItsChange: a configuration change and its audit entry commit
// together or not at all: a change refused writes no entry, one that
// changes nothing writes none, and an entry that cannot be written undoes
// its change.
func TestAuditWithItsChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	acme := createTenant(t, db)
	entry := func(action string) *model.AuditEntry {
		return &model.AuditEntry{TenantID: &acme.ID, Actor: "key:test", Action: action}
	}
	actions := func() []string {
		entries, err := db.ListAudit(ctx, model.AuditFilter{TenantID: &acme.ID, Limit: 100})
		require.NoError(t, err)
		var out []string
		for i := len(entries) - 1; i >= 0; i-- {
			out = append(out, entries[i].Action)
		}
		return out
	}
	byOutcome := func(created bool) *model.AuditEntry {
		if created {
			return entry("topic.created")
		}
		return entry("topic.updated")
	}
	base := actions()

	_, err := db.PutTopic(ctx, &model.Topic{TenantID: acme.ID, Name: "one"}, 1, byOutcome)
	require.NoError(t, err)
	_, err = db.PutTopic(ctx, &model.Topic{TenantID: acme.ID, Name: "one"}, 1, byOutcome)
	require.NoError(t, err)
	_, err = db.PutTopic(ctx, &model.Topic{TenantID: acme.ID, Name: "two"}, 1, byOutcome)
	require.ErrorIs(t, err, model.ErrTopicQuota)
	_, err = db.DeleteTopic(ctx, acme.ID, "two", entry("topic.deleted"))
	require.ErrorIs(t, err, model.ErrNotFound)

	s := schedNew(acme.ID, nil)
	s.Paused = true
	require.NoError(t, db.InsertSchedule(ctx, s, entry("schedule.created")))
	_, _, err = db.PauseSchedule(ctx, acme.ID, s.ID, entry("schedule.paused"))
	require.NoError(t, err, "already paused: no change")
	require.Equal(t, append(base, "topic.created", "topic.updated", "schedule.created"), actions())

	// Postgres refuses a NUL in text: the entry fails, and so does its change.
	_, err = db.PutTopic(ctx, &model.Topic{TenantID: acme.ID, Name: "one", Description: "changed"}, 1,
		func(bool) *model.AuditEntry { return entry("topic.\x00") })
	require.Error(t, err)
	topic, err := db.GetTopic(ctx, acme.ID, "one")
	require.NoError(t, err)
	require.Empty(t, topic.Description, "the change went with its entry")
	_, _, err = db.DeleteSchedule(ctx, acme.ID, s.ID, entry("schedule.\x00"))
	require.Error(t, err)
	_, err = db.GetSchedule(ctx, acme.ID, s.ID)
	require.NoError(t, err, "not deleted")
	require.Equal(t, append(base, "topic.created", "topic.updated", "schedule.created"), actions())
}
