package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

func TestIdempotency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	other := h.createTenant("other")

	body := `{"url": "https://example.com/hook", "body": "x", "headers": {"X-A": "1", "X-B": "2"}, "retry": {"max_attempts": 3, "min_backoff": "2s"}}`
	first := h.postTask(acme, body, "order-42")
	require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
	require.Empty(t, first.Header.Get("Idempotent-Replayed"))
	var created openapi.Task
	require.NoError(t, json.Unmarshal(first.Body, &created))
	require.Equal(t, ptr("order-42"), created.IdempotencyKey)

	requireReplay := func(t *testing.T, resp response) openapi.Task {
		t.Helper()
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
		var task openapi.Task
		require.NoError(t, json.Unmarshal(resp.Body, &task))
		require.Equal(t, created.ID, task.ID)
		return task
	}

	t.Run("same key, same body", func(t *testing.T) {
		replay := requireReplay(t, h.postTask(acme, body, "order-42"))
		require.True(t, replay.RunAt.Equal(created.RunAt))
		require.Equal(t, ptr("order-42"), replay.IdempotencyKey)
	})

	t.Run("same key, same JSON spelled differently", func(t *testing.T) {
		reordered := "{\n  \"retry\": {\"min_backoff\": \"2s\", \"max_attempts\": 3},\n\t\"headers\": {\"X-B\": \"2\", \"X-A\": \"1\"},\n  \"body\":\"x\", \"url\":   \"https://example.com/hook\"\n}\n"
		requireReplay(t, h.postTask(acme, reordered, "order-42"))
	})

	t.Run("same key, same request through the generated client", func(t *testing.T) {
		resp, err := acme.Client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{IdempotencyKey: ptr("order-42")}, openapi.TaskRequest{
			URL: "https://example.com/hook", Body: "x", Headers: map[string]string{"X-A": "1", "X-B": "2"},
			Retry: &openapi.RetryPolicy{MaxAttempts: ptr(3), MinBackoff: ptr("2s")},
		})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		require.Equal(t, "true", resp.Headers200.IdempotentReplayed)
		replayed, err := resp.JSON200.AsTask()
		require.NoError(t, err)
		require.Equal(t, created.ID, replayed.ID)
	})

	differentBodies := map[string]string{
		"different url":     `{"url": "https://example.com/other", "body": "x", "headers": {"X-A": "1", "X-B": "2"}, "retry": {"max_attempts": 3, "min_backoff": "2s"}}`,
		"different body":    `{"url": "https://example.com/hook", "body": "y", "headers": {"X-A": "1", "X-B": "2"}, "retry": {"max_attempts": 3, "min_backoff": "2s"}}`,
		"different header":  `{"url": "https://example.com/hook", "body": "x", "headers": {"X-A": "1", "X-B": "3"}, "retry": {"max_attempts": 3, "min_backoff": "2s"}}`,
		"a member dropped":  `{"url": "https://example.com/hook", "body": "x", "headers": {"X-A": "1", "X-B": "2"}, "retry": {"max_attempts": 3}}`,
		"a member added":    `{"url": "https://example.com/hook", "body": "x", "headers": {"X-A": "1", "X-B": "2"}, "retry": {"max_attempts": 3, "min_backoff": "2s"}, "delay": "1m"}`,
		"a different retry": `{"url": "https://example.com/hook", "body": "x", "headers": {"X-A": "1", "X-B": "2"}, "retry": {"max_attempts": 4, "min_backoff": "2s"}}`,
	}
	for name, other := range differentBodies {
		t.Run("same key, "+name, func(t *testing.T) {
			resp := h.postTask(acme, other, "order-42")
			p := requireProblem(t, resp, http.StatusUnprocessableEntity)
			require.True(t, strings.HasSuffix(p.Type, "idempotency-key-reused"), "type %q", p.Type)
			require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
		})
	}

	t.Run("another key creates another task", func(t *testing.T) {
		resp := h.postTask(acme, body, "order-43")
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		var task openapi.Task
		require.NoError(t, json.Unmarshal(resp.Body, &task))
		require.NotEqual(t, created.ID, task.ID)
	})

	t.Run("keys are per tenant", func(t *testing.T) {
		resp := h.postTask(other, body, "order-42")
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
		var task openapi.Task
		require.NoError(t, json.Unmarshal(resp.Body, &task))
		require.NotEqual(t, created.ID, task.ID)
		// And the other tenant's replay is its own task, not acme's.
		replay := h.postTask(other, body, "order-42")
		require.Equal(t, http.StatusOK, replay.Status)
		require.Contains(t, string(replay.Body), task.ID.String())
	})

	t.Run("a replay shows the task as it is now", func(t *testing.T) {
		resp := h.postTask(acme, `{"url": "https://example.com/cancel-me", "delay": "1h"}`, "cancel-me")
		require.Equal(t, http.StatusCreated, resp.Status)
		var task openapi.Task
		require.NoError(t, json.Unmarshal(resp.Body, &task))
		require.Equal(t, http.StatusOK, h.do(http.MethodDelete, "/v1/tasks/"+task.ID.String(), acme.APIKey, nil, nil).Status)

		replay := h.postTask(acme, `{"url": "https://example.com/cancel-me", "delay": "1h"}`, "cancel-me")
		require.Equal(t, http.StatusOK, replay.Status)
		var again openapi.Task
		require.NoError(t, json.Unmarshal(replay.Body, &again))
		require.Equal(t, task.ID, again.ID)
		require.Equal(t, openapi.TaskStatus("canceled"), again.Status)
	})

	// A replay never announced the task to the dispatcher a second time.
	require.Len(t, h.Sched.scheduledFor(created.ID), 1)
}

func TestIdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	const n = 50
	body := `{"url": "https://example.com/hook", "body": "once"}`

	type result struct {
		status   int
		replayed string
		id       uuid.UUID
		err      error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			req, err := http.NewRequest(http.MethodPost, h.URL+"/v1/tasks", strings.NewReader(body))
			if err != nil {
				results[i].err = err
				return
			}
			req.Header.Set("Authorization", "Bearer "+tn.APIKey)
			req.Header.Set("Idempotency-Key", "the-one")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			var task openapi.Task
			results[i] = result{
				status:   resp.StatusCode,
				replayed: resp.Header.Get("Idempotent-Replayed"),
				err:      json.NewDecoder(resp.Body).Decode(&task),
				id:       task.ID,
			}
		})
	}
	close(start)
	wg.Wait()

	created, replayed := 0, 0
	ids := map[uuid.UUID]bool{}
	for i, r := range results {
		require.NoError(t, r.err, "request %d", i)
		switch r.status {
		case http.StatusCreated:
			created++
			require.Empty(t, r.replayed)
		case http.StatusOK:
			replayed++
			require.Equal(t, "true", r.replayed)
		default:
			t.Fatalf("request %d: status %d", i, r.status)
		}
		ids[r.id] = true
	}
	require.Equal(t, 1, created, "exactly one request creates the task")
	require.Equal(t, n-1, replayed)
	require.Len(t, ids, 1, "every response names the same task")

	list, err := tn.Client.ListTasksWithResponse(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list.StatusCode())
	require.Len(t, list.JSON200.Data, 1)
	require.True(t, ids[list.JSON200.Data[0].ID])
	require.Len(t, h.Sched.scheduledFor(list.JSON200.Data[0].ID), 1, "only the creating request announces the task")
}
