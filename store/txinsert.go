package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Querier runs statements on a connection the caller holds, or in a
// transaction it has begun: pgx.Tx, *pgx.Conn and *pgxpool.Pool are each
// one, and so is the store's own pool.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxStore runs the statements that create tasks through a Querier of the
// caller's, so that a program sharing hookwheel's database can create
// tasks in its own transaction: they commit, and are announced to the
// dispatchers, with the program's writes, or vanish with them. They are
// the very statements of DB.InsertTask, DB.InsertTasks, DB.InsertPublishes,
// DB.CountPendingTasks, DB.HasIdempotencyKey and DB.HasPublishKey
// (tasks.Creator), run on another connection. DB.WithTasksCreated runs
// them, through a TxStore, in a transaction of its own.
//
// The statements need the extended protocol, which pgx uses unless the
// connection's default_query_exec_mode is exec or simple_protocol: only
// then can pgx encode headers and labels for their jsonb columns.
type TxStore struct {
	q Querier
	// locked: the store's own transaction holding the tenant's shard 0 of
	// tasks created today (DB.WithTasksCreated), where the count goes;
	// otherwise a caller's, counting in an enqueue shard.
	locked bool
}

// queryPickEnqueueShard picks, in random order, an enqueue shard of the
// tenant's day that no other open transaction counts in: the one whose
// transaction-scoped advisory lock it takes first (the two-int4 key space,
// apart from the ordering keys' bigint one). An application's transaction
// may stay open long after its insert, holding its shard's row; a second
// one picking the same shard would wait for its commit, and an application
// waiting on the second before committing the first would never finish.
// No row when every shard is taken by an open transaction. OFFSET 0 keeps
// the lock out of the subquery, so it is tried row by row in the random
// order and stops at the first taken, rather than on all 16 before sorting.
const queryPickEnqueueShard = `-- name: PickEnqueueShard
SELECT s::int2 FROM (SELECT s FROM generate_series($2::int, $3::int) s ORDER BY random() OFFSET 0) r
WHERE pg_try_advisory_xact_lock(hashtext('usage/' || $1::text), s)
LIMIT 1`

// shard is the shard of usage_days the statements count tasks created in:
// shard 0 under the daily quota's lock, else an enqueue shard no other open
// transaction holds (a random one when all are held).
func (s TxStore) shard(ctx context.Context, tenantID uuid.UUID) (int16, error) {
	if s.locked {
		return 0, nil
	}
	var shard int16
	err := s.q.QueryRow(ctx, queryPickEnqueueShard, tenantID, enqueueShardFirst, enqueueShardFirst+spreadShards-1).Scan(&shard)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return enqueueShard(), nil
	case err != nil:
		return 0, fmt.Errorf("pick the usage shard of tenant %s: %w", tenantID, err)
	}
	return shard, nil
}

// On returns the TxStore running its statements through q. It refuses a q
// in the exec or simple_protocol mode where it can see the mode (pgx.Tx,
// *pgx.Conn, *pgxpool.Pool), before a statement fails in the caller's
// transaction.
func On(q Querier) (TxStore, error) {
	var mode pgx.QueryExecMode
	switch c := q.(type) {
	case interface{ Conn() *pgx.Conn }: // pgx.Tx
		mode = c.Conn().Config().DefaultQueryExecMode
	case *pgx.Conn:
		mode = c.Config().DefaultQueryExecMode
	case *pgxpool.Pool:
		mode = c.Config().ConnConfig.DefaultQueryExecMode
	}
	if mode == pgx.QueryExecModeExec || mode == pgx.QueryExecModeSimpleProtocol {
		return TxStore{}, fmt.Errorf("pgx's %q query exec mode (default_query_exec_mode) cannot encode hookwheel's parameters: "+
			"use cache_statement (pgx's default), cache_describe or describe_exec", mode)
	}
	return TxStore{q: q}, nil
}

// InsertTask is DB.InsertTask through the caller's querier. The
// notification of a task, when notifyDue asks for it, goes out when the
// caller's transaction commits, and never if it rolls back. An idempotency
// key another open transaction is inserting waits for that transaction to
// end; in a repeatable read or serializable transaction, a key committed by
// another after this one's snapshot fails with a serialization error, which
// the caller retries as for any such error.
func (s TxStore) InsertTask(ctx context.Context, t *model.Task, notifyDue bool) (existing *model.Task, created bool, err error) {
	shard, err := s.shard(ctx, t.TenantID)
	if err != nil {
		return nil, false, err
	}
	return insertTask(ctx, s.q, shard, t, notifyDue)
}

// InsertTasks is DB.InsertTasks through the caller's querier, announcing
// the tasks due before notifyBefore when the caller's transaction commits.
func (s TxStore) InsertTasks(ctx context.Context, tasks []*model.Task, notifyBefore time.Time) ([]model.InsertResult, error) {
	if len(tasks) == 0 {
		return insertTasks(ctx, s.q, enqueueShard(), tasks, notifyBefore)
	}
	shard, err := s.shard(ctx, tasks[0].TenantID)
	if err != nil {
		return nil, err
	}
	return insertTasks(ctx, s.q, shard, tasks, notifyBefore)
}

// CountPendingTasks is DB.CountPendingTasks through the caller's querier:
// inside its transaction, the tasks it inserted so far count.
func (s TxStore) CountPendingTasks(ctx context.Context, tenantID uuid.UUID, upTo int) (int, error) {
	return countPendingTasks(ctx, s.q, tenantID, upTo)
}

// HasIdempotencyKey is DB.HasIdempotencyKey through the caller's querier.
func (s TxStore) HasIdempotencyKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error) {
	return hasIdempotencyKey(ctx, s.q, tenantID, key)
}

// Not tenantColumns: a program creating tasks needs the tenant's settings,
// never its signing secrets, so its role may be granted these columns alone
// (and plans, whose limits come with them).
const queryGetTenantSettings = `-- name: GetTenantSettings
SELECT id, retry_max_attempts, retry_min_backoff_ms, retry_max_backoff_ms, limits, target_allow_cidrs, plan,
	` + tenantPlanLimits + `
FROM tenants WHERE id = $1`

// GetTenantSettings reads what creating a tenant's tasks depends on: its
// retry defaults, limits and granted target ranges (the Tenant's other
// fields stay zero). An unknown id is model.ErrNotFound.
func (s TxStore) GetTenantSettings(ctx context.Context, id uuid.UUID) (*model.Tenant, error) {
	var (
		t          model.Tenant
		minB, maxB *int64
	)
	err := s.q.QueryRow(ctx, queryGetTenantSettings, id).Scan(&t.ID, &t.Retry.MaxAttempts, &minB, &maxB,
		&t.LimitOverrides, &t.TargetAllowCIDRs, &t.Plan, &t.PlanLimits)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get settings of tenant %s: %w", id, err)
	}
	t.Retry.MinBackoff, t.Retry.MaxBackoff = millisToDuration(minB), millisToDuration(maxB)
	t.Limits = t.LimitOverrides.Resolve(t.PlanLimits)
	return &t, nil
}
