package maintenance

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestPurgerUsage: two days on, the purger folds a day's usage rows of a
// tenant (its creates' and its recorders' shards) into one, the counts
// unchanged; past model.UsageKeepDays days it deletes them, whatever the
// task retention (none here).
func TestPurgerUsage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := storetest.DB(t)
	tenant := storetest.CreateTenant(t, db, model.Limits{})
	claims := storetest.ClaimNow(t, db, storetest.InsertTask(t, db, tenant, "https://receiver.example/hook", time.Now()).ID,
		storetest.InsertTask(t, db, tenant, "https://receiver.example/hook", time.Now()).ID)
	_, err := db.RecordAttempts(ctx, []model.AttemptResult{result(claims[0], model.StatusDelivered, 200, nil),
		result(claims[1], model.StatusDelivered, 200, nil)})
	require.NoError(t, err)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	read := func() []model.UsageDay {
		days, err := db.TenantUsage(ctx, tenant, today, today)
		require.NoError(t, err)
		return days
	}
	before := read()
	require.Len(t, before, 1)
	require.EqualValues(t, 2, before[0].TasksCreated)
	require.EqualValues(t, 2, before[0].Deliveries)

	fake := clock.NewFake(today.Add(2*24*time.Hour + time.Hour))
	reg := prometheus.NewRegistry()
	p, err := NewPurger(PurgerConfig{
		Store: db, Clock: fake, Logger: quietLogger(), Registerer: reg,
		Interval: time.Minute, Batch: 2, Leader: func() bool { return true },
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	require.NoError(t, fake.WaitForTimers(ctx, 1))
	require.Equal(t, before, read(), "folded, the counts unchanged")
	left, err := db.FoldUsage(ctx, today, 10)
	require.NoError(t, err)
	require.Zero(t, left, "one row left for the tenant's day")
	require.Zero(t, purged(t, reg, purgedUsage))

	fake.Advance(model.UsageKeepDays * 24 * time.Hour)
	require.NoError(t, fake.WaitForTimers(ctx, 1))
	require.Empty(t, read())
	require.Equal(t, 1.0, purged(t, reg, purgedUsage))
}
