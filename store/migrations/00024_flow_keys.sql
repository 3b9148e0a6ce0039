-- +goose Up

-- Flow-control keys: a task may name a flow_key, and its tenant may give a
-- key a rate and a parallelism (flow_limits). The dispatcher holds each
-- send of a keyed task to its key's limits in Redis, as it holds a tenant's
-- sends to a host to its dispatch limits; Postgres only stores the key and
-- its limits, and the claim reads the limits with the task (one probe of
-- the primary key below; none for a task without a key).
--
-- The key '*' holds the limits of every key of the tenant that has none of
-- its own: each such key is limited apart, by the same numbers.
CREATE TABLE flow_limits (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key         text COLLATE "C" NOT NULL,
    -- At most rate sends per period_ms; 0: no rate limit.
    rate        integer NOT NULL DEFAULT 0 CHECK (rate >= 0),
    period_ms   bigint NOT NULL DEFAULT 1000 CHECK (period_ms > 0),
    -- At most parallelism sends in flight at once; 0: no limit.
    parallelism integer NOT NULL DEFAULT 0 CHECK (parallelism >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key),
    CHECK (rate > 0 OR parallelism > 0)
);

-- Nullable with no default: only the catalogue changes, and a task without
-- a key stores nothing more. lock_timeout: see 00015.
SET LOCAL lock_timeout = '5s';
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS flow_key text;
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS flow_key text;

-- +goose Down
ALTER TABLE schedules DROP COLUMN IF EXISTS flow_key;
ALTER TABLE tasks DROP COLUMN IF EXISTS flow_key;
DROP TABLE IF EXISTS flow_limits;
