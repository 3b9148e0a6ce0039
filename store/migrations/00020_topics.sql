-- +goose Up

-- Topics: a tenant's named sets of endpoint URLs. A webhook published to a
-- topic becomes one ordinary task per endpoint, made in the publish's
-- transaction, so that dispatch knows nothing of topics. The endpoints are a
-- JSON array ([{"url": ..., "name": ...}], at most 100) on the topic's row:
-- a publish reads them with the row, in one probe, and a topic is always
-- replaced whole. The name is compared byte for byte (COLLATE "C"), so that
-- the primary key also gives the listing's order, whatever the database's
-- collation.
CREATE TABLE topics (
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name        text COLLATE "C" NOT NULL,
    description text NOT NULL DEFAULT '',
    endpoints   jsonb NOT NULL DEFAULT '[]',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

-- One publish to a topic: the parent its tasks name in tasks.publish_id, and
-- the holder of the publish's idempotency key (its tasks hold none: their
-- webhooks carry their own id as Idempotency-Key). Keys of publishes are
-- unique among the tenant's publishes, apart from those of tasks. No foreign
-- key joins the two tables: the purger deletes a publish once retention has
-- deleted the last of its tasks (store.PurgeFinished), and a check on every
-- task insert would buy nothing.
CREATE TABLE publishes (
    id              uuid PRIMARY KEY,
    tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    topic           text NOT NULL,
    idempotency_key text,
    -- SHA-256 of the normalised request, as tasks.request_hash.
    request_hash    bytea,
    -- The tasks made, one per endpoint the topic had.
    task_count      integer NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX publishes_idempotency_key ON publishes (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- A publish's task says which publish, topic and endpoint it delivers for.
-- Nullable columns with no default change only the catalogue, and a task
-- that is not a publish's stores nothing more; the indexes reading them are
-- built concurrently by 00021. lock_timeout, as in 00015: the ALTER takes
-- the table's ACCESS EXCLUSIVE lock, and a request queued behind a long
-- transaction would hold up every insert and claim behind it.
SET LOCAL lock_timeout = '5s';
ALTER TABLE tasks
    ADD COLUMN IF NOT EXISTS publish_id uuid,
    ADD COLUMN IF NOT EXISTS topic text,
    ADD COLUMN IF NOT EXISTS endpoint_name text;

-- +goose Down
ALTER TABLE tasks DROP COLUMN IF EXISTS endpoint_name, DROP COLUMN IF EXISTS topic, DROP COLUMN IF EXISTS publish_id;
DROP TABLE IF EXISTS publishes;
DROP TABLE IF EXISTS topics;
