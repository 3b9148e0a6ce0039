package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// finishedStatuses are the statuses a task never leaves on its own; they
// must read exactly as the predicate of the tasks_finished_or_expired index
// (migration 00032), or the planner cannot use it.
const finishedStatuses = `('delivered', 'dead', 'canceled', 'expired')`

// One lateral probe of tasks_finished_or_expired per tenant with a retention (its own or
// the default) reads that tenant's oldest finished tasks, stopping at the
// first one still within retention: a pass costs a probe per tenant plus the
// rows it deletes, whatever the size of the table. FOR UPDATE SKIP LOCKED
// leaves alone a task being replayed (the replay holds its row) and the rows
// another purger has taken during a lease handover, so two purgers never
// wait on each other's rows; it also re-reads each row's latest version, so
// a task replayed since the statement's snapshot is no longer finished and
// is left out. The deletes take their rows by primary key from an array:
// joined to the batch instead, the cached generic plan (which cannot see
// the batch's size) hashed the batch and read both tables whole.
const queryPurgeFinished = `-- name: PurgeFinished
WITH doomed AS (
	SELECT d.id FROM tenants tn
	CROSS JOIN LATERAL (
		SELECT t.id FROM tasks t
		WHERE t.tenant_id = tn.id AND t.status IN ` + finishedStatuses + `
			AND t.updated_at < $1::timestamptz - coalesce(tn.retention_ms, $2::bigint) * interval '1 millisecond'
		ORDER BY t.updated_at
		LIMIT $3
		FOR UPDATE OF t SKIP LOCKED
	) d
	WHERE coalesce(tn.retention_ms, $2::bigint) IS NOT NULL
	LIMIT $3
), purged AS (
	DELETE FROM tasks
	WHERE id = ANY (ARRAY(SELECT id FROM doomed)) AND status IN ` + finishedStatuses + `
	RETURNING id, publish_id, tenant_id, idempotency_key, created_at,
		CASE WHEN idempotency_key IS NOT NULL THEN to_jsonb(tasks.*) - 'body' - 'headers' END AS snapshot
), purged_attempts AS (
	DELETE FROM attempts
	WHERE task_id = ANY (ARRAY(SELECT id FROM purged))
	RETURNING 1
), remembered AS (
	INSERT INTO idempotency_keys (tenant_id, kind, key, created_at, snapshot)
	SELECT tenant_id, 'task', idempotency_key, created_at, snapshot FROM purged
	WHERE idempotency_key IS NOT NULL AND $4::bigint > 0
		AND created_at > $1::timestamptz - $4::bigint * interval '1 millisecond'
	ON CONFLICT DO NOTHING
	RETURNING 1
)
SELECT (SELECT count(*) FROM purged), (SELECT count(*) FROM purged_attempts),
	ARRAY(SELECT DISTINCT publish_id FROM purged WHERE publish_id IS NOT NULL), (SELECT count(*) FROM remembered)`

// A publish goes with the last of its tasks. Whether any is left must be
// read by a statement that sees the deletes of every other purger that
// committed, and two purgers that each delete one of a publish's last two
// tasks at once must not each see the other's: so the publishes are first
// locked, in id order, which waits for a purger holding them to commit, and
// then checked by a statement of their own, whose snapshot comes after
// that commit. The later of the two then finds nothing left.
const (
	queryLockPublishes = `-- name: LockPublishes
SELECT id FROM publishes WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`
	queryPurgePublishes = `-- name: PurgePublishes
WITH purged AS (
	DELETE FROM publishes p
	WHERE p.id = ANY($1::uuid[]) AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.publish_id = p.id)
	RETURNING p.tenant_id, p.idempotency_key, p.created_at, to_jsonb(p.*) AS snapshot
), remembered AS (
	INSERT INTO idempotency_keys (tenant_id, kind, key, created_at, snapshot)
	SELECT tenant_id, 'publish', idempotency_key, created_at, snapshot FROM purged
	WHERE idempotency_key IS NOT NULL AND $3::bigint > 0
		AND created_at > $2::timestamptz - $3::bigint * interval '1 millisecond'
	ON CONFLICT DO NOTHING
	RETURNING 1
)
SELECT (SELECT count(*) FROM purged), (SELECT count(*) FROM remembered)`
)

// PurgeFinished deletes up to p.Limit finished tasks (delivered, dead or
// canceled) that finished longer ago than their tenant's retention (its own,
// else p.DefaultRetention), with their attempts, in one statement: a task
// is never seen without its attempts, nor attempts without their task. Each
// tenant's oldest go first; a task that is not finished is never deleted,
// whatever its age, and neither is one replayed while the pass runs.
//
// A finished task's updated_at is when it finished (see migration 00010).
// A pass that deletes Limit tasks may have left more behind: call it again.
//
// A publish to a topic is deleted in the same transaction as the last of
// its tasks; a pass that deletes none of a publish's tasks costs nothing
// more.
func (db *DB) PurgeFinished(ctx context.Context, p model.PurgeParams) (model.PurgeResult, error) {
	var defaultMs *int64
	if p.DefaultRetention > 0 {
		ms := p.DefaultRetention.Milliseconds()
		defaultMs = &ms
	}
	var r model.PurgeResult
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		var publishes []uuid.UUID
		windowMs := p.IdempotencyWindow.Milliseconds()
		if err := tx.QueryRow(ctx, queryPurgeFinished, p.Now, defaultMs, p.Limit, windowMs).Scan(&r.Tasks, &r.Attempts,
			&publishes, &r.Remembered); err != nil {
			return err
		}
		if len(publishes) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, queryLockPublishes, publishes); err != nil {
			return fmt.Errorf("lock %d publishes: %w", len(publishes), err)
		}
		var remembered int
		if err := tx.QueryRow(ctx, queryPurgePublishes, publishes, p.Now, windowMs).Scan(&r.Publishes, &remembered); err != nil {
			return fmt.Errorf("purge publishes: %w", err)
		}
		r.Remembered += remembered
		return nil
	})
	if err != nil {
		return model.PurgeResult{}, fmt.Errorf("purge finished tasks: %w", err)
	}
	return r, nil
}

// The oldest first through idempotency_keys_created_at, a bounded batch per
// statement.
const queryExpireIdempotencyKeys = `-- name: ExpireIdempotencyKeys
DELETE FROM idempotency_keys
WHERE (tenant_id, kind, key) IN (
	SELECT tenant_id, kind, key FROM idempotency_keys WHERE created_at <= $1 ORDER BY created_at LIMIT $2
)`

// ExpireIdempotencyKeys forgets up to limit remembered idempotency keys of
// tasks and publishes created at or before createdBefore (the purge's now
// less the window): a repeat of one of them creates a new task again. A
// pass that forgets limit keys may have left more: call it again.
func (db *DB) ExpireIdempotencyKeys(ctx context.Context, createdBefore time.Time, limit int) (int, error) {
	tag, err := db.pool.Exec(ctx, queryExpireIdempotencyKeys, createdBefore, limit)
	if err != nil {
		return 0, fmt.Errorf("expire idempotency keys: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// A probe of tasks_finished_or_expired per tenant, as in PurgeFinished: min() over the
// whole index would read every tenant's finished tasks.
const queryOldestFinished = `-- name: OldestFinished
SELECT min(o.updated_at) FROM tenants tn
CROSS JOIN LATERAL (
	SELECT t.updated_at FROM tasks t
	WHERE t.tenant_id = tn.id AND t.status IN ` + finishedStatuses + `
	ORDER BY t.updated_at
	LIMIT 1
) o`

// OldestFinished returns when the task that finished longest ago, of those
// still kept, finished; ok is false when no finished task is kept.
func (db *DB) OldestFinished(ctx context.Context) (at time.Time, ok bool, err error) {
	var oldest *time.Time
	if err := db.pool.QueryRow(ctx, queryOldestFinished).Scan(&oldest); err != nil {
		return time.Time{}, false, fmt.Errorf("read the oldest finished task: %w", err)
	}
	if oldest == nil {
		return time.Time{}, false, nil
	}
	return *oldest, true, nil
}

const querySetTenantRetention = `-- name: SetTenantRetention
UPDATE tenants SET retention_ms = $2 WHERE id = $1
RETURNING ` + tenantColumns

// SetTenantRetention sets how long a tenant's finished tasks are kept; nil
// goes back to the node default. The purger reads it on its next pass.
func (db *DB) SetTenantRetention(ctx context.Context, id uuid.UUID, retention *time.Duration, audit model.AuditEntry) (*model.Tenant, error) {
	t, err := db.updateTenant(ctx, audit, querySetTenantRetention, id, durationToMillis(retention))
	if err != nil {
		return nil, fmt.Errorf("set retention of tenant %s: %w", id, err)
	}
	return t, nil
}

const querySetTenantOperationsURL = `-- name: SetTenantOperationsURL
UPDATE tenants SET operations_url = $2 WHERE id = $1
RETURNING ` + tenantColumns

// SetTenantOperationsURL sets where a tenant's operations events go; nil:
// nowhere.
func (db *DB) SetTenantOperationsURL(ctx context.Context, id uuid.UUID, url *string, audit model.AuditEntry) (*model.Tenant, error) {
	t, err := db.updateTenant(ctx, audit, querySetTenantOperationsURL, id, url)
	if err != nil {
		return nil, fmt.Errorf("set operations URL of tenant %s: %w", id, err)
	}
	return t, nil
}
