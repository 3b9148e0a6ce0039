package tasks_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
)

// TestChangesOfUnknownTasks: another tenant's task or an unknown id is
// model.ErrNotFound for every change, and nothing is announced.
func TestChangesOfUnknownTasks(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	task := b.create(t, svc, time.Hour)
	other := uuid.New()
	for name, change := range map[string]func(tenantID, id uuid.UUID) error{
		"get":        func(tn, id uuid.UUID) error { _, err := svc.Get(t.Context(), tn, id); return err },
		"attempts":   func(tn, id uuid.UUID) error { _, err := svc.Attempts(t.Context(), tn, id, 0, 1); return err },
		"cancel":     func(tn, id uuid.UUID) error { _, err := svc.Cancel(t.Context(), tn, id); return err },
		"reschedule": func(tn, id uuid.UUID) error { _, err := svc.Reschedule(t.Context(), tn, id, b.clock.Now()); return err },
		"replay": func(tn, id uuid.UUID) error {
			_, err := svc.Replay(t.Context(), &model.Tenant{ID: tn}, id, nil)
			return err
		},
	} {
		require.ErrorIs(t, change(b.tenant.ID, uuid.New()), model.ErrNotFound, name)
		require.ErrorIs(t, change(other, task.ID), model.ErrNotFound, name+" of another tenant's task")
	}
	require.Empty(t, b.announcer.canceledIDs())
	require.Len(t, b.announcer.scheduledCalls(), 0)
}

// TestCancel: a waiting task is canceled and its timer dropped; one in
// another status is a conflict carrying the task as it is, and nothing is
// announced.
func TestCancel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status   model.TaskStatus
		canceled bool
	}{
		{model.StatusScheduled, true},
		{model.StatusRetrying, true},
		{model.StatusDispatching, false},
		{model.StatusDelivered, false},
		{model.StatusDead, false},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			t.Parallel()
			svc, b := setup(t, setupConfig{})
			task := b.create(t, svc, time.Hour)
			b.exec(t, `UPDATE tasks SET status = $2 WHERE id = $1`, task.ID, tc.status)

			got, err := svc.Cancel(t.Context(), b.tenant.ID, task.ID)
			if tc.canceled {
				require.NoError(t, err)
				require.Equal(t, model.StatusCanceled, got.Status)
				require.Equal(t, []uuid.UUID{task.ID}, b.announcer.canceledIDs())
				return
			}
			require.ErrorIs(t, err, model.ErrConflict)
			var conflict *tasks.ConflictError
			require.ErrorAs(t, err, &conflict)
			require.Equal(t, tc.status, conflict.Task.Status)
			require.Equal(t, task.ID, conflict.Task.ID)
			require.Empty(t, b.announcer.canceledIDs())
		})
	}
}

// TestCancelMatching: every matching waiting task is canceled and its timer
// dropped; the others are left alone.
func TestCancelMatching(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	scheduledTask := b.create(t, svc, time.Hour)
	retrying := b.create(t, svc, time.Hour)
	b.exec(t, `UPDATE tasks SET status = 'retrying' WHERE id = $1`, retrying.ID)
	dispatching := b.create(t, svc, time.Hour)
	b.exec(t, `UPDATE tasks SET status = 'dispatching' WHERE id = $1`, dispatching.ID)

	status := model.StatusRetrying
	n, err := svc.CancelMatching(t.Context(), b.tenant.ID, model.CancelFilter{Status: &status}, "key:test")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []uuid.UUID{retrying.ID}, b.announcer.canceledIDs())

	n, err = svc.CancelMatching(t.Context(), b.tenant.ID, model.CancelFilter{}, "key:test")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []uuid.UUID{retrying.ID, scheduledTask.ID}, b.announcer.canceledIDs())
	got, err := svc.Get(t.Context(), b.tenant.ID, dispatching.ID)
	require.NoError(t, err)
	require.Equal(t, model.StatusDispatching, got.Status)
}

// TestReschedule: the old timer is dropped; a time within the window gets a
// new one, a later time is left to the loader; a refused reschedule tells no
// one.
func TestReschedule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		lookahead time.Duration
		from, to  time.Duration
		announced bool
	}{
		{"later to sooner", 30 * time.Second, time.Hour, 10 * time.Second, true},
		{"sooner to later", 30 * time.Second, 10 * time.Second, time.Hour, false},
		{"later to now", 30 * time.Second, time.Hour, 0, true},
		{"within a wider window", 5 * time.Minute, time.Hour, 2 * time.Minute, true},
		{"past a narrower window", 5 * time.Second, time.Hour, 10 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, b := setup(t, setupConfig{lookahead: tc.lookahead})
			task := b.create(t, svc, tc.from)
			before := len(b.announcer.scheduledCalls())
			at := b.clock.Now().Add(tc.to)

			got, err := svc.Reschedule(t.Context(), b.tenant.ID, task.ID, at)
			require.NoError(t, err)
			require.Equal(t, at, got.RunAt.UTC())
			require.Equal(t, at, got.NextAttemptAt.UTC())
			require.Equal(t, []uuid.UUID{task.ID}, b.announcer.canceledIDs(), "the old timer is dropped")
			calls := b.announcer.scheduledCalls()[before:]
			if tc.announced {
				require.Len(t, calls, 1)
				require.Equal(t, task.ID, calls[0].ID)
				require.Equal(t, at, calls[0].At.UTC())
			} else {
				require.Empty(t, calls)
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		svc, b := setup(t, setupConfig{})
		task := b.create(t, svc, time.Hour)
		b.exec(t, `UPDATE tasks SET status = 'delivered', next_attempt_at = NULL WHERE id = $1`, task.ID)
		_, err := svc.Reschedule(t.Context(), b.tenant.ID, task.ID, b.clock.Now())
		var conflict *tasks.ConflictError
		require.ErrorAs(t, err, &conflict)
		require.Equal(t, model.StatusDelivered, conflict.Task.Status)
		require.Empty(t, b.announcer.canceledIDs())
		require.Empty(t, b.announcer.scheduledCalls())
	})
}

// TestReplay: a dead or delivered task is scheduled again, due now, and
// handed to the local dispatcher; a waiting one is a conflict, and nothing is
// announced.
func TestReplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status   model.TaskStatus
		replayed bool
	}{
		{model.StatusDead, true},
		{model.StatusDelivered, true},
		{model.StatusScheduled, false},
		{model.StatusCanceled, false},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			t.Parallel()
			svc, b := setup(t, setupConfig{})
			task := b.create(t, svc, time.Hour)
			b.exec(t, `UPDATE tasks SET status = $2, attempts = 3, next_attempt_at = NULL WHERE id = $1`, task.ID, tc.status)
			if tc.status == model.StatusScheduled {
				b.exec(t, `UPDATE tasks SET next_attempt_at = run_at WHERE id = $1`, task.ID)
			}
			b.clock.Advance(1500 * time.Nanosecond) // a time Postgres cannot keep as it is

			got, err := svc.Replay(t.Context(), b.tenant, task.ID, nil)
			if !tc.replayed {
				var conflict *tasks.ConflictError
				require.ErrorAs(t, err, &conflict)
				require.Equal(t, tc.status, conflict.Task.Status)
				require.Empty(t, b.announcer.scheduledCalls())
				return
			}
			require.NoError(t, err)
			require.Equal(t, model.StatusScheduled, got.Status)
			require.Equal(t, 3, got.AttemptBase, "a fresh retry budget")
			due := b.clock.Now().Truncate(time.Microsecond).Add(time.Microsecond)
			require.Equal(t, due, got.NextAttemptAt.UTC(), "due now, rounded up to the microsecond")
			require.Equal(t, []scheduled{{task.ID, *got.NextAttemptAt}}, b.announcer.scheduledCalls())
		})
	}
}
