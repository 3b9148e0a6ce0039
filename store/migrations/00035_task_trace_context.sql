-- +goose Up

-- The W3C trace context a task was created in: its traceparent (version
-- 00, 55 characters) and tracestate, as the create request's headers (or the
-- API's own span) gave them; NULL for a task created outside any trace. The
-- dispatcher reads them with the claim and sends each attempt's webhook as
-- a child of that context. Nullable and without a default or a CHECK, so
-- that adding them rewrites and scans nothing: the application bounds them
-- (internal/tracing) before they are stored.
ALTER TABLE tasks ADD COLUMN trace_parent text, ADD COLUMN trace_state text;

-- A schedule's, from its create request, which the materializer copies to
-- every occurrence's task.
ALTER TABLE schedules ADD COLUMN trace_parent text, ADD COLUMN trace_state text;

-- +goose Down
ALTER TABLE schedules DROP COLUMN trace_parent, DROP COLUMN trace_state;
ALTER TABLE tasks DROP COLUMN trace_parent, DROP COLUMN trace_state;
