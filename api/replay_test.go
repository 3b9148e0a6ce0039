package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// finishForReplay puts a task in a final state with attempts made, as the
// dispatcher would leave it.
func finishForReplay(h *harness, id uuid.UUID, status string, attempts int, statusCode int, lastError *string) {
	h.t.Helper()
	h.exec(`UPDATE tasks SET status = $2, attempts = $3, next_attempt_at = NULL, last_status_code = $4, last_error = $5
		WHERE id = $1`, id, status, attempts, statusCode, lastError)
}

func TestReplayTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	ctx := context.Background()

	// A dead task that made 3 attempts, the last refused with a 404.
	resp := h.postTask(tn, `{"url": "https://example.com/hook", "delay": "1h", "retry": {"max_attempts": 3}}`, "order-42")
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	var task openapi.Task
	require.NoError(t, json.Unmarshal(resp.Body, &task))
	finishForReplay(h, task.ID, "dead", 3, 404, ptr("receiver answered 404 Not Found"))
	require.Empty(t, h.Sched.scheduledFor(task.ID), "a task due in an hour was not handed to the local dispatcher")

	// The replay happens later, at an instant finer than Postgres keeps: it
	// is rounded up, never down.
	h.Clock.Advance(2*time.Hour + 1500*time.Nanosecond)
	wantNext := h.Clock.Now().Truncate(time.Microsecond).Add(time.Microsecond)

	replayed, err := tn.Client.ReplayTaskWithBodyWithResponse(ctx, task.ID, "application/json", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, replayed.StatusCode(), "body: %s", replayed.Body)
	got := replayed.JSON200
	require.NotNil(t, got)
	require.Equal(t, task.ID, got.ID, "the same task: same webhook-id")
	require.Equal(t, openapi.TaskStatus("scheduled"), got.Status)
	require.NotNil(t, got.NextAttemptAt)
	require.True(t, got.NextAttemptAt.Equal(wantNext), "next_attempt_at %s, want %s", got.NextAttemptAt, wantNext)
	require.True(t, got.RunAt.Equal(task.RunAt), "run_at %s is kept, want %s", got.RunAt, task.RunAt)
	require.Equal(t, 3, got.Attempts, "attempts continue their count")
	require.Equal(t, 3, got.MaxAttempts)
	require.Equal(t, ptr(404), got.LastStatusCode, "the latest outcome stays until the next attempt")
	require.Equal(t, ptr("receiver answered 404 Not Found"), got.LastError)
	require.Equal(t, ptr("order-42"), got.IdempotencyKey, "the same Idempotency-Key")
	require.Equal(t, task.URL, got.URL)
	require.True(t, got.CreatedAt.Equal(task.CreatedAt))

	// The local dispatcher was handed the task, due now.
	calls := h.Sched.scheduledFor(task.ID)
	require.Len(t, calls, 1)
	require.True(t, calls[0].At.Equal(wantNext), "scheduled at %s, want %s", calls[0].At, wantNext)

	// Stored as answered, with a fresh budget counted from the replay.
	read, err := tn.Client.GetTaskWithResponse(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, openapi.TaskStatus("scheduled"), read.JSON200.Status)
	require.True(t, read.JSON200.NextAttemptAt.Equal(wantNext))
	conn, err := pgx.Connect(ctx, h.dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var attemptBase int
	require.NoError(t, conn.QueryRow(ctx, `SELECT attempt_base FROM tasks WHERE id = $1`, task.ID).Scan(&attemptBase))
	require.Equal(t, 3, attemptBase)

	// Once scheduled again, it cannot be replayed a second time.
	again := h.do(http.MethodPost, "/v1/tasks/"+task.ID.String()+"/replay", tn.APIKey, nil, nil)
	p := requireProblem(t, again, http.StatusConflict)
	require.Equal(t, problemTypePrefix+"not-replayable", p.Type)
	require.Contains(t, p.Detail, "is scheduled")
	require.Len(t, h.Sched.scheduledFor(task.ID), 1, "a refused replay tells no one")
}

func TestReplayDeliveredTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")

	task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
	finishForReplay(h, task.ID, "delivered", 1, 200, nil)
	resp := h.do(http.MethodPost, "/v1/tasks/"+task.ID.String()+"/replay", tn.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	body := rawKeys(t, resp.Body)
	require.JSONEq(t, `"scheduled"`, string(body["status"]))
	require.JSONEq(t, `1`, string(body["attempts"]))
	require.JSONEq(t, `200`, string(body["last_status_code"]))
	require.JSONEq(t, `null`, string(body["last_error"]))
	require.Len(t, h.Sched.scheduledFor(task.ID), 1)
}

func TestReplayTaskRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	other := h.createTenant("other")

	// Only dead and delivered tasks can be replayed; the problem names the status.
	for _, status := range []string{"scheduled", "retrying", "dispatching", "canceled"} {
		t.Run(status, func(t *testing.T) {
			task := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
			switch status {
			case "canceled":
				require.Equal(t, http.StatusOK, h.do(http.MethodDelete, "/v1/tasks/"+task.ID.String(), tn.APIKey, nil, nil).Status)
			case "scheduled":
			default:
				h.exec(`UPDATE tasks SET status = $1, attempts = 1 WHERE id = $2`, status, task.ID)
			}
			resp := h.do(http.MethodPost, "/v1/tasks/"+task.ID.String()+"/replay", tn.APIKey, nil, nil)
			p := requireProblem(t, resp, http.StatusConflict)
			require.Equal(t, problemTypePrefix+"not-replayable", p.Type)
			require.Contains(t, p.Detail, "is "+status)
			require.Empty(t, h.Sched.scheduledFor(task.ID))

			got, err := tn.Client.GetTaskWithResponse(context.Background(), task.ID)
			require.NoError(t, err)
			require.Equal(t, openapi.TaskStatus(status), got.JSON200.Status, "a refused replay changes nothing")
		})
	}

	// Another tenant's task is not found, exactly like an unknown id, and stays dead.
	dead := h.createTask(tn, `{"url": "https://example.com/hook", "delay": "1h"}`)
	finishForReplay(h, dead.ID, "dead", 10, 500, ptr("receiver answered 500 Internal Server Error"))
	for name, path := range map[string]string{
		"another tenant's task": "/v1/tasks/" + dead.ID.String() + "/replay",
		"unknown id":            "/v1/tasks/" + uuid.NewString() + "/replay",
	} {
		resp := h.do(http.MethodPost, path, other.APIKey, nil, nil)
		p := requireProblem(t, resp, http.StatusNotFound)
		require.Equal(t, problemTypePrefix+"not-found", p.Type, name)
	}
	require.Empty(t, h.Sched.scheduledFor(dead.ID))
	got, err := tn.Client.GetTaskWithResponse(context.Background(), dead.ID)
	require.NoError(t, err)
	require.Equal(t, openapi.TaskStatus("dead"), got.JSON200.Status)

	// A malformed id is a bad request; no key is unauthorized.
	for _, path := range []string{"/v1/tasks/not-a-uuid/replay", "/v1/tasks/12345/replay"} {
		p := requireProblem(t, h.do(http.MethodPost, path, tn.APIKey, nil, nil), http.StatusBadRequest)
		require.Equal(t, problemTypePrefix+"bad-request", p.Type)
	}
	requireProblem(t, h.do(http.MethodPost, "/v1/tasks/"+dead.ID.String()+"/replay", "", nil, nil), http.StatusUnauthorized)
	require.Equal(t, http.StatusMethodNotAllowed,
		h.do(http.MethodGet, "/v1/tasks/"+dead.ID.String()+"/replay", tn.APIKey, nil, nil).Status)
}
