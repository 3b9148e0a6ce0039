-- +goose Up

-- A tenant's rate limits and quotas, as the admin API shows them
-- (store.Limits): {"api_rate", "api_burst", "max_pending_tasks",
-- "dispatch_rate", "dispatch_concurrency", "targets": {host: {...}}}.
-- One document rather than columns: it is read whole (with the tenant, on
-- every authenticated call) and replaced whole, and per-host overrides are a
-- map. A constant default makes this a catalogue-only change, no rewrite.
ALTER TABLE tenants ADD COLUMN limits jsonb NOT NULL DEFAULT '{}';

-- No new index on tasks: the pending-task count (tenant, status in scheduled,
-- retrying, dispatching) is a range scan of tasks_tenant_status_recent, and
-- another index on the hottest table would tax every claim and record.

-- +goose Down
ALTER TABLE tenants DROP COLUMN limits;
