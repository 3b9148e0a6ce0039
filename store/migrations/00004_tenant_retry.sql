-- +goose Up

-- A tenant's default retry policy, field by field; NULL is hookwheel's default.
ALTER TABLE tenants
    ADD COLUMN retry_max_attempts   integer,
    ADD COLUMN retry_min_backoff_ms bigint,
    ADD COLUMN retry_max_backoff_ms bigint;

-- +goose Down
ALTER TABLE tenants
    DROP COLUMN retry_max_attempts,
    DROP COLUMN retry_min_backoff_ms,
    DROP COLUMN retry_max_backoff_ms;
