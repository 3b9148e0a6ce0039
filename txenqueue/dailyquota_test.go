package txenqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/tenants"
	"github.com/hookwheel/hookwheel/txenqueue"
)

// TestDailyQuota: tasks inserted in an application's transaction count in
// the tenant's tasks created today when it commits, and none when it rolls
// back; the tasks_per_day check reads the count (the transaction's own
// tasks included) without holding it, so an open transaction holds back
// no other create of the tenant.
func TestDailyQuota(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	_, err := tenants.New(tenants.Config{Store: e.db}).SetLimits(ctx, e.tenant, model.Limits{TasksPerDay: 3}, model.ActorCLI)
	require.NoError(t, err)
	c := e.client()
	hook := "http://127.0.0.1:9/hook"

	rolledBack, err := e.app.Begin(ctx)
	require.NoError(t, err)
	_, err = c.Insert(ctx, rolledBack, txenqueue.Task{URL: hook, Delay: time.Hour})
	require.NoError(t, err)
	require.NoError(t, rolledBack.Rollback(ctx))

	tx, err := e.app.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	results, err := c.InsertMany(ctx, tx, []txenqueue.Task{{URL: hook, Delay: time.Hour}, {URL: hook, Delay: time.Hour}})
	require.NoError(t, err)
	require.NoError(t, results[0].Err)
	require.NoError(t, results[1].Err)

	// While tx is open, another create of the tenant goes through at once.
	other, err := e.app.Begin(ctx)
	require.NoError(t, err)
	_, err = c.Insert(ctx, other, txenqueue.Task{URL: hook, Delay: time.Hour})
	require.NoError(t, err, "the open transaction's tasks are not counted yet")
	require.NoError(t, other.Commit(ctx))

	_, err = c.Insert(ctx, tx, txenqueue.Task{URL: hook, Delay: time.Hour})
	var daily *txenqueue.DailyQuotaError
	require.ErrorAs(t, err, &daily, "its own two and the other's one")
	require.Equal(t, 3, daily.Limit)
	require.Equal(t, 3, daily.Created)
	require.Positive(t, daily.RetryAfter(time.Now()))
	require.NoError(t, tx.Commit(ctx))

	n, err := e.db.TasksCreatedToday(ctx, e.tenant)
	require.NoError(t, err)
	require.Equal(t, 3, n)
}
