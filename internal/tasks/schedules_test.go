package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
)

// createSchedule stores a schedule firing every ten seconds, its first
// occurrence ten seconds after the fake clock's now.
func (b *testBundle) createSchedule(t *testing.T, svc *tasks.Service) *model.Schedule {
	t.Helper()
	next := b.clock.Now().Add(10 * time.Second)
	sc := &model.Schedule{
		Cron: "@every 10s", Timezone: "UTC", URL: "https://example.com/hook", Method: "POST",
		Headers: map[string]string{}, Timeout: 30 * time.Second,
		MaxAttempts: 5, MinBackoff: time.Second, MaxBackoff: time.Minute,
		NextRunAt: &next, CreatedAt: b.clock.Now(),
	}
	require.NoError(t, svc.CreateSchedule(t.Context(), b.tenant, sc, "key:test"))
	require.NotEqual(t, uuid.Nil, sc.ID)
	require.Equal(t, b.tenant.ID, sc.TenantID)
	return sc
}

// materialize turns the schedule's next two occurrences into tasks, as the
// dispatcher owning it would, and returns them in time order.
func (b *testBundle) materialize(t *testing.T) (first, second model.DueTask) {
	t.Helper()
	partitions := make([]int16, model.Partitions)
	for i := range partitions {
		partitions[i] = int16(i)
	}
	done, err := b.db.MaterializeSchedules(t.Context(), model.MaterializeParams{
		Partitions: partitions, Until: b.clock.Now().Add(time.Minute), Limit: 10, NotifyUntil: b.clock.Now(),
	}, func(sc *model.Schedule) model.OccurrencePlan {
		next := sc.NextRunAt.Add(20 * time.Second)
		return model.OccurrencePlan{Occurrences: []time.Time{*sc.NextRunAt, sc.NextRunAt.Add(10 * time.Second)}, Next: &next}
	})
	require.NoError(t, err)
	created := done.Created
	require.Len(t, created, 2)
	first, second = created[0], created[1]
	if second.At.Before(first.At) {
		first, second = second, first
	}
	return first, second
}

// TestStopSchedule: pausing or deleting a schedule cancels its waiting
// occurrences and drops their timers; an occurrence being sent is left to
// finish.
func TestStopSchedule(t *testing.T) {
	t.Parallel()
	for name, stop := range map[string]func(*tasks.Service, context.Context, uuid.UUID, uuid.UUID, string) (*model.Schedule, error){
		"pause":  (*tasks.Service).PauseSchedule,
		"delete": (*tasks.Service).DeleteSchedule,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			svc, b := setup(t, setupConfig{})
			sc := b.createSchedule(t, svc)
			first, second := b.materialize(t)
			b.exec(t, `UPDATE tasks SET status = 'dispatching', attempts = 1 WHERE id = $1`, first.ID)

			got, err := stop(svc, t.Context(), b.tenant.ID, sc.ID, "key:test")
			require.NoError(t, err)
			require.Equal(t, sc.ID, got.ID)
			require.Equal(t, []uuid.UUID{second.ID}, b.announcer.canceledIDs())
			for id, want := range map[uuid.UUID]model.TaskStatus{first.ID: model.StatusDispatching, second.ID: model.StatusCanceled} {
				task, err := svc.Get(t.Context(), b.tenant.ID, id)
				require.NoError(t, err)
				require.Equal(t, want, task.Status)
			}

			_, err = stop(svc, t.Context(), b.tenant.ID, uuid.New(), "key:test")
			require.ErrorIs(t, err, model.ErrNotFound)
		})
	}
}

// TestResumeSchedule: a paused schedule restarts from its first occurrence
// after now, skipping those it missed.
func TestResumeSchedule(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	sc := b.createSchedule(t, svc)
	_, err := svc.PauseSchedule(t.Context(), b.tenant.ID, sc.ID, "key:test")
	require.NoError(t, err)

	created := sc.CreatedAt.UTC()
	b.clock.Advance(time.Minute + 5*time.Second)
	got, err := svc.ResumeSchedule(t.Context(), b.tenant.ID, sc.ID, "key:test")
	require.NoError(t, err)
	require.False(t, got.Paused)
	require.Equal(t, created.Add(70*time.Second), got.NextRunAt.UTC())

	runs, err := svc.NextRuns(t.Context(), b.tenant.ID, sc.ID, 3)
	require.NoError(t, err)
	require.Equal(t, []time.Time{
		created.Add(70 * time.Second), created.Add(80 * time.Second), created.Add(90 * time.Second),
	}, runs, "in the schedule's zone, UTC")

	_, err = svc.ResumeSchedule(t.Context(), b.tenant.ID, uuid.New(), "key:test")
	require.ErrorIs(t, err, model.ErrNotFound)
	_, err = svc.NextRuns(t.Context(), b.tenant.ID, uuid.New(), 3)
	require.ErrorIs(t, err, model.ErrNotFound)
}
