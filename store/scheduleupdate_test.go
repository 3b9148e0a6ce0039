package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
)

// TestUpdateSchedule: the change is written under the row lock and
// answered; returning the schedule given writes nothing; the change's error
// rolls everything back; another tenant's or a deleted schedule is
// ErrNotFound without the change being asked.
func TestUpdateSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	next := dbNow(t, pool).Add(time.Hour)
	s := schedInsert(t, db, tenant.ID, &next)

	later := µs(next.Add(time.Minute))
	got, canceled, err := db.UpdateSchedule(ctx, tenant.ID, s.ID, func(cur *model.Schedule) (*model.Schedule, error) {
		require.Equal(t, s.URL, cur.URL)
		after := *cur
		after.Cron, after.Timezone, after.URL, after.Method = "*/5 * * * *", "UTC", "https://receiver.example/new", "POST"
		after.Headers, after.Body, after.Timeout = map[string]string{"X-New": "1"}, nil, 3*time.Second
		after.MaxAttempts, after.MinBackoff, after.MaxBackoff = 2, time.Second, time.Hour
		after.Labels, after.NextRunAt = map[string]string{"team": "a"}, &later
		return &after, nil
	}, nil)
	require.NoError(t, err)
	require.Empty(t, canceled)
	stored, err := db.GetSchedule(ctx, tenant.ID, s.ID)
	require.NoError(t, err)
	require.Equal(t, got, stored)
	require.Equal(t, "*/5 * * * *", stored.Cron)
	require.Equal(t, "https://receiver.example/new", stored.URL)
	require.Equal(t, map[string]string{"X-New": "1"}, stored.Headers)
	require.Empty(t, stored.Body)
	require.Equal(t, 3*time.Second, stored.Timeout)
	require.Equal(t, 2, stored.MaxAttempts)
	require.Equal(t, map[string]string{"team": "a"}, stored.Labels)
	require.True(t, later.Equal(*stored.NextRunAt))
	require.True(t, stored.UpdatedAt.After(s.UpdatedAt) || stored.UpdatedAt.Equal(s.UpdatedAt))

	same, _, err := db.UpdateSchedule(ctx, tenant.ID, s.ID, func(cur *model.Schedule) (*model.Schedule, error) { return cur, nil }, nil)
	require.NoError(t, err)
	require.Equal(t, stored, same, "returning the schedule given writes nothing")

	refused := errors.New("refused")
	_, _, err = db.UpdateSchedule(ctx, tenant.ID, s.ID, func(cur *model.Schedule) (*model.Schedule, error) { return nil, refused }, nil)
	require.ErrorIs(t, err, refused)

	asked := false
	_, _, err = db.UpdateSchedule(ctx, other.ID, s.ID, func(cur *model.Schedule) (*model.Schedule, error) { asked = true; return cur, nil }, nil)
	require.ErrorIs(t, err, model.ErrNotFound)
	_, _, err = db.DeleteSchedule(ctx, tenant.ID, s.ID, nil)
	require.NoError(t, err)
	_, _, err = db.UpdateSchedule(ctx, tenant.ID, s.ID, func(cur *model.Schedule) (*model.Schedule, error) { asked = true; return cur, nil }, nil)
	require.ErrorIs(t, err, model.ErrNotFound)
	require.False(t, asked)
}

// TestUpdateWaitsForMaterializer changes a schedule while a materialiser
// holds it, mid-transaction: the change waits for the materialiser's commit
// and is then asked with what it committed (the NextRunAt it moved on), so
// a change that keeps NextRunAt keeps the materialiser's, not a stale one;
// the occurrences it made keep the request they were made with. A change
// that pauses cancels them, as a pause does.
func TestUpdateWaitsForMaterializer(t *testing.T) {
	t.Parallel()
	for _, pause := range []bool{false, true} {
		t.Run(map[bool]string{false: "template", true: "pause"}[pause], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, pool := openDB(t)
			tenant := createTenant(t, db)
			now := dbNow(t, pool).Truncate(time.Second)
			first := now.Add(time.Second)
			s := schedInsert(t, db, tenant.ID, &first)
			until := now.Add(5 * time.Second)

			release := holdScheduleRows(t, db, until)

			type result struct {
				seen     *model.Schedule
				canceled []uuid.UUID
				err      error
			}
			updated := make(chan result, 1)
			go func() {
				var seen *model.Schedule
				_, canceled, err := db.UpdateSchedule(ctx, tenant.ID, s.ID, func(cur *model.Schedule) (*model.Schedule, error) {
					seen = cur
					after := *cur
					after.URL = "https://receiver.example/new"
					if pause {
						after.Paused, after.NextRunAt = true, nil
					}
					return &after, nil
				}, nil)
				updated <- result{seen, canceled, err}
			}()
			waitBlockedOnSchedule(t, pool, "update", updated)
			require.NoError(t, release())
			r := <-updated
			require.NoError(t, r.err)
			require.True(t, until.Add(time.Second).Equal(*r.seen.NextRunAt), "the change saw the materialiser's NextRunAt")

			stored, err := db.GetSchedule(ctx, tenant.ID, s.ID)
			require.NoError(t, err)
			require.Equal(t, "https://receiver.example/new", stored.URL)
			occurrences := schedOccurrences(t, pool, s.ID)
			require.Len(t, occurrences, 5)
			if pause {
				require.Len(t, r.canceled, 5, "the pause cancels what the materialiser committed while it waited")
				require.Nil(t, stored.NextRunAt)
			} else {
				require.Empty(t, r.canceled)
				require.True(t, until.Add(time.Second).Equal(*stored.NextRunAt))
			}
			for _, o := range occurrences {
				require.Equal(t, map[bool]string{false: "scheduled", true: "canceled"}[pause], o.Status)
				require.Equal(t, s.URL, taskURL(t, pool, o.ID), "a materialised occurrence keeps its request")
			}
		})
	}
}

// taskURL reads a task's URL.
func taskURL(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) string {
	t.Helper()
	var url string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT url FROM tasks WHERE id = $1`, id).Scan(&url))
	return url
}
