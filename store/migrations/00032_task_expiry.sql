-- +goose NO TRANSACTION
-- +goose Up

-- Expiry: a task may carry expires_at, after which no attempt of it starts;
-- one that falls due (or would be retried) past it ends 'expired', a
-- finished status like dead, without an attempt. NULL, on most rows, never
-- expires and costs nothing to write.
--
-- The column takes the table's ACCESS EXCLUSIVE lock for a catalogue change
-- only; as in 00018, lock_timeout makes the migration fail rather than queue
-- every insert and claim behind a long transaction, and the DO block is one
-- transaction of its own, so SET LOCAL holds for it alone.
--
-- The status check of 00001 is unnamed, so Postgres named it
-- tasks_status_check; it is replaced by one that admits 'expired'. NOT VALID
-- skips the scan under the lock (no stored row breaks the wider check), and
-- the VALIDATE below reads the table under a lock that lets writes go on.
-- +goose StatementBegin
DO $$
BEGIN
    SET LOCAL lock_timeout = '5s';
    ALTER TABLE tasks ADD COLUMN IF NOT EXISTS expires_at timestamptz;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'tasks_status_known') THEN
        ALTER TABLE tasks DROP CONSTRAINT IF EXISTS tasks_status_check;
        ALTER TABLE tasks ADD CONSTRAINT tasks_status_known
            CHECK (status IN ('scheduled', 'dispatching', 'retrying', 'delivered', 'dead', 'canceled', 'expired'))
            NOT VALID;
    END IF;
END
$$;
-- +goose StatementEnd
ALTER TABLE tasks VALIDATE CONSTRAINT tasks_status_known;

-- Retention purges expired tasks like the other finished ones: the purger's
-- index (00010) gains the status. The new index is built CONCURRENTLY before
-- the old one goes, so the purger always has one; store.finishedStatuses
-- must read exactly as this predicate. An interrupted build leaves an
-- invalid index, which running the migration again drops first.
DROP INDEX CONCURRENTLY IF EXISTS tasks_finished_or_expired;
CREATE INDEX CONCURRENTLY tasks_finished_or_expired ON tasks (tenant_id, updated_at)
    WHERE status IN ('delivered', 'dead', 'canceled', 'expired');
DROP INDEX CONCURRENTLY IF EXISTS tasks_finished;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_finished ON tasks (tenant_id, updated_at)
    WHERE status IN ('delivered', 'dead', 'canceled');
DROP INDEX CONCURRENTLY IF EXISTS tasks_finished_or_expired;
-- Expired tasks read as dead to the version before, which knows no other
-- final failure.
UPDATE tasks SET status = 'dead' WHERE status = 'expired';
ALTER TABLE tasks DROP CONSTRAINT IF EXISTS tasks_status_known;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check
    CHECK (status IN ('scheduled', 'dispatching', 'retrying', 'delivered', 'dead', 'canceled')) NOT VALID;
ALTER TABLE tasks DROP COLUMN IF EXISTS expires_at;
