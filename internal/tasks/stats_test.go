package tasks_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
)

// TestStats fills every minute of the window, the written ones with their
// counts, and refuses windows that are not whole minutes up to a day.
func TestStats(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	b.clock.Set(time.Date(2026, 11, 24, 10, 30, 45, 0, time.UTC))
	b.create(t, svc, time.Hour)
	row := model.TenantMinuteStats{TenantID: b.tenant.ID}
	row.Start = time.Date(2026, 11, 24, 10, 28, 0, 0, time.UTC)
	row.Add(model.StatusDelivered, time.Millisecond)
	row.Add(model.StatusDead, time.Millisecond)
	require.NoError(t, b.db.AddTaskStats(t.Context(), []model.TenantMinuteStats{row}))

	st, err := svc.Stats(t.Context(), b.tenant.ID, 5*time.Minute)
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, st.Window)
	require.Len(t, st.Minutes, 5)
	for i, m := range st.Minutes {
		require.True(t, m.Start.Equal(time.Date(2026, 11, 24, 10, 26+i, 0, 0, time.UTC)), "minute %d starts %s", i, m.Start)
	}
	require.EqualValues(t, 2, st.Minutes[2].Attempts())
	require.EqualValues(t, 1, st.Minutes[2].Dead)
	require.EqualValues(t, 2, st.Minutes[2].Lateness.Count())
	require.Zero(t, st.Minutes[4].Attempts())
	require.Equal(t, 1, st.ByStatus[model.StatusScheduled])
	require.Equal(t, tasks.StatusCountLimit, st.StatusCountLimit)

	for _, w := range []time.Duration{0, -time.Minute, 30 * time.Second, 90 * time.Second, 24*time.Hour + time.Minute} {
		_, err := svc.Stats(t.Context(), b.tenant.ID, w)
		require.ErrorIs(t, err, tasks.ErrStatsWindow, "window %s", w)
	}
}
