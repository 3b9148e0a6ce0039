package hookwheel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

func TestPublishSendsTheTopicAndReadsThePublish(t *testing.T) {
	t.Parallel()
	pubID, taskID := uuid.New(), uuid.New()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		task := taskJSON(taskID, "https://billing.example/hooks")
		task["topic"], task["publish_id"], task["endpoint_name"] = "orders", pubID, "billing"
		writeJSON(w, http.StatusCreated, map[string]any{
			"id": pubID, "topic": "orders", "created_at": time.Now().UTC().Format(time.RFC3339Nano), "idempotency_key": "k",
			"task_count": 1, "tasks": []any{task},
			"status_counts": map[string]int{"scheduled": 1, "dispatching": 0, "retrying": 0, "delivered": 0, "dead": 0, "canceled": 0},
		})
	})
	c := f.client(t)

	pub, err := c.Publish(context.Background(), hookwheel.TaskRequest{Topic: "orders", Body: "x", IdempotencyKey: "k"})
	require.NoError(t, err)
	require.Equal(t, pubID, pub.ID)
	require.Equal(t, 1, pub.StatusCounts.Scheduled)
	require.Len(t, pub.Tasks, 1)
	require.Equal(t, &pubID, pub.Tasks[0].PublishID)
	require.Equal(t, "billing", *pub.Tasks[0].EndpointName)

	got := f.got()
	require.Len(t, got, 1)
	require.Equal(t, "/v1/tasks", got[0].path)
	require.Equal(t, "k", got[0].header.Get("Idempotency-Key"))
	require.JSONEq(t, `{"topic": "orders", "body": "x"}`, string(got[0].body))

	// A topic's request is not a task's, nor the other way round; neither
	// reaches the server.
	_, err = c.CreateTask(context.Background(), hookwheel.TaskRequest{Topic: "orders"})
	require.ErrorContains(t, err, "Publish")
	_, err = c.Publish(context.Background(), hookwheel.TaskRequest{URL: "https://example.com/"})
	require.ErrorContains(t, err, "Topic")
	_, err = c.Publish(context.Background(), hookwheel.TaskRequest{Topic: "orders", URL: "https://example.com/"})
	require.Error(t, err)
	require.Len(t, f.got(), 1)
}

func TestTaskRequestJSONWithATopic(t *testing.T) {
	t.Parallel()
	var req hookwheel.TaskRequest
	require.NoError(t, json.Unmarshal([]byte(`{"topic":"orders","delay":"1m","idempotency_key":"k"}`), &req))
	require.Equal(t, hookwheel.TaskRequest{Topic: "orders", Delay: time.Minute, IdempotencyKey: "k"}, req)
	out, err := json.Marshal(req)
	require.NoError(t, err)
	require.JSONEq(t, `{"topic":"orders","delay":"1m0s","idempotency_key":"k"}`, string(out))
}

func TestPutTopicSendsEveryEndpoint(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, nth int) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		status := http.StatusCreated
		if nth > 1 {
			status = http.StatusOK
		}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		writeJSON(w, status, map[string]any{"name": "orders", "description": "", "endpoints": []any{}, "created_at": now, "updated_at": now})
	})
	c := f.client(t)
	for range 2 {
		topic, err := c.PutTopic(context.Background(), "orders", hookwheel.TopicSpec{
			Endpoints: []hookwheel.TopicEndpoint{{URL: "https://a.example/", Name: "a"}, {URL: "https://b.example/"}}})
		require.NoError(t, err, "201 and 200 alike")
		require.Equal(t, "orders", topic.Name)
	}
	_, err := c.PutTopic(context.Background(), "empty", hookwheel.TopicSpec{})
	require.NoError(t, err)
	got := f.got()
	require.Equal(t, http.MethodPut, got[0].method)
	require.Equal(t, "/v1/topics/orders", got[0].path)
	require.JSONEq(t, `{"endpoints": [{"url": "https://a.example/", "name": "a"}, {"url": "https://b.example/"}]}`, string(got[0].body))
	require.JSONEq(t, `{"endpoints": []}`, string(got[2].body), "no endpoints is an empty list, not null")
}
