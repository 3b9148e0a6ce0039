package tenants_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/store/storetest"
	"github.com/hookwheel/hookwheel/tenants"
)

// fillTenant gives a tenant tasks (the first withAttempts of them with two
// attempts each) and a row in each of its other tables.
func fillTenant(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, tasks, withAttempts int) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []struct {
		sql string
		n   int
	}{{
		// One in ten with an ordering key, whose trigger sets the key's
		// next task due as each is deleted.
		`INSERT INTO tasks (id, tenant_id, status, url, method, run_at, next_attempt_at,
			timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms, ordering_key)
		SELECT gen_random_uuid(), $1, 'scheduled', 'https://receiver.example/' || g, 'POST', now(), now(),
			10000, 10, 1000, 3600000, CASE WHEN g % 10 = 0 THEN 'key-' || g % 7 END
		FROM generate_series(1, $2::int) AS g`, tasks,
	}, {
		`INSERT INTO attempts (task_id, attempt, started_at, duration_ms, outcome)
		SELECT t.id, a, now(), 5, 'retry'
		FROM (SELECT id FROM tasks WHERE tenant_id = $1 LIMIT $2) t, generate_series(1, 2) AS a`, withAttempts,
	}} {
		_, err := pool.Exec(ctx, q.sql, id, q.n)
		require.NoError(t, err, q.sql)
	}
	for _, q := range []string{
		`INSERT INTO schedules (id, tenant_id, cron, timezone, url, method, timeout_ms, max_attempts, min_backoff_ms, max_backoff_ms)
		VALUES (gen_random_uuid(), $1, '* * * * *', 'UTC', 'https://receiver.example/s', 'POST', 10000, 10, 1000, 3600000)`,
		`INSERT INTO topics (tenant_id, name) VALUES ($1, 'orders')`,
		`INSERT INTO flow_limits (tenant_id, key, rate) VALUES ($1, 'customer-1', 5)`,
		`INSERT INTO idempotency_keys (tenant_id, kind, key, created_at, snapshot) VALUES ($1, 'task', 'k1', now(), '{}')`,
		`INSERT INTO portal_links (id, tenant_id, secret_hash, label_key, label_value, created_by, expires_at)
		VALUES (gen_random_uuid(), $1, '\x00', 'customer', '1', 'cli', now() + interval '1 hour')`,
		`INSERT INTO task_stats_minutes (tenant_id, minute, delivered, retried, dead, lateness)
		VALUES ($1, date_trunc('minute', now()), 1, 0, 0, '{}')`,
	} {
		_, err := pool.Exec(ctx, q, id)
		require.NoError(t, err, q)
	}
}

// rowsOf counts a tenant's rows in each of the tables a deletion empties.
func rowsOf(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) map[string]int {
	t.Helper()
	out := map[string]int{}
	for table, q := range map[string]string{
		"tenants":          `SELECT count(*) FROM tenants WHERE id = $1`,
		"tasks":            `SELECT count(*) FROM tasks WHERE tenant_id = $1`,
		"attempts":         `SELECT count(*) FROM attempts JOIN tasks ON tasks.id = attempts.task_id WHERE tenant_id = $1`,
		"schedules":        `SELECT count(*) FROM schedules WHERE tenant_id = $1`,
		"topics":           `SELECT count(*) FROM topics WHERE tenant_id = $1`,
		"flow_limits":      `SELECT count(*) FROM flow_limits WHERE tenant_id = $1`,
		"idempotency_keys": `SELECT count(*) FROM idempotency_keys WHERE tenant_id = $1`,
		"api_keys":         `SELECT count(*) FROM api_keys WHERE tenant_id = $1`,
		"portal_links":     `SELECT count(*) FROM portal_links WHERE tenant_id = $1`,
		"stats":            `SELECT count(*) FROM task_stats_minutes WHERE tenant_id = $1`,
		"audit":            `SELECT count(*) FROM audit_log WHERE tenant_id = $1`,
	} {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), q, id).Scan(&n))
		out[table] = n
	}
	return out
}

// batchLog records the batches of one Deleter.
type batchLog struct {
	mu      sync.Mutex
	batches []model.DeletionBatch
	// progress is the tenant's progress as read after each batch.
	progress []map[string]int64
	n        chan struct{}
}

// TestDeleterBoundedBatches: a tenant of 20,000 tasks is deleted 1,000
// tasks (with their attempts) a statement, then its other tables, its row
// last, by one Deleter at a time: a second one running beside it does
// nothing until the first stops, then continues where it left off once the
// first's lease has run out. Another tenant's rows, and the deleted
// tenant's audit entries, stay.
func TestDeleterBoundedBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DatabaseURL(t)
	db, err := store.Open(ctx, store.Config{DatabaseURL: url})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	svc := tenants.New(tenants.Config{Store: db})

	victim, err := svc.Create(ctx, "victim", model.ActorCLI)
	require.NoError(t, err)
	bystander, err := svc.Create(ctx, "bystander", model.ActorCLI)
	require.NoError(t, err)
	const tasks, withAttempts, batch = 20_000, 3_000, 1_000
	fillTenant(t, pool, victim.Tenant.ID, tasks, withAttempts)
	fillTenant(t, pool, bystander.Tenant.ID, 50, 10)
	before := rowsOf(t, pool, bystander.Tenant.ID)

	_, err = svc.Delete(ctx, victim.Tenant.ID, model.ActorOperator)
	require.NoError(t, err)

	logs := [2]*batchLog{{n: make(chan struct{}, 1)}, {n: make(chan struct{}, 1)}}
	progress := func(log *batchLog) func(uuid.UUID, model.DeletionBatch) {
		return func(id uuid.UUID, b model.DeletionBatch) {
			if id != victim.Tenant.ID {
				return
			}
			var deleted map[string]int64
			if tn, err := db.GetTenant(ctx, id); err == nil && tn.Deletion != nil {
				deleted = tn.Deletion.Deleted
			}
			log.mu.Lock()
			log.batches = append(log.batches, b)
			log.progress = append(log.progress, deleted)
			log.mu.Unlock()
			select {
			case log.n <- struct{}{}:
			default:
			}
		}
	}
	run := func(cfg tenants.DeleterConfig) (stop func()) {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- tenants.NewDeleter(cfg).Run(runCtx) }()
		return func() { cancel(); require.NoError(t, <-done) }
	}
	// The first takes the tenant; the second, started once the first has
	// done a batch, finds it taken. The lease is renewed by each batch, so
	// it must outlast a batch on a loaded machine (300 ms did not: the
	// second took over while the first was still deleting); once the first
	// stops, the second waits it out.
	stopFirst := run(tenants.DeleterConfig{Store: db, Batch: batch, Pause: 5 * time.Millisecond,
		Interval: 10 * time.Millisecond, Lease: 5 * time.Second, Progress: progress(logs[0])})
	waitBatches(t, logs[0], 1)
	stopSecond := run(tenants.DeleterConfig{Store: db, Batch: batch, Pause: time.Millisecond,
		Interval: 10 * time.Millisecond, Progress: progress(logs[1])})
	t.Cleanup(stopSecond)
	waitBatches(t, logs[0], 8)
	stopFirst()
	logs[0].mu.Lock()
	firstDid := len(logs[0].batches)
	logs[0].mu.Unlock()

	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := svc.Get(ctx, victim.Tenant.ID)
		if errors.Is(err, model.ErrNotFound) {
			break
		}
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "the tenant is still there")
		select {
		case <-logs[1].n:
		case <-time.After(100 * time.Millisecond):
		}
	}

	var all []model.DeletionBatch
	for _, l := range logs {
		l.mu.Lock()
		all = append(all, l.batches...)
		l.mu.Unlock()
	}
	require.Len(t, logs[0].batches, firstDid, "the first deleter stopped")
	require.NotEmpty(t, logs[1].batches, "the second deleter continued")
	// The tasks, 1,000 with their attempts a statement, then one batch per
	// other table, the tenant's row last.
	var tables []string
	sums := map[string]int{}
	for i, b := range all {
		require.LessOrEqual(t, b.Rows, batch, "batch %d: %+v", i, b)
		require.False(t, b.Busy)
		sums[b.Table] += b.Rows
		sums["attempts"] += b.Attempts
		if b.Table != "tasks" {
			tables = append(tables, b.Table)
		} else {
			require.Empty(t, tables, "tasks after the other tables: batch %d", i)
			require.Equal(t, batch, b.Rows, "batch %d", i)
		}
		require.Equal(t, i == len(all)-1, b.Done, "batch %d", i)
	}
	require.Equal(t, []string{"schedules", "topics", "flow_limits", "idempotency_keys", "api_keys", "portal_links", "stats", "tenants"}, tables)
	require.Equal(t, tasks, sums["tasks"])
	require.Equal(t, 2*withAttempts, sums["attempts"])
	// The progress as the admin API reads it, after each batch.
	for i, p := range logs[0].progress {
		require.Equal(t, int64((i+1)*batch), p["tasks"], "after batch %d", i)
	}

	left := rowsOf(t, pool, victim.Tenant.ID)
	audit := left["audit"]
	delete(left, "audit")
	for table, n := range left {
		require.Zero(t, n, table)
	}
	require.GreaterOrEqual(t, audit, 3, "created, deletion asked, deleted")
	require.Equal(t, before, rowsOf(t, pool, bystander.Tenant.ID))
	_, err = svc.Authenticate(ctx, bystander.APIKey)
	require.NoError(t, err)
	t.Logf("deleted %d tasks with %d attempts in %d batches, %d of them by the first deleter", sums["tasks"], sums["attempts"], len(all), firstDid)
}

func waitBatches(t *testing.T, log *batchLog, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		log.mu.Lock()
		got := len(log.batches)
		log.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-log.n:
		case <-deadline:
			t.Fatalf("%d batches, want %d", got, n)
		}
	}
}
