-- +goose Up
-- The headers of the receiver's response to each attempt, as a JSON object
-- of canonical names to values, bounded and without credentials
-- (store.EncodeResponseHeaders says which are kept). NULL when no response
-- came (a network error, a timeout). A nullable column with no default is a
-- catalogue-only change: existing attempts are not rewritten, and read as
-- NULL.
ALTER TABLE attempts ADD COLUMN response_headers jsonb;

-- +goose Down
ALTER TABLE attempts DROP COLUMN response_headers;
