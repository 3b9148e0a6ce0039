package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

func TestPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	audit := model.AuditEntry{Actor: model.ActorOperator, Action: "plan.put"}

	free := &model.Plan{Name: "free", Limits: model.Limits{MaxPendingTasks: 10, TasksPerDay: 100, APIRate: model.Unlimited}}
	created, err := db.PutPlan(ctx, free, audit)
	require.NoError(t, err)
	require.True(t, created)
	require.False(t, free.CreatedAt.IsZero())
	again := &model.Plan{Name: "free", Limits: model.Limits{MaxPendingTasks: 20, TasksPerDay: 100, APIRate: model.Unlimited}}
	created, err = db.PutPlan(ctx, again, audit)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, free.CreatedAt, again.CreatedAt)
	require.False(t, again.UpdatedAt.Before(again.CreatedAt))

	got, err := db.GetPlan(ctx, "free")
	require.NoError(t, err)
	require.Equal(t, again.Limits, got.Limits)
	_, err = db.GetPlan(ctx, "nope")
	require.ErrorIs(t, err, model.ErrNotFound)

	// A tenant on the plan reads the plan's limits with it, everywhere.
	tenant := createTenant(t, db)
	_, err = db.SetTenantLimits(ctx, tenant.ID, model.Limits{MaxPendingTasks: 3}, model.AuditEntry{Actor: model.ActorOperator, Action: "x"})
	require.NoError(t, err)
	plan := "free"
	updated, err := db.SetTenantPlan(ctx, tenant.ID, &plan, model.AuditEntry{Actor: model.ActorOperator, Action: "x"})
	require.NoError(t, err)
	require.Equal(t, "free", *updated.Plan)
	require.Equal(t, again.Limits, updated.PlanLimits)
	require.Equal(t, model.Limits{MaxPendingTasks: 3, TasksPerDay: 100}, updated.Limits, "own over the plan's, resolved")
	read, err := db.GetTenant(ctx, tenant.ID)
	require.NoError(t, err)
	require.Equal(t, updated.Limits, read.Limits)
	limits, err := db.TenantLimits(ctx, tenant.ID)
	require.NoError(t, err)
	require.Equal(t, model.Limits{MaxPendingTasks: 3, TasksPerDay: 100, APIRate: model.Unlimited}, limits,
		"the dispatcher's read: own over plan, as set")
	list, err := db.ListTenants(ctx, nil, 10, 10)
	require.NoError(t, err)
	require.Equal(t, "free", *list[0].Plan)

	gold := "gold"
	_, err = db.SetTenantPlan(ctx, tenant.ID, &gold, model.AuditEntry{Actor: model.ActorOperator, Action: "x"})
	require.ErrorIs(t, err, model.ErrNoSuchPlan)
	_, err = db.SetTenantPlan(ctx, uuid.New(), &plan, model.AuditEntry{Actor: model.ActorOperator, Action: "x"})
	require.ErrorIs(t, err, model.ErrNotFound)

	require.ErrorIs(t, db.DeletePlan(ctx, "free", audit), model.ErrPlanInUse)
	_, err = db.SetTenantPlan(ctx, tenant.ID, nil, model.AuditEntry{Actor: model.ActorOperator, Action: "x"})
	require.NoError(t, err)
	require.NoError(t, db.DeletePlan(ctx, "free", audit))
	require.ErrorIs(t, db.DeletePlan(ctx, "free", audit), model.ErrNotFound)
	plans, err := db.ListPlans(ctx)
	require.NoError(t, err)
	require.Empty(t, plans)
}

// TestTasksCreatedCounted: every statement inserting tasks counts them in
// the tenant's tasks created today, in the same transaction; a repeat of an
// idempotency key, which stores nothing, counts nothing.
func TestTasksCreatedCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	count := func(id uuid.UUID) int {
		n, err := db.TasksCreatedToday(ctx, id)
		require.NoError(t, err)
		return n
	}
	require.Zero(t, count(tenant.ID))

	task := newTask(tenant.ID, time.Now())
	task.IdempotencyKey = ptr("k1")
	_, created, err := db.InsertTask(ctx, task, false)
	require.NoError(t, err)
	require.True(t, created)
	repeat := newTask(tenant.ID, time.Now())
	repeat.IdempotencyKey = ptr("k1")
	_, created, err = db.InsertTask(ctx, repeat, false)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, 1, count(tenant.ID))

	batch := []*model.Task{newTask(tenant.ID, time.Now()), newTask(other.ID, time.Now()), newTask(tenant.ID, time.Now()), repeat}
	_, err = db.InsertTasks(ctx, batch, time.Time{})
	require.NoError(t, err)
	require.Equal(t, 3, count(tenant.ID))
	require.Equal(t, 1, count(other.ID))

	// A transaction that rolls back counts nothing.
	boom := context.Canceled
	err = db.WithTasksCreated(ctx, tenant.ID, func(st model.CreateStore, created int) error {
		require.Equal(t, 3, created)
		_, _, err := st.InsertTask(ctx, newTask(tenant.ID, time.Now()), false)
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 3, count(tenant.ID))
}

// TestWithTasksCreatedSerialises: a second holder of a tenant's daily
// count waits for the first to commit and reads the count it left.
func TestWithTasksCreatedSerialises(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant := createTenant(t, db)
	inside, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := db.WithTasksCreated(ctx, tenant.ID, func(st model.CreateStore, created int) error {
			if created != 0 {
				t.Errorf("first holder read %d", created)
			}
			_, err := st.InsertTasks(ctx, []*model.Task{newTask(tenant.ID, time.Now()), newTask(tenant.ID, time.Now())}, time.Time{})
			close(inside)
			<-release
			return err
		})
		if err != nil {
			t.Error(err)
		}
	}()
	<-inside
	second := make(chan int, 1)
	go func() {
		_ = db.WithTasksCreated(ctx, tenant.ID, func(_ model.CreateStore, created int) error {
			second <- created
			return nil
		})
	}()
	select {
	case n := <-second:
		t.Fatalf("the second holder read %d while the first held the lock", n)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	require.Equal(t, 2, <-second, "the count the first committed")
}

// TestClaimCarriesPlanMaxTimeout: a claim carries the max_timeout the
// sender cuts attempts to: the tenant's own, else its plan's, and a tenant's
// model.Unlimited lifts its plan's.
func TestClaimCarriesPlanMaxTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	audit := model.AuditEntry{Actor: model.ActorOperator, Action: "x"}
	_, err := db.PutPlan(ctx, &model.Plan{Name: "short", Limits: model.Limits{MaxTimeout: 5 * time.Second}}, audit)
	require.NoError(t, err)
	short := "short"
	onPlan, own, lifted, none := createTenant(t, db), createTenant(t, db), createTenant(t, db), createTenant(t, db)
	for _, tn := range []*model.Tenant{onPlan, own, lifted} {
		_, err = db.SetTenantPlan(ctx, tn.ID, &short, audit)
		require.NoError(t, err)
	}
	_, err = db.SetTenantLimits(ctx, own.ID, model.Limits{MaxTimeout: 2 * time.Second}, audit)
	require.NoError(t, err)
	_, err = db.SetTenantLimits(ctx, lifted.ID, model.Limits{MaxTimeout: model.Unlimited}, audit)
	require.NoError(t, err)

	for _, tt := range []struct {
		name   string
		tenant *model.Tenant
		want   time.Duration
	}{
		{"the plan's", onPlan, 5 * time.Second},
		{"the tenant's own over its plan's", own, 2 * time.Second},
		{"lifted over its plan's", lifted, model.Unlimited},
		{"none", none, 0},
	} {
		c := claimOne(t, db, pool, insertDueTask(t, db, pool, tt.tenant.ID).ID)
		require.Equal(t, tt.want, c.TenantMaxTimeout, tt.name)
	}
}
