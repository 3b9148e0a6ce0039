package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tracing"
)

// A task's trace context goes in with the single and the batch insert, and
// comes back with its claim; a task without one claims with none.
func TestTraceContextStoredAndClaimed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	due := dbNow(t, pool).Add(-time.Minute)
	const (
		parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		state  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	)

	single := newTask(tenant.ID, due)
	single.TraceParent, single.TraceState = parent, state
	_, created, err := db.InsertTask(ctx, single, false)
	require.NoError(t, err)
	require.True(t, created)

	batched, untraced := newTask(tenant.ID, due), newTask(tenant.ID, due)
	batched.TraceParent = parent
	results, err := db.InsertTasks(ctx, []*model.Task{batched, untraced}, due)
	require.NoError(t, err)
	require.True(t, results[0].Created && results[1].Created)

	for _, tc := range []struct {
		task          *model.Task
		parent, state string
	}{
		{single, parent, state},
		{batched, parent, ""},
		{untraced, "", ""},
	} {
		claim := claimOne(t, db, pool, tc.task.ID)
		require.Equal(t, tc.parent, claim.TraceParent)
		require.Equal(t, tc.state, claim.TraceState)
	}
	var stored *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT trace_parent FROM tasks WHERE id = $1`, untraced.ID).Scan(&stored))
	require.Nil(t, stored, "no trace context is stored as NULL")
}

// An insert under a recording span gets a span of its own, a child of it,
// naming the task; one outside any trace makes none.
func TestInsertSpan(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	exported := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exported))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	_, created, err := db.InsertTask(context.Background(), newTask(tenant.ID, dbNow(t, pool)), false)
	require.NoError(t, err)
	require.True(t, created)
	require.Empty(t, exported.GetSpans(), "no span outside a trace")

	ctx, request := tp.Tracer("test").Start(context.Background(), "POST /v1/tasks")
	task := newTask(tenant.ID, dbNow(t, pool))
	_, created, err = db.InsertTask(ctx, task, false)
	require.NoError(t, err)
	require.True(t, created)
	_, err = db.InsertTasks(ctx, []*model.Task{newTask(tenant.ID, dbNow(t, pool)), newTask(tenant.ID, dbNow(t, pool))}, time.Time{})
	require.NoError(t, err)
	request.End()

	spans := exported.GetSpans()
	require.Len(t, spans, 3)
	for _, s := range spans[:2] {
		require.Equal(t, tracing.SpanStoreInsert, s.Name)
		require.Equal(t, request.SpanContext().SpanID(), s.Parent.SpanID())
		require.Equal(t, request.SpanContext().TraceID(), s.SpanContext.TraceID())
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, task.ID.String(), attrs[tracing.AttrTaskID])
	require.Equal(t, tenant.ID.String(), attrs[tracing.AttrTenantID])
	require.Equal(t, "https://receiver.example:443", attrs[tracing.AttrTarget])
	require.Equal(t, "InsertTask", attrs["db.operation.name"])
	batchAttrs := map[string]string{}
	for _, kv := range spans[1].Attributes {
		batchAttrs[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, "2", batchAttrs[tracing.AttrTaskCount])
	require.Equal(t, "InsertTasks", batchAttrs["db.operation.name"])
}

// A schedule's trace context is copied to each occurrence's task, which its
// claim then carries; a schedule without one makes tasks without one.
func TestScheduleTraceContextReachesOccurrences(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	now := dbNow(t, pool).Truncate(time.Second)
	first := now.Add(-2 * time.Second)
	traced, untraced := schedNew(tenant.ID, &first), schedNew(tenant.ID, &first)
	traced.TraceParent, traced.TraceState = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "rojo=00f067aa0ba902b7"
	require.NoError(t, db.InsertSchedule(context.Background(), traced, nil))
	require.NoError(t, db.InsertSchedule(context.Background(), untraced, nil))

	created := schedMaterialize(t, db, now, schedEverySecond(now))
	require.Len(t, created, 6, "three occurrences of each")
	for _, s := range []*model.Schedule{traced, untraced} {
		occ := schedOccurrences(t, pool, s.ID)
		require.Len(t, occ, 3)
		for _, o := range occ {
			claim := claimOne(t, db, pool, o.ID)
			require.Equal(t, s.TraceParent, claim.TraceParent)
			require.Equal(t, s.TraceState, claim.TraceState)
		}
	}
}
