package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
)

// replay posts body (nil for none) to POST /v1/tasks/{id}/replay as tn.
func (h *harness) replay(tn tenant, id uuid.UUID, body *string) response {
	h.t.Helper()
	if body == nil {
		return h.do(http.MethodPost, "/v1/tasks/"+id.String()+"/replay", tn.APIKey, nil, nil)
	}
	return h.do(http.MethodPost, "/v1/tasks/"+id.String()+"/replay", tn.APIKey, strings.NewReader(*body), nil)
}

// getTask requires a 200 for GET /v1/tasks/{id} as tn and returns the task.
func (h *harness) getTask(tn tenant, id uuid.UUID) openapi.Task {
	h.t.Helper()
	resp, err := tn.Client.GetTaskWithResponse(context.Background(), id)
	require.NoError(h.t, err)
	require.Equal(h.t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return *resp.JSON200
}

func TestReplayTaskEdit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	ctx := context.Background()
	const created = `{"url": "https://example.com/old", "headers": {"X-Old": "1"}, "body": "old", "delay": "1h",
		"retry": {"max_attempts": 3}}`

	resp := h.postTask(tn, created, "order-9")
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	var task openapi.Task
	require.NoError(t, json.Unmarshal(resp.Body, &task))
	finishForReplay(h, task.ID, "dead", 3, 500, ptr("receiver answered 500"))

	edit := `{"url": "https://example.net/new?v=2", "method": "PUT", "headers": {"x-new": "2"}, "body": "{\"v\": 2}"}`
	replayed := h.replay(tn, task.ID, &edit)
	require.Equal(t, http.StatusOK, replayed.Status, "body: %s", replayed.Body)
	var got openapi.Task
	require.NoError(t, json.Unmarshal(replayed.Body, &got))
	require.Equal(t, openapi.TaskStatus("scheduled"), got.Status)
	require.Equal(t, "https://example.net/new?v=2", got.URL)
	require.Equal(t, openapi.HTTPMethod("PUT"), got.Method)
	require.Equal(t, map[string]string{"X-New": "2"}, got.Headers, "the whole set replaced, names canonical as at creation")
	require.Equal(t, `{"v": 2}`, got.Body)
	require.Equal(t, task.ID, got.ID)
	require.Equal(t, 3, got.Attempts, "attempts continue their count")
	require.Equal(t, ptr("order-9"), got.IdempotencyKey)
	require.Len(t, h.Sched.scheduledFor(task.ID), 1)
	require.Equal(t, got, h.getTask(tn, task.ID), "stored as answered")

	// The create request repeated with its key is still this task, as it is now.
	again := h.postTask(tn, created, "order-9")
	require.Equal(t, http.StatusOK, again.Status, "body: %s", again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	var repeated openapi.Task
	require.NoError(t, json.Unmarshal(again.Body, &repeated))
	require.Equal(t, task.ID, repeated.ID)
	require.Equal(t, "https://example.net/new?v=2", repeated.URL)

	t.Run("some fields", func(t *testing.T) {
		// Dead again: the generated client's edit of the body alone keeps the rest.
		finishForReplay(h, task.ID, "dead", 4, 500, nil)
		r, err := tn.Client.ReplayTaskWithResponse(ctx, task.ID, openapi.ReplayRequest{Body: ptr("v3")})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.StatusCode(), "body: %s", r.Body)
		require.Equal(t, "v3", r.JSON200.Body)
		require.Equal(t, "https://example.net/new?v=2", r.JSON200.URL)
		require.Equal(t, map[string]string{"X-New": "2"}, r.JSON200.Headers)

		// No headers and an empty body are values too.
		finishForReplay(h, task.ID, "dead", 5, 500, nil)
		r2 := h.replay(tn, task.ID, ptr(`{"headers": {}, "body": ""}`))
		require.Equal(t, http.StatusOK, r2.Status, "body: %s", r2.Body)
		stored := h.getTask(tn, task.ID)
		require.Empty(t, stored.Headers)
		require.Empty(t, stored.Body)
	})

	t.Run("nothing to change", func(t *testing.T) {
		for _, body := range []*string{nil, ptr(""), ptr(" \n"), ptr(`{}`), ptr(`null`)} {
			finishForReplay(h, task.ID, "dead", 6, 500, nil)
			before := h.getTask(tn, task.ID)
			r := h.replay(tn, task.ID, body)
			require.Equal(t, http.StatusOK, r.Status, "body %v: %s", body, r.Body)
			after := h.getTask(tn, task.ID)
			require.Equal(t, openapi.TaskStatus("scheduled"), after.Status)
			require.Equal(t, before.URL, after.URL)
			require.Equal(t, before.Body, after.Body)
			require.Equal(t, before.Headers, after.Headers)
		}
	})
}

func TestReplayTaskEditRefused(t *testing.T) {
	t.Parallel()
	const maxBody = 1024
	h := newHarness(t, func(c *api.Config) {
		c.Guard = netguard.New(netguard.Config{})
		c.Limits.MaxBody = maxBody
	})
	tn := h.createTenant("acme")
	other := h.createTenant("other")
	task := h.createTask(tn, `{"url": "https://example.com/hook", "headers": {"X-A": "1"}, "body": "b", "delay": "1h"}`)
	finishForReplay(h, task.ID, "dead", 2, 500, nil)
	before := h.getTask(tn, task.ID)

	tests := []struct {
		name, body, field string
	}{
		{"unknown field", `{"url": "https://example.net/", "run_at": "2030-01-01T00:00:00Z"}`, "run_at"},
		{"misspelt field", `{"urll": "https://example.net/"}`, "urll"},
		{"not http", `{"url": "ftp://example.net/x"}`, "url"},
		{"empty url", `{"url": ""}`, "url"},
		{"internal address", `{"url": "http://169.254.169.254/latest/meta-data/"}`, "url"},
		{"credentials in the url", `{"url": "https://user:pass@example.net/"}`, "url"},
		{"url of the wrong type", `{"url": 42}`, "url"},
		{"null url", `{"url": null}`, "url"},
		{"method", `{"method": "TRACE"}`, "method"},
		{"lower-case method", `{"method": "put"}`, "method"},
		{"reserved header", `{"headers": {"Webhook-Signature": "v1,forged"}}`, "headers.Webhook-Signature"},
		{"reserved header with _", `{"headers": {"hookwheel_attempt": "1"}}`, "headers.hookwheel_attempt"},
		{"header injection", `{"headers": {"X-A": "1\r\nX-Injected: 1"}}`, "headers.X-A"},
		{"header name", `{"headers": {"X A": "1"}}`, "headers.X A"},
		{"null headers", `{"headers": null}`, "headers"},
		{"body too large", `{"body": "` + strings.Repeat("x", maxBody+1) + `"}`, "body"},
		{"body not sendable as given", `{"body": "\udc00"}`, "body"},
		{"body of the wrong type", `{"body": {"a": 1}}`, "body"},
		{"a valid field beside an invalid one", `{"url": "https://example.net/", "headers": {"Host": "evil.example"}}`, "headers.Host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireFieldProblem(t, h.replay(tn, task.ID, &tt.body), tt.field)
		})
	}
	t.Run("malformed", func(t *testing.T) {
		for _, body := range []string{`[]`, `{"url": `, `"https://example.net/"`} {
			p := requireProblem(t, h.replay(tn, task.ID, &body), http.StatusBadRequest)
			require.Equal(t, problemTypePrefix+"malformed-json", p.Type)
		}
	})
	t.Run("another tenant's task", func(t *testing.T) {
		edit := `{"url": "https://thief.example/", "body": "stolen"}`
		for _, id := range []uuid.UUID{task.ID, uuid.Must(uuid.NewV7())} {
			p := requireProblem(t, h.replay(other, id, &edit), http.StatusNotFound)
			require.Equal(t, problemTypePrefix+"not-found", p.Type)
		}
	})
	t.Run("a task that cannot be replayed", func(t *testing.T) {
		waiting := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
		edit := `{"url": "https://example.net/"}`
		p := requireProblem(t, h.replay(tn, waiting.ID, &edit), http.StatusConflict)
		require.Equal(t, problemTypePrefix+"not-replayable", p.Type)
		require.Equal(t, "https://example.com/hook", h.getTask(tn, waiting.ID).URL, "not edited either")
	})

	require.Equal(t, before, h.getTask(tn, task.ID), "a refused edit changes nothing")
	require.Empty(t, h.Sched.scheduledFor(task.ID))
}

func TestReplayTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	dead := func(t fixtureTask) bool { return t.status == "dead" }
	// The fixture's second half goes to another host.
	elsewhere := func(f *filterFixture, t fixtureTask) bool {
		for i, ft := range f.tasks {
			if ft.id == t.id {
				return i >= len(f.tasks)/2
			}
		}
		return false
	}
	cases := []struct {
		name string
		body func(f *filterFixture) openapi.ReplayFilter
		keep func(f *filterFixture, t fixtureTask) bool
	}{
		{"every dead task", func(*filterFixture) openapi.ReplayFilter { return openapi.ReplayFilter{} },
			func(*filterFixture, fixtureTask) bool { return true }},
		{"schedule", func(f *filterFixture) openapi.ReplayFilter { return openapi.ReplayFilter{ScheduleID: &f.schedule} },
			func(_ *filterFixture, t fixtureTask) bool { return t.inSched }},
		{"url prefix", func(*filterFixture) openapi.ReplayFilter {
			return openapi.ReplayFilter{URL: ptr("https://example.net")}
		}, elsewhere},
		{"created range and url", func(f *filterFixture) openapi.ReplayFilter {
			return openapi.ReplayFilter{CreatedAfter: &f.hours[1], CreatedBefore: &f.hours[2], URL: ptr("https://example.com/")}
		}, func(f *filterFixture, t fixtureTask) bool { return t.hour == 1 && !elsewhere(f, t) }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFilterFixture(t, h, fmt.Sprintf("replay-%d", i), "dead", "delivered", "scheduled")
			for _, ft := range f.tasks[len(f.tasks)/2:] {
				h.exec(`UPDATE tasks SET url = 'https://example.net/g' WHERE id = $1`, ft.id)
			}
			want := f.ids(func(t fixtureTask) bool { return dead(t) && tc.keep(f, t) })
			require.NotEmpty(t, want)

			dry := tc.body(f)
			dry.DryRun = ptr(true)
			resp, err := f.tn.Client.ReplayTasksWithResponse(ctx, dry)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			require.Equal(t, openapi.ReplayResult{Matched: len(want), Replayed: 0}, *resp.JSON200)
			for _, task := range f.tasks {
				require.Equal(t, openapi.TaskStatus(task.status), h.getTask(f.tn, task.id).Status, "a dry run changes nothing")
				require.Empty(t, h.Sched.scheduledFor(task.id))
			}

			resp, err = f.tn.Client.ReplayTasksWithResponse(ctx, tc.body(f))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			require.Equal(t, openapi.ReplayResult{Matched: len(want), Replayed: len(want)}, *resp.JSON200)
			wanted := map[uuid.UUID]bool{}
			for _, id := range want {
				wanted[id] = true
			}
			for _, task := range f.tasks {
				got := h.getTask(f.tn, task.id)
				if wanted[task.id] {
					require.Equal(t, openapi.TaskStatus("scheduled"), got.Status)
					require.Len(t, h.Sched.scheduledFor(task.id), 1, "the local dispatcher is told")
					continue
				}
				require.Equal(t, openapi.TaskStatus(task.status), got.Status, "untouched")
				require.Empty(t, h.Sched.scheduledFor(task.id))
			}

			again, err := f.tn.Client.ReplayTasksWithResponse(ctx, tc.body(f))
			require.NoError(t, err)
			require.Equal(t, openapi.ReplayResult{}, *again.JSON200, "nothing dead left")
		})
	}

	t.Run("another tenant's tasks are out of reach", func(t *testing.T) {
		t.Parallel()
		f := newFilterFixture(t, h, "victim", "dead")
		thief := h.createTenant("thief")
		for _, body := range []openapi.ReplayFilter{{}, {ScheduleID: &f.schedule}, {URL: ptr("https://example.com/")}} {
			resp, err := thief.Client.ReplayTasksWithResponse(ctx, body)
			require.NoError(t, err)
			require.Equal(t, openapi.ReplayResult{}, *resp.JSON200)
		}
		for _, task := range f.tasks {
			require.Equal(t, openapi.TaskStatus("dead"), h.getTask(f.tn, task.id).Status)
			require.Empty(t, h.Sched.scheduledFor(task.id))
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		t.Parallel()
		f := newFilterFixture(t, h, "bad", "dead")
		bad := []struct {
			body   string
			status int
			field  string
		}{
			{`{"status": "dead"}`, 422, "status"},
			{`{"schedule_id": "nope"}`, 422, "schedule_id"},
			{`{"url": ""}`, 422, "url"},
			{`{"url": "` + strings.Repeat("a", 2049) + `"}`, 422, "url"},
			{`{"url": "https://example.com/\u0000"}`, 422, "url"},
			{`{"created_after": "yesterday"}`, 422, "created_after"},
			{`{"created_after": "2026-01-01T11:00:00Z", "created_before": "2026-01-01T11:00:00Z"}`, 422, "created_before"},
			{`{"dry_run": "yes"}`, 422, "dry_run"},
			// No label would be no condition, replaying every dead task.
			{`{"labels": {}}`, 422, "labels"},
			{`{"labels": null}`, 422, "labels"},
			{`{"labels": {}, "dry_run": true}`, 422, "labels"},
			{`{"url": "https://example.com/", "labels": {}}`, 422, "labels"},
			{`{"Labels": null}`, 422, "labels"},
			{`{"labels": []}`, 422, "labels"},
			{`{"labels": {"team": 1}}`, 422, "labels"},
			{`{"dry_run": `, 400, ""},
			{``, 400, ""},
		}
		for _, tc := range bad {
			resp := h.do(http.MethodPost, "/v1/tasks/replay", f.tn.APIKey, strings.NewReader(tc.body), nil)
			if tc.field != "" {
				requireFieldProblem(t, resp, tc.field)
				continue
			}
			requireProblem(t, resp, tc.status)
		}
		for _, task := range f.tasks {
			require.Equal(t, openapi.TaskStatus("dead"), h.getTask(f.tn, task.id).Status, "nothing was replayed")
		}
	})
}
