-- +goose NO TRANSACTION
-- +goose Up

-- A claim of a task without an ordering key changes no indexed column: it
-- sets claim_token, claimed_by, lease_expires_at and attempts, leaving
-- status, next_attempt_at and updated_at as they were, and "dispatching" is
-- read from the token (store/claims.go). Postgres can then write the claimed
-- version of the row on its own page without a new entry in any index (a
-- heap-only update), for about 7 µs and 234 bytes of WAL a task against 18 µs
-- and 1,000 bytes (bench/results/2026-11-27-claim-cost.md).
--
-- Two things stand in its way, and go here:
--   - tasks_leased has lease_expires_at as its key: any index holding a
--     column the claim changes rules the heap-only update out. In flight
--     claims of keyed tasks (still status 'dispatching') are found through
--     tasks_dispatching instead, by partition, the lease read from the row.
--   - the new version needs room on its page. Tasks falling due together are
--     stored together and claimed in one statement, so a page needs room for
--     a second version of every row on it, and the claimed version is the
--     larger by its token, node and lease (40 bytes): with fillfactor 80
--     only 21 % of claims were heap-only, with 50 89 %, with 45 all of them.
--     The cost is disk: new pages are filled to 45 %, so the table takes up
--     to twice the room for the tasks it keeps (retention bounds them).
--     Existing pages keep their filling until rewritten.
-- Built CONCURRENTLY, as 00017 says why.
ALTER TABLE tasks SET (fillfactor = 45);
DROP INDEX CONCURRENTLY IF EXISTS tasks_dispatching;
CREATE INDEX CONCURRENTLY tasks_dispatching ON tasks (partition) WHERE status = 'dispatching';
DROP INDEX CONCURRENTLY IF EXISTS tasks_leased;

-- +goose Down
-- An older hookwheel reads a waiting status as unclaimed: give the tasks
-- claimed meanwhile the status it claimed with.
UPDATE tasks SET status = 'dispatching', updated_at = now()
WHERE claim_token IS NOT NULL AND status IN ('scheduled', 'retrying');
CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_leased ON tasks (partition, lease_expires_at) WHERE status = 'dispatching';
DROP INDEX CONCURRENTLY IF EXISTS tasks_dispatching;
ALTER TABLE tasks RESET (fillfactor);
