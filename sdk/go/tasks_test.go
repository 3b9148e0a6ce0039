package hookwheel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

func TestCreateTaskSendsTheRequestWithAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeJSON(w, http.StatusCreated, taskJSON(id, "https://example.com/hook"))
	})
	c := f.client(t)
	ctx := context.Background()

	runAt := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	task, err := c.CreateTask(ctx, hookwheel.TaskRequest{
		URL: "https://example.com/hook", Method: "PUT", Headers: map[string]string{"X-A": "b"}, Body: "{}",
		RunAt: runAt, Timeout: 10 * time.Second, MaxAttempts: 3, MinBackoff: time.Second,
	})
	require.NoError(t, err)
	require.Equal(t, id, task.ID)
	_, err = c.CreateTask(ctx, hookwheel.TaskRequest{URL: "https://example.com/hook", Delay: 90 * time.Second, IdempotencyKey: "mine"})
	require.NoError(t, err)

	got := f.got()
	require.Len(t, got, 2)
	require.Equal(t, "/v1/tasks", got[0].path)
	require.Equal(t, "Bearer hw_test_secret", got[0].header.Get("Authorization"))
	require.Contains(t, got[0].header.Get("User-Agent"), "hookwheel-go")
	_, err = uuid.Parse(got[0].header.Get("Idempotency-Key"))
	require.NoError(t, err, "a create without a key gets a random one")
	require.JSONEq(t, `{"url":"https://example.com/hook","method":"PUT","headers":{"X-A":"b"},"body":"{}",
		"run_at":"2030-01-02T03:04:05Z","timeout":"10s","retry":{"max_attempts":3,"min_backoff":"1s"}}`, string(got[0].body))
	require.Equal(t, "mine", got[1].header.Get("Idempotency-Key"))
	require.JSONEq(t, `{"url":"https://example.com/hook","delay":"1m30s"}`, string(got[1].body))
}

// TestCreateTaskSendsEveryField: every field of a TaskRequest reaches
// POST /v1/tasks, as its JSON form (a batch line) spells it, but for the
// idempotency key, which travels as the Idempotency-Key header.
func TestCreateTaskSendsEveryField(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeJSON(w, http.StatusCreated, taskJSON(uuid.New(), "https://example.com/hook"))
	})
	req := hookwheel.TaskRequest{
		URL: "https://example.com/hook", Method: "PATCH", Headers: map[string]string{"X-A": "b"}, Body: "{}",
		RunAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Timeout: 10 * time.Second,
		MaxAttempts: 3, MinBackoff: time.Second, MaxBackoff: time.Minute, Labels: map[string]string{"team": "a"},
		OrderingKey: "order-42", FlowKey: "customer-1042", Callback: "https://example.com/done", FailureCallback: "https://example.com/failed",
		IdempotencyKey: "mine",
	}
	_, err := f.client(t).CreateTask(context.Background(), req)
	require.NoError(t, err)

	var want map[string]any
	line, err := json.Marshal(req)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(line, &want))
	require.Equal(t, "mine", want["idempotency_key"])
	delete(want, "idempotency_key")
	got := f.got()
	require.Len(t, got, 1)
	require.Equal(t, "mine", got[0].header.Get("Idempotency-Key"))
	var sent map[string]any
	require.NoError(t, json.Unmarshal(got[0].body, &sent))
	require.Equal(t, want, sent)
	require.Contains(t, sent, "ordering_key")
	require.Contains(t, sent, "flow_key")
}

func TestListTasksWalksEveryPage(t *testing.T) {
	t.Parallel()
	ids := make([]uuid.UUID, 5)
	for i := range ids {
		ids[i] = uuid.New()
	}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		// Pages of two: the cursor is the index of the page's first task.
		start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		if r.URL.Query().Get("status") != "dead" || r.URL.Query().Get("limit") != "2" {
			writeProblem(w, http.StatusBadRequest, "unexpected query "+r.URL.RawQuery)
			return
		}
		page := map[string]any{"data": []any{}}
		var data []any
		for i := start; i < min(start+2, len(ids)); i++ {
			data = append(data, taskJSON(ids[i], "https://example.com/"))
		}
		page["data"] = data
		if start+2 < len(ids) {
			page["next_cursor"] = strconv.Itoa(start + 2)
		}
		writeJSON(w, http.StatusOK, page)
	})
	c := f.client(t)
	ctx := context.Background()
	filter := hookwheel.TaskFilter{Status: hookwheel.StatusDead, PageSize: 2}

	var got []uuid.UUID
	for task, err := range c.ListTasks(ctx, filter) {
		require.NoError(t, err)
		got = append(got, task.ID)
	}
	require.Equal(t, ids, got)
	require.Len(t, f.got(), 3)

	// Breaking out fetches no further page.
	for range c.ListTasks(ctx, filter) {
		break
	}
	require.Len(t, f.got(), 4)

	// An error ends the sequence.
	var errs int
	for _, err := range c.ListTasks(ctx, hookwheel.TaskFilter{PageSize: 2}) {
		require.ErrorIs(t, err, hookwheel.ErrInvalid)
		errs++
	}
	require.Equal(t, 1, errs)
}

// TestListIncludeBody: IncludeBody asks for bodies (include=body), and a
// page the server cut short at its bound on bodies (fewer tasks than asked,
// with a cursor) is read on from its cursor like any other.
func TestListIncludeBody(t *testing.T) {
	t.Parallel()
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		q := r.URL.Query()
		switch {
		case r.URL.Path == "/v1/schedules":
			writeJSON(w, http.StatusOK, map[string]any{"data": []any{}})
		case q.Get("cursor") == "":
			// Cut short: one task where 100 were asked for.
			task := taskJSON(ids[0], "https://example.com/")
			task["body"] = "<big>"
			writeJSON(w, http.StatusOK, map[string]any{"data": []any{task}, "next_cursor": "c1"})
		default:
			var data []any
			for _, id := range ids[1:] {
				task := taskJSON(id, "https://example.com/")
				task["body"] = "<b>"
				data = append(data, task)
			}
			writeJSON(w, http.StatusOK, map[string]any{"data": data})
		}
	})
	c := f.client(t)
	ctx := context.Background()

	var got []string
	for task, err := range c.ListTasks(ctx, hookwheel.TaskFilter{IncludeBody: true}) {
		require.NoError(t, err)
		got = append(got, task.Body)
	}
	require.Equal(t, []string{"<big>", "<b>", "<b>"}, got)
	for range c.ListTasks(ctx, hookwheel.TaskFilter{}) {
		break
	}
	for range c.ListSchedules(ctx, hookwheel.ScheduleFilter{IncludeBody: true}) {
	}
	for range c.ListSchedules(ctx, hookwheel.ScheduleFilter{}) {
	}
	var queries []string
	for _, r := range f.got() {
		queries = append(queries, r.path+"?"+mustQuery(t, r.query).Encode())
	}
	require.Equal(t, []string{
		"/v1/tasks?include=body&limit=100",
		"/v1/tasks?cursor=c1&include=body&limit=100",
		"/v1/tasks?limit=100",
		"/v1/schedules?include=body&limit=100",
		"/v1/schedules?limit=100",
	}, queries)
}

// TestListTasksStopsOnARepeatedCursor: a server answering a page with its own
// cursor ends the walk with an error instead of an endless loop.
func TestListTasksStopsOnARepeatedCursor(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{taskJSON(uuid.New(), "https://example.com/")}, "next_cursor": "same"})
	})
	var items, errs int
	for _, err := range f.client(t).ListTasks(context.Background(), hookwheel.TaskFilter{}) {
		if err != nil {
			require.ErrorContains(t, err, `cursor "same"`)
			errs++
			continue
		}
		items++
	}
	require.Equal(t, 2, items, "the first page, then the page its cursor names")
	require.Equal(t, 1, errs)
	require.Len(t, f.got(), 2)
}

func TestCreateTasksReportsEachItem(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{
			map[string]any{"task": taskJSON(id, "https://example.com/"), "replayed": true},
			map[string]any{"error": map[string]any{"type": "validation", "title": "Unprocessable Entity", "status": 422,
				"detail": "the request has invalid fields", "instance": "/v1/tasks/batch#/tasks/1",
				"errors": []any{map[string]any{"field": "url", "message": "is required"}}}},
		}})
	})
	results, err := f.client(t).CreateTasks(context.Background(), []hookwheel.TaskRequest{
		{URL: "https://example.com/", IdempotencyKey: "first"}, {},
	})
	require.NoError(t, err)
	require.Len(t, results, 2)
	require.Equal(t, id, results[0].Task.ID)
	require.True(t, results[0].Replayed)
	require.Nil(t, results[0].Err)
	require.Nil(t, results[1].Task)
	require.ErrorIs(t, results[1].Err, hookwheel.ErrInvalid)
	require.Equal(t, "/v1/tasks/batch#/tasks/1", results[1].Err.Instance)

	var sent struct {
		Tasks []struct {
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"tasks"`
	}
	require.NoError(t, json.Unmarshal(f.got()[0].body, &sent))
	require.Equal(t, "first", sent.Tasks[0].IdempotencyKey)
	_, err = uuid.Parse(sent.Tasks[1].IdempotencyKey)
	require.NoError(t, err, "an item without a key gets a random one")
}

func TestTaskRequestJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     hookwheel.TaskRequest
		wantErr  string
	}{
		{name: "every field",
			in: `{"url":"https://example.com/","method":"PUT","headers":{"A":"b"},"body":"x","run_at":"2030-01-01T00:00:00Z",
				"timeout":"10s","retry":{"max_attempts":3,"min_backoff":"2s","max_backoff":"1m"},"idempotency_key":"k"}`,
			want: hookwheel.TaskRequest{URL: "https://example.com/", Method: "PUT", Headers: map[string]string{"A": "b"}, Body: "x",
				RunAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Timeout: 10 * time.Second, MaxAttempts: 3,
				MinBackoff: 2 * time.Second, MaxBackoff: time.Minute, IdempotencyKey: "k"}},
		{name: "labels", in: `{"url":"https://example.com/","labels":{"team":"payments","note":"a:b"}}`,
			want: hookwheel.TaskRequest{URL: "https://example.com/", Labels: map[string]string{"team": "payments", "note": "a:b"}}},
		{name: "delay", in: `{"url":"https://example.com/","delay":"1h30m"}`,
			want: hookwheel.TaskRequest{URL: "https://example.com/", Delay: 90 * time.Minute}},
		{name: "unknown field", in: `{"url":"https://example.com/","runAt":"2030-01-01T00:00:00Z"}`, wantErr: `unknown field "runAt"`},
		{name: "bad duration", in: `{"url":"https://example.com/","delay":"soon"}`, wantErr: `delay: want a Go duration`},
		{name: "not an object", in: `["https://example.com/"]`, wantErr: "cannot unmarshal array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got hookwheel.TaskRequest
			err := json.Unmarshal([]byte(tc.in), &got)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			// And back: the same request.
			out, err := json.Marshal(got)
			require.NoError(t, err)
			var again hookwheel.TaskRequest
			require.NoError(t, json.Unmarshal(out, &again))
			require.Equal(t, tc.want, again)
		})
	}
}

func TestLabelsReachTheAPI(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/tasks":
			writeJSON(w, http.StatusOK, map[string]any{"data": []any{taskJSON(id, "https://example.com/")}})
		case r.URL.Path == "/v1/tasks/replay":
			writeJSON(w, http.StatusOK, map[string]any{"matched": 1, "replayed": 1})
		case r.URL.Path == "/v1/schedules":
			writeJSON(w, http.StatusCreated, map[string]any{"id": uuid.New(), "cron": "@hourly", "timezone": "UTC",
				"paused": false, "next_run_at": nil, "url": "https://example.com/", "method": "POST", "timeout": "30s",
				"retry": map[string]any{}, "created_at": time.Now(), "updated_at": time.Now(), "skipped_occurrences": 0})
		default:
			writeJSON(w, http.StatusOK, taskJSON(id, "https://example.com/"))
		}
	})
	c := f.client(t)
	ctx := context.Background()
	labels := map[string]string{"team": "payments", "note": "a:b,c"}

	_, err := c.CreateTask(ctx, hookwheel.TaskRequest{URL: "https://example.com/", Labels: labels})
	require.NoError(t, err)
	for _, err := range c.ListTasks(ctx, hookwheel.TaskFilter{Labels: labels, PageSize: 10}) {
		require.NoError(t, err)
	}
	_, err = c.ReplayDead(ctx, hookwheel.DeadFilter{Labels: labels})
	require.NoError(t, err)
	// An empty map would go out as no condition and replay every dead
	// task: refused before any request.
	_, err = c.ReplayDead(ctx, hookwheel.DeadFilter{Labels: map[string]string{}})
	require.ErrorContains(t, err, "DeadFilter.Labels is empty")
	_, err = c.ReplayTask(ctx, id, &hookwheel.ReplayEdit{Labels: map[string]string{}})
	require.NoError(t, err)
	_, err = c.ReplayTask(ctx, id, &hookwheel.ReplayEdit{URL: "https://example.com/v2"})
	require.NoError(t, err)
	_, err = c.CreateSchedule(ctx, hookwheel.ScheduleRequest{Cron: "@hourly", URL: "https://example.com/", Labels: labels})
	require.NoError(t, err)

	got := f.got()
	require.Len(t, got, 6)
	require.JSONEq(t, `{"url":"https://example.com/","labels":{"team":"payments","note":"a:b,c"}}`, string(got[0].body))
	// One label parameter per pair, in key order, "key:value".
	require.Equal(t, []string{"note:a:b,c", "team:payments"}, mustQuery(t, got[1].query)["label"])
	require.JSONEq(t, `{"labels":{"team":"payments","note":"a:b,c"},"dry_run":false}`, string(got[2].body))
	require.JSONEq(t, `{"labels":{}}`, string(got[3].body), "an empty, non-nil map removes the labels")
	require.JSONEq(t, `{"url":"https://example.com/v2"}`, string(got[4].body), "nil keeps them")
	require.JSONEq(t, `{"cron":"@hourly","url":"https://example.com/","labels":{"team":"payments","note":"a:b,c"}}`,
		string(got[5].body))
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	q, err := url.ParseQuery(raw)
	require.NoError(t, err)
	return q
}

func TestTaskAttemptsPages(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	attempt := func(n int) map[string]any {
		return map[string]any{"attempt": n, "started_at": "2026-11-22T10:00:00Z", "duration_ms": 5, "outcome": "retry"}
	}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		page := map[string]any{"data": []any{attempt(1), attempt(2)}, "next_cursor": "c2"}
		if r.URL.Query().Get("cursor") == "c2" {
			page = map[string]any{"data": []any{attempt(3)}}
		}
		writeJSON(w, http.StatusOK, page)
	})
	c := f.client(t)
	ctx := context.Background()

	var numbers []int
	for a, err := range c.ListTaskAttempts(ctx, id, 2) {
		require.NoError(t, err)
		numbers = append(numbers, a.Attempt)
	}
	require.Equal(t, []int{1, 2, 3}, numbers, "every page, oldest first")
	all, err := c.TaskAttempts(ctx, id)
	require.NoError(t, err)
	require.Len(t, all, 3)

	got := f.got()
	require.Len(t, got, 4)
	require.Equal(t, "/v1/tasks/"+id.String()+"/attempts", got[0].path)
	require.Equal(t, url.Values{"limit": {"2"}}, mustQuery(t, got[0].query))
	require.Equal(t, url.Values{"limit": {"2"}, "cursor": {"c2"}}, mustQuery(t, got[1].query))
	require.Equal(t, url.Values{"limit": {"500"}}, mustQuery(t, got[2].query), "TaskAttempts reads the largest pages")
}

func TestReplayDeadSendsTheEdit(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeJSON(w, http.StatusOK, map[string]any{"matched": 2, "replayed": 0, "changed": 1, "refused": 1,
			"refusals": []any{map[string]any{"reason": "url: must be at most 4096 characters", "count": 1, "task_ids": []any{uuid.Nil}}},
			"sample": []any{map[string]any{"id": uuid.Nil, "url_before": "https://old.example/a", "url_after": "https://new.example/a",
				"headers_set": map[string]any{"Authorization": "Bearer new"}, "headers_removed": []any{}}}})
	})
	c := f.client(t)
	res, err := c.ReplayDead(context.Background(), hookwheel.DeadFilter{DryRun: true, Edit: &hookwheel.DeadEdit{
		URLPrefixFrom: "https://old.example/", URLPrefixTo: "https://new.example/",
		SetHeaders: map[string]string{"Authorization": "Bearer new"}, RemoveHeaders: []string{"X-Old"}}})
	require.NoError(t, err)
	require.Equal(t, 2, res.Matched)
	require.Equal(t, 1, *res.Refused)
	require.Equal(t, "https://new.example/a", res.Sample[0].URLAfter)
	_, err = c.ReplayDead(context.Background(), hookwheel.DeadFilter{Edit: &hookwheel.DeadEdit{RemoveHeaders: []string{"X-Old"}}})
	require.NoError(t, err)

	got := f.got()
	require.Len(t, got, 2)
	require.JSONEq(t, `{"dry_run": true, "edit": {"url_prefix": {"from": "https://old.example/", "to": "https://new.example/"},
		"headers": {"set": {"Authorization": "Bearer new"}, "remove": ["X-Old"]}}}`, string(got[0].body))
	require.JSONEq(t, `{"dry_run": false, "edit": {"headers": {"remove": ["X-Old"]}}}`, string(got[1].body))
}
