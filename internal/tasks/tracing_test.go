package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/internal/tracing"
)

const createParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// Every way of creating tasks stores the trace context of the caller's span
// with each task: a single create, each task of a batch, each endpoint's task
// of a publish (alone or in a batch), and a transactional enqueue's; a
// create outside any trace stores none.
func TestCreatesKeepTheCallersTrace(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	_, err := svc.PutTopic(t.Context(), b.tenant, &model.Topic{Name: "orders", Endpoints: []model.TopicEndpoint{
		{URL: "https://billing.example/hook"}, {URL: "https://shipping.example/hook"}}}, "key:test")
	require.NoError(t, err)
	parent, ok := tracing.Parent(createParent, "vendor=opaque")
	require.True(t, ok)
	traced := trace.ContextWithRemoteSpanContext(t.Context(), parent)
	topic := "orders"
	published := func() *model.Task {
		task := b.newTask(time.Second, "", "")
		task.URL, task.Topic = "", &topic
		return task
	}

	single, err := svc.Create(traced, b.tenant, b.newTask(time.Second, "", ""))
	require.NoError(t, err)
	pub, err := svc.Publish(traced, b.tenant, published())
	require.NoError(t, err)
	batch, err := svc.CreateBatch(traced, b.tenant, []*model.Task{b.newTask(time.Second, "", ""), published()})
	require.NoError(t, err)
	enqueued, err := tasks.CreateWith(traced, b.db, b.tenant, b.newTask(time.Second, "", ""), b.clock.Now())
	require.NoError(t, err)
	untraced, err := svc.Create(context.WithoutCancel(t.Context()), b.tenant, b.newTask(time.Second, "", ""))
	require.NoError(t, err)

	want := []*model.Task{single.Task, batch[0].Task, enqueued.Task}
	want = append(want, pub.Publish.Tasks...)
	want = append(want, batch[1].Publish.Tasks...)
	require.Len(t, want, 7)
	for _, task := range want {
		require.Equal(t, [2]string{createParent, "vendor=opaque"}, storedTrace(t, b, task), task.URL)
	}
	require.Equal(t, [2]string{}, storedTrace(t, b, untraced.Task))
}

// storedTrace is the trace context stored with task, read back from its row.
func storedTrace(t *testing.T, b *testBundle, task *model.Task) [2]string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), b.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var parent, state *string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT trace_parent, trace_state FROM tasks WHERE id = $1`, task.ID).Scan(&parent, &state))
	var out [2]string
	if parent != nil {
		out[0] = *parent
	}
	if state != nil {
		out[1] = *state
	}
	return out
}

// A schedule keeps the trace context of its create, which every occurrence
// then carries (the store's materializer copies it).
func TestCreateScheduleKeepsTheCallersTrace(t *testing.T) {
	t.Parallel()
	svc, b := setup(t, setupConfig{})
	parent, ok := tracing.Parent(createParent, "")
	require.True(t, ok)
	for _, tc := range []struct {
		ctx  context.Context
		want string
	}{
		{trace.ContextWithRemoteSpanContext(t.Context(), parent), createParent},
		{t.Context(), ""},
	} {
		sc := &model.Schedule{Cron: "0 9 * * *", Timezone: "UTC", URL: "https://example.com/tick", Method: "POST",
			Headers: map[string]string{}, Timeout: 30 * time.Second, MaxAttempts: 5, MinBackoff: time.Second, MaxBackoff: time.Minute,
			CreatedAt: b.clock.Now()}
		next := b.clock.Now().Add(time.Hour)
		sc.NextRunAt = &next
		require.NoError(t, svc.CreateSchedule(tc.ctx, b.tenant, sc, "key:test"))
		conn, err := pgx.Connect(t.Context(), b.dbURL)
		require.NoError(t, err)
		var stored *string
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT trace_parent FROM schedules WHERE id = $1`, sc.ID).Scan(&stored))
		_ = conn.Close(context.Background())
		got := ""
		if stored != nil {
			got = *stored
		}
		require.Equal(t, tc.want, got)
	}
}
