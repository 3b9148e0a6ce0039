package store_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// insertBareSchedule stores a bare schedule of the tenant, for tasks to belong to.
func insertBareSchedule(t *testing.T, pool *pgxpool.Pool, tenantID uuid.UUID) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	exec(t, pool, `INSERT INTO schedules (id, tenant_id, cron, timezone, url, method, timeout_ms, max_attempts,
		min_backoff_ms, max_backoff_ms) VALUES ($1, $2, '@hourly', 'UTC', 'https://receiver.example/s', 'POST', 10000, 10, 1000, 3600000)`,
		id, tenantID)
	return id
}

// taskSet is a tenant's tasks in every combination the filters tell apart:
// schedule or not, created in one of three hours, in each status.
type taskSet struct {
	schedule uuid.UUID
	hours    [3]time.Time // creation times: hours[0] < hours[1] < hours[2]
	tasks    []setTask    // oldest first
}

type setTask struct {
	id        uuid.UUID
	status    model.TaskStatus
	scheduled bool // belongs to the schedule
	hour      int
}

// newTaskSet stores n tasks of each combination for the tenant, with
// statuses, schedules and creation times set in SQL.
func newTaskSet(t *testing.T, db *store.DB, pool *pgxpool.Pool, tenantID uuid.UUID, n int) *taskSet {
	t.Helper()
	ctx := context.Background()
	base := dbNow(t, pool).Add(-24 * time.Hour).Truncate(time.Hour)
	s := &taskSet{schedule: insertBareSchedule(t, pool, tenantID), hours: [3]time.Time{base, base.Add(time.Hour), base.Add(2 * time.Hour)}}
	statuses := []model.TaskStatus{model.StatusScheduled, model.StatusRetrying, model.StatusDispatching,
		model.StatusDelivered, model.StatusDead, model.StatusCanceled}
	var batch []*model.Task
	for range n {
		for hour := range 3 {
			for _, scheduled := range []bool{false, true} {
				for _, status := range statuses {
					task := newTask(tenantID, time.Now().Add(time.Hour))
					batch = append(batch, task)
					s.tasks = append(s.tasks, setTask{id: task.ID, status: status, scheduled: scheduled, hour: hour})
				}
			}
		}
	}
	_, err := db.InsertTasks(ctx, batch, time.Time{})
	require.NoError(t, err)
	var (
		ids       = make([]uuid.UUID, len(s.tasks))
		statusOf  = make([]string, len(s.tasks))
		schedules = make([]*uuid.UUID, len(s.tasks))
		createdAt = make([]time.Time, len(s.tasks))
	)
	for i, st := range s.tasks {
		ids[i], statusOf[i] = st.id, string(st.status)
		if st.scheduled {
			schedules[i] = &s.schedule
		}
		createdAt[i] = s.hours[st.hour].Add(time.Duration(i%3600) * time.Second)
	}
	exec(t, pool, `UPDATE tasks t SET status = u.status, schedule_id = u.schedule_id, created_at = u.created_at,
			next_attempt_at = CASE WHEN u.status IN ('scheduled', 'retrying') THEN t.next_attempt_at END
		FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::timestamptz[]) AS u(id, status, schedule_id, created_at)
		WHERE t.id = u.id`, ids, statusOf, schedules, createdAt)
	return s
}

// tenantTaskRows reads the rows of a tenant's tasks, by id.
func tenantTaskRows(t *testing.T, pool *pgxpool.Pool, tenantID uuid.UUID) map[uuid.UUID]taskRow {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT id, status, attempts, next_attempt_at, claim_token, claimed_by, lease_expires_at, updated_at FROM tasks WHERE tenant_id = $1`, tenantID)
	require.NoError(t, err)
	defer rows.Close()
	out := map[uuid.UUID]taskRow{}
	for rows.Next() {
		var (
			id uuid.UUID
			r  taskRow
		)
		require.NoError(t, rows.Scan(&id, &r.Status, &r.Attempts, &r.NextAttemptAt, &r.ClaimToken, &r.ClaimedBy, &r.LeaseExpiresAt, &r.UpdatedAt))
		out[id] = r
	}
	require.NoError(t, rows.Err())
	return out
}

// ids returns the ids of the tasks keep accepts, newest first.
func (s *taskSet) ids(keep func(setTask) bool) []uuid.UUID {
	out := []uuid.UUID{}
	for i := len(s.tasks) - 1; i >= 0; i-- {
		if keep(s.tasks[i]) {
			out = append(out, s.tasks[i].id)
		}
	}
	return out
}

func TestListTasksFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant, other := createTenant(t, db), createTenant(t, db)
	set := newTaskSet(t, db, pool, tenant.ID, 1)
	otherSet := newTaskSet(t, db, pool, other.ID, 1) // noise the tenant never sees

	tests := []struct {
		name   string
		filter model.TaskFilter
		keep   func(setTask) bool
	}{
		{"schedule", model.TaskFilter{ScheduleID: &set.schedule}, func(s setTask) bool { return s.scheduled }},
		{"created after (inclusive)", model.TaskFilter{CreatedAfter: &set.hours[1]}, func(s setTask) bool { return s.hour >= 1 }},
		{"created before (exclusive)", model.TaskFilter{CreatedBefore: &set.hours[1]}, func(s setTask) bool { return s.hour < 1 }},
		{"created in the middle hour", model.TaskFilter{CreatedAfter: &set.hours[1], CreatedBefore: &set.hours[2]},
			func(s setTask) bool { return s.hour == 1 }},
		{"everything combined", model.TaskFilter{ScheduleID: &set.schedule, Status: ptr(model.StatusRetrying),
			CreatedAfter: &set.hours[1], CreatedBefore: &set.hours[2]},
			func(s setTask) bool { return s.scheduled && s.status == model.StatusRetrying && s.hour == 1 }},
		{"another tenant's schedule", model.TaskFilter{ScheduleID: &otherSet.schedule}, func(setTask) bool { return false }},
		{"unknown schedule", model.TaskFilter{ScheduleID: ptr(uuid.Must(uuid.NewV7()))}, func(setTask) bool { return false }},
	}
	for _, tt := range tests {
		want := set.ids(tt.keep)
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := tt.filter
			f.Limit = 1000
			got, err := db.ListTasks(ctx, tenant.ID, f)
			require.NoError(t, err)
			require.Equal(t, want, taskIDs(got))
		})
		t.Run(tt.name+"/pages of 4", func(t *testing.T) {
			t.Parallel()
			var concatenated []uuid.UUID
			f := tt.filter
			f.Limit = 4
			for pages := 0; ; pages++ {
				require.LessOrEqual(t, pages, len(set.tasks), "paging does not end")
				page, err := db.ListTasks(ctx, tenant.ID, f)
				require.NoError(t, err)
				if len(page) == 0 {
					break
				}
				concatenated = append(concatenated, taskIDs(page)...)
				f.Before = &page[len(page)-1].ID
			}
			require.Equal(t, want, append([]uuid.UUID{}, concatenated...), "pages keep the filter")
		})
	}
}

func TestCancelTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)

	waiting := func(s setTask) bool {
		return s.status == model.StatusScheduled || s.status == model.StatusRetrying
	}
	tests := []struct {
		name   string
		n      int // tasks of each combination
		filter func(s *taskSet) model.CancelFilter
		keep   func(s setTask) bool
	}{
		{"schedule", 10, func(s *taskSet) model.CancelFilter { return model.CancelFilter{ScheduleID: &s.schedule} },
			func(s setTask) bool { return s.scheduled }},
		// 1,200 scheduled and 1,200 retrying tasks: more than one chunk of
		// the store's 1,000 for each status.
		{"schedule, many", 200, func(s *taskSet) model.CancelFilter { return model.CancelFilter{ScheduleID: &s.schedule} },
			func(s setTask) bool { return s.scheduled }},
		{"status scheduled", 10, func(*taskSet) model.CancelFilter { return model.CancelFilter{Status: ptr(model.StatusScheduled)} },
			func(s setTask) bool { return s.status == model.StatusScheduled }},
		{"status retrying", 10, func(*taskSet) model.CancelFilter { return model.CancelFilter{Status: ptr(model.StatusRetrying)} },
			func(s setTask) bool { return s.status == model.StatusRetrying }},
		{"created range", 10, func(s *taskSet) model.CancelFilter {
			return model.CancelFilter{CreatedAfter: &s.hours[1], CreatedBefore: &s.hours[2]}
		}, func(s setTask) bool { return s.hour == 1 }},
		{"combined", 10, func(s *taskSet) model.CancelFilter {
			return model.CancelFilter{ScheduleID: &s.schedule, Status: ptr(model.StatusRetrying), CreatedBefore: &s.hours[1]}
		}, func(s setTask) bool { return s.scheduled && s.status == model.StatusRetrying && s.hour == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Tenants of their own: a cancel must touch neither the other
			// subtests' tasks nor another tenant's.
			tenant, other := createTenant(t, db), createTenant(t, db)
			set := newTaskSet(t, db, pool, tenant.ID, tt.n)
			newTaskSet(t, db, pool, other.ID, 1)
			before := tenantTaskRows(t, pool, tenant.ID)
			otherBefore := tenantTaskRows(t, pool, other.ID)

			canceled, err := db.CancelTasks(ctx, tenant.ID, tt.filter(set))
			require.NoError(t, err)
			want := set.ids(func(s setTask) bool { return waiting(s) && tt.keep(s) })
			require.NotEmpty(t, want)
			sortUUIDs(want)
			sortUUIDs(canceled)
			require.Equal(t, want, canceled, "exactly the waiting tasks matching, each once")

			wanted := map[uuid.UUID]bool{}
			for _, id := range want {
				wanted[id] = true
			}
			after := tenantTaskRows(t, pool, tenant.ID)
			require.Len(t, after, len(set.tasks))
			for _, st := range set.tasks {
				row := after[st.id]
				if wanted[st.id] {
					require.Equal(t, "canceled", row.Status)
					require.Nil(t, row.NextAttemptAt)
					continue
				}
				require.Equal(t, before[st.id], row, "task %s (%s) untouched", st.id, st.status)
			}
			require.Equal(t, otherBefore, tenantTaskRows(t, pool, other.ID), "another tenant's tasks untouched")

			// Nothing left to cancel the second time.
			again, err := db.CancelTasks(ctx, tenant.ID, tt.filter(set))
			require.NoError(t, err)
			require.Empty(t, again)
		})
	}

	t.Run("only waiting statuses", func(t *testing.T) {
		t.Parallel()
		tenant := createTenant(t, db)
		_, err := db.CancelTasks(ctx, tenant.ID, model.CancelFilter{Status: ptr(model.StatusDelivered)})
		require.Error(t, err)
	})
}

func sortUUIDs(ids []uuid.UUID) {
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
}
