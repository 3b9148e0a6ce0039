package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// TestHeldTenantsTasks: a claim leaves out the tasks of the tenants it is
// told are held, counting them no attempt, and the sweep's listing passes
// over them; the tenants not active are those a status change made so.
func TestHeldTenantsTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	held, free := createTenant(t, db), createTenant(t, db)
	heldTask, freeTask := insertDueTask(t, db, pool, held.ID), insertDueTask(t, db, pool, free.ID)

	audit := model.AuditEntry{TenantID: &held.ID, Actor: model.ActorOperator, Action: "tenant.suspended"}
	got, err := db.SetTenantStatus(ctx, held.ID, model.TenantSuspended, []model.TenantStatus{model.TenantActive}, audit)
	require.NoError(t, err)
	require.Equal(t, model.TenantSuspended, got.Status)
	inactive, err := db.InactiveTenants(ctx)
	require.NoError(t, err)
	require.Equal(t, map[uuid.UUID]model.TenantStatus{held.ID: model.TenantSuspended}, inactive)
	_, err = db.SetTenantStatus(ctx, held.ID, model.TenantActive, []model.TenantStatus{model.TenantDeleting}, audit)
	require.ErrorIs(t, err, model.ErrConflict)
	_, err = db.SetTenantStatus(ctx, uuid.New(), model.TenantSuspended, []model.TenantStatus{model.TenantActive}, audit)
	require.ErrorIs(t, err, model.ErrNotFound)

	heldIDs := &model.Held{Tenants: []uuid.UUID{held.ID}}
	due, err := db.ListDueExcept(ctx, allPartitions(), model.DueCursor{}, dbNow(t, pool), 100, heldIDs)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{freeTask.ID}, dueIDs(due))
	due, err = db.ListDueExcept(ctx, allPartitions(), model.DueCursor{}, dbNow(t, pool), 100, nil)
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{heldTask.ID, freeTask.ID}, dueIDs(due))

	claims, err := db.ClaimTasks(ctx, testNode, allPartitions(), []uuid.UUID{heldTask.ID, freeTask.ID}, dbNow(t, pool),
		30*time.Second, heldIDs)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, freeTask.ID, claims[0].ID)
	stored, err := db.GetTask(ctx, held.ID, heldTask.ID)
	require.NoError(t, err)
	require.Equal(t, model.StatusScheduled, stored.Status)
	require.Zero(t, stored.Attempts)
}
