package hookwheel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
	"github.com/hookwheel/hookwheel/sdk/go/webhook"
)

func TestLiveFlowKeys(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	ctx := context.Background()
	// Every character a key may hold, so that the path carries them all.
	prefix := "sdk:" + uuid.NewString() + "@eu+1="
	keys := []string{prefix + "a", prefix + "b", prefix + "c"}
	t.Cleanup(func() {
		for _, key := range keys {
			_, _ = l.client.DeleteFlowLimit(context.Background(), key)
		}
	})

	limit, err := l.client.PutFlowLimit(ctx, keys[0], hookwheel.FlowLimitSpec{Rate: 100, Period: time.Minute, Parallelism: 5})
	require.NoError(t, err)
	require.Equal(t, keys[0], limit.Key)
	require.Equal(t, 100, limit.Rate)
	period, err := time.ParseDuration(limit.Period)
	require.NoError(t, err)
	require.Equal(t, time.Minute, period)
	require.Equal(t, 5, limit.Parallelism)
	replaced, err := l.client.PutFlowLimit(ctx, keys[0], hookwheel.FlowLimitSpec{Parallelism: 2})
	require.NoError(t, err)
	require.Equal(t, hookwheel.FlowLimit{Key: keys[0], Rate: 0, Period: "1s", Parallelism: 2,
		CreatedAt: limit.CreatedAt, UpdatedAt: replaced.UpdatedAt}, *replaced, "replaced whole: no rate, the default period")
	got, err := l.client.GetFlowLimit(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, *replaced, *got)

	for _, key := range keys[1:] {
		_, err := l.client.PutFlowLimit(ctx, key, hookwheel.FlowLimitSpec{Rate: 10})
		require.NoError(t, err)
	}
	var listed []string
	for fl, err := range l.client.ListFlowLimits(ctx, 1) {
		require.NoError(t, err)
		if len(fl.Key) > len(prefix) && fl.Key[:len(prefix)] == prefix {
			listed = append(listed, fl.Key)
		}
	}
	require.Equal(t, keys, listed, "ListFlowLimits walks every page, in key order")

	_, err = l.client.PutFlowLimit(ctx, keys[1], hookwheel.FlowLimitSpec{})
	require.ErrorIs(t, err, hookwheel.ErrInvalid, "neither a rate nor a parallelism")
	_, err = l.client.PutFlowLimit(ctx, "not a key", hookwheel.FlowLimitSpec{Rate: 1})
	require.ErrorIs(t, err, hookwheel.ErrInvalid)

	// The default's key: read back as set, then lifted.
	def, err := l.client.PutFlowLimit(ctx, hookwheel.DefaultFlowKey, hookwheel.FlowLimitSpec{Parallelism: 1000})
	require.NoError(t, err)
	require.Equal(t, hookwheel.DefaultFlowKey, def.Key)
	def, err = l.client.GetFlowLimit(ctx, hookwheel.DefaultFlowKey)
	require.NoError(t, err)
	require.Equal(t, 1000, def.Parallelism)
	_, err = l.client.DeleteFlowLimit(ctx, hookwheel.DefaultFlowKey)
	require.NoError(t, err)

	task := l.later(t, ctx, hookwheel.TaskRequest{URL: l.base + "/flow", FlowKey: keys[0]})
	require.NotNil(t, task.FlowKey)
	require.Equal(t, keys[0], *task.FlowKey)
	read, err := l.client.GetTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, task.FlowKey, read.FlowKey)
	results, err := l.client.CreateTasks(ctx, []hookwheel.TaskRequest{{URL: l.base + "/flow", Delay: time.Hour, FlowKey: keys[1]}})
	require.NoError(t, err)
	require.Nil(t, results[0].Err)
	l.cancelAtEnd(t, results[0].Task.ID)
	require.Equal(t, keys[1], *results[0].Task.FlowKey)
	_, err = l.client.CreateTask(ctx, hookwheel.TaskRequest{URL: l.base + "/flow", FlowKey: hookwheel.DefaultFlowKey})
	require.ErrorIs(t, err, hookwheel.ErrInvalid, "the default's key is no task's")

	s, err := l.client.CreateSchedule(ctx, hookwheel.ScheduleRequest{Cron: "@daily", URL: l.base + "/flow-daily", Paused: true,
		FlowKey: keys[0]})
	require.NoError(t, err)
	t.Cleanup(func() {
		if _, err := l.client.DeleteSchedule(context.Background(), s.ID); err != nil && !errors.Is(err, hookwheel.ErrNotFound) {
			t.Errorf("delete schedule %s: %v", s.ID, err)
		}
	})
	require.Equal(t, keys[0], *s.FlowKey)
	s, err = l.client.UpdateSchedule(ctx, s.ID, hookwheel.ScheduleUpdate{FlowKey: &keys[2]})
	require.NoError(t, err)
	require.Equal(t, keys[2], *s.FlowKey)
	s, err = l.client.UpdateSchedule(ctx, s.ID, hookwheel.ScheduleUpdate{Reset: []string{"flow_key"}})
	require.NoError(t, err)
	require.Nil(t, s.FlowKey, "reset removes it")

	deleted, err := l.client.DeleteFlowLimit(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, *replaced, *deleted)
	_, err = l.client.GetFlowLimit(ctx, keys[0])
	require.ErrorIs(t, err, hookwheel.ErrNotFound)
	_, err = l.client.DeleteFlowLimit(ctx, keys[0])
	require.ErrorIs(t, err, hookwheel.ErrNotFound)
	read, err = l.client.GetTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, keys[0], *read.FlowKey, "a task keeps its key when the key's limits are lifted")
}

// TestLiveFlowKeyWebhooks sends the tasks of a rate-limited key: each is
// delivered and verifies, spaced as the key's rate says.
func TestLiveFlowKeyWebhooks(t *testing.T) {
	t.Parallel()
	l := newLive(t)
	l.needReceiver(t)
	ctx := context.Background()
	key := "sdk-" + uuid.NewString()
	t.Cleanup(func() { _, _ = l.client.DeleteFlowLimit(context.Background(), key) })
	// Two a second, one at a time: three tasks due together take a second.
	_, err := l.client.PutFlowLimit(ctx, key, hookwheel.FlowLimitSpec{Rate: 2, Period: time.Second, Parallelism: 1})
	require.NoError(t, err)

	var tasks []*hookwheel.Task
	for range 3 {
		task, err := l.client.CreateTask(ctx, hookwheel.TaskRequest{URL: l.base + "/flow", Body: `{"hello":"flow"}`, FlowKey: key})
		require.NoError(t, err)
		tasks = append(tasks, task)
	}
	var first, last time.Time
	for _, task := range tasks {
		l.waitStatus(t, ctx, task.ID, hookwheel.StatusDelivered)
		ds := l.waitDeliveries(t, ctx, task.ID, 1)
		require.NoError(t, webhook.Verify([]string{l.secret}, ds[0].Header, ds[0].Body, webhook.WithURL(task.URL)))
		attempts, err := l.client.TaskAttempts(ctx, task.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1, "a wait for the key spends no attempt")
		at := attempts[0].StartedAt
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	// Their slots are 500 ms apart, and a send may start up to half an
	// interval after its slot and still use it (the limiter's grace, which
	// keeps any second to the rate plus one): the third starts at least
	// 1,000 - 250 ms after the first, less the time from the decision to
	// the attempt's start on a busy machine. Without the limit all three
	// would start within milliseconds.
	require.GreaterOrEqual(t, last.Sub(first), 650*time.Millisecond, "three sends at two a second")
}
