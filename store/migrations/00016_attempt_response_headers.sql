-- +goose Up
-- The headers of the receiver's response to each attempt, as a JSON object
-- of canonical names to values, bounded and without credentials
-- (store.EncodeResponseHeaders says which are kept). NULL when no response
-- came (a network error, a timeout). A nullable column with no default is a
-- catalogue-only change: existing attempts are not rewritten, and read as
-- NULL. It still takes the table's ACCESS EXCLUSIVE lock: lock_timeout makes
-- the migration fail rather than queue every attempt record behind a lock
-- request waiting on a long transaction (run it again when it is quieter).
SET LOCAL lock_timeout = '5s';
ALTER TABLE attempts ADD COLUMN response_headers jsonb;

-- +goose Down
ALTER TABLE attempts DROP COLUMN response_headers;
