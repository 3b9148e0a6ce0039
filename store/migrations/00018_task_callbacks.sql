-- +goose NO TRANSACTION
-- +goose Up

-- Callbacks: a task (and a schedule, whose occurrences copy them) may name
-- a URL that hears of its delivery (callback) and one that hears of its
-- death (failure_callback). The report is a task of its own, inserted by the
-- statement that records the source's final attempt (store.RecordAttempts):
-- callback_of names its source, and the source's callback_task_id the
-- latest report it produced. All four are NULL on most rows, which then
-- cost nothing more to write.
--
-- Nullable columns with no default change only the catalogue, but they
-- take the tables' ACCESS EXCLUSIVE lock, and a lock request queued behind a
-- long transaction would queue every insert and claim behind it: as in 00015
-- and 00016, lock_timeout makes the migration fail instead (run it again
-- when the tables are quieter). The index below must be built outside a
-- transaction, so the columns are added in a DO block, one statement and so
-- one transaction of its own, where SET LOCAL holds for that block alone and
-- cannot cut the index build short. IF NOT EXISTS lets the migration run
-- again after an interrupted build.
--
-- A callback task never has callbacks of its own, so that reports never
-- report on each other; the check says so to every writer. NOT VALID skips
-- the scan of existing rows, which cannot break it (the columns are new),
-- and is enforced on every row written from now on.
-- +goose StatementBegin
DO $$
BEGIN
    SET LOCAL lock_timeout = '5s';
    ALTER TABLE tasks
        ADD COLUMN IF NOT EXISTS callback text,
        ADD COLUMN IF NOT EXISTS failure_callback text,
        ADD COLUMN IF NOT EXISTS callback_of uuid,
        ADD COLUMN IF NOT EXISTS callback_task_id uuid;
    ALTER TABLE schedules
        ADD COLUMN IF NOT EXISTS callback text,
        ADD COLUMN IF NOT EXISTS failure_callback text;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'tasks_callback_has_no_callbacks') THEN
        ALTER TABLE tasks ADD CONSTRAINT tasks_callback_has_no_callbacks
            CHECK (callback_of IS NULL OR (callback IS NULL AND failure_callback IS NULL)) NOT VALID;
    END IF;
END
$$;
-- +goose StatementEnd

-- GET /v1/tasks?callback_of=<id> lists the reports of one task. Partial, so
-- that inserting an ordinary task never touches it. Built CONCURRENTLY, as
-- 00010's, 00013's and 00017's are, so that an installation with a large
-- tasks table keeps writing while it builds; an interrupted build leaves an
-- invalid index, which running the migration again drops first.
DROP INDEX CONCURRENTLY IF EXISTS tasks_callback_of;
CREATE INDEX CONCURRENTLY tasks_callback_of ON tasks (callback_of) WHERE callback_of IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_callback_of;
ALTER TABLE tasks DROP CONSTRAINT IF EXISTS tasks_callback_has_no_callbacks;
ALTER TABLE schedules DROP COLUMN IF EXISTS failure_callback, DROP COLUMN IF EXISTS callback;
ALTER TABLE tasks DROP COLUMN IF EXISTS callback_task_id, DROP COLUMN IF EXISTS callback_of,
    DROP COLUMN IF EXISTS failure_callback, DROP COLUMN IF EXISTS callback;
