package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
)

// TestDispatchStatementsIgnoreBacklog backs the claim that claiming and
// recording cost the same with thousands of tasks due or in flight as with
// none: Postgres runs them from a cached generic plan after five executions,
// and such a plan once walked tasks_due through every due task (35 ms a claim
// with 7,000 due) and the index of dispatching tasks through every one. The
// statements are prepared and explained here under force_generic_plan, the
// plan a busy node ends up with, over 20,000 due and 5,000 dispatching tasks.
func TestDispatchStatementsIgnoreBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	// Statistics taken while the table was nearly empty, as on a node that
	// filled up faster than autovacuum analyzes: they make a scan of the
	// partial indexes look cheap, which is when a generic plan chose them.
	insertDueTask(t, db, pool, tenant.ID)
	exec(t, pool, `ANALYZE tasks`)

	const dueNow, inFlight = 20_000, 5_000
	exec(t, pool, `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
		SELECT gen_random_uuid(), $1, 'scheduled', 'https://receiver.example/due', 'POST', at, at, 10000, 10, 1000, 3600000
		FROM (SELECT now() - g * interval '1 millisecond' AS at FROM generate_series(1, $2::int) AS g) s`,
		tenant.ID, dueNow+inFlight)
	token := uuid.New()
	// In flight: claimed as tasks with an ordering key are (status
	// dispatching) and as the others are (a token on a waiting row).
	exec(t, pool, `UPDATE tasks SET status = CASE WHEN random() < 0.5 THEN 'dispatching' ELSE status END,
		attempts = 1, claim_token = $1, lease_expires_at = now() + interval '1 minute'
		WHERE id IN (SELECT id FROM tasks ORDER BY id LIMIT $2)`, token, inFlight)

	var waiting, dispatching []uuid.UUID
	rows, err := pool.Query(ctx, `SELECT id FROM tasks WHERE claim_token IS NULL ORDER BY random() LIMIT 10`)
	require.NoError(t, err)
	waiting, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	rows, err = pool.Query(ctx, `SELECT id FROM tasks WHERE claim_token IS NOT NULL ORDER BY random() LIMIT 10`)
	require.NoError(t, err)
	dispatching, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.Len(t, waiting, 10)
	require.Len(t, dispatching, 10)

	n := len(dispatching)
	attempts, outcomes, statuses := make([]int32, n), make([]string, n), make([]string, n)
	started, durations, tokens := make([]time.Time, n), make([]int32, n), make([]uuid.UUID, n)
	for i := range n {
		attempts[i], outcomes[i], statuses[i] = 1, "success", "delivered"
		started[i], durations[i], tokens[i] = time.Now(), 5, token
	}
	pausing := uuid.New()
	cases := []struct {
		name     string
		prepare  string
		args     []any
		wantRows float64
	}{
		{
			name:    "ClaimTasks",
			prepare: store.QueryClaimTasks,
			// A held tenant and a tenant's paused target (none of these
			// tasks'): the filters on them must not change the plan.
			args: []any{waiting, time.Now().Add(time.Second), uuid.New(), 30 * time.Second, uuid.New(),
				allPartitions(), store.ClaimBodyInline, []uuid.UUID{uuid.New()},
				[]uuid.UUID{pausing}, []string{model.HeldTargetKey(pausing, "https://paused.example:443")}},
			wantRows: 10,
		},
		{
			name:    "RecordAttempts",
			prepare: store.QueryRecordAttempts,
			args: []any{dispatching, attempts, started, durations, make([]*int32, n), make([]*string, n),
				outcomes, make([]*string, n), statuses, make([]*time.Time, n), tokens, make([]*string, n),
				make([]int64, n), make([]int64, n), int16(1), make([]bool, n)},
			wantRows: 10,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			explainGeneric := func(t *testing.T, query string, args []any) []byte {
				return explainGenericPlan(t, pool, query, args)
			}
			out := explainGeneric(t, c.prepare, c.args)
			plan := topPlan(t, out)
			var facts planFacts
			walkPlan(plan, &facts)
			require.NotContains(t, facts.indexNames, "tasks_due", "plan nodes: %v", facts.nodeTypes)
			require.NotContains(t, facts.indexNames, "tasks_dispatching", "plan nodes: %v", facts.nodeTypes)
			require.NotContains(t, facts.seqScans, "tasks", "plan nodes: %v", facts.nodeTypes)
			require.Equal(t, c.wantRows, plan["Actual Rows"], "plan nodes: %v", facts.nodeTypes)
			// Which partitions another node leases is read once per
			// statement, not once per task (leasedElsewhere).
			require.LessOrEqual(t, facts.relationReads["partitions"], 1.0, "plan nodes: %v", facts.nodeTypes)
			blocks := sharedBlocks(plan)
			t.Logf("%s of %d tasks with %d due and %d in flight: %d shared buffers; plan %v",
				c.name, len(waiting), dueNow, inFlight, blocks, facts.nodeTypes)
			// A few index pages and a heap page per task, for each index the
			// new row versions go into: nothing in proportion to the backlog.
			require.Less(t, blocks, 600)
		})
	}
}

// explainGenericPlan runs query under EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
// with the generic plan Postgres caches for a prepared statement, in a
// transaction it rolls back. Postgres 15 has no EXPLAIN (GENERIC_PLAN), and
// EXECUTE takes no protocol parameters, so each argument travels in a
// transaction-local setting, cast back to the parameter's type inside the
// EXECUTE: the plan cannot see the values.
func explainGenericPlan(t *testing.T, pool *pgxpool.Pool, query string, args []any) []byte {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SET LOCAL plan_cache_mode TO force_generic_plan`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `PREPARE generic_plan AS `+query)
	require.NoError(t, err)
	// Prepared statements outlive transactions: the connection goes back to
	// the pool without it.
	defer func() { _, _ = conn.Exec(ctx, `DEALLOCATE generic_plan`) }()
	var types []string
	require.NoError(t, tx.QueryRow(ctx,
		`SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = 'generic_plan'`).Scan(&types))
	require.Len(t, types, len(args))
	params := make([]string, len(args))
	for i, arg := range args {
		setting := fmt.Sprintf("hookwheel_test.p%d", i+1)
		_, err := tx.Exec(ctx, fmt.Sprintf(`SELECT set_config($1, $2::%s::text, true)`, types[i]), setting, arg)
		require.NoError(t, err, "parameter $%d (%s)", i+1, types[i])
		params[i] = fmt.Sprintf("current_setting('%s')::%s", setting, types[i])
	}
	var out []byte
	require.NoError(t, tx.QueryRow(ctx,
		`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE generic_plan(`+strings.Join(params, ", ")+`)`).Scan(&out))
	return out
}

// TestLockOrderingKeysSkipsUnkeyedTasks: a claim's first statement, which
// finds the ordering keys of the batch to lock them, reads tasks without a
// key from no index but tasks_keyed (migration 00025), which holds none of
// them: its cost does not follow the batch's size when no task has a key.
func TestLockOrderingKeysSkipsUnkeyedTasks(t *testing.T) {
	t.Parallel()
	db, pool := openDB(t)
	tenant := createTenant(t, db)
	exec(t, pool, `
		INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
		SELECT gen_random_uuid(), $1, 'scheduled', 'https://receiver.example/due', 'POST', now(), now(), 10000, 10, 1000, 3600000
		FROM generate_series(1, 20000)`, tenant.ID)
	exec(t, pool, `ANALYZE tasks`)
	rows, err := pool.Query(context.Background(), `SELECT id FROM tasks ORDER BY random() LIMIT 100`)
	require.NoError(t, err)
	batch, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)

	out := explainGenericPlan(t, pool, store.QueryLockOrderingKeys, []any{batch})
	plan := topPlan(t, out)
	var facts planFacts
	walkPlan(plan, &facts)
	require.Contains(t, facts.indexNames, "tasks_keyed", "plan nodes: %v", facts.nodeTypes)
	require.NotContains(t, facts.indexNames, "tasks_pkey", "plan nodes: %v", facts.nodeTypes)
	blocks := sharedBlocks(plan)
	t.Logf("LockOrderingKeys of %d unkeyed tasks: %d shared buffers; plan %v", len(batch), blocks, facts.nodeTypes)
	// Two pages a probe (the index's metapage and its only page) and no heap
	// page; through the primary key the same batch read 289.
	require.Less(t, blocks, 250)
}

// TestClaimChangesNoIndex backs migration 00026: the claim of tasks without
// an ordering key changes no indexed column, so Postgres writes each claimed
// row version beside the old one without an index entry (a heap-only
// update); a keyed task's claim sets status 'dispatching', which indexes
// must see. The claim statement runs in a transaction of the test's own, whose
// counts pg_stat_get_xact_* report.
func TestClaimChangesNoIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool := openDB(t)
	tenant := createTenant(t, db)

	const n = 50
	var unkeyed []uuid.UUID
	for range n {
		unkeyed = append(unkeyed, insertDueTask(t, db, pool, tenant.ID).ID)
	}
	keyedTask := newTask(tenant.ID, dbNow(t, pool).Add(-time.Minute))
	key := "order-42"
	keyedTask.OrderingKey = &key
	_, created, err := db.InsertTask(ctx, keyedTask, false)
	require.NoError(t, err)
	require.True(t, created)

	claim := func(t *testing.T, ids []uuid.UUID) (claimed, updated, heapOnly int) {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		// The backend's counts not yet reported include its earlier
		// transactions': the claim's are the difference.
		const counts = `SELECT pg_stat_get_xact_tuples_updated('tasks'::regclass),
			pg_stat_get_xact_tuples_hot_updated('tasks'::regclass)`
		var updatedBefore, heapOnlyBefore int
		require.NoError(t, tx.QueryRow(ctx, counts).Scan(&updatedBefore, &heapOnlyBefore))
		rows, err := tx.Query(ctx, store.QueryClaimTasks, ids, dbNow(t, pool), uuid.New(), 30*time.Second, uuid.New(),
			allPartitions(), store.ClaimBodyInline, []uuid.UUID{}, []uuid.UUID{}, []string{})
		require.NoError(t, err)
		for rows.Next() {
			claimed++
		}
		require.NoError(t, rows.Err())
		require.NoError(t, tx.QueryRow(ctx, counts).Scan(&updated, &heapOnly))
		return claimed, updated - updatedBefore, heapOnly - heapOnlyBefore
	}

	t.Run("without a key", func(t *testing.T) {
		claimed, updated, heapOnly := claim(t, unkeyed)
		require.Equal(t, n, claimed)
		require.Equal(t, n, updated)
		require.Equal(t, n, heapOnly, "every claim without a key is heap-only")
	})
	t.Run("with a key", func(t *testing.T) {
		claimed, updated, heapOnly := claim(t, []uuid.UUID{keyedTask.ID})
		require.Equal(t, 1, claimed)
		require.Equal(t, 1, updated)
		require.Zero(t, heapOnly, "a keyed claim changes status, an indexed column")
	})
}
