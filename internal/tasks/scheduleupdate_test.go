package tasks_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// TestUpdateSchedule: next_run_at follows a new recurrence from now and is
// kept through a change of the request alone; paused is a pause (waiting
// occurrences canceled, their timers dropped) and unpaused a resume; a
// change to nothing writes nothing; edit's error changes nothing.
func TestUpdateSchedule(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	sc := b.createSchedule(t, svc)
	created := sc.CreatedAt.UTC()
	edit := func(f func(*model.Schedule)) func(*model.Schedule) (*model.Schedule, error) {
		return func(cur *model.Schedule) (*model.Schedule, error) {
			want := *cur
			f(&want)
			return &want, nil
		}
	}

	// The request alone: the next occurrence stays.
	got, err := svc.UpdateSchedule(t.Context(), b.tenant.ID, sc.ID, edit(func(s *model.Schedule) { s.URL = "https://example.com/v2" }), "key:test")
	require.NoError(t, err)
	require.Equal(t, "https://example.com/v2", got.URL)
	require.Equal(t, created.Add(10*time.Second), got.NextRunAt.UTC())

	// A new recurrence: from now, @every anchored at the creation.
	b.clock.Advance(25 * time.Second)
	got, err = svc.UpdateSchedule(t.Context(), b.tenant.ID, sc.ID, edit(func(s *model.Schedule) { s.Cron = "@every 20s" }), "key:test")
	require.NoError(t, err)
	require.Equal(t, created.Add(40*time.Second), got.NextRunAt.UTC())

	// Nothing changed: nothing written.
	same, err := svc.UpdateSchedule(t.Context(), b.tenant.ID, sc.ID, edit(func(*model.Schedule) {}), "key:test")
	require.NoError(t, err)
	require.Equal(t, got.UpdatedAt, same.UpdatedAt)

	refused := errors.New("refused")
	_, err = svc.UpdateSchedule(t.Context(), b.tenant.ID, sc.ID, func(*model.Schedule) (*model.Schedule, error) { return nil, refused }, "key:test")
	require.ErrorIs(t, err, refused)

	// Paused: its waiting occurrences are canceled, and their timers dropped.
	first, second := b.materialize(t)
	got, err = svc.UpdateSchedule(t.Context(), b.tenant.ID, sc.ID, edit(func(s *model.Schedule) { s.Paused = true }), "key:test")
	require.NoError(t, err)
	require.True(t, got.Paused)
	require.Nil(t, got.NextRunAt)
	require.ElementsMatch(t, []uuid.UUID{first.ID, second.ID}, b.announcer.canceledIDs())

	// Unpaused: from the first occurrence after now.
	b.clock.Advance(time.Minute)
	got, err = svc.UpdateSchedule(t.Context(), b.tenant.ID, sc.ID, edit(func(s *model.Schedule) { s.Paused = false }), "key:test")
	require.NoError(t, err)
	require.False(t, got.Paused)
	require.Equal(t, created.Add(100*time.Second), got.NextRunAt.UTC())

	_, err = svc.UpdateSchedule(t.Context(), b.tenant.ID, uuid.New(), edit(func(*model.Schedule) {}), "key:test")
	require.ErrorIs(t, err, model.ErrNotFound)
}
