package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// taskAt stores a task of the tenant in status, last changed at updatedAt
// (for a finished task: when it finished), with attempts attempt rows.
func taskAt(t *testing.T, db *store.DB, pool *pgxpool.Pool, tenantID uuid.UUID, status model.TaskStatus, updatedAt time.Time, attempts int) uuid.UUID {
	t.Helper()
	task := insertTask(t, db, tenantID, updatedAt)
	exec(t, pool, `UPDATE tasks SET status = $2::text, attempts = $3, updated_at = $4,
			next_attempt_at = CASE WHEN $2::text IN ('scheduled', 'retrying') THEN next_attempt_at END,
			claim_token = CASE WHEN $2::text = 'dispatching' THEN gen_random_uuid() END,
			lease_expires_at = CASE WHEN $2::text = 'dispatching' THEN now() + interval '1 hour' END
		WHERE id = $1`, task.ID, string(status), attempts, updatedAt)
	exec(t, pool, `INSERT INTO attempts (task_id, attempt, started_at, duration_ms, status_code, outcome)
		SELECT $1, g, $2, 5, 500, 'retry' FROM generate_series(1, $3::int) AS g`, task.ID, updatedAt, attempts)
	return task.ID
}

// attemptsOf counts the attempt rows of each task.
func attemptsOf(t *testing.T, pool *pgxpool.Pool, ids []uuid.UUID) map[uuid.UUID]int {
	t.Helper()
	out := make(map[uuid.UUID]int, len(ids))
	for _, id := range ids {
		out[id] = countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, id)
	}
	return out
}

// tenantTasks is the ids of a tenant's tasks, sorted.
func tenantTasks(t *testing.T, pool *pgxpool.Pool, tenantID uuid.UUID) []uuid.UUID {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM tasks WHERE tenant_id = $1`, tenantID)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	sortUUIDs(ids)
	return ids
}

func setRetention(t *testing.T, db *store.DB, tenantID uuid.UUID, d time.Duration) {
	t.Helper()
	_, err := db.SetTenantRetention(context.Background(), tenantID, &d,
		model.AuditEntry{TenantID: &tenantID, Actor: model.ActorOperator, Action: "tenant.retention_changed"})
	require.NoError(t, err)
}

func TestPurgeFinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	now := dbNow(t, pool)
	const retention = time.Hour
	byDefault, longer, shorter := createTenant(t, db), createTenant(t, db), createTenant(t, db)
	setRetention(t, db, longer.ID, 3*time.Hour)
	setRetention(t, db, shorter.ID, 10*time.Minute)

	type task struct {
		tenant   *model.Tenant
		status   model.TaskStatus
		age      time.Duration
		attempts int
		wantGone bool
		taskID   uuid.UUID
	}
	tasks := []*task{
		{tenant: byDefault, status: model.StatusDelivered, age: 2 * time.Hour, attempts: 2, wantGone: true},
		{tenant: byDefault, status: model.StatusDead, age: 2 * time.Hour, attempts: 3, wantGone: true},
		{tenant: byDefault, status: model.StatusCanceled, age: 2 * time.Hour, wantGone: true},
		{tenant: byDefault, status: model.StatusDelivered, age: retention + time.Second, attempts: 1, wantGone: true},
		{tenant: byDefault, status: model.StatusDelivered, age: retention - time.Minute, attempts: 1},
		{tenant: byDefault, status: model.StatusCanceled, age: retention - time.Minute},
		{tenant: byDefault, status: model.StatusExpired, age: 2 * time.Hour, attempts: 1, wantGone: true},
		{tenant: byDefault, status: model.StatusExpired, age: retention - time.Minute},
		// Not finished: kept whatever their age.
		{tenant: byDefault, status: model.StatusScheduled, age: 365 * 24 * time.Hour},
		{tenant: byDefault, status: model.StatusRetrying, age: 365 * 24 * time.Hour, attempts: 2},
		{tenant: byDefault, status: model.StatusDispatching, age: 365 * 24 * time.Hour, attempts: 1},
		{tenant: longer, status: model.StatusDelivered, age: 2 * time.Hour, attempts: 1},
		{tenant: longer, status: model.StatusDead, age: 4 * time.Hour, attempts: 1, wantGone: true},
		{tenant: longer, status: model.StatusScheduled, age: 365 * 24 * time.Hour},
		{tenant: shorter, status: model.StatusDelivered, age: 30 * time.Minute, attempts: 1, wantGone: true},
		{tenant: shorter, status: model.StatusDelivered, age: 5 * time.Minute, attempts: 1},
		{tenant: shorter, status: model.StatusRetrying, age: 365 * 24 * time.Hour, attempts: 4},
	}
	var want model.PurgeResult
	for _, tk := range tasks {
		tk.taskID = taskAt(t, db, pool, tk.tenant.ID, tk.status, now.Add(-tk.age), tk.attempts)
		if tk.wantGone {
			want.Tasks++
			want.Attempts += tk.attempts
		}
	}

	got, err := db.PurgeFinished(ctx, model.PurgeParams{Now: now, DefaultRetention: retention, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, want, got)

	for _, tn := range []*model.Tenant{byDefault, longer, shorter} {
		var kept []uuid.UUID
		for _, tk := range tasks {
			if tk.tenant == tn && !tk.wantGone {
				kept = append(kept, tk.taskID)
			}
		}
		sortUUIDs(kept)
		require.Equal(t, kept, tenantTasks(t, pool, tn.ID), "tenant %s keeps exactly its unfinished and recent tasks", tn.Name)
	}
	for _, tk := range tasks {
		n := countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, tk.taskID)
		if tk.wantGone {
			require.Zero(t, n, "%s task %s aged %s lost its attempts with it", tk.status, tk.taskID, tk.age)
			_, err := db.GetTask(ctx, tk.tenant.ID, tk.taskID)
			require.ErrorIs(t, err, model.ErrNotFound)
			_, err = db.ListAttempts(ctx, tk.tenant.ID, tk.taskID, 0, 1000)
			require.ErrorIs(t, err, model.ErrNotFound)
			continue
		}
		require.Equal(t, tk.attempts, n, "%s task aged %s keeps its attempts", tk.status, tk.age)
	}

	again, err := db.PurgeFinished(ctx, model.PurgeParams{Now: now, DefaultRetention: retention, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, model.PurgeResult{}, again, "nothing is left to purge")
}

func TestPurgeFinishedKeepForeverByDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	now := dbNow(t, pool)
	byDefault, own := createTenant(t, db), createTenant(t, db)
	setRetention(t, db, own.ID, time.Hour)
	ancient := taskAt(t, db, pool, byDefault.ID, model.StatusDelivered, now.Add(-10*365*24*time.Hour), 1)
	old := taskAt(t, db, pool, own.ID, model.StatusDelivered, now.Add(-2*time.Hour), 1)

	got, err := db.PurgeFinished(ctx, model.PurgeParams{Now: now, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, model.PurgeResult{Tasks: 1, Attempts: 1}, got)
	require.Equal(t, []uuid.UUID{ancient}, tenantTasks(t, pool, byDefault.ID), "no default retention: kept")
	require.Empty(t, tenantTasks(t, pool, own.ID), "the tenant's own retention still applies")
	require.Zero(t, countRows(t, pool, `SELECT count(*) FROM attempts WHERE task_id = $1`, old))
}

// A pass deletes at most Limit tasks, each tenant's oldest first, so that
// repeated passes drain a backlog in finishing order.
func TestPurgeFinishedLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	now := dbNow(t, pool)
	a, b := createTenant(t, db), createTenant(t, db)
	type doomed struct {
		tenant     uuid.UUID
		finishedAt time.Time
	}
	doomedTasks := map[uuid.UUID]doomed{}
	for i := range 5 {
		at := now.Add(-time.Duration(2+i) * time.Hour)
		doomedTasks[taskAt(t, db, pool, a.ID, model.StatusDelivered, at, 1)] = doomed{a.ID, at}
	}
	for i := range 3 {
		at := now.Add(-time.Duration(2+i) * time.Hour)
		doomedTasks[taskAt(t, db, pool, b.ID, model.StatusDead, at, 2)] = doomed{b.ID, at}
	}
	kept := taskAt(t, db, pool, a.ID, model.StatusDelivered, now, 1)

	const limit = 3
	var passes []int
	for range 5 {
		got, err := db.PurgeFinished(ctx, model.PurgeParams{Now: now, DefaultRetention: time.Hour, Limit: limit})
		require.NoError(t, err)
		passes = append(passes, got.Tasks)
		left := slices.Concat(tenantTasks(t, pool, a.ID), tenantTasks(t, pool, b.ID))
		// Within each tenant, every task deleted so far finished before
		// every doomed task left.
		for id, gone := range doomedTasks {
			if slices.Contains(left, id) {
				continue
			}
			for _, other := range left {
				if d, ok := doomedTasks[other]; ok && d.tenant == gone.tenant {
					require.True(t, gone.finishedAt.Before(d.finishedAt),
						"a task that finished at %s went before one that finished at %s", gone.finishedAt, d.finishedAt)
				}
			}
		}
		if got.Tasks < limit {
			break
		}
	}
	require.Equal(t, []int{3, 3, 2}, passes)
	require.Equal(t, []uuid.UUID{kept}, tenantTasks(t, pool, a.ID))
	require.Empty(t, tenantTasks(t, pool, b.ID))
}

// A task being replayed holds its row lock: the purge passes it by rather
// than wait, and deletes it on a later pass only if it is still finished.
func TestPurgeFinishedSkipsTaskBeingReplayed(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "replay commits", false: "replay rolls back"}[commit]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, pool := openDB(t)
			now := dbNow(t, pool)
			tenant := createTenant(t, db)
			replayed := taskAt(t, db, pool, tenant.ID, model.StatusDead, now.Add(-2*time.Hour), 3)
			other := taskAt(t, db, pool, tenant.ID, model.StatusDead, now.Add(-3*time.Hour), 1)

			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			// What ReplayTask writes, left uncommitted.
			_, err = tx.Exec(ctx, `UPDATE tasks SET status = 'scheduled', next_attempt_at = now(), attempt_base = attempts,
				updated_at = now() WHERE id = $1 AND status IN ('dead', 'delivered')`, replayed)
			require.NoError(t, err)

			params := model.PurgeParams{Now: now, DefaultRetention: time.Hour, Limit: 100}
			got, err := db.PurgeFinished(ctx, params)
			require.NoError(t, err)
			require.Equal(t, model.PurgeResult{Tasks: 1, Attempts: 1}, got)
			require.Equal(t, []uuid.UUID{replayed}, tenantTasks(t, pool, tenant.ID))

			if commit {
				require.NoError(t, tx.Commit(ctx))
			} else {
				require.NoError(t, tx.Rollback(ctx))
			}
			got, err = db.PurgeFinished(ctx, params)
			require.NoError(t, err)
			if commit {
				require.Equal(t, model.PurgeResult{}, got)
				task, err := db.GetTask(ctx, tenant.ID, replayed)
				require.NoError(t, err)
				require.Equal(t, model.StatusScheduled, task.Status)
				require.Equal(t, map[uuid.UUID]int{replayed: 3}, attemptsOf(t, pool, []uuid.UUID{replayed}))
				return
			}
			require.Equal(t, model.PurgeResult{Tasks: 1, Attempts: 3}, got)
			require.Empty(t, tenantTasks(t, pool, tenant.ID))
			require.Equal(t, map[uuid.UUID]int{other: 0, replayed: 0}, attemptsOf(t, pool, []uuid.UUID{other, replayed}))
		})
	}
}

func TestOldestFinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	now := dbNow(t, pool)
	a, b := createTenant(t, db), createTenant(t, db)

	_, ok, err := db.OldestFinished(ctx)
	require.NoError(t, err)
	require.False(t, ok, "no task at all")
	taskAt(t, db, pool, a.ID, model.StatusScheduled, now.Add(-365*24*time.Hour), 0)
	taskAt(t, db, pool, b.ID, model.StatusRetrying, now.Add(-365*24*time.Hour), 1)
	_, ok, err = db.OldestFinished(ctx)
	require.NoError(t, err)
	require.False(t, ok, "no finished task")

	taskAt(t, db, pool, a.ID, model.StatusDelivered, now.Add(-2*time.Hour), 1)
	taskAt(t, db, pool, b.ID, model.StatusCanceled, now.Add(-3*time.Hour), 0)
	taskAt(t, db, pool, b.ID, model.StatusDead, now.Add(-time.Hour), 1)
	at, ok, err := db.OldestFinished(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, µs(now.Add(-3*time.Hour)).Equal(at), "oldest finished at %s, want %s", at, now.Add(-3*time.Hour))
}

func TestSetTenantRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openDB(t)
	tenant := createTenant(t, db)
	require.Nil(t, tenant.Retention)
	key := &model.APIKey{ID: randomHex(t, 8), TenantID: tenant.ID, SecretHash: []byte("hash"), Scopes: []model.Scope{model.ScopeAll}}
	require.NoError(t, db.CreateAPIKey(ctx, key, "", model.AuditEntry{TenantID: &tenant.ID, Actor: model.ActorCLI, Action: "key.created"}))
	audit := model.AuditEntry{TenantID: &tenant.ID, Actor: model.ActorOperator, Action: "tenant.retention_changed"}

	month := 720 * time.Hour
	for _, want := range []*time.Duration{&month, nil} {
		set, err := db.SetTenantRetention(ctx, tenant.ID, want, audit)
		require.NoError(t, err)
		require.Equal(t, want, set.Retention)
		got, err := db.GetTenant(ctx, tenant.ID)
		require.NoError(t, err)
		require.Equal(t, want, got.Retention)
		_, withKey, err := db.GetAPIKey(ctx, key.ID)
		require.NoError(t, err)
		require.Equal(t, want, withKey.Retention, "the tenant read with its key")
	}
	_, err := db.SetTenantRetention(ctx, uuid.Must(uuid.NewV7()), &month, audit)
	require.ErrorIs(t, err, model.ErrNotFound)
}

// TestPurgeCostIgnoresTableSize backs the claim that a purge pass costs a
// probe of tasks_finished_or_expired per tenant plus the rows it deletes, however many
// finished tasks are still kept and however many old tasks are unfinished:
// under the generic plan a busy node caches, over 100,000 finished tasks kept
// and 50,000 unfinished ones older than any retention.
func TestPurgeCostIgnoresTableSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	now := dbNow(t, pool)
	big := createTenant(t, db)
	var others []*model.Tenant
	for range 20 {
		others = append(others, createTenant(t, db))
	}
	// Statistics of a nearly empty table, as in TestDispatchStatementsIgnoreBacklog.
	taskAt(t, db, pool, others[0].ID, model.StatusDelivered, now, 1)
	exec(t, pool, `ANALYZE tasks`)
	exec(t, pool, `ANALYZE attempts`)

	const keptFinished, oldUnfinished, doomed = 100_000, 50_000, 10
	exec(t, pool, `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, attempts, updated_at)
		SELECT gen_random_uuid(), $1, 'delivered', 'https://receiver.example/done', 'POST', at, NULL, 10000, 10, 1000, 3600000, 1, at
		FROM (SELECT $2::timestamptz - g * interval '1 millisecond' AS at FROM generate_series(1, $3::int) AS g) s`,
		big.ID, now, keptFinished)
	exec(t, pool, `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, updated_at)
		SELECT gen_random_uuid(), $1, 'scheduled', 'https://receiver.example/later', 'POST', at, at, 10000, 10, 1000, 3600000,
			$2::timestamptz - interval '1 year'
		FROM (SELECT $2::timestamptz + interval '30 days' + g * interval '1 second' AS at FROM generate_series(1, $3::int) AS g) s`,
		big.ID, now, oldUnfinished)
	var doomedIDs []uuid.UUID
	for i := range doomed {
		doomedIDs = append(doomedIDs, taskAt(t, db, pool, big.ID, model.StatusDead, now.Add(-2*time.Hour-time.Duration(i)*time.Second), 2))
	}
	exec(t, pool, `INSERT INTO attempts (task_id, attempt, started_at, duration_ms, status_code, outcome)
		SELECT id, 1, updated_at, 5, 200, 'success' FROM tasks WHERE tenant_id = $1 AND status = 'delivered'`, big.ID)
	exec(t, pool, `ANALYZE tasks`)
	exec(t, pool, `ANALYZE attempts`)
	height := btreeHeight(t, pool, "tasks_finished_or_expired")
	var indexPages int
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_relation_size('tasks_finished_or_expired') / 8192`).Scan(&indexPages))

	tenants := 1 + len(others)
	cases := []struct {
		name     string
		query    string
		args     []any
		wantRows float64
	}{
		{"PurgeFinished", store.QueryPurgeFinished, []any{now, time.Hour.Milliseconds(), 1000, (24 * time.Hour).Milliseconds()}, 1},
		{"OldestFinished", store.QueryOldestFinished, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out []byte
			if len(c.args) > 0 {
				out = explainGenericPlan(t, pool, c.query, c.args)
			} else {
				out = explainAnalyze(t, pool, c.query)
			}
			plan := topPlan(t, out)
			var facts planFacts
			walkPlan(plan, &facts)
			require.Contains(t, facts.indexNames, "tasks_finished_or_expired", "plan nodes: %v", facts.nodeTypes)
			require.NotContains(t, facts.seqScans, "tasks", "plan nodes: %v", facts.nodeTypes)
			require.NotContains(t, facts.seqScans, "attempts", "plan nodes: %v", facts.nodeTypes)
			require.Equal(t, c.wantRows, plan["Actual Rows"], "plan nodes: %v", facts.nodeTypes)
			blocks := sharedBlocks(plan)
			t.Logf("%s over %d tenants, %d finished tasks kept, %d old unfinished, %d doomed: %d shared buffers "+
				"(tasks_finished_or_expired: height %d, %d pages); plan %v",
				c.name, tenants, keptFinished, oldUnfinished, doomed, blocks, height, indexPages, facts.nodeTypes)
			// A descent of tasks_finished_or_expired per tenant, and for each task
			// deleted: its row locked and deleted (a descent of the primary
			// key, whose leaf holds the row's older versions too, and its
			// heap page) and its attempts' (a descent, a heap page each):
			// about twenty pages. Nothing in proportion to the rows kept.
			require.LessOrEqual(t, blocks, tenants*(height+2)+doomed*20)
			require.Less(t, blocks, indexPages/2, "far less than the index")
		})
	}
	// The explained purge was rolled back: the real one deletes them all.
	got, err := db.PurgeFinished(ctx, model.PurgeParams{Now: now, DefaultRetention: time.Hour, Limit: 1000})
	require.NoError(t, err)
	require.Equal(t, model.PurgeResult{Tasks: doomed, Attempts: 2 * doomed}, got)
	none := map[uuid.UUID]int{}
	for _, id := range doomedIDs {
		none[id] = 0
	}
	require.Equal(t, none, attemptsOf(t, pool, doomedIDs))
}

// explainAnalyze runs query under EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON), in
// a transaction it rolls back: for statements without parameters, whose
// generic and custom plans are one.
func explainAnalyze(t *testing.T, pool *pgxpool.Pool, query string) []byte {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var out []byte
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+query).Scan(&out))
	return out
}
