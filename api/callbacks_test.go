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

// TestCallbackValidation: a callback URL is held to the rules of a task's
// url wherever it is given (a task, a batch item, a schedule, a schedule's
// patch, an edit-and-replay), and a bad one is a 422 naming its field.
func TestCallbackValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
	tn := h.createTenant("acme")
	sched := h.createSchedule(tn, `{"cron": "@hourly", "url": "https://example.com/tick"}`)
	dead := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
	finishForReplay(h, dead.ID, "dead", 1, 500, nil)

	bad := []struct {
		name  string
		value any
	}{
		{"relative", "/hooks/done"},
		{"scheme-relative", "//example.com/done"},
		{"not http", "ftp://example.com/done"},
		{"javascript", "javascript:alert(1)"},
		{"no host", "https:///done"},
		{"credentials", "https://user:pass@example.com/done"},
		{"fragment", "https://example.com/done#x"},
		{"too long", "https://example.com/" + strings.Repeat("a", 4096)},
		{"loopback", "http://127.0.0.1/done"},
		{"metadata address", "http://169.254.169.254/latest/meta-data/"},
		{"a number", 42},
	}
	for _, field := range []string{"callback", "failure_callback"} {
		for _, tc := range bad {
			t.Run(field+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				value, err := json.Marshal(tc.value)
				require.NoError(t, err)
				member := fmt.Sprintf(`%q: %s`, field, value)

				requireFieldProblem(t, h.postTask(tn, `{"url": "https://example.com/hook", `+member+`}`, ""), field)
				results := h.batch(tn, `{"url": "https://example.com/hook", `+member+`}`, `{"url": "https://example.com/ok"}`)
				requireItemProblem(t, results[0], 0, http.StatusUnprocessableEntity, field)
				requireItemCreated(t, results[1])
				requireFieldProblem(t, h.postSchedule(tn, `{"cron": "@hourly", "url": "https://example.com/tick", `+member+`}`), field)
				requireFieldProblem(t, h.patchSchedule(tn, sched.ID, `{`+member+`}`), field)
				edit := `{` + member + `}`
				requireFieldProblem(t, h.replay(tn, dead.ID, &edit), field)
			})
		}
		t.Run(field+"/empty", func(t *testing.T) {
			t.Parallel()
			member := fmt.Sprintf(`%q: ""`, field)
			requireFieldProblem(t, h.postTask(tn, `{"url": "https://example.com/hook", `+member+`}`, ""), field)
			requireFieldProblem(t, h.postSchedule(tn, `{"cron": "@hourly", "url": "https://example.com/tick", `+member+`}`), field)
			null := fmt.Sprintf(`{%q: null}`, field)
			requireFieldProblem(t, h.replay(tn, dead.ID, &null), field)
		})
	}
	require.Equal(t, openapi.TaskStatus("dead"), h.getTask(tn, dead.ID).Status, "no refused edit replayed it")
}

// TestCallbackFields: the callback URLs come back on the task and the
// schedule, count in the idempotency fingerprint, are changed and removed by
// a schedule's patch and an edit-and-replay; a callback task shows its
// source and its report, is found by callback_of, and cannot be given
// callbacks.
func TestCallbackFields(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	other := h.createTenant("other")
	ctx := context.Background()
	const withCallbacks = `{"url": "https://example.com/hook", "delay": "1h",
		"callback": "https://example.com/done", "failure_callback": "https://example.com/failed"}`

	resp := h.postTask(tn, withCallbacks, "charge-7")
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	var task openapi.Task
	require.NoError(t, json.Unmarshal(resp.Body, &task))
	require.Equal(t, ptr("https://example.com/done"), task.Callback)
	require.Equal(t, ptr("https://example.com/failed"), task.FailureCallback)
	require.Nil(t, task.CallbackOf)
	require.Nil(t, task.CallbackTaskID)
	require.Nil(t, task.Report)
	require.Equal(t, task.Callback, h.getTask(tn, task.ID).Callback)

	// The same key with another callback is another request.
	reused := h.postTask(tn, strings.Replace(withCallbacks, "/done", "/done-v2", 1), "charge-7")
	requireProblem(t, reused, http.StatusUnprocessableEntity)
	replayed := h.postTask(tn, withCallbacks, "charge-7")
	require.Equal(t, http.StatusOK, replayed.Status, "body: %s", replayed.Body)

	// A task without callbacks shows none: the members are absent.
	plain := h.createTask(tn, `{"url": "https://example.com/hook"}`)
	raw := rawKeys(t, h.do(http.MethodGet, "/v1/tasks/"+plain.ID.String(), tn.APIKey, nil, nil).Body)
	for _, member := range []string{"callback", "failure_callback", "callback_of", "callback_task_id", "report"} {
		require.NotContains(t, raw, member)
	}

	// The task delivered, with its callback task written as the dispatcher
	// writes it.
	callbackID := uuid.Must(uuid.NewV7())
	report := fmt.Sprintf(`{"task_id": %q, "status": "delivered", "attempt": 1, "error": null,
		"response": {"status_code": 200, "headers": {"Content-Type": "text/plain"}, "body": "b2s=", "body_truncated": false}}`, task.ID)
	h.exec(`INSERT INTO tasks (id, tenant_id, status, url, method, headers, body, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, callback_of)
		SELECT $1, tenant_id, 'scheduled', callback, 'POST', '{"Content-Type": "application/json"}', $3::text::bytea,
			now(), now(), timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, id
		FROM tasks WHERE id = $2`, callbackID, task.ID, report)
	h.exec(`UPDATE tasks SET status = 'delivered', attempts = 1, next_attempt_at = NULL, last_status_code = 200,
		callback_task_id = $2 WHERE id = $1`, task.ID, callbackID)

	source := h.getTask(tn, task.ID)
	require.Equal(t, &callbackID, source.CallbackTaskID)
	cb := h.getTask(tn, callbackID)
	require.Equal(t, &task.ID, cb.CallbackOf)
	require.Equal(t, "https://example.com/done", cb.URL)
	require.Nil(t, cb.Callback)
	require.NotNil(t, cb.Report)
	require.Equal(t, task.ID, cb.Report.TaskID)
	require.Equal(t, openapi.CallbackPayloadStatusDelivered, cb.Report.Status)
	require.Equal(t, []byte("ok"), cb.Report.Response.Body)
	require.Equal(t, ptr(200), cb.Report.Response.StatusCode)

	list, err := tn.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{CallbackOf: &task.ID})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list.StatusCode(), "body: %s", list.Body)
	require.Len(t, list.JSON200.Data, 1)
	require.Equal(t, callbackID, list.JSON200.Data[0].ID)
	foreign, err := other.Client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{CallbackOf: &task.ID})
	require.NoError(t, err)
	require.Empty(t, foreign.JSON200.Data, "another tenant finds nothing")
	bad := h.do(http.MethodGet, "/v1/tasks?callback_of=nope", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusBadRequest, bad.Status, "body: %s", bad.Body)

	// A callback task cannot be given callbacks; it can be replayed.
	finishForReplay(h, callbackID, "dead", 1, 500, nil)
	for _, field := range []string{"callback", "failure_callback"} {
		edit := fmt.Sprintf(`{%q: "https://example.com/loop"}`, field)
		requireFieldProblem(t, h.replay(tn, callbackID, &edit), field)
	}
	require.Equal(t, openapi.TaskStatus("dead"), h.getTask(tn, callbackID).Status)
	asIs := `{"url": "https://example.com/done-v2"}`
	require.Equal(t, http.StatusOK, h.replay(tn, callbackID, &asIs).Status)

	// The source's callbacks are changed and removed by an edit-and-replay.
	edit := `{"callback": "", "failure_callback": "https://example.com/failed-v2"}`
	edited := h.replay(tn, task.ID, &edit)
	require.Equal(t, http.StatusOK, edited.Status, "body: %s", edited.Body)
	got := h.getTask(tn, task.ID)
	require.Nil(t, got.Callback)
	require.Equal(t, ptr("https://example.com/failed-v2"), got.FailureCallback)

	// A schedule carries them, and a patch changes or removes them.
	sched := h.createSchedule(tn, `{"cron": "@hourly", "url": "https://example.com/tick", "callback": "https://example.com/tick-done"}`)
	require.Equal(t, ptr("https://example.com/tick-done"), sched.Callback)
	require.Nil(t, sched.FailureCallback)
	patched := h.mustPatchSchedule(tn, sched.ID, `{"callback": null, "failure_callback": "https://example.com/tick-failed"}`)
	require.Nil(t, patched.Callback)
	require.Equal(t, ptr("https://example.com/tick-failed"), patched.FailureCallback)
}
