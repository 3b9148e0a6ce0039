-- +goose Up
-- Every claim and every outcome writes a new version of the task row and an
-- entry for it in each index whose columns or predicate it matches; an
-- attempt row also ran a foreign-key check against tasks. This migration
-- removes what the dispatch path paid for and nothing reads.

-- Most tasks have no idempotency key: they need no entry in its unique index.
-- (NULL keys never conflicted; they only took up space and writes.)
ALTER TABLE tasks DROP CONSTRAINT tasks_idempotency_key;
CREATE UNIQUE INDEX tasks_idempotency_key ON tasks (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Attempts are only ever inserted by the statement that records them, joined
-- to the task row it updates under its claim, so the reference holds by
-- construction; the check cost a query per attempt. Tasks are never deleted
-- once attempted (only canceled, never-attempted schedule occurrences are),
-- so nothing relied on the cascade either.
ALTER TABLE attempts DROP CONSTRAINT attempts_task_id_fkey;

-- +goose Down
ALTER TABLE attempts ADD CONSTRAINT attempts_task_id_fkey FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE;
DROP INDEX tasks_idempotency_key;
ALTER TABLE tasks ADD CONSTRAINT tasks_idempotency_key UNIQUE (tenant_id, idempotency_key);
