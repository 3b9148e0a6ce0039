package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/jackc/pgx/v5"
)

// Ordering keys: a tenant's tasks sharing an ordering_key are delivered one
// at a time, in (run_at, id) order. The whole protocol lives in Postgres, so
// it holds across nodes, partitions and crashes without the dispatcher
// knowing of keys:
//
//   - A claim (ClaimTasks) first takes a transaction-scoped advisory lock per
//     key among its tasks (lockOrderingKeys, in one global order, so two
//     claims never deadlock), then, in its own statement and so with a
//     snapshot taken after the locks, claims each keyed task only if it is
//     not blocked (orderingBlocked): no task of its key comes before it
//     unfinished, and none is in flight. A blocked task is parked instead:
//     status unchanged, next_attempt_at NULL, out of every due scan. The
//     lock makes two claims of one key see each other, even for a task
//     stored earlier in the order while a later one was being claimed.
//   - Whatever finishes a keyed task (an outcome, a cancel, a delete) or
//     moves it in the order (a reschedule) fires the trigger of migration
//     00019, which in the same transaction releases the key's head (its
//     next_attempt_at set back to its due time) and notifies the
//     dispatchers on DueNotifyChannel.
//   - A wake-up cannot be lost between a claim parking B and the release
//     finishing A, B's blocker. The release writes the head row even when
//     it was not parked, so if it wrote B first, the park waits for B's row
//     lock, commits after the release, and the claim's recheck
//     (releaseParked, run after its commit on what it parked) reads a
//     snapshot in which A is finished. If the park wrote B first, the
//     release's update waits for it and then sees B parked. Either way B
//     is released.
//   - A claim that parked and then failed to recheck (its node died between
//     the two) leaves tasks parked with no blocker: ReleaseOrphans, run by
//     the next owner of their partition when it takes it over, frees them.
//
// A task that goes dead releases its successor like one delivered.

// lockOrderingKeys serialises the claims of one key. Transaction-scoped, so
// it suits a transaction pooler, and released by the claim's commit.
const queryLockOrderingKeys = `-- name: LockOrderingKeys
SELECT count(pg_advisory_xact_lock(k)) FROM (
	SELECT DISTINCT hashtextextended(tenant_id::text || '/' || ordering_key, 0) AS k
	FROM tasks WHERE id = ANY($1::uuid[]) AND ordering_key IS NOT NULL
	ORDER BY 1
) keys`

// orderingBlocked is true of a keyed task t that must wait: a waiting task
// waits for every unfinished task of its key before it in the order, and any
// task waits while another of its key is in flight (claimed, or retrying:
// a task between attempts still holds its key). Each EXISTS is one probe of
// an index of migration 00023.
const orderingBlocked = `(t.ordering_key IS NOT NULL AND (
	(t.status = 'scheduled' AND EXISTS (SELECT 1 FROM tasks p
		WHERE p.tenant_id = t.tenant_id AND p.ordering_key = t.ordering_key
			AND p.status IN ('scheduled', 'retrying', 'dispatching') AND (p.run_at, p.id) < (t.run_at, t.id)))
	OR EXISTS (SELECT 1 FROM tasks p
		WHERE p.tenant_id = t.tenant_id AND p.ordering_key = t.ordering_key
			AND p.status IN ('retrying', 'dispatching') AND p.id <> t.id)))`

// releasedNotify announces a released task on commit, as InsertTask does.
const releasedNotify = `pg_notify('` + DueNotifyChannel + `',
	t.id::text || ' ' || (extract(epoch FROM t.next_attempt_at) * 1000000)::bigint::text)`

const queryReleaseParked = `-- name: ReleaseParked
UPDATE tasks t SET next_attempt_at = greatest(t.run_at, now())
WHERE t.id = ANY($1::uuid[]) AND t.next_attempt_at IS NULL AND t.status IN ('scheduled', 'retrying')
	AND NOT ` + orderingBlocked + `
RETURNING t.id, t.next_attempt_at, ` + releasedNotify

// releaseParked is the claim's recheck: of the tasks it just parked, those
// no longer blocked now that the claim has committed go back to the queue.
func (db *DB) releaseParked(ctx context.Context, parked []uuid.UUID) ([]model.DueTask, error) {
	rows, err := db.pool.Query(ctx, queryReleaseParked, parked)
	if err != nil {
		return nil, fmt.Errorf("recheck %d parked tasks: %w", len(parked), err)
	}
	released, err := pgx.CollectRows(rows, scanReleased)
	if err != nil {
		return nil, fmt.Errorf("recheck %d parked tasks: %w", len(parked), err)
	}
	return released, nil
}

func scanReleased(r pgx.CollectableRow) (model.DueTask, error) {
	var d model.DueTask
	var ignored *string
	err := r.Scan(&d.ID, &d.At, &ignored)
	return d, err
}

// The inner query walks the partitions' parked tasks (NULL next_attempt_at
// sorts last in tasks_due) and keeps the unblocked ones; OFFSET 0 keeps the
// LIMIT on what is released, not on what is read.
const queryReleaseOrphans = `-- name: ReleaseOrphans
UPDATE tasks t SET next_attempt_at = greatest(t.run_at, now())
FROM (
	SELECT id FROM tasks t
	WHERE t.partition = ANY($1) AND t.status IN ('scheduled', 'retrying') AND t.next_attempt_at IS NULL
		AND NOT ` + orderingBlocked + `
	LIMIT $2
) o
WHERE t.id = o.id AND t.next_attempt_at IS NULL AND t.status IN ('scheduled', 'retrying')
RETURNING t.id, t.next_attempt_at, ` + releasedNotify

// ReleaseOrphans frees up to limit parked tasks of the given partitions that
// nothing blocks any more (a claim parked them and its node died before its
// recheck), and announces them. A node calls it for the partitions it takes
// over; the released tasks are returned for its wheel.
func (db *DB) ReleaseOrphans(ctx context.Context, partitions []int16, limit int) ([]model.DueTask, error) {
	rows, err := db.pool.Query(ctx, queryReleaseOrphans, partitions, limit)
	if err != nil {
		return nil, fmt.Errorf("release orphaned parked tasks: %w", err)
	}
	released, err := pgx.CollectRows(rows, scanReleased)
	if err != nil {
		return nil, fmt.Errorf("release orphaned parked tasks: %w", err)
	}
	return released, nil
}
