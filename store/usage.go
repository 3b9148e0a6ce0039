package store

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Usage: what each tenant used per UTC day, in usage_days, a day's counts
// spread over shards that readers sum. tasks_created is written by the
// statements that insert tasks (one more CTE in each, so a count commits
// with its rows, and an idempotent repeat, which inserts nothing, counts
// nothing). A count holds its row locked from its statement to its commit,
// so the shard decides who waits for whom:
//
//   - 0: the creates of a tenant with tasks_per_day, whose check locks that
//     row (WithTasksCreated) so that they take turns, and the materializer,
//     which holds the rows of its tenants' days for the same reason;
//   - 1..16: the attempt recorders';
//   - createShards: other creates, one at random per statement, so that a
//     tenant's concurrent creates rarely wait for each other's commit;
//   - enqueueShards: transactional enqueue, apart from the others because
//     an application's transaction may hold its row for long, and one that
//     no other open transaction holds (TxStore.shard), since an application
//     may wait on one open transaction before committing another.
//
// The day is Postgres's (usageDay): every node counts on the same day
// whatever its clock, and a transaction counts and checks on one day, its
// start's.

// The shards of creates without the daily quota's lock, and of
// transactional enqueue: 16 each, so that a tenant's day has at most 49
// rows (the recorders' included).
const (
	createShardFirst  = 17
	enqueueShardFirst = 33
	spreadShards      = 16
)

// recordShard picks the shard (1..16) an attempt recorder's statement
// counts in.
func recordShard() int16 { return int16(1 + rand.IntN(spreadShards)) }

// createShard picks the shard a create without the quota's lock counts in.
func createShard() int16 { return int16(createShardFirst + rand.IntN(spreadShards)) }

// enqueueShard picks the shard a transactional enqueue's statement counts in.
func enqueueShard() int16 { return int16(enqueueShardFirst + rand.IntN(spreadShards)) }

// usageDay is the UTC day of the transaction's start, the day a count goes to.
const usageDay = `(now() AT TIME ZONE 'UTC')::date`

// countTasksCreated is the CTE that adds the rows of the CTE "inserted"
// (which returns tenant_id, and the shard to count in as shard) to their
// tenants' tasks_created, in tenant order so that two statements counting
// for the same tenants wait for each other in one direction only. A
// statement holding shard 0's lock (LockTasksCreated) updates it under
// that lock.
const countTasksCreated = `counted AS (
	INSERT INTO usage_days AS u (tenant_id, day, shard, tasks_created)
	SELECT tenant_id, ` + usageDay + `, shard, count(*) FROM inserted GROUP BY tenant_id, shard ORDER BY tenant_id
	ON CONFLICT (tenant_id, day, shard) DO UPDATE SET tasks_created = u.tasks_created + excluded.tasks_created
)`

// An upsert rather than SELECT ... FOR UPDATE, so that the first create of
// a day locks a row too: the update changes nothing but takes the row's
// lock, and waits for a holder to commit, then returns the count as that
// holder left it, plus the other shards' (transactional enqueue's, read as
// committed: that path is unlocked).
const queryLockTasksCreated = `-- name: LockTasksCreated
INSERT INTO usage_days AS u (tenant_id, day, shard)
SELECT DISTINCT t, ` + usageDay + `, 0 FROM unnest($1::uuid[]) t ORDER BY 1
ON CONFLICT (tenant_id, day, shard) DO UPDATE SET tasks_created = u.tasks_created
RETURNING tenant_id, tasks_created + (
	SELECT coalesce(sum(o.tasks_created), 0) FROM usage_days o WHERE o.tenant_id = u.tenant_id AND o.day = u.day AND o.shard <> 0)`

// lockTasksCreated locks the tenants' counts of tasks created today (shard
// 0 of usage_days), making the rows that do not exist yet, and returns the
// counts. The locks last until q's transaction ends.
func lockTasksCreated(ctx context.Context, q Querier, tenantIDs []uuid.UUID) (map[uuid.UUID]int, error) {
	rows, err := q.Query(ctx, queryLockTasksCreated, tenantIDs)
	if err != nil {
		return nil, fmt.Errorf("lock tasks created today: %w", err)
	}
	counts := make(map[uuid.UUID]int, len(tenantIDs))
	var (
		id uuid.UUID
		n  int
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		counts[id] = n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("lock tasks created today: %w", err)
	}
	return counts, nil
}

const queryTasksCreated = `-- name: TasksCreated
SELECT coalesce(sum(tasks_created), 0) FROM usage_days WHERE tenant_id = $1 AND day = ` + usageDay

// WithTasksCreated runs fn in a transaction holding the lock on the
// tenant's count of tasks created today, with that count, and with st
// running the create statements in the transaction: the daily task quota's
// check. Concurrent creates of the tenant wait for each other from the
// lock to their commit, so the count each reads is exact; creates of other
// tenants do not wait. fn's error rolls everything back and is returned.
//
// Cost over a create without the quota: the transaction's BEGIN and
// COMMIT, and this statement, so three round trips.
func (db *DB) WithTasksCreated(ctx context.Context, tenantID uuid.UUID, fn func(st model.CreateStore, created int) error) error {
	return pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		counts, err := lockTasksCreated(ctx, tx, []uuid.UUID{tenantID})
		if err != nil {
			return err
		}
		return fn(TxStore{q: tx, locked: true}, counts[tenantID])
	})
}

// WithTasksCreated is DB.WithTasksCreated in the caller's transaction,
// without the lock: the count is read, not locked, since the caller's
// transaction may stay open long after its insert, and a lock held that
// long would serialise every create of the tenant behind it. Concurrent
// creates may together pass the quota by what they add.
func (s TxStore) WithTasksCreated(ctx context.Context, tenantID uuid.UUID, fn func(st model.CreateStore, created int) error) error {
	var n int
	if err := s.q.QueryRow(ctx, queryTasksCreated, tenantID).Scan(&n); err != nil {
		return fmt.Errorf("read tasks created today by tenant %s: %w", tenantID, err)
	}
	return fn(s, n)
}

// TasksCreatedToday reads how many tasks the tenant created today (UTC,
// Postgres's day), as the daily quota counts them.
func (db *DB) TasksCreatedToday(ctx context.Context, tenantID uuid.UUID) (int, error) {
	var n int
	if err := db.pool.QueryRow(ctx, queryTasksCreated, tenantID).Scan(&n); err != nil {
		return 0, fmt.Errorf("read tasks created today by tenant %s: %w", tenantID, err)
	}
	return n, nil
}
