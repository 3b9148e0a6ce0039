package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// minuteOf is a tenant's minute with the given counts, each attempt started
// lateness after it was due.
func minuteOf(tenant uuid.UUID, start time.Time, delivered, retried, dead int, lateness time.Duration) model.TenantMinuteStats {
	r := model.TenantMinuteStats{TenantID: tenant}
	r.Start = start
	for range delivered {
		r.Add(model.StatusDelivered, lateness)
	}
	for range retried {
		r.Add(model.StatusRetrying, lateness)
	}
	for range dead {
		r.Add(model.StatusDead, lateness)
	}
	return r
}

// TestTaskStatsAddUp adds statistics as two nodes would, both to the same
// minutes, and reads them back: counts and histograms add up, a tenant reads
// only its own, and the window's bounds hold.
func TestTaskStatsAddUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	acme, globex := uuid.New(), uuid.New()
	m0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	m1, m2 := m0.Add(time.Minute), m0.Add(2*time.Minute)

	require.NoError(t, db.AddTaskStats(ctx, []model.TenantMinuteStats{
		minuteOf(acme, m1, 3, 1, 0, time.Millisecond),
		minuteOf(globex, m1, 100, 0, 0, time.Second),
		minuteOf(acme, m0, 1, 0, 0, time.Millisecond),
	}))
	require.NoError(t, db.AddTaskStats(ctx, []model.TenantMinuteStats{
		minuteOf(acme, m1, 2, 0, 1, time.Second),
		minuteOf(acme, m2, 0, 0, 1, time.Minute),
	}))
	require.NoError(t, db.AddTaskStats(ctx, nil))

	got, err := db.TaskStatsBetween(ctx, acme, m0, m2)
	require.NoError(t, err)
	require.Len(t, got, 2, "m2 is past the window")
	require.True(t, got[0].Start.Equal(m0))
	require.EqualValues(t, 1, got[0].Delivered)
	require.True(t, got[1].Start.Equal(m1))
	require.EqualValues(t, 5, got[1].Delivered)
	require.EqualValues(t, 1, got[1].Retried)
	require.EqualValues(t, 1, got[1].Dead)
	require.EqualValues(t, 7, got[1].Lateness.Count())
	require.EqualValues(t, 4, got[1].Lateness[model.LatenessBucket(time.Millisecond)])
	require.EqualValues(t, 3, got[1].Lateness[model.LatenessBucket(time.Second)], "not globex's hundred")

	got, err = db.TaskStatsBetween(ctx, globex, m0, m2.Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.EqualValues(t, 100, got[0].Attempts())

	got, err = db.TaskStatsBetween(ctx, uuid.New(), m0, m2)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestPurgeTaskStats deletes the minutes older than the cutoff, any tenant's,
// a batch at a time, and keeps the rest.
func TestPurgeTaskStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	now := time.Now().Truncate(time.Minute)
	var rows []model.TenantMinuteStats
	for _, tenant := range []uuid.UUID{uuid.New(), uuid.New()} {
		for m := range 3 {
			rows = append(rows, minuteOf(tenant, now.Add(-49*time.Hour-time.Duration(m)*time.Minute), 1, 0, 0, 0))
		}
		rows = append(rows, minuteOf(tenant, now.Add(-47*time.Hour), 1, 0, 0, 0), minuteOf(tenant, now, 1, 0, 0, 0))
	}
	require.NoError(t, db.AddTaskStats(ctx, rows))

	cutoff := now.Add(-48 * time.Hour)
	n, err := db.PurgeTaskStats(ctx, cutoff, 4)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	n, err = db.PurgeTaskStats(ctx, cutoff, 4)
	require.NoError(t, err)
	require.Equal(t, 2, n, "a short batch: nothing more to purge")
	n, err = db.PurgeTaskStats(ctx, cutoff, 4)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 4, countRows(t, pool, `SELECT count(*) FROM task_stats_minutes`))
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM task_stats_minutes WHERE minute < $1`, cutoff))
}

// TestCountTasksByStatus counts a tenant's tasks in every status, each up to
// the limit, and none of another tenant's.
func TestCountTasksByStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	acme, other := createTenant(t, db), createTenant(t, db)
	past := time.Now().Add(-time.Hour)
	for range 5 {
		taskAt(t, db, pool, acme.ID, model.StatusDelivered, past, 1)
	}
	taskAt(t, db, pool, acme.ID, model.StatusDead, past, 3)
	taskAt(t, db, pool, acme.ID, model.StatusExpired, past, 0)
	taskAt(t, db, pool, acme.ID, model.StatusRetrying, past, 1)
	insertTask(t, db, acme.ID, time.Now().Add(time.Hour))
	taskAt(t, db, pool, other.ID, model.StatusDead, past, 1)
	// Claimed, so dispatching though it keeps its stored status; the other
	// tenant's claim is not acme's.
	claimOne(t, db, pool, insertTask(t, db, acme.ID, past).ID)
	claimOne(t, db, pool, insertTask(t, db, other.ID, past).ID)

	got, err := db.CountTasksByStatus(ctx, acme.ID, 3)
	require.NoError(t, err)
	require.Equal(t, map[model.TaskStatus]int{
		model.StatusScheduled: 1, model.StatusDispatching: 1, model.StatusRetrying: 1,
		model.StatusDelivered: 3, model.StatusDead: 1, model.StatusCanceled: 0, model.StatusExpired: 1,
	}, got)
}

// TestStatsStatementsStayBounded backs the claims that reading a tenant's
// statistics costs the same however many tasks it has and however many
// tenants have statistics: the status counts read at most their limit of
// index entries per status, the window read one range of the primary key,
// and the purge only what it deletes. Each runs from the generic plan a busy
// node caches, over a tenant of 200,000 tasks and a day of minutes of 50
// tenants.
func TestStatsStatementsStayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a table of 200,000 tasks")
	}
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	insertDueTask(t, db, pool, tenant.ID)
	exec(t, pool, `ANALYZE tasks`)
	// Mostly delivered, as a busy tenant's tasks are; the rest spread over
	// the other statuses.
	exec(t, pool, `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at, claim_token, lease_expires_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
		SELECT gen_random_uuid(), $1, s.status, 'https://receiver.example/hook', 'POST', now(),
			CASE WHEN s.status IN ('scheduled', 'retrying') THEN now() END,
			CASE WHEN s.status = 'dispatching' THEN gen_random_uuid() END,
			CASE WHEN s.status = 'dispatching' THEN now() + interval '1 minute' END,
			10000, 10, 1000, 3600000
		FROM generate_series(1, 200000) AS g
		CROSS JOIN LATERAL (SELECT CASE
			WHEN g % 10 < 6 THEN 'delivered' WHEN g % 10 = 6 THEN 'dead' WHEN g % 10 = 7 THEN 'scheduled'
			WHEN g % 10 = 8 THEN 'retrying' WHEN g % 100 = 9 THEN 'canceled' ELSE 'dispatching' END AS status) s`,
		tenant.ID)
	now := time.Now().Truncate(time.Minute)
	var rows []model.TenantMinuteStats
	tenants := []uuid.UUID{tenant.ID}
	for range 49 {
		tenants = append(tenants, uuid.New())
	}
	for _, id := range tenants {
		for m := range 1440 {
			rows = append(rows, minuteOf(id, now.Add(-time.Duration(m)*time.Minute), 3, 1, 0, time.Millisecond))
		}
	}
	require.NoError(t, db.AddTaskStats(ctx, rows))
	exec(t, pool, `VACUUM ANALYZE tasks`)
	exec(t, pool, `VACUUM ANALYZE task_stats_minutes`)

	const limit = 10_000
	cases := []struct {
		name      string
		query     string
		args      []any
		wantIndex string
		wantRows  float64
		maxBlocks int
	}{
		{
			name: "CountTasksByStatus", query: store.QueryCountTasksByStatus,
			args:      []any{tenant.ID, limit, allPartitions(), store.CountDueAtMost},
			wantIndex: "tasks_tenant_status_recent", wantRows: 7,
			// Seven descents, then 52,000 index entries at about a hundred a
			// page; and the search for claimed tasks among the due ones
			// (here 40,000 waiting tasks are due), a heap page for each of
			// the CountDueAtMost it reads at most.
			maxBlocks: 800 + store.CountDueAtMost*11/10,
		},
		{
			name: "TaskStatsBetween", query: store.QueryTaskStatsBetween,
			args:      []any{tenant.ID, now.Add(-time.Hour), now},
			wantIndex: "task_stats_minutes_pkey", wantRows: 60, maxBlocks: 20,
		},
		{
			// Nothing is old enough: the purge reads nothing but a descent.
			name: "PurgeTaskStats", query: store.QueryPurgeTaskStats,
			args:      []any{now.Add(-48 * time.Hour), limit},
			wantIndex: "task_stats_minutes_minute", wantRows: 0, maxBlocks: 10,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := explainGenericPlan(t, pool, c.query, c.args)
			var doc []map[string]any
			require.NoError(t, json.Unmarshal(out, &doc), "%s", out)
			plan := doc[0]["Plan"].(map[string]any)
			var facts planFacts
			walkPlan(plan, &facts)
			require.Contains(t, facts.indexNames, c.wantIndex, "plan nodes: %v", facts.nodeTypes)
			require.Empty(t, facts.seqScans, "plan nodes: %v", facts.nodeTypes)
			require.Equal(t, c.wantRows, plan["Actual Rows"], "plan nodes: %v", facts.nodeTypes)
			blocks := sharedBlocks(plan)
			t.Logf("%s: %d shared buffers, %.2f ms; plan %v", c.name, blocks, doc[0]["Execution Time"], facts.nodeTypes)
			require.Less(t, blocks, c.maxBlocks)
		})
	}

	counts, err := db.CountTasksByStatus(ctx, tenant.ID, limit)
	require.NoError(t, err)
	require.Equal(t, map[model.TaskStatus]int{
		model.StatusScheduled: limit, model.StatusDispatching: limit, model.StatusRetrying: limit,
		model.StatusDelivered: limit, model.StatusDead: limit, model.StatusCanceled: 2000, model.StatusExpired: 0,
	}, counts)
}
