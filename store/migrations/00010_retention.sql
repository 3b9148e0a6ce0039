-- +goose NO TRANSACTION
-- +goose Up

-- Retention: finished tasks (delivered, dead, canceled) and their attempts
-- are deleted a while after they finished (store.PurgeFinished).
--
-- A finished task's updated_at is the time it finished: every statement that
-- finishes a task sets updated_at = now(), and no statement changes a
-- finished task without moving it out of the finished statuses (a replay
-- makes it scheduled). So no finished_at column is needed.

-- The tenant's own retention; NULL keeps the node default (HOOKWHEEL_RETENTION).
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS retention_ms bigint;

-- What the purger reads: per tenant, its finished tasks oldest first. A pass
-- probes it once per tenant and reads only the rows it deletes, so its cost
-- does not grow with the table; unfinished tasks are not in it at all. Every
-- update of a task already changes an indexed column (status or
-- next_attempt_at), so indexing updated_at makes no update lose HOT.
--
-- Built CONCURRENTLY so that an installation with a large tasks table keeps
-- writing while it builds (hence no transaction). A build interrupted half way
-- leaves an invalid index behind; the migration is then run again, and drops
-- it first.
DROP INDEX CONCURRENTLY IF EXISTS tasks_finished;
CREATE INDEX CONCURRENTLY tasks_finished ON tasks (tenant_id, updated_at)
    WHERE status IN ('delivered', 'dead', 'canceled');

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_finished;
ALTER TABLE tenants DROP COLUMN IF EXISTS retention_ms;
