-- +goose Up

-- The idempotency keys of tasks and publishes that retention purged while
-- their key was still inside HOOKWHEEL_IDEMPOTENCY_WINDOW: a create
-- repeating such a key answers the remembered task (or publish) and stores
-- nothing, where it used to find no row holding the key and send the
-- webhook a second time. Written by the purge statement that deletes the
-- row, so a key is never without its row or its memory; deleted by the
-- purger once the window since the row's creation has passed.
--
-- snapshot is the row as it was purged, without body and headers (the
-- payload retention exists to delete): a repeat answers with the task's id,
-- status and settings. kind is 'task' or 'publish': their keys are two
-- namespaces, as the two unique indexes on tasks and publishes make them.
CREATE TABLE idempotency_keys (
    tenant_id  uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind       text        NOT NULL CHECK (kind IN ('task', 'publish')),
    key        text        NOT NULL,
    created_at timestamptz NOT NULL,
    snapshot   jsonb       NOT NULL,
    PRIMARY KEY (tenant_id, kind, key)
);

-- The purger's expiry: the oldest first, in bounded batches.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
