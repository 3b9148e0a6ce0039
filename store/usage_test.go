package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// TestMaterializeSkipsOverDailyQuota: schedule occurrences count in their
// tenant's tasks created today, and those past its tasks_per_day (its own,
// else its plan's, else the node's default) are skipped, the latest first,
// and counted on their schedules.
func TestMaterializeSkipsOverDailyQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	audit := model.AuditEntry{Actor: model.ActorOperator, Action: "x"}
	_, err := db.PutPlan(ctx, &model.Plan{Name: "small", Limits: model.Limits{TasksPerDay: 5}}, audit)
	require.NoError(t, err)
	small := "small"
	onPlan, byDefault, lifted := createTenant(t, db), createTenant(t, db), createTenant(t, db)
	for _, tn := range []*model.Tenant{onPlan, lifted} {
		_, err = db.SetTenantPlan(ctx, tn.ID, &small, audit)
		require.NoError(t, err)
	}
	_, err = db.SetTenantLimits(ctx, lifted.ID, model.Limits{TasksPerDay: model.Unlimited}, audit)
	require.NoError(t, err)

	now := dbNow(t, pool).Truncate(time.Second)
	first := now.Add(time.Second)
	// Two tasks created today already: room for three more on the plan.
	insertTask(t, db, onPlan.ID, now.Add(time.Hour))
	insertTask(t, db, onPlan.ID, now.Add(time.Hour))
	mine := []*model.Schedule{schedInsert(t, db, onPlan.ID, &first), schedInsert(t, db, onPlan.ID, &first)}
	defaulted := schedInsert(t, db, byDefault.ID, &first)
	free := schedInsert(t, db, lifted.ID, &first)

	until := first.Add(2 * time.Second)
	done, err := db.MaterializeSchedules(ctx, model.MaterializeParams{
		Partitions: allPartitions(), Until: until, Limit: 100, NotifyUntil: until, DefaultTasksPerDay: 2,
	}, schedEverySecond(until))
	require.NoError(t, err)
	require.Len(t, done.Created, 3+2+3, "three on the plan, two by the node's default, three lifted")
	require.Equal(t, 3+1, done.Skipped)

	for tenant, want := range map[*model.Tenant]int{onPlan: 5, byDefault: 2, lifted: 3} {
		n, err := db.TasksCreatedToday(ctx, tenant.ID)
		require.NoError(t, err)
		require.Equal(t, want, n)
	}
	var skipped int64
	for _, s := range mine {
		got, err := db.GetSchedule(ctx, onPlan.ID, s.ID)
		require.NoError(t, err)
		skipped += got.SkippedOccurrences
		require.True(t, until.Add(time.Second).Equal(*got.NextRunAt), "the schedule goes on past what it skipped")
	}
	require.EqualValues(t, 3, skipped)
	got, err := db.GetSchedule(ctx, byDefault.ID, defaulted.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.SkippedOccurrences)
	require.True(t, until.Equal(*got.LastSkippedAt), "the latest occurrence is the one skipped")
	require.Len(t, schedOccurrences(t, pool, free.ID), 3)

	// The day's quota is spent: the next occurrences are all skipped.
	later := until.Add(time.Second)
	done, err = db.MaterializeSchedules(ctx, model.MaterializeParams{
		Partitions: allPartitions(), Until: later, Limit: 100, NotifyUntil: later, DefaultTasksPerDay: 2,
	}, schedEverySecond(later))
	require.NoError(t, err)
	require.Len(t, done.Created, 1, "only the lifted tenant's")
	require.Equal(t, 3, done.Skipped)
}
