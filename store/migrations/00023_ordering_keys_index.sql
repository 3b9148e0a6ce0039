-- +goose NO TRANSACTION
-- +goose Up

-- A key's unfinished tasks in delivery order: what the claim asks ("is any
-- task of this key before this one?") and what the release
-- asks ("which is first now?"), each one range probe however many keys a
-- tenant has. Partial, so tasks without a key and finished tasks are not in
-- it. Built CONCURRENTLY in a migration of its own, as 00017 says why.
DROP INDEX CONCURRENTLY IF EXISTS tasks_ordering_key;
CREATE INDEX CONCURRENTLY tasks_ordering_key ON tasks (tenant_id, ordering_key, run_at, id)
    WHERE ordering_key IS NOT NULL AND status IN ('scheduled', 'retrying', 'dispatching');

-- The key's task in flight (claimed, or between attempts), if any: at most
-- one row per key, so "is one in flight?" is one probe even when the key has
-- a million tasks waiting behind it.
DROP INDEX CONCURRENTLY IF EXISTS tasks_ordering_key_started;
CREATE INDEX CONCURRENTLY tasks_ordering_key_started ON tasks (tenant_id, ordering_key)
    WHERE ordering_key IS NOT NULL AND status IN ('retrying', 'dispatching');

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_ordering_key_started;
DROP INDEX CONCURRENTLY IF EXISTS tasks_ordering_key;
