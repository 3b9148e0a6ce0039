-- +goose NO TRANSACTION
-- +goose Up

-- A claim of a task without an ordering key changes no indexed column: it
-- sets claim_token, claimed_by, lease_expires_at and attempts, leaving
-- status, next_attempt_at and updated_at as they were, and "dispatching" is
-- read from the token (store/claims.go). Postgres can then write the claimed
-- version of the row on its own page without a new entry in any index (a
-- heap-only update): 8–12 µs and 144 bytes of WAL a task against 37–51 µs
-- and about 1,000 bytes (bench/results/2026-11-27-heap-only-claim.md).
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
--     New pages are filled to 45 %. Measured over 100,000 tasks stored,
--     claimed and finished, the table came out smaller than at 100 all the
--     same (52 MB against 72): the versions a task's claim and outcome leave
--     behind find room on its page instead of new pages. Existing pages
--     keep their filling until rewritten.
-- Built CONCURRENTLY, as 00017 says why.
ALTER TABLE tasks SET (fillfactor = 45);
DROP INDEX CONCURRENTLY IF EXISTS tasks_dispatching;
CREATE INDEX CONCURRENTLY tasks_dispatching ON tasks (partition) WHERE status = 'dispatching';
DROP INDEX CONCURRENTLY IF EXISTS tasks_leased;

-- While a rolling upgrade runs, nodes of the version before share the
-- database, and they read a waiting status as unclaimed: their claim would
-- take a task a new node claimed by its token (and send the attempt twice),
-- their cancel, reschedule or schedule pause would answer 200 for a task
-- being sent. No statement of this version changes a row that holds a claim
-- token and keeps one: a claim sets a token where there was none, an
-- outcome, deferral or recovery clears it. So such a change of status, due
-- time or token is an older node's, and is skipped, as if the row had been
-- taken by a concurrent writer (the claim leaves it out, the cancel answers
-- 409). The WHEN clause is checked without calling the function, so other
-- updates pay next to nothing.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION hookwheel_skip_claimed_task_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP TRIGGER IF EXISTS tasks_claimed_by_token ON tasks;
CREATE TRIGGER tasks_claimed_by_token BEFORE UPDATE ON tasks
    FOR EACH ROW
    WHEN (OLD.claim_token IS NOT NULL AND NEW.claim_token IS NOT NULL
        AND (NEW.claim_token <> OLD.claim_token OR NEW.status <> OLD.status
            OR NEW.next_attempt_at IS DISTINCT FROM OLD.next_attempt_at))
    EXECUTE FUNCTION hookwheel_skip_claimed_task_change();

-- +goose Down
DROP TRIGGER IF EXISTS tasks_claimed_by_token ON tasks;
DROP FUNCTION IF EXISTS hookwheel_skip_claimed_task_change();
-- An older hookwheel reads a waiting status as unclaimed: give the tasks
-- claimed meanwhile the status it claimed with.
UPDATE tasks SET status = 'dispatching', updated_at = now()
WHERE claim_token IS NOT NULL AND status IN ('scheduled', 'retrying');
CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_leased ON tasks (partition, lease_expires_at) WHERE status = 'dispatching';
DROP INDEX CONCURRENTLY IF EXISTS tasks_dispatching;
ALTER TABLE tasks RESET (fillfactor);
