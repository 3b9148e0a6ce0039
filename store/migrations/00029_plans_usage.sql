-- +goose Up

-- Plans: named sets of limits an operator gives tenants. limits holds the
-- same JSON as tenants.limits (model.Limits, tasks_per_day and
-- deliveries_per_day included): a tenant's own limits override its plan's
-- field by field, and the plan's override the node's defaults.
CREATE TABLE plans (
    name       text        PRIMARY KEY,
    limits     jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- A tenant's plan; NULL: none (its own limits over the node's defaults).
-- ON DELETE RESTRICT: a plan some tenant is on cannot be deleted (the admin
-- API answers 409).
ALTER TABLE tenants ADD COLUMN plan text REFERENCES plans (name) ON DELETE RESTRICT;

-- The tenants on a plan: the plan's delete checks for them.
CREATE INDEX tenants_plan ON tenants (plan) WHERE plan IS NOT NULL;

-- What each tenant used, per UTC day. No reference to tenants: usage
-- outlives a deleted tenant. A day's counts are spread over shards that
-- readers sum, so that writers rarely wait on one row: shard 0 is written
-- only by task creates under a tasks_per_day check (tasks_created, in the
-- transaction that inserts the tasks; it is the row the check locks),
-- shards 1..16 by the attempt recorders, each statement choosing one, and
-- shards 17..48 by the other task creates (tasks_created, one chosen at
-- random per statement; 33..48 for transactional enqueue, whose
-- application transactions may hold their row for long).
CREATE TABLE usage_days (
    tenant_id       uuid     NOT NULL,
    day             date     NOT NULL,
    shard           smallint NOT NULL CHECK (shard >= 0),
    tasks_created   bigint   NOT NULL DEFAULT 0,
    deliveries      bigint   NOT NULL DEFAULT 0,
    attempts        bigint   NOT NULL DEFAULT 0,
    failed_attempts bigint   NOT NULL DEFAULT 0,
    bytes_sent      bigint   NOT NULL DEFAULT 0,
    bytes_received  bigint   NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day, shard)
);

-- The admin usage report and the purge of rows past 400 days read by day.
CREATE INDEX usage_days_day ON usage_days (day);

-- +goose Down
DROP TABLE usage_days;
ALTER TABLE tenants DROP COLUMN plan;
DROP TABLE plans;
