-- +goose Up

-- What each tenant's attempts did, minute by minute (GET /v1/stats). Every
-- dispatcher node counts in memory and adds its counts every few seconds,
-- all tenants and minutes in one statement, so that statistics cost no write
-- per attempt; several nodes add to the same rows. An attempt is counted by
-- the status it left its task in (attempts = delivered + retried + dead), and
-- by how late it started in lateness, the counts of a fixed histogram
-- (model.LatenessHistogram: under 0.25 ms, then buckets doubling in width,
-- the last unbounded) that add up bucket by bucket. No reference to tenants:
-- the rows go after two days whoever they belong to, and a reference would
-- cost a lookup per row added.
--
-- The current minute's rows are updated at every flush of every node: the
-- free space left in each page lets those updates stay on their page without
-- touching the indexes (HOT), the columns they change being in none.
CREATE TABLE task_stats_minutes (
    tenant_id uuid NOT NULL,
    minute    timestamptz NOT NULL,
    delivered bigint NOT NULL,
    retried   bigint NOT NULL,
    dead      bigint NOT NULL,
    lateness  bigint[] NOT NULL,
    PRIMARY KEY (tenant_id, minute)
) WITH (fillfactor = 70);

-- The purge deletes by age, across tenants.
CREATE INDEX task_stats_minutes_minute ON task_stats_minutes (minute);

-- +goose Down
DROP TABLE task_stats_minutes;
