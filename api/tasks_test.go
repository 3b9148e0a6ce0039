package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

func ptr[T any](v T) *T { return &v }

func TestCreateTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	ctx := context.Background()
	now := h.Clock.Now()

	resp := h.postTask(tn, `{"url": "https://example.com/hooks/order-timeout", "headers": {"content-type": "application/json"}, "body": "{\"order\": 42}"}`, "")
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"), resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Get("Idempotent-Replayed"))

	raw := rawKeys(t, resp.Body)
	for _, key := range []string{"id", "status", "url", "method", "run_at", "created_at", "attempts",
		"next_attempt_at", "last_status_code", "idempotency_key", "timeout", "retry", "max_attempts"} {
		require.Contains(t, raw, key, "task member %q missing: %s", key, resp.Body)
	}
	require.JSONEq(t, `null`, string(raw["last_status_code"]))
	require.JSONEq(t, `null`, string(raw["idempotency_key"]))

	var task openapi.Task
	require.NoError(t, json.Unmarshal(resp.Body, &task))
	require.Equal(t, "/v1/tasks/"+task.ID.String(), resp.Header.Get("Location"))
	require.Equal(t, uuid.Version(7), task.ID.Version())
	require.Equal(t, openapi.TaskStatus("scheduled"), task.Status)
	require.Equal(t, "https://example.com/hooks/order-timeout", task.URL)
	require.Equal(t, openapi.HTTPMethod("POST"), task.Method, "method defaults to POST")
	require.Equal(t, map[string]string{"Content-Type": "application/json"}, task.Headers)
	require.Equal(t, `{"order": 42}`, task.Body)
	require.True(t, task.RunAt.Equal(now), "neither run_at nor delay means now: %s, want %s", task.RunAt, now)
	require.NotNil(t, task.NextAttemptAt)
	require.True(t, task.NextAttemptAt.Equal(task.RunAt))
	require.Zero(t, task.Attempts)
	require.Nil(t, task.LastStatusCode)
	require.Nil(t, task.IdempotencyKey)
	require.False(t, task.CreatedAt.IsZero())

	// Defaults: timeout 30s, retry 10 / 1s / 1h.
	requireDuration(t, 30*time.Second, task.Timeout)
	require.Equal(t, 10, task.MaxAttempts)
	require.NotNil(t, task.Retry.MaxAttempts)
	require.Equal(t, 10, *task.Retry.MaxAttempts)
	requireDuration(t, time.Second, *task.Retry.MinBackoff)
	requireDuration(t, time.Hour, *task.Retry.MaxBackoff)
	require.Equal(t, "1h", *task.Retry.MaxBackoff, "durations are spelled as a request would spell them")
	require.Equal(t, "30s", task.Timeout)

	// The Location names the task, and reading it gives the same task.
	got := h.do(http.MethodGet, resp.Header.Get("Location"), tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, got.Status)
	var read openapi.Task
	require.NoError(t, json.Unmarshal(got.Body, &read))
	require.Equal(t, task.ID, read.ID)
	require.True(t, read.RunAt.Equal(task.RunAt))
	require.Equal(t, task.Headers, read.Headers)
	require.Equal(t, task.Body, read.Body)
	requireDuration(t, time.Hour, *read.Retry.MaxBackoff)

	// The generated client agrees with the server on the same operation.
	created, err := tn.Client.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{IdempotencyKey: ptr("gen-1")}, openapi.TaskRequest{
		URL:     "https://example.com/typed",
		Method:  ptr(openapi.HTTPMethod("PUT")),
		Timeout: ptr("10s"),
		Retry:   &openapi.RetryPolicy{MaxAttempts: ptr(3), MinBackoff: ptr("2s"), MaxBackoff: ptr("1m")},
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)
	require.NotNil(t, created.JSON201)
	typed, err := created.JSON201.AsTask()
	require.NoError(t, err)
	require.Equal(t, openapi.HTTPMethod("PUT"), typed.Method)
	requireDuration(t, 10*time.Second, typed.Timeout)
	require.Equal(t, 3, typed.MaxAttempts)
	require.Equal(t, 3, *typed.Retry.MaxAttempts)
	requireDuration(t, 2*time.Second, *typed.Retry.MinBackoff)
	requireDuration(t, time.Minute, *typed.Retry.MaxBackoff)
	require.Equal(t, ptr("gen-1"), typed.IdempotencyKey)

	fetched, err := tn.Client.GetTaskWithResponse(ctx, typed.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, fetched.StatusCode())
	require.Equal(t, typed.ID, fetched.JSON200.ID)
	require.Equal(t, ptr("gen-1"), fetched.JSON200.IdempotencyKey)
	require.Equal(t, 3, fetched.JSON200.MaxAttempts)
}

func requireDuration(t *testing.T, want time.Duration, got string) {
	t.Helper()
	d, err := time.ParseDuration(got)
	require.NoError(t, err, "duration %q", got)
	require.Equal(t, want, d, "duration %q", got)
}

func TestCreateTaskRunAt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	now := h.Clock.Now()

	cases := []struct {
		name      string
		members   map[string]any
		wantRunAt time.Time
		dueSoon   bool // announced to the local dispatcher
	}{
		{"neither means now", nil, now, true},
		{"delay", map[string]any{"delay": "90s"}, now.Add(90 * time.Second), false},
		{"short delay", map[string]any{"delay": "10s"}, now.Add(10 * time.Second), true},
		{"delay with fraction", map[string]any{"delay": "1.5s"}, now.Add(1500 * time.Millisecond), true},
		{"compound delay", map[string]any{"delay": "1h30m"}, now.Add(90 * time.Minute), false},
		{"past run_at becomes now", map[string]any{"run_at": "2001-02-03T04:05:06Z"}, now, true},
		{"run_at a second ago becomes now", map[string]any{"run_at": now.Add(-time.Second).Format(time.RFC3339)}, now, true},
		{"run_at soon", map[string]any{"run_at": now.Add(20 * time.Second).Format(time.RFC3339)}, now.Add(20 * time.Second), true},
		{"run_at in an hour", map[string]any{"run_at": now.Add(time.Hour).Format(time.RFC3339)}, now.Add(time.Hour), false},
		{"run_at far ahead", map[string]any{"run_at": now.Add(300 * 24 * time.Hour).Format(time.RFC3339)}, now.Add(300 * 24 * time.Hour), false},
		{"run_at with offset", map[string]any{"run_at": now.Add(2 * time.Hour).In(time.FixedZone("", 5*3600+1800)).Format(time.RFC3339)}, now.Add(2 * time.Hour), false},
		{"run_at with nanoseconds rounds up", map[string]any{"run_at": now.Add(time.Hour + 1500*time.Nanosecond).Format(time.RFC3339Nano)}, now.Add(time.Hour + 2*time.Microsecond), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := h.createTask(tn, taskBody(t, tc.members))
			require.True(t, task.RunAt.Equal(tc.wantRunAt), "run_at %s, want %s", task.RunAt, tc.wantRunAt)
			require.True(t, task.NextAttemptAt.Equal(tc.wantRunAt))

			// What was stored is what was answered.
			got, err := tn.Client.GetTaskWithResponse(context.Background(), task.ID)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, got.StatusCode())
			require.True(t, got.JSON200.RunAt.Equal(tc.wantRunAt), "stored run_at %s, want %s", got.JSON200.RunAt, tc.wantRunAt)

			calls := h.Sched.scheduledFor(task.ID)
			if !tc.dueSoon {
				require.Empty(t, calls, "a task due later is left to the dispatcher's loader")
				return
			}
			require.Len(t, calls, 1)
			require.True(t, calls[0].At.Equal(tc.wantRunAt), "scheduled at %s, want %s", calls[0].At, tc.wantRunAt)
		})
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.createTenant("a")
	b := h.createTenant("b")
	taskA := h.createTask(a, `{"url": "https://example.com/a", "delay": "1h"}`)
	taskB := h.createTask(b, `{"url": "https://example.com/b", "delay": "1h"}`)
	ctx := context.Background()

	// B's answers for A's task are those for a task that does not exist.
	for _, id := range []uuid.UUID{taskA.ID, uuid.Must(uuid.NewV7())} {
		for _, r := range []struct{ method, path string }{
			{http.MethodGet, "/v1/tasks/" + id.String()},
			{http.MethodDelete, "/v1/tasks/" + id.String()},
			{http.MethodGet, "/v1/tasks/" + id.String() + "/attempts"},
		} {
			resp := h.do(r.method, r.path, b.APIKey, nil, nil)
			p := requireProblem(t, resp, http.StatusNotFound)
			require.Equal(t, problemTypePrefix+"not-found", p.Type)
			require.NotContains(t, string(resp.Body), a.ID.String())
		}
	}

	// B's list holds only B's task.
	list, err := b.Client.ListTasksWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Len(t, list.JSON200.Data, 1)
	require.Equal(t, taskB.ID, list.JSON200.Data[0].ID)
	for _, st := range []openapi.TaskStatus{"scheduled", "canceled"} {
		list, err := b.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Status: &st})
		require.NoError(t, err)
		for _, task := range list.JSON200.Data {
			require.NotEqual(t, taskA.ID, task.ID)
		}
	}
	// A cursor taken from A's listing pages through B's tasks only.
	newerA := h.createTask(a, `{"url": "https://example.com/a2", "delay": "1h"}`)
	pageA, err := a.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Limit: ptr(1)})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{newerA.ID}, taskIDs(pageA.JSON200.Data))
	require.NotNil(t, pageA.JSON200.NextCursor)
	pageB, err := b.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Cursor: pageA.JSON200.NextCursor})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, pageB.StatusCode())
	require.Equal(t, []uuid.UUID{taskB.ID}, taskIDs(pageB.JSON200.Data))

	// B's DELETE did nothing to A's task.
	got, err := a.Client.GetTaskWithResponse(ctx, taskA.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode())
	require.Equal(t, openapi.TaskStatus("scheduled"), got.JSON200.Status)
	require.Zero(t, h.Sched.canceledCount(taskA.ID))

	// Through the generated client too.
	typed, err := b.Client.GetTaskWithResponse(ctx, taskA.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, typed.StatusCode())
	require.NotNil(t, typed.ApplicationProblemJSON404)
}

func TestRoutingProblems(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	cases := []struct {
		name         string
		method, path string
		token        string
		want         int
		wantType     string
	}{
		{"malformed id on GET", http.MethodGet, "/v1/tasks/not-a-uuid", tn.APIKey, 400, "bad-request"},
		{"malformed id on DELETE", http.MethodDelete, "/v1/tasks/12345", tn.APIKey, 400, "bad-request"},
		{"malformed id on attempts", http.MethodGet, "/v1/tasks/zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz/attempts", tn.APIKey, 400, "bad-request"},
		{"escaped id", http.MethodGet, "/v1/tasks/%27%3B%20drop%20table%20tasks", tn.APIKey, 400, "bad-request"},
		{"unknown route", http.MethodGet, "/v1/nope", tn.APIKey, 404, "not-found"},
		{"unknown route without a key", http.MethodGet, "/nope", "", 404, "not-found"},
		{"unknown sub-resource", http.MethodGet, "/v1/tasks/" + uuid.NewString() + "/nope", tn.APIKey, 404, "not-found"},
		{"wrong method on the collection", http.MethodPut, "/v1/tasks", tn.APIKey, 405, "method-not-allowed"},
		{"wrong method on a task", http.MethodPut, "/v1/tasks/" + uuid.NewString(), tn.APIKey, 405, "method-not-allowed"},
		{"wrong method on healthz", http.MethodPost, "/healthz", "", 405, "method-not-allowed"},
		{"wrong method on admin", http.MethodPut, "/v1/admin/tenants", adminToken, 405, "method-not-allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := h.do(tc.method, tc.path, tc.token, nil, nil)
			p := requireProblem(t, resp, tc.want)
			require.Equal(t, problemTypePrefix+tc.wantType, p.Type)
		})
	}
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	ctx := context.Background()

	// An empty list is an empty array, and has no cursor.
	empty := h.do(http.MethodGet, "/v1/tasks", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, empty.Status)
	require.JSONEq(t, `{"data": []}`, string(empty.Body))

	var created []uuid.UUID
	for i := range 7 {
		task := h.createTask(tn, taskBody(t, map[string]any{"url": "https://example.com/" + string(rune('a'+i)), "delay": "1h"}))
		created = append(created, task.ID)
	}
	newestFirst := make([]uuid.UUID, len(created))
	for i, id := range created {
		newestFirst[len(created)-1-i] = id
	}

	t.Run("newest first", func(t *testing.T) {
		t.Parallel()
		list, err := tn.Client.ListTasksWithResponse(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, list.StatusCode())
		require.Equal(t, newestFirst, taskIDs(list.JSON200.Data))
		require.Nil(t, list.JSON200.NextCursor)
	})

	t.Run("paging by 3", func(t *testing.T) {
		t.Parallel()
		var (
			seen   []uuid.UUID
			sizes  []int
			cursor *string
		)
		for range 10 {
			resp, err := tn.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Limit: ptr(3), Cursor: cursor})
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			seen = append(seen, taskIDs(resp.JSON200.Data)...)
			sizes = append(sizes, len(resp.JSON200.Data))
			if resp.JSON200.NextCursor == nil {
				// Absent, not null or empty.
				require.NotContains(t, rawKeys(t, resp.Body), "next_cursor")
				break
			}
			require.NotEmpty(t, *resp.JSON200.NextCursor)
			cursor = resp.JSON200.NextCursor
		}
		require.Equal(t, []int{3, 3, 1}, sizes)
		require.Equal(t, newestFirst, seen)
	})

	t.Run("limit equal to the count has no next page", func(t *testing.T) {
		t.Parallel()
		resp, err := tn.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Limit: ptr(7)})
		require.NoError(t, err)
		require.Len(t, resp.JSON200.Data, 7)
		require.Nil(t, resp.JSON200.NextCursor)
	})

	t.Run("limit 500", func(t *testing.T) {
		t.Parallel()
		resp := h.do(http.MethodGet, "/v1/tasks?limit=500", tn.APIKey, nil, nil)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	})

	t.Run("bad parameters", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			query string
			want  int
			field string
		}{
			{"limit=0", 422, "limit"},
			{"limit=-1", 422, "limit"},
			{"limit=501", 422, "limit"},
			{"limit=abc", 400, ""},
			{"limit=1.5", 400, ""},
			{"limit=99999999999999999999", 400, ""},
			{"cursor=!!!", 422, "cursor"},
			{"cursor=AAAA", 422, "cursor"},
			{"cursor=", 422, "cursor"},
			{"status=bogus", 422, "status"},
			{"status=SCHEDULED", 422, "status"},
		}
		for _, tc := range cases {
			resp := h.do(http.MethodGet, "/v1/tasks?"+tc.query, tn.APIKey, nil, nil)
			if tc.field != "" {
				requireFieldProblem(t, resp, tc.field)
				continue
			}
			requireProblem(t, resp, tc.want)
		}
	})

	t.Run("status filter", func(t *testing.T) {
		t.Parallel()
		// A tenant of its own, so that canceling does not race the other subtests.
		other := h.createTenant("filter")
		var ids []uuid.UUID
		for range 5 {
			ids = append(ids, h.createTask(other, `{"url": "https://example.com/f", "delay": "1h"}`).ID)
		}
		for _, id := range []uuid.UUID{ids[1], ids[3]} {
			resp, err := other.Client.CancelTaskWithResponse(ctx, id)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode())
		}
		canceled, err := other.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Status: ptr(openapi.TaskStatus("canceled"))})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{ids[3], ids[1]}, taskIDs(canceled.JSON200.Data))
		scheduled, err := other.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Status: ptr(openapi.TaskStatus("scheduled"))})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{ids[4], ids[2], ids[0]}, taskIDs(scheduled.JSON200.Data))
		delivered := h.do(http.MethodGet, "/v1/tasks?status=delivered", other.APIKey, nil, nil)
		require.Equal(t, http.StatusOK, delivered.Status)
		require.JSONEq(t, `{"data": []}`, string(delivered.Body))

		// Paging keeps the filter.
		first, err := other.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Status: ptr(openapi.TaskStatus("scheduled")), Limit: ptr(2)})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{ids[4], ids[2]}, taskIDs(first.JSON200.Data))
		require.NotNil(t, first.JSON200.NextCursor)
		second, err := other.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Status: ptr(openapi.TaskStatus("scheduled")), Limit: ptr(2), Cursor: first.JSON200.NextCursor})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{ids[0]}, taskIDs(second.JSON200.Data))
		require.Nil(t, second.JSON200.NextCursor)
	})
}

func taskIDs(tasks []openapi.Task) []uuid.UUID {
	ids := make([]uuid.UUID, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return ids
}

func TestCancelTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	ctx := context.Background()

	task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
	resp, err := tn.Client.CancelTaskWithResponse(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	require.Equal(t, task.ID, resp.JSON200.ID)
	require.Equal(t, openapi.TaskStatus("canceled"), resp.JSON200.Status)
	require.Nil(t, resp.JSON200.NextAttemptAt, "a finished task has no next attempt")
	require.Equal(t, 1, h.Sched.canceledCount(task.ID), "the local dispatcher is told")

	got, err := tn.Client.GetTaskWithResponse(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, openapi.TaskStatus("canceled"), got.JSON200.Status)

	again := h.do(http.MethodDelete, "/v1/tasks/"+task.ID.String(), tn.APIKey, nil, nil)
	p := requireProblem(t, again, http.StatusConflict)
	require.Equal(t, problemTypePrefix+"not-cancelable", p.Type)
	require.Contains(t, p.Detail, "canceled")
	require.Equal(t, 1, h.Sched.canceledCount(task.ID), "a refused cancel tells no one")

	// Every state but scheduled and retrying refuses; retrying cancels.
	for _, tc := range []struct {
		status string
		want   int
	}{
		{"dispatching", http.StatusConflict},
		{"delivered", http.StatusConflict},
		{"dead", http.StatusConflict},
		{"retrying", http.StatusOK},
	} {
		t.Run(tc.status, func(t *testing.T) {
			task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
			h.exec(`UPDATE tasks SET status = $1 WHERE id = $2`, tc.status, task.ID)
			resp := h.do(http.MethodDelete, "/v1/tasks/"+task.ID.String(), tn.APIKey, nil, nil)
			if tc.want == http.StatusConflict {
				requireProblem(t, resp, http.StatusConflict)
				require.Zero(t, h.Sched.canceledCount(task.ID))
				got, err := tn.Client.GetTaskWithResponse(ctx, task.ID)
				require.NoError(t, err)
				require.Equal(t, openapi.TaskStatus(tc.status), got.JSON200.Status)
				return
			}
			require.Equal(t, tc.want, resp.Status, "body: %s", resp.Body)
			require.Contains(t, string(resp.Body), `"status":"canceled"`)
			require.Equal(t, 1, h.Sched.canceledCount(task.ID))
		})
	}
}

func TestListTaskAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	ctx := context.Background()

	task := h.createTask(tn, `{"url": "https://example.com/hook"}`)
	resp := h.do(http.MethodGet, "/v1/tasks/"+task.ID.String()+"/attempts", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"))
	require.JSONEq(t, `{"data": []}`, string(resp.Body), "no attempts is an empty array, not null")

	// Attempts as the dispatcher records them, inserted out of order.
	started := h.Clock.Now()
	h.exec(`INSERT INTO attempts (task_id, attempt, started_at, duration_ms, status_code, error, outcome, response_body,
			response_headers)
		VALUES ($1, 2, $2, 120, 200, NULL, 'success', 'ok', '{"Content-Type": "text/plain", "Vary": "Accept, Origin"}'),
		       ($1, 1, $3, 5000, NULL, 'dial tcp: connection refused', 'retry', NULL, NULL)`,
		task.ID, started.Add(time.Second), started)

	list, err := tn.Client.ListTaskAttemptsWithResponse(ctx, task.ID, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list.StatusCode(), "body: %s", list.Body)
	attempts := list.JSON200.Data
	require.Len(t, attempts, 2)
	require.Equal(t, 1, attempts[0].Attempt)
	require.True(t, attempts[0].StartedAt.Equal(started))
	require.Equal(t, int64(5000), attempts[0].DurationMs)
	require.Nil(t, attempts[0].StatusCode, "absent on a network error")
	require.Equal(t, ptr("dial tcp: connection refused"), attempts[0].Error)
	require.Equal(t, openapi.AttemptOutcome("retry"), attempts[0].Outcome)
	require.Equal(t, 2, attempts[1].Attempt)
	require.Equal(t, ptr(200), attempts[1].StatusCode)
	require.Nil(t, attempts[1].Error)
	require.Equal(t, openapi.AttemptOutcome("success"), attempts[1].Outcome)
	require.Nil(t, attempts[0].ResponseHeaders, "absent on a network error")
	require.Equal(t, map[string]string{"Content-Type": "text/plain", "Vary": "Accept, Origin"}, attempts[1].ResponseHeaders)

	// The raw JSON leaves status_code out rather than null on a network error.
	raw := h.do(http.MethodGet, "/v1/tasks/"+task.ID.String()+"/attempts", tn.APIKey, nil, nil)
	var body struct {
		Data []map[string]json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(raw.Body, &body))
	require.NotContains(t, body.Data[0], "status_code")
	require.NotContains(t, body.Data[0], "response_headers")
	for _, key := range []string{"attempt", "started_at", "duration_ms", "error", "outcome"} {
		require.Contains(t, body.Data[0], key)
	}
}

func TestListTaskAttemptsPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	task := h.createTask(tn, `{"url": "https://example.com/hook"}`)
	h.exec(`INSERT INTO attempts (task_id, attempt, started_at, duration_ms, outcome)
		SELECT $1, n, now(), 10, 'retry' FROM generate_series(1, 5) n`, task.ID)
	path := "/v1/tasks/" + task.ID.String() + "/attempts"
	// A cursor as the API makes them, to check the ones it never makes.
	nameCursor := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

	type page struct {
		Data []struct {
			Attempt int `json:"attempt"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	read := func(query string) page {
		t.Helper()
		resp := h.do(http.MethodGet, path+query, tn.APIKey, nil, nil)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		var p page
		require.NoError(t, json.Unmarshal(resp.Body, &p))
		return p
	}
	numbers := func(p page) []int {
		var out []int
		for _, a := range p.Data {
			out = append(out, a.Attempt)
		}
		return out
	}

	whole := read("")
	require.Equal(t, []int{1, 2, 3, 4, 5}, numbers(whole), "the default page holds up to 500")
	require.Nil(t, whole.NextCursor)

	var seen []int
	query := "?limit=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3, "five attempts take three pages of two")
		p := read(query)
		seen = append(seen, numbers(p)...)
		if p.NextCursor == nil {
			break
		}
		query = "?limit=2&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	require.Equal(t, []int{1, 2, 3, 4, 5}, seen)

	exact := read("?limit=5")
	require.Len(t, exact.Data, 5)
	require.Nil(t, exact.NextCursor, "no next cursor when the page ends the list")

	t.Run("bad parameters", func(t *testing.T) {
		cases := []struct {
			query string
			want  int
			field string
		}{
			{"limit=0", 422, "limit"},
			{"limit=501", 422, "limit"},
			{"limit=abc", 400, ""},
			{"cursor=!!!", 422, "cursor"},
			{"cursor=", 422, "cursor"},
			{"cursor=" + nameCursor("0"), 422, "cursor"},
			{"cursor=" + nameCursor("-3"), 422, "cursor"},
			{"cursor=" + nameCursor("99999999999"), 422, "cursor"},
			{"cursor=" + base64.RawURLEncoding.EncodeToString(task.ID[:]), 422, "cursor"},
		}
		for _, tc := range cases {
			resp := h.do(http.MethodGet, path+"?"+tc.query, tn.APIKey, nil, nil)
			if tc.field != "" {
				requireFieldProblem(t, resp, tc.field)
				continue
			}
			requireProblem(t, resp, tc.want)
		}
	})
}
