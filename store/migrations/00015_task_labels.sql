-- +goose Up

-- Labels: a task (and a schedule, whose occurrences copy them) may carry a
-- JSON object of string keys to string values, and GET /v1/tasks and the
-- bulk replay filter on them by containment (labels @> {"team": "payments"}).
-- NULL when a task has none, which is most tasks: such a row costs nothing
-- more to write, and the index of 00017 leaves it out.
--
-- A nullable column with no default changes only the catalogue, but it takes
-- the table's ACCESS EXCLUSIVE lock, and a lock request waiting behind a long
-- transaction would queue every insert and claim behind it: lock_timeout
-- makes the migration fail instead (run it again when the table is quieter).
SET LOCAL lock_timeout = '5s';
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS labels jsonb;
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS labels jsonb;

-- +goose Down
ALTER TABLE schedules DROP COLUMN IF EXISTS labels;
ALTER TABLE tasks DROP COLUMN IF EXISTS labels;
