-- +goose Up

-- A tenant is one customer: its own API keys, signing secret and tasks.
CREATE TABLE tenants (
    id             uuid PRIMARY KEY,
    name           text NOT NULL,
    signing_secret text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- API keys are stored only as a hash of their secret part; the key id is the
-- public prefix that finds the row without scanning.
CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    secret_hash bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

-- The task row is the queue: whatever is committed here is eventually sent.
CREATE TABLE tasks (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    status           text NOT NULL CHECK (status IN ('scheduled', 'dispatching', 'retrying', 'delivered', 'dead', 'canceled')),
    url              text NOT NULL,
    method           text NOT NULL,
    headers          jsonb NOT NULL DEFAULT '{}',
    body             bytea NOT NULL DEFAULT '',
    run_at           timestamptz NOT NULL,
    -- Set while the task waits for an attempt (scheduled or retrying); NULL once finished.
    next_attempt_at  timestamptz,
    timeout_ms       integer NOT NULL,
    max_attempts     integer NOT NULL,
    min_backoff_ms   bigint NOT NULL,
    max_backoff_ms   bigint NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    last_status_code integer,
    last_error       text,
    idempotency_key  text,
    -- SHA-256 of the normalised create request, to tell a replay from a reused key.
    request_hash     bytea,
    -- Who owns a dispatching task and until when: a claim that outlives its
    -- lease (the owner died mid-send) is handed back to the queue.
    claim_token      uuid,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT tasks_idempotency_key UNIQUE (tenant_id, idempotency_key)
);

-- "What falls due next": a partial index holding only waiting tasks, so a range
-- scan over the next window costs the same with ten million pending tasks far
-- in the future as with ten, and finished tasks never weigh on it.
CREATE INDEX tasks_due ON tasks (next_attempt_at, id) WHERE status IN ('scheduled', 'retrying');
-- Dispatching rows whose owner may have died.
CREATE INDEX tasks_leased ON tasks (lease_expires_at) WHERE status = 'dispatching';
-- Tenant listings, newest first (ids are UUIDv7, so id order is creation order).
CREATE INDEX tasks_tenant_recent ON tasks (tenant_id, id DESC);
CREATE INDEX tasks_tenant_status_recent ON tasks (tenant_id, status, id DESC);

CREATE TABLE attempts (
    task_id       uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt       integer NOT NULL,
    started_at    timestamptz NOT NULL,
    duration_ms   integer NOT NULL,
    status_code   integer,
    error         text,
    outcome       text NOT NULL CHECK (outcome IN ('success', 'retry', 'fail')),
    response_body text,
    PRIMARY KEY (task_id, attempt)
);

-- +goose Down
DROP TABLE attempts;
DROP TABLE tasks;
DROP TABLE api_keys;
DROP TABLE tenants;
