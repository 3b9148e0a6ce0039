package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// bareSchedule stores a bare schedule of the tenant in SQL, for tasks to belong to.
func (h *harness) bareSchedule(tn tenant) uuid.UUID {
	h.t.Helper()
	id := uuid.Must(uuid.NewV7())
	h.exec(`INSERT INTO schedules (id, tenant_id, cron, timezone, url, method, timeout_ms, max_attempts,
		min_backoff_ms, max_backoff_ms) VALUES ($1, $2, '@hourly', 'UTC', 'https://example.com/s', 'POST', 10000, 10, 1000, 3600000)`,
		id, tn.ID)
	return id
}

// filterFixture is a tenant's tasks in each combination the filters tell
// apart: in the schedule or not, created in one of three hours, and the
// status given, newest last.
type filterFixture struct {
	tn       tenant
	schedule uuid.UUID
	hours    [3]time.Time
	tasks    []fixtureTask
}

type fixtureTask struct {
	id        uuid.UUID
	inSched   bool
	hour      int
	status    string
	createdAt time.Time
}

func newFilterFixture(t *testing.T, h *harness, name string, statuses ...string) *filterFixture {
	t.Helper()
	f := &filterFixture{tn: h.createTenant(name)}
	f.schedule = h.bareSchedule(f.tn)
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	f.hours = [3]time.Time{base, base.Add(time.Hour), base.Add(2 * time.Hour)}
	var items []string
	type combo struct {
		inSched bool
		hour    int
		status  string
	}
	var combos []combo
	for hour := range 3 {
		for _, inSched := range []bool{false, true} {
			for _, status := range statuses {
				combos = append(combos, combo{inSched, hour, status})
				items = append(items, `{"url": "https://example.com/f", "delay": "1h"}`)
			}
		}
	}
	for i, res := range h.batch(f.tn, items...) {
		task := requireItemCreated(t, res)
		c := combos[i]
		ft := fixtureTask{id: task.ID, inSched: c.inSched, hour: c.hour, status: c.status,
			createdAt: f.hours[c.hour].Add(time.Duration(i) * time.Second)}
		var scheduleID *uuid.UUID
		if c.inSched {
			scheduleID = &f.schedule
		}
		h.exec(`UPDATE tasks SET status = $2, schedule_id = $3, created_at = $4 WHERE id = $1`, task.ID, c.status, scheduleID, ft.createdAt)
		f.tasks = append(f.tasks, ft)
	}
	return f
}

// ids returns the ids of the tasks keep accepts, newest first.
func (f *filterFixture) ids(keep func(fixtureTask) bool) []uuid.UUID {
	out := []uuid.UUID{}
	for i := len(f.tasks) - 1; i >= 0; i-- {
		if keep(f.tasks[i]) {
			out = append(out, f.tasks[i].id)
		}
	}
	return out
}

func TestListTasksFilters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	f := newFilterFixture(t, h, "acme", "scheduled", "delivered")
	noise := newFilterFixture(t, h, "noise", "scheduled")

	cases := []struct {
		name   string
		params openapi.ListTasksParams
		keep   func(fixtureTask) bool
	}{
		{"schedule", openapi.ListTasksParams{ScheduleID: &f.schedule}, func(t fixtureTask) bool { return t.inSched }},
		{"created after, inclusive", openapi.ListTasksParams{CreatedAfter: &f.hours[1]}, func(t fixtureTask) bool { return t.hour >= 1 }},
		{"created before, exclusive", openapi.ListTasksParams{CreatedBefore: &f.hours[1]}, func(t fixtureTask) bool { return t.hour == 0 }},
		{"both bounds", openapi.ListTasksParams{CreatedAfter: &f.hours[1], CreatedBefore: &f.hours[2]}, func(t fixtureTask) bool { return t.hour == 1 }},
		{"all with status", openapi.ListTasksParams{ScheduleID: &f.schedule, Status: ptr(openapi.TaskStatus("delivered")),
			CreatedAfter: &f.hours[1]}, func(t fixtureTask) bool { return t.inSched && t.status == "delivered" && t.hour >= 1 }},
		{"another tenant's schedule", openapi.ListTasksParams{ScheduleID: &noise.schedule}, func(fixtureTask) bool { return false }},
	}
	for _, tc := range cases {
		want := f.ids(tc.keep)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := f.tn.Client.ListTasksWithResponse(ctx, &tc.params)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			require.Equal(t, want, taskIDs(resp.JSON200.Data))
		})
		t.Run(tc.name+", pages of 2", func(t *testing.T) {
			t.Parallel()
			params := tc.params
			params.Limit = ptr(2)
			seen := []uuid.UUID{}
			for range len(f.tasks) + 1 {
				resp, err := f.tn.Client.ListTasksWithResponse(ctx, &params)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
				seen = append(seen, taskIDs(resp.JSON200.Data)...)
				if resp.JSON200.NextCursor == nil {
					break
				}
				params.Cursor = resp.JSON200.NextCursor
			}
			require.Equal(t, want, seen)
		})
	}

	t.Run("times with offsets in the query", func(t *testing.T) {
		t.Parallel()
		after := f.hours[1].In(time.FixedZone("", -5*3600)).Format(time.RFC3339)
		resp := h.do(http.MethodGet, "/v1/tasks?created_after="+strings.ReplaceAll(after, "-05:00", "-05%3A00"), f.tn.APIKey, nil, nil)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		var list openapi.TaskList
		require.NoError(t, json.Unmarshal(resp.Body, &list))
		require.Equal(t, f.ids(func(t fixtureTask) bool { return t.hour >= 1 }), taskIDs(list.Data))
	})

	t.Run("bad parameters", func(t *testing.T) {
		t.Parallel()
		bad := []struct {
			query  string
			status int
			field  string
		}{
			{"schedule_id=nope", 400, ""},
			{"created_after=yesterday", 400, ""},
			{"created_before=2026-13-01T00:00:00Z", 400, ""},
			{"created_after=2026-01-01T11:00:00Z&created_before=2026-01-01T11:00:00Z", 422, "created_before"},
			{"created_after=2026-01-01T12:00:00Z&created_before=2026-01-01T11:00:00Z", 422, "created_before"},
		}
		for _, tc := range bad {
			resp := h.do(http.MethodGet, "/v1/tasks?"+tc.query, f.tn.APIKey, nil, nil)
			if tc.field != "" {
				requireFieldProblem(t, resp, tc.field)
				continue
			}
			requireProblem(t, resp, tc.status)
		}
	})
}

func TestCancelTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	waiting := func(t fixtureTask) bool { return t.status == "scheduled" || t.status == "retrying" }
	cases := []struct {
		name string
		body func(f *filterFixture) openapi.CancelFilter
		keep func(fixtureTask) bool
	}{
		{"schedule", func(f *filterFixture) openapi.CancelFilter { return openapi.CancelFilter{ScheduleID: &f.schedule} },
			func(t fixtureTask) bool { return t.inSched }},
		{"status retrying", func(*filterFixture) openapi.CancelFilter {
			return openapi.CancelFilter{Status: ptr(openapi.CancelFilterStatus("retrying"))}
		}, func(t fixtureTask) bool { return t.status == "retrying" }},
		{"created range", func(f *filterFixture) openapi.CancelFilter {
			return openapi.CancelFilter{CreatedAfter: &f.hours[1], CreatedBefore: &f.hours[2]}
		}, func(t fixtureTask) bool { return t.hour == 1 }},
		{"everything", func(f *filterFixture) openapi.CancelFilter {
			return openapi.CancelFilter{ScheduleID: &f.schedule, Status: ptr(openapi.CancelFilterStatus("scheduled")), CreatedAfter: &f.hours[2]}
		}, func(t fixtureTask) bool { return t.inSched && t.status == "scheduled" && t.hour == 2 }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFilterFixture(t, h, fmt.Sprintf("cancel-%d", i), "scheduled", "retrying", "dispatching", "delivered", "canceled")
			resp, err := f.tn.Client.CancelTasksWithResponse(ctx, tc.body(f))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			want := f.ids(func(t fixtureTask) bool { return waiting(t) && tc.keep(t) })
			require.NotEmpty(t, want)
			require.Equal(t, len(want), resp.JSON200.Canceled)

			wanted := map[uuid.UUID]bool{}
			for _, id := range want {
				wanted[id] = true
			}
			for _, task := range f.tasks {
				got, err := f.tn.Client.GetTaskWithResponse(ctx, task.id)
				require.NoError(t, err)
				if wanted[task.id] {
					require.Equal(t, openapi.TaskStatus("canceled"), got.JSON200.Status)
					require.Nil(t, got.JSON200.NextAttemptAt)
					require.Equal(t, 1, h.Sched.canceledCount(task.id), "the local dispatcher is told")
					continue
				}
				require.Equal(t, openapi.TaskStatus(task.status), got.JSON200.Status, "untouched")
				require.Zero(t, h.Sched.canceledCount(task.id))
			}

			again, err := f.tn.Client.CancelTasksWithResponse(ctx, tc.body(f))
			require.NoError(t, err)
			require.Equal(t, 0, again.JSON200.Canceled, "nothing left to cancel")
		})
	}

	t.Run("another tenant's tasks are out of reach", func(t *testing.T) {
		t.Parallel()
		f := newFilterFixture(t, h, "victim", "scheduled")
		thief := h.createTenant("thief")
		resp, err := thief.Client.CancelTasksWithResponse(ctx, openapi.CancelFilter{ScheduleID: &f.schedule})
		require.NoError(t, err)
		require.Equal(t, 0, resp.JSON200.Canceled)
		resp, err = thief.Client.CancelTasksWithResponse(ctx, openapi.CancelFilter{Status: ptr(openapi.CancelFilterStatus("scheduled"))})
		require.NoError(t, err)
		require.Equal(t, 0, resp.JSON200.Canceled)
		for _, task := range f.tasks {
			require.Zero(t, h.Sched.canceledCount(task.id))
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		t.Parallel()
		tn := h.createTenant("bad")
		task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
		bad := []struct {
			body   string
			status int
			field  string
		}{
			{`{}`, 422, "status"},
			{`null`, 422, "status"},
			{`{"status": "delivered"}`, 422, "status"},
			{`{"status": "SCHEDULED"}`, 422, "status"},
			{`{"schedule_id": "nope"}`, 422, "schedule_id"},
			{`{"created_after": "yesterday"}`, 422, "created_after"},
			{`{"created_before": 5}`, 422, "created_before"},
			{`{"created_after": "2026-01-01T11:00:00Z", "created_before": "2026-01-01T10:00:00Z"}`, 422, "created_before"},
			{`{"url": "https://example.com/hook"}`, 422, "url"},
			{`{"status": `, 400, ""},
			{``, 400, ""},
		}
		for _, tc := range bad {
			resp := h.do(http.MethodPost, "/v1/tasks/cancel", tn.APIKey, strings.NewReader(tc.body), nil)
			if tc.field != "" {
				requireFieldProblem(t, resp, tc.field)
				continue
			}
			requireProblem(t, resp, tc.status)
		}
		got, err := tn.Client.GetTaskWithResponse(ctx, task.ID)
		require.NoError(t, err)
		require.Equal(t, openapi.TaskStatus("scheduled"), got.JSON200.Status, "nothing was canceled")
	})
}
