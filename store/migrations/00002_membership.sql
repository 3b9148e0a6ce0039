-- +goose Up

-- Every dispatcher node registers here and renews its row; a row whose
-- expires_at has passed is a dead node.
CREATE TABLE nodes (
    id           uuid PRIMARY KEY,
    name         text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);

-- Tasks are split into 256 partitions by the last byte of their id (random
-- in a UUIDv7). Each partition is leased to one live node at a time: only its
-- owner loads and claims its tasks. Row locks on this table arbitrate.
CREATE TABLE partitions (
    id               smallint PRIMARY KEY CHECK (id BETWEEN 0 AND 255),
    owner            uuid,
    lease_expires_at timestamptz
);
INSERT INTO partitions (id) SELECT generate_series(0, 255);

ALTER TABLE tasks ADD COLUMN partition smallint GENERATED ALWAYS AS (get_byte(uuid_send(id), 15)) STORED;
-- The node whose sender owns a dispatching task: when that node dies, the
-- task is handed back at once rather than when its lease runs out.
ALTER TABLE tasks ADD COLUMN claimed_by uuid;

DROP INDEX tasks_due;
CREATE INDEX tasks_due ON tasks (partition, next_attempt_at, id) WHERE status IN ('scheduled', 'retrying');
DROP INDEX tasks_leased;
CREATE INDEX tasks_leased ON tasks (partition, lease_expires_at) WHERE status = 'dispatching';

-- +goose Down
DROP INDEX tasks_leased;
CREATE INDEX tasks_leased ON tasks (lease_expires_at) WHERE status = 'dispatching';
DROP INDEX tasks_due;
CREATE INDEX tasks_due ON tasks (next_attempt_at, id) WHERE status IN ('scheduled', 'retrying');
ALTER TABLE tasks DROP COLUMN claimed_by;
ALTER TABLE tasks DROP COLUMN partition;
DROP TABLE partitions;
DROP TABLE nodes;
