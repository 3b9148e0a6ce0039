-- +goose Up

-- A recurring webhook: each occurrence of cron in timezone becomes a task.
CREATE TABLE schedules (
    id             uuid PRIMARY KEY,
    tenant_id      uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    cron           text NOT NULL,
    timezone       text NOT NULL,
    paused         boolean NOT NULL DEFAULT false,
    url            text NOT NULL,
    method         text NOT NULL,
    headers        jsonb NOT NULL DEFAULT '{}',
    body           bytea NOT NULL DEFAULT '',
    timeout_ms     integer NOT NULL,
    max_attempts   integer NOT NULL,
    min_backoff_ms bigint NOT NULL,
    max_backoff_ms bigint NOT NULL,
    -- The next occurrence not yet materialised as a task; NULL while paused.
    next_run_at    timestamptz,
    -- The latest occurrence materialised as a task.
    last_run_at    timestamptz,
    deleted_at     timestamptz,
    -- Like tasks, schedules are materialised by the owner of their partition.
    partition      smallint GENERATED ALWAYS AS (get_byte(uuid_send(id), 15)) STORED,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedules_due ON schedules (partition, next_run_at) WHERE NOT paused AND deleted_at IS NULL;
CREATE INDEX schedules_tenant_recent ON schedules (tenant_id, id DESC) WHERE deleted_at IS NULL;

ALTER TABLE tasks
    ADD COLUMN schedule_id uuid REFERENCES schedules (id) ON DELETE CASCADE,
    -- The occurrence a scheduled task stands for; unlike run_at, never moved.
    ADD COLUMN occurrence_at timestamptz;
-- At most one task per (schedule, occurrence), however many nodes materialise.
CREATE UNIQUE INDEX tasks_schedule_occurrence ON tasks (schedule_id, occurrence_at) WHERE schedule_id IS NOT NULL;
CREATE INDEX tasks_tenant_schedule_recent ON tasks (tenant_id, schedule_id, id DESC) WHERE schedule_id IS NOT NULL;
CREATE INDEX tasks_tenant_created ON tasks (tenant_id, created_at);

-- +goose Down
DROP INDEX tasks_tenant_created;
DROP INDEX tasks_tenant_schedule_recent;
DROP INDEX tasks_schedule_occurrence;
ALTER TABLE tasks DROP COLUMN occurrence_at, DROP COLUMN schedule_id;
DROP TABLE schedules;
