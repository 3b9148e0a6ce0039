package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// keyedDeadTask is a dead task of the tenant created with an idempotency key.
func keyedDeadTask(t *testing.T, db *store.DB, pool *pgxpool.Pool, tenantID uuid.UUID, key string) *model.Task {
	t.Helper()
	task := deadTask(t, db, pool, tenantID)
	exec(t, pool, `UPDATE tasks SET idempotency_key = $2, request_hash = $3 WHERE id = $1`, task.ID, key, []byte("hash of "+key))
	got, err := db.GetTask(context.Background(), tenantID, task.ID)
	require.NoError(t, err)
	return got
}

func TestReplayTaskEdit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	tests := []struct {
		name string
		edit *model.TaskEdit
		// want changes the task as it was into what the edit makes it.
		want func(*model.Task)
	}{
		{"everything", &model.TaskEdit{
			URL: ptr("https://moved.example/hooks"), Method: ptr("PUT"),
			Headers: map[string]string{"X-New": "1"}, Body: []byte(`{"fixed": true}`),
		}, func(t *model.Task) {
			t.URL, t.Method, t.Headers, t.Body = "https://moved.example/hooks", "PUT", map[string]string{"X-New": "1"}, []byte(`{"fixed": true}`)
		}},
		{"body alone", &model.TaskEdit{Body: []byte("v2")}, func(t *model.Task) { t.Body = []byte("v2") }},
		{"url alone", &model.TaskEdit{URL: ptr("https://moved.example/only")}, func(t *model.Task) { t.URL = "https://moved.example/only" }},
		{"no headers and an empty body", &model.TaskEdit{Headers: map[string]string{}, Body: []byte{}}, func(t *model.Task) {
			t.Headers, t.Body = map[string]string{}, []byte{}
		}},
		{"an empty edit", &model.TaskEdit{}, func(*model.Task) {}},
		{"no edit", nil, func(*model.Task) {}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := "order-" + string(rune('a'+i))
			before := keyedDeadTask(t, db, pool, tenant.ID, key)
			got, err := db.ReplayTask(ctx, tenant.ID, before.ID, dbNow(t, pool).Add(-time.Second), tt.edit)
			require.NoError(t, err)
			require.Equal(t, model.StatusScheduled, got.Status)
			require.Equal(t, before.Attempts, got.AttemptBase)

			want := *before
			tt.want(&want)
			require.Equal(t, want.URL, got.URL)
			require.Equal(t, want.Method, got.Method)
			require.Equal(t, want.Headers, got.Headers)
			require.Equal(t, want.Body, got.Body)
			require.Equal(t, before.IdempotencyKey, got.IdempotencyKey)
			require.Equal(t, before.RequestHash, got.RequestHash, "the fingerprint of the request that created it")
			read, err := db.GetTask(ctx, tenant.ID, before.ID)
			require.NoError(t, err)
			require.Equal(t, got, read, "stored as returned")

			// The create request repeated with its key finds the task, as
			// it is now.
			repeat := newTask(tenant.ID, time.Now())
			repeat.IdempotencyKey, repeat.RequestHash = &key, before.RequestHash
			existing, created, err := db.InsertTask(ctx, repeat, false)
			require.NoError(t, err)
			require.False(t, created)
			require.Equal(t, got.ID, existing.ID)
			require.Equal(t, want.URL, existing.URL)

			// The edited task is what the next claim sends.
			claim := claimOne(t, db, pool, before.ID)
			require.Equal(t, want.URL, claim.URL)
			require.Equal(t, want.Method, claim.Method)
			require.Equal(t, want.Headers, claim.Headers)
			require.Equal(t, want.Body, claim.Body)
			require.Equal(t, len(want.Body), claim.BodySize)
		})
	}

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		// A task that cannot be replayed is not edited either.
		scheduled := insertTask(t, db, tenant.ID, time.Now().Add(time.Hour))
		before, err := db.GetTask(ctx, tenant.ID, scheduled.ID)
		require.NoError(t, err)
		got, err := db.ReplayTask(ctx, tenant.ID, scheduled.ID, time.Now(), &model.TaskEdit{URL: ptr("https://moved.example/"), Body: []byte("x")})
		require.ErrorIs(t, err, model.ErrConflict)
		require.Equal(t, before, got, "the task comes back as it is")
		read, err := db.GetTask(ctx, tenant.ID, scheduled.ID)
		require.NoError(t, err)
		require.Equal(t, before, read)
	})

	t.Run("another tenant's task", func(t *testing.T) {
		t.Parallel()
		task := deadTask(t, db, pool, tenant.ID)
		other := createTenant(t, db)
		got, err := db.ReplayTask(ctx, other.ID, task.ID, time.Now(), &model.TaskEdit{URL: ptr("https://thief.example/")})
		require.ErrorIs(t, err, model.ErrNotFound)
		require.Nil(t, got)
		read, err := db.GetTask(ctx, tenant.ID, task.ID)
		require.NoError(t, err)
		require.Equal(t, task, read, "untouched")
	})
}

func TestReplayTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)

	tests := []struct {
		name   string
		n      int // tasks of each combination
		filter func(s *taskSet) model.ReplayFilter
		keep   func(i int, s setTask) bool
	}{
		{"everything", 2, func(*taskSet) model.ReplayFilter { return model.ReplayFilter{} },
			func(int, setTask) bool { return true }},
		// 1,200 dead tasks: more than one chunk of the store's 1,000.
		{"everything, many", 200, func(*taskSet) model.ReplayFilter { return model.ReplayFilter{} },
			func(int, setTask) bool { return true }},
		{"schedule", 2, func(s *taskSet) model.ReplayFilter { return model.ReplayFilter{ScheduleID: &s.schedule} },
			func(_ int, s setTask) bool { return s.scheduled }},
		{"created range", 2, func(s *taskSet) model.ReplayFilter {
			return model.ReplayFilter{CreatedAfter: &s.hours[1], CreatedBefore: &s.hours[2]}
		}, func(_ int, s setTask) bool { return s.hour == 1 }},
		// The % is the URL's, not a wildcard.
		{"url prefix", 2, func(*taskSet) model.ReplayFilter {
			return model.ReplayFilter{URLPrefix: ptr("https://receiver.example/h%")}
		},
			func(i int, _ setTask) bool { return otherURL(i) }},
		{"combined", 2, func(s *taskSet) model.ReplayFilter {
			return model.ReplayFilter{ScheduleID: &s.schedule, URLPrefix: ptr("https://receiver.example/hooks/"), CreatedBefore: &s.hours[1]}
		}, func(i int, s setTask) bool { return s.scheduled && !otherURL(i) && s.hour == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tenant, other := createTenant(t, db), createTenant(t, db)
			set := newTaskSet(t, db, pool, tenant.ID, tt.n)
			// Some tasks go to a URL whose % a pattern that left it a
			// wildcard would match the others with.
			var odd []uuid.UUID
			for i, st := range set.tasks {
				if otherURL(i) {
					odd = append(odd, st.id)
				}
			}
			exec(t, pool, `UPDATE tasks SET url = 'https://receiver.example/h%x/1' WHERE id = ANY($1)`, odd)
			newTaskSet(t, db, pool, other.ID, 1)
			filter := tt.filter(set)
			var want []uuid.UUID
			for i, st := range set.tasks {
				if st.status == model.StatusDead && tt.keep(i, st) {
					want = append(want, st.id)
				}
			}
			require.NotEmpty(t, want)
			before := tenantTaskRows(t, pool, tenant.ID)
			otherBefore := tenantTaskRows(t, pool, other.ID)

			matched, err := db.CountDeadTasks(ctx, tenant.ID, filter)
			require.NoError(t, err)
			require.Equal(t, len(want), matched, "a dry run counts what the replay takes")
			require.Equal(t, before, tenantTaskRows(t, pool, tenant.ID), "counting changes nothing")

			at := dbNow(t, pool).Add(500 * time.Nanosecond)
			replayed, due, err := db.ReplayTasks(ctx, tenant.ID, filter, at)
			require.NoError(t, err)
			require.Equal(t, at.Truncate(time.Microsecond).Add(time.Microsecond), due, "rounded up, never down")
			sortUUIDs(want)
			sortUUIDs(replayed)
			require.Equal(t, want, replayed, "exactly the dead tasks matching, each once")

			wanted := map[uuid.UUID]bool{}
			for _, id := range want {
				wanted[id] = true
			}
			after := tenantTaskRows(t, pool, tenant.ID)
			for _, st := range set.tasks {
				row := after[st.id]
				if !wanted[st.id] {
					require.Equal(t, before[st.id], row, "task %s (%s) untouched", st.id, st.status)
					continue
				}
				require.Equal(t, "scheduled", row.Status)
				require.NotNil(t, row.NextAttemptAt)
				require.True(t, row.NextAttemptAt.Equal(due))
			}
			require.Equal(t, otherBefore, tenantTaskRows(t, pool, other.ID), "another tenant's tasks untouched")
			var unbased int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE id = ANY($1) AND attempt_base <> attempts`,
				replayed).Scan(&unbased))
			require.Zero(t, unbased, "a fresh retry budget for each")

			again, _, err := db.ReplayTasks(ctx, tenant.ID, filter, at)
			require.NoError(t, err)
			require.Empty(t, again, "nothing dead left to replay")
			matched, err = db.CountDeadTasks(ctx, tenant.ID, filter)
			require.NoError(t, err)
			require.Zero(t, matched)
		})
	}

	t.Run("announced", func(t *testing.T) {
		t.Parallel()
		db, pool := openDB(t) // NOTIFY is per database: only this subtest's statements arrive
		tenant := createTenant(t, db)
		want := map[uuid.UUID]time.Time{}
		for range 3 {
			want[deadTask(t, db, pool, tenant.ID).ID] = time.Time{}
		}
		listener := listenDue(t, db, pool)
		replayed, due, err := db.ReplayTasks(ctx, tenant.ID, model.ReplayFilter{}, time.Now())
		require.NoError(t, err)
		require.Len(t, replayed, 3)
		for id := range want {
			want[id] = due
		}
		require.Equal(t, normalizeAnnounced(want), normalizeAnnounced(listener.drain(t)), "each once, due when replayed")
	})
}

// otherURL says which tasks of a taskSet TestReplayTasks sends elsewhere:
// every third run of the set's six statuses.
func otherURL(i int) bool { return i/6%3 == 0 }
