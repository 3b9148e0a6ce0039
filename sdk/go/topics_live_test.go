package hookwheel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

func TestLiveTopics(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	ctx := context.Background()
	name := "sdk-" + uuid.NewString()
	t.Cleanup(func() { _, _ = l.client.DeleteTopic(context.Background(), name) })

	topic, err := l.client.PutTopic(ctx, name, hookwheel.TopicSpec{Description: "from the Go SDK", Endpoints: []hookwheel.TopicEndpoint{
		{URL: l.base + "/a", Name: "a"}, {URL: l.base + "/b"},
	}})
	require.NoError(t, err)
	require.Equal(t, name, topic.Name)
	require.Len(t, topic.Endpoints, 2)
	got, err := l.client.GetTopic(ctx, name)
	require.NoError(t, err)
	require.Equal(t, topic.Endpoints, got.Endpoints)
	found := false
	for tp, err := range l.client.ListTopics(ctx, 1) {
		require.NoError(t, err)
		found = found || tp.Name == name
	}
	require.True(t, found, "ListTopics walks every page")

	key := "sdk-publish-" + uuid.NewString()
	pub, err := l.client.Publish(ctx, hookwheel.TaskRequest{Topic: name, Delay: time.Hour, Body: "x", IdempotencyKey: key})
	require.NoError(t, err)
	require.Len(t, pub.Tasks, 2)
	for _, task := range pub.Tasks {
		l.cancelAtEnd(t, task.ID)
	}
	again, err := l.client.Publish(ctx, hookwheel.TaskRequest{Topic: name, Delay: time.Hour, Body: "x", IdempotencyKey: key})
	require.NoError(t, err)
	require.Equal(t, pub.ID, again.ID, "the same key: the same publish")
	read, err := l.client.GetPublish(ctx, pub.ID)
	require.NoError(t, err)
	require.Equal(t, 2, read.StatusCounts.Scheduled)
	var listed []uuid.UUID
	for task, err := range l.client.ListTasks(ctx, hookwheel.TaskFilter{PublishID: pub.ID}) {
		require.NoError(t, err)
		listed = append(listed, task.ID)
	}
	require.ElementsMatch(t, []uuid.UUID{pub.Tasks[0].ID, pub.Tasks[1].ID}, listed)

	results, err := l.client.CreateTasks(ctx, []hookwheel.TaskRequest{{Topic: name, Delay: time.Hour}, {Topic: "sdk-no-such-topic"}})
	require.NoError(t, err)
	require.NotNil(t, results[0].Publish)
	for _, task := range results[0].Publish.Tasks {
		l.cancelAtEnd(t, task.ID)
	}
	require.ErrorIs(t, results[1].Err, hookwheel.ErrInvalid)
	_, err = l.client.Publish(ctx, hookwheel.TaskRequest{Topic: "sdk-no-such-topic"})
	require.ErrorIs(t, err, hookwheel.ErrInvalid)

	deleted, err := l.client.DeleteTopic(ctx, name)
	require.NoError(t, err)
	require.Equal(t, name, deleted.Name)
	_, err = l.client.GetTopic(ctx, name)
	require.ErrorIs(t, err, hookwheel.ErrNotFound)
}

func TestLiveTopicWebhooks(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	l.needReceiver(t)
	ctx := context.Background()
	name := "sdk-" + uuid.NewString()
	t.Cleanup(func() { _, _ = l.client.DeleteTopic(context.Background(), name) })
	_, err := l.client.PutTopic(ctx, name, hookwheel.TopicSpec{Endpoints: []hookwheel.TopicEndpoint{
		{URL: l.base + "/one"}, {URL: l.base + "/two"},
	}})
	require.NoError(t, err)

	pub, err := l.client.Publish(ctx, hookwheel.TaskRequest{Topic: name, Body: `{"hello":"topic"}`})
	require.NoError(t, err)
	for _, task := range pub.Tasks {
		l.waitStatus(t, ctx, task.ID, hookwheel.StatusDelivered)
		ds := l.waitDeliveries(t, ctx, task.ID, 1)
		require.True(t, strings.HasSuffix(ds[0].URL, task.URL[len(l.base):]), ds[0].URL)
		require.Equal(t, name, ds[0].Header.Get("Hookwheel-Topic"))
		require.Equal(t, pub.ID.String(), ds[0].Header.Get("Hookwheel-Publish-Id"))
		require.NoError(t, webhook.Verify([]string{l.secret}, ds[0].Header, ds[0].Body, webhook.WithURL(task.URL)))
	}
}
