package tasks_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
)

// TestBatchPublishesThroughTheSharedPath: the service's batches and
// CreateBatchWith are one implementation. Through the service a batch item
// naming a topic is published, its tasks copies of the request with every
// field (callbacks and ordering key included) and announced like the plain
// tasks beside it; CreateWith and CreateBatchWith, which transactional
// enqueue calls, cannot publish and refuse such a task whole, storing
// nothing.
func TestBatchPublishesThroughTheSharedPath(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	ctx := t.Context()
	_, err := svc.PutTopic(ctx, b.tenant, &model.Topic{Name: "orders", Endpoints: []model.TopicEndpoint{
		{URL: "https://billing.example/hook", Name: "billing"}, {URL: "https://shipping.example/hook"}}}, "key:test")
	require.NoError(t, err)
	topic := "orders"
	published := func() *model.Task {
		task := b.newTask(time.Second, "", "")
		task.URL, task.Topic = "", &topic
		task.OrderingKey = ptr("order-42")
		task.Callback, task.FailureCallback = ptr("https://example.com/done"), ptr("https://example.com/failed")
		return task
	}

	notifyBefore := b.clock.Now().Add(time.Minute)
	_, err = tasks.CreateWith(ctx, b.db, b.tenant, published(), notifyBefore)
	require.ErrorContains(t, err, `topic "orders"`)
	_, err = tasks.CreateBatchWith(ctx, b.db, b.tenant, []*model.Task{b.newTask(time.Second, "", ""), published()}, notifyBefore)
	require.ErrorContains(t, err, `topic "orders"`)
	stored, err := svc.Pending(ctx, b.tenant.ID)
	require.NoError(t, err)
	require.Zero(t, stored, "a refused call stores nothing, not even its plain task")

	plain := b.newTask(time.Second, "", "")
	results, err := svc.CreateBatch(ctx, b.tenant, []*model.Task{plain, published()})
	require.NoError(t, err)
	require.NoError(t, results[0].Err)
	require.Equal(t, plain, results[0].Task)
	require.NoError(t, results[1].Err)
	pub := results[1].Publish
	require.NotNil(t, pub)
	require.Len(t, pub.Tasks, 2)
	want := []scheduled{{plain.ID, plain.RunAt}}
	for i, url := range []string{"https://billing.example/hook", "https://shipping.example/hook"} {
		got, err := b.db.GetTask(ctx, b.tenant.ID, pub.Tasks[i].ID)
		require.NoError(t, err)
		require.Equal(t, url, got.URL, "endpoint order")
		require.Equal(t, &pub.ID, got.PublishID)
		require.Equal(t, ptr("orders"), got.Topic)
		require.Equal(t, ptr("order-42"), got.OrderingKey)
		require.Equal(t, ptr("https://example.com/done"), got.Callback)
		require.Equal(t, ptr("https://example.com/failed"), got.FailureCallback)
		want = append(want, scheduled{pub.Tasks[i].ID, pub.Tasks[i].RunAt})
	}
	require.ElementsMatch(t, want, b.announcer.scheduledCalls(), "every task of the batch due soon, published or not")
}
