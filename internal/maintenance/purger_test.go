package maintenance

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestPurger drives the purger alone, against Postgres, on a fake clock set
// an hour after the tasks finished: a node that is not the leader only
// measures the oldest finished task; the leader deletes the finished tasks
// past retention with their attempts, a batch after another while batches
// come back full, and none of the unfinished ones.
func TestPurger(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := storetest.DB(t)
	tenant := storetest.CreateTenant(t, db, model.Limits{})
	start := time.Now()
	const target = "https://receiver.example/hook"

	var finished, unfinished []uuid.UUID
	claims := storetest.ClaimNow(t, db,
		storetest.InsertTask(t, db, tenant, target, start).ID,
		storetest.InsertTask(t, db, tenant, target, start).ID,
		storetest.InsertTask(t, db, tenant, target, start).ID,
		storetest.InsertTask(t, db, tenant, target, start).ID,
		storetest.InsertTask(t, db, tenant, target, start).ID,
	)
	later := start.Add(24 * time.Hour)
	outcomes := []model.AttemptResult{
		result(claims[0], model.StatusDelivered, 200, nil),
		result(claims[1], model.StatusDead, 410, nil),
		result(claims[2], model.StatusDelivered, 204, nil),
		result(claims[3], model.StatusRetrying, 503, &later),
	}
	errs, err := db.RecordAttempts(ctx, outcomes)
	require.NoError(t, err)
	for _, err := range errs {
		require.NoError(t, err)
	}
	finished = append(finished, claims[0].ID, claims[1].ID, claims[2].ID)
	unfinished = append(unfinished, claims[3].ID, claims[4].ID) // retrying, dispatching
	canceled := storetest.InsertTask(t, db, tenant, target, later)
	_, err = db.CancelTask(ctx, tenant, canceled.ID)
	require.NoError(t, err)
	finished = append(finished, canceled.ID)
	unfinished = append(unfinished, storetest.InsertTask(t, db, tenant, target, later).ID) // scheduled
	finishedBy := time.Now()

	fake := clock.NewFake(start.Add(time.Hour))
	reg := prometheus.NewRegistry()
	var leader atomic.Bool
	const interval = time.Minute
	p, err := NewPurger(PurgerConfig{
		Store: db, Clock: fake, Logger: quietLogger(), Registerer: reg,
		Retention: 30 * time.Minute, Interval: interval, Batch: 2, Leader: leader.Load,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	// Armed again means the pass is over and the purger waits Interval.
	require.NoError(t, fake.WaitForTimers(ctx, 1))
	for _, id := range append(finished, unfinished...) {
		taskOf(t, db, tenant, id)
	}
	require.Zero(t, purged(t, reg, purgedTasks))
	age := gathered(t, reg, "hookwheel_retention_oldest_finished_age_seconds")
	require.GreaterOrEqual(t, age, fake.Now().Sub(finishedBy).Seconds(), "measured without purging")
	require.LessOrEqual(t, age, fake.Now().Sub(start).Seconds())

	leader.Store(true)
	fake.Advance(interval)
	require.NoError(t, fake.WaitForTimers(ctx, 1))
	// Four finished tasks in batches of two: two full batches, then an
	// empty one, all before the purger waits again.
	require.Equal(t, 4.0, purged(t, reg, purgedTasks))
	require.Equal(t, 3.0, purged(t, reg, purgedAttempts))
	for _, id := range finished {
		_, err := db.GetTask(ctx, tenant, id)
		require.ErrorIs(t, err, model.ErrNotFound)
		_, err = db.ListAttempts(ctx, tenant, id, 0, 1000)
		require.ErrorIs(t, err, model.ErrNotFound)
	}
	for _, id := range unfinished {
		taskOf(t, db, tenant, id)
	}
	attempts, err := db.ListAttempts(ctx, tenant, claims[3].ID, 0, 1000)
	require.NoError(t, err)
	require.Len(t, attempts, 1, "the retrying task keeps its attempt")
	require.Zero(t, gathered(t, reg, "hookwheel_retention_oldest_finished_age_seconds"), "no finished task is left")
}

// TestPurgerAuditRetention: once AuditRetention has passed, the leader
// deletes audit entries, a batch after another while batches come back
// full; entries younger than it stay, and finished tasks kept forever stay
// too.
func TestPurgerAuditRetention(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := storetest.DB(t)
	const retention = 400 * 24 * time.Hour
	tenant := storetest.CreateTenant(t, db, model.Limits{})
	for range 4 {
		_, err := db.SetTenantLimits(ctx, tenant, model.Limits{MaxSchedules: 5},
			model.AuditEntry{TenantID: &tenant, Actor: model.ActorCLI, Action: "tenant.limits_changed"})
		require.NoError(t, err)
	}
	claims := storetest.ClaimNow(t, db, storetest.InsertTask(t, db, tenant, "https://receiver.example/hook", time.Now()).ID)
	_, err := db.RecordAttempts(ctx, []model.AttemptResult{result(claims[0], model.StatusDelivered, 200, nil)})
	require.NoError(t, err)
	entries := func() int {
		got, err := db.ListAudit(ctx, model.AuditFilter{Limit: 100})
		require.NoError(t, err)
		return len(got)
	}
	require.Equal(t, 5, entries(), "the tenant's creation and four changes")

	// A day short of the retention, nothing goes; past it, all five, in
	// batches of two.
	fake := clock.NewFake(time.Now().Add(retention - 24*time.Hour))
	reg := prometheus.NewRegistry()
	const interval = time.Minute
	p, err := NewPurger(PurgerConfig{
		Store: db, Clock: fake, Logger: quietLogger(), Registerer: reg,
		AuditRetention: retention, Interval: interval, Batch: 2, Leader: func() bool { return true },
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	require.NoError(t, fake.WaitForTimers(ctx, 1))
	require.Equal(t, 5, entries())
	fake.Advance(48 * time.Hour)
	require.NoError(t, fake.WaitForTimers(ctx, 1))
	require.Zero(t, entries())
	require.Equal(t, 5.0, purged(t, reg, purgedAudit))
	require.Zero(t, purged(t, reg, purgedTasks), "finished tasks kept forever")
	taskOf(t, db, tenant, claims[0].ID)
}

// purged reads hookwheel_retention_purged_total of kind from reg.
func purged(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	return gathered(t, reg, "hookwheel_retention_purged_total", "kind", kind)
}

// TestNewPurgerRefusesMissingParts: a purger without a store or a leader
// would fail at its first pass or never purge; it is refused when built, as
// is a second purger registering the same series.
func TestNewPurgerRefusesMissingParts(t *testing.T) {
	t.Parallel()
	var store struct{ PurgerStore }
	leader := func() bool { return true }
	_, err := NewPurger(PurgerConfig{Leader: leader})
	require.Error(t, err)
	_, err = NewPurger(PurgerConfig{Store: store})
	require.Error(t, err)

	reg := prometheus.NewRegistry()
	_, err = NewPurger(PurgerConfig{Store: store, Leader: leader, Registerer: reg})
	require.NoError(t, err)
	_, err = NewPurger(PurgerConfig{Store: store, Leader: leader, Registerer: reg})
	require.Error(t, err, "its series are registered already")
}
