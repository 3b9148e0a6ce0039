-- +goose Up

-- Ordering keys: a tenant's tasks with the same ordering_key are delivered
-- one at a time, in (run_at, id) order, each once the one before it is
-- delivered, dead or canceled. NULL for tasks without one, which costs such
-- a row nothing.
--
-- A task that falls due while another task of its key is unfinished is
-- parked: ClaimTasks leaves its status as it was and sets next_attempt_at to
-- NULL, which takes it out of every due scan (the loader's and the claim's
-- "next_attempt_at <= now" are never true of NULL) without a status of its
-- own for every reader to learn. It is released (next_attempt_at set back)
-- by whatever finishes the task before it, through the trigger below, so
-- that no path that finishes or removes a task (recording an outcome,
-- canceling, deleting a schedule's occurrences, any added later) can forget
-- to: store/ordering.go has the whole protocol and why it cannot lose a
-- wake-up.
--
-- lock_timeout: see 00015.
SET LOCAL lock_timeout = '5s';
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS ordering_key text;
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS ordering_key text;

-- The release: the first unfinished task of the key, in delivery order, has
-- its next attempt set to its due time (or now, if that passed) when it was
-- parked, and every dispatcher is told on commit. The head is written even
-- when it was not parked (an unchanged next_attempt_at, a HOT update): the
-- row lock that takes is what orders this release after a claim parking
-- that same row in a concurrent transaction (store/ordering.go).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION hookwheel_release_ordering_key() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    head_id uuid;
    head_at timestamptz;
BEGIN
    SELECT id INTO head_id FROM tasks
    WHERE tenant_id = OLD.tenant_id AND ordering_key = OLD.ordering_key
        AND status IN ('scheduled', 'retrying', 'dispatching')
    ORDER BY run_at, id
    LIMIT 1;
    IF head_id IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE tasks SET next_attempt_at = coalesce(next_attempt_at, greatest(run_at, now()))
    WHERE id = head_id AND status IN ('scheduled', 'retrying')
    RETURNING next_attempt_at INTO head_at;
    IF head_at IS NOT NULL THEN
        PERFORM pg_notify('hookwheel_due',
            head_id::text || ' ' || (extract(epoch FROM head_at) * 1000000)::bigint::text);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Finishing a keyed task, or moving it in the key's order (a reschedule),
-- releases the key's head. The WHEN clause is evaluated before any call, so
-- a task without a key costs an update one NULL test.
CREATE TRIGGER tasks_release_ordering_key_on_update
    AFTER UPDATE OF status, run_at ON tasks
    FOR EACH ROW
    WHEN (OLD.ordering_key IS NOT NULL
        AND OLD.status IN ('scheduled', 'retrying', 'dispatching')
        AND (NEW.status NOT IN ('scheduled', 'retrying', 'dispatching') OR NEW.run_at <> OLD.run_at))
    EXECUTE FUNCTION hookwheel_release_ordering_key();

CREATE TRIGGER tasks_release_ordering_key_on_delete
    AFTER DELETE ON tasks
    FOR EACH ROW
    WHEN (OLD.ordering_key IS NOT NULL AND OLD.status IN ('scheduled', 'retrying', 'dispatching'))
    EXECUTE FUNCTION hookwheel_release_ordering_key();

-- +goose Down
DROP TRIGGER IF EXISTS tasks_release_ordering_key_on_delete ON tasks;
DROP TRIGGER IF EXISTS tasks_release_ordering_key_on_update ON tasks;
DROP FUNCTION IF EXISTS hookwheel_release_ordering_key();
ALTER TABLE schedules DROP COLUMN IF EXISTS ordering_key;
ALTER TABLE tasks DROP COLUMN IF EXISTS ordering_key;
