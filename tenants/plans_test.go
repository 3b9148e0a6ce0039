package tenants_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

// TestPlanResolution: a tenant's effective limits are its own over its
// plan's over the node's defaults, field by field, and a plan's change is
// seen on the tenant's next read, through its key too.
func TestPlanResolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := model.Limits{APIRate: 50, MaxPendingTasks: 100, MaxSchedules: 10}
	svc := tenants.New(tenants.Config{Store: storetest.DB(t), DefaultLimits: node, DefaultPlan: "free"})

	// The default plan does not exist yet: the tenant goes on none.
	early, err := svc.Create(ctx, "early", model.ActorCLI)
	require.NoError(t, err)
	require.Nil(t, early.Tenant.Plan)
	require.Equal(t, node, early.Tenant.Limits)

	_, created, err := svc.PutPlan(ctx, model.Plan{Name: "free", Limits: model.Limits{MaxPendingTasks: 20, TasksPerDay: 500, MaxSchedules: model.Unlimited}}, model.ActorOperator)
	require.NoError(t, err)
	require.True(t, created)
	acme, err := svc.Create(ctx, "acme", model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, "free", *acme.Tenant.Plan, "the default plan")
	require.Equal(t, model.Limits{APIRate: 50, MaxPendingTasks: 20, TasksPerDay: 500}, acme.Tenant.Limits)

	_, err = svc.SetLimits(ctx, acme.Tenant.ID, model.Limits{MaxPendingTasks: 7, APIRate: model.Unlimited}, model.ActorOperator)
	require.NoError(t, err)
	got, err := svc.Get(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	require.Equal(t, model.Limits{MaxPendingTasks: 7, TasksPerDay: 500}, got.Limits, "own over the plan's over the node's")

	_, created, err = svc.PutPlan(ctx, model.Plan{Name: "free", Limits: model.Limits{TasksPerDay: 900, DeliveriesPerDay: 5}}, model.ActorOperator)
	require.NoError(t, err)
	require.False(t, created)
	got, err = svc.Get(ctx, acme.Tenant.ID)
	require.NoError(t, err)
	require.Equal(t, model.Limits{MaxPendingTasks: 7, MaxSchedules: 10, TasksPerDay: 900, DeliveriesPerDay: 5}, got.Limits,
		"the plan's change, on the next read")
	caller, err := svc.Authenticate(ctx, acme.APIKey)
	require.NoError(t, err)
	require.Equal(t, got.Limits, caller.Tenant.Limits, "and through the tenant's key")

	// A plan named at create wins over the default; an unknown one is refused.
	_, _, err = svc.PutPlan(ctx, model.Plan{Name: "pro"}, model.ActorOperator)
	require.NoError(t, err)
	pro := "pro"
	other, err := svc.CreateOn(ctx, "other", &pro, model.ActorCLI)
	require.NoError(t, err)
	require.Equal(t, "pro", *other.Tenant.Plan)
	gold := "gold"
	_, err = svc.CreateOn(ctx, "gold", &gold, model.ActorCLI)
	require.ErrorIs(t, err, model.ErrNoSuchPlan)
	_, err = svc.SetPlan(ctx, acme.Tenant.ID, &gold, model.ActorOperator)
	require.ErrorIs(t, err, model.ErrNoSuchPlan)

	require.ErrorIs(t, svc.DeletePlan(ctx, "free", model.ActorOperator), model.ErrPlanInUse)
	got, err = svc.SetPlan(ctx, acme.Tenant.ID, nil, model.ActorOperator)
	require.NoError(t, err)
	require.Nil(t, got.Plan)
	require.Equal(t, model.Limits{MaxPendingTasks: 7, MaxSchedules: 10}, got.Limits)
	require.NoError(t, svc.DeletePlan(ctx, "free", model.ActorOperator))
	require.ErrorIs(t, svc.DeletePlan(ctx, "free", model.ActorOperator), model.ErrNotFound)
	_, err = svc.GetPlan(ctx, "free")
	require.ErrorIs(t, err, model.ErrNotFound)
	plans, err := svc.ListPlans(ctx)
	require.NoError(t, err)
	require.Len(t, plans, 1)

	_, _, err = svc.PutPlan(ctx, model.Plan{Name: "Bad Name"}, model.ActorOperator)
	require.Error(t, err)
	require.False(t, tenants.ValidPlanName("-x"))

	entries, err := svc.ListAudit(ctx, model.AuditFilter{Limit: 100})
	require.NoError(t, err)
	actions := map[string]int{}
	for _, e := range entries {
		actions[e.Action]++
		if e.Action == "plan.put" || e.Action == "plan.deleted" {
			require.Equal(t, model.ActorOperator, e.Actor)
		}
	}
	require.Equal(t, 3, actions["plan.put"])
	require.Equal(t, 1, actions["plan.deleted"])
	require.Equal(t, 1, actions["tenant.plan_changed"])
}
