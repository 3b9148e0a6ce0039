package e2e_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

// TestTopicFanOut: one publish to a topic of three receivers delivers to
// each exactly once; the receiver that keeps failing is retried on its own
// and ends dead on its own while the others are delivered; every delivery
// is found from the publish, and the dead one is replayed alone.
func TestTopicFanOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	billing, shipping, audit := newReceiver(t), newReceiver(t), newReceiver(t)
	audit.setRespond(func(delivery, int) (int, http.Header) { return http.StatusServiceUnavailable, nil })

	put, err := acme.client.PutTopicWithResponse(ctx, "orders", openapi.TopicRequest{Endpoints: []openapi.TopicEndpoint{
		{URL: billing.URL + "/hooks", Name: "billing"},
		{URL: shipping.URL + "/hooks", Name: "shipping"},
		{URL: audit.URL + "/hooks"},
	}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, put.StatusCode(), string(put.Body))

	created, err := acme.client.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{IdempotencyKey: ptr("order-42-paid")},
		openapi.TaskRequest{Topic: "orders", Body: `{"order": 42}`, Headers: map[string]string{"Content-Type": "application/json"},
			Retry: &openapi.RetryPolicy{MaxAttempts: ptr(3), MinBackoff: ptr("200ms"), MaxBackoff: ptr("400ms")}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), string(created.Body))
	pub, err := created.JSON201.AsPublish()
	require.NoError(t, err)
	require.Len(t, pub.Tasks, 3)
	byURL := map[string]openapi.Task{}
	for _, task := range pub.Tasks {
		byURL[task.URL] = task
	}

	// The failing receiver's task is retried on its own and dies after its
	// three attempts.
	deadTask := byURL[audit.URL+"/hooks"]
	dead := acme.waitStatus(t, deadTask.ID, openapi.TaskStatusDead, 15*time.Second)
	require.Equal(t, 3, dead.Attempts)
	require.Equal(t, 503, *dead.LastStatusCode)
	require.Len(t, audit.snapshot(), 3)
	require.Equal(t, map[string]int{deadTask.ID.String(): 3}, distinctIDs(audit.snapshot()))

	// The others were delivered, each once, with its own webhook id, the
	// topic and the publish in its headers, signed like any webhook.
	for _, recv := range []*receiver{billing, shipping} {
		task := byURL[recv.URL+"/hooks"]
		acme.waitStatus(t, task.ID, openapi.TaskStatusDelivered, 5*time.Second)
		ds := recv.snapshot()
		require.Len(t, ds, 1, "delivered exactly once")
		d := ds[0]
		require.Equal(t, task.ID.String(), d.webhookID())
		require.Equal(t, "orders", d.header.Get("Hookwheel-Topic"))
		require.Equal(t, pub.ID.String(), d.header.Get("Hookwheel-Publish-Id"))
		require.Equal(t, task.ID.String(), d.header.Get("Idempotency-Key"), "each task's webhook carries its own key")
		require.Equal(t, "application/json", d.header.Get("Content-Type"))
		require.Equal(t, `{"order": 42}`, string(d.body))
		require.NoError(t, webhook.Verify([]string{acme.signingSecret}, d.header, d.body))
	}

	// Every delivery is found from the publish.
	got, err := acme.client.GetPublishWithResponse(ctx, pub.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode(), string(got.Body))
	require.Equal(t, openapi.PublishStatusCounts{Delivered: 2, Dead: 1}, got.JSON200.StatusCounts)
	list, err := acme.client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{PublishID: &pub.ID})
	require.NoError(t, err)
	require.Len(t, list.JSON200.Data, 3)
	deadLetters, err := acme.client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Topic: ptr("orders"), Status: ptr(openapi.TaskStatusDead)})
	require.NoError(t, err)
	require.Len(t, deadLetters.JSON200.Data, 1)
	require.Equal(t, deadTask.ID, deadLetters.JSON200.Data[0].ID)
	attempts, err := acme.client.ListTaskAttemptsWithResponse(ctx, deadTask.ID, nil)
	require.NoError(t, err)
	require.Len(t, attempts.JSON200.Data, 3)

	// A repeat of the publish sends nothing more.
	again, err := acme.client.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{IdempotencyKey: ptr("order-42-paid")},
		openapi.TaskRequest{Topic: "orders", Body: `{"order": 42}`, Headers: map[string]string{"Content-Type": "application/json"},
			Retry: &openapi.RetryPolicy{MaxAttempts: ptr(3), MinBackoff: ptr("200ms"), MaxBackoff: ptr("400ms")}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, again.StatusCode(), string(again.Body))

	// The receiver fixed, the dead letter is replayed on its own.
	audit.setRespond(nil)
	replayed, err := acme.client.ReplayTaskWithResponse(ctx, deadTask.ID, openapi.ReplayRequest{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, replayed.StatusCode(), string(replayed.Body))
	acme.waitStatus(t, deadTask.ID, openapi.TaskStatusDelivered, 5*time.Second)
	got, err = acme.client.GetPublishWithResponse(ctx, pub.ID)
	require.NoError(t, err)
	require.Equal(t, openapi.PublishStatusCounts{Delivered: 3}, got.JSON200.StatusCounts)
	require.Len(t, billing.snapshot(), 1)
	require.Len(t, shipping.snapshot(), 1)
	require.Len(t, audit.snapshot(), 4)

	// The topic's other calls, and the answers the above does not get,
	// through the client that checks each against openapi.yaml.
	one, err := acme.client.GetTopicWithResponse(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, one.StatusCode(), string(one.Body))
	require.Len(t, one.JSON200.Endpoints, 3)
	replaced, err := acme.client.PutTopicWithResponse(ctx, "orders", openapi.TopicRequest{Description: "billing only",
		Endpoints: []openapi.TopicEndpoint{{URL: billing.URL + "/hooks"}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, replaced.StatusCode(), string(replaced.Body))
	invalid, err := acme.client.PutTopicWithResponse(ctx, "orders", openapi.TopicRequest{Endpoints: []openapi.TopicEndpoint{{URL: "ftp://x"}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, invalid.StatusCode(), string(invalid.Body))
	topics, err := acme.client.ListTopicsWithResponse(ctx, &openapi.ListTopicsParams{Limit: ptr(10)})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, topics.StatusCode(), string(topics.Body))
	require.Len(t, topics.JSON200.Data, 1)
	batch, err := acme.client.CreateTasksBatchWithResponse(ctx, openapi.BatchRequest{Tasks: []openapi.BatchTaskRequest{
		{Topic: "orders", Delay: ptr("1h")}, {Topic: "invoices"},
	}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, batch.StatusCode(), string(batch.Body))
	require.NotNil(t, batch.JSON200.Data[0].Publish)
	require.Equal(t, []string{billing.URL + "/hooks"}, []string{batch.JSON200.Data[0].Publish.Tasks[0].URL})
	require.NotNil(t, batch.JSON200.Data[1].Error)
	unknown, err := acme.client.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{}, openapi.TaskRequest{Topic: "invoices"})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, unknown.StatusCode(), string(unknown.Body))
	deleted, err := acme.client.DeleteTopicWithResponse(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, deleted.StatusCode(), string(deleted.Body))
	gone, err := acme.client.GetTopicWithResponse(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, gone.StatusCode(), string(gone.Body))
	noPublish, err := acme.client.GetPublishWithResponse(ctx, deadTask.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, noPublish.StatusCode(), "a task's id names no publish: %s", noPublish.Body)
}
