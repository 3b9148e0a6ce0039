-- +goose NO TRANSACTION
-- +goose Up

-- GET /v1/tasks?url=<prefix> lists a tenant's tasks whose URL starts with a
-- text. Without an index a rare prefix (one host among many) would be found
-- by walking every task of the tenant; with this one, Postgres reads the
-- matches alone, and still walks tasks_tenant_recent for a prefix most tasks
-- share, whichever its statistics say is cheaper (store.ListTasks plans each
-- call for its values). text_pattern_ops compares bytes, which is what a
-- LIKE prefix needs whatever the database's collation.
--
-- Only the first 256 characters are indexed: a URL may be 4096 bytes, and a
-- B-tree entry over about 2700 bytes cannot be stored, which would make
-- such a task fail to insert. A longer prefix narrows by its first 256
-- characters here and is checked whole on the row.
--
-- Built CONCURRENTLY, as 00010's index is, so that an installation with a
-- large tasks table keeps writing while it builds (hence no transaction);
-- an interrupted build leaves an invalid index, which running the migration
-- again drops first.
DROP INDEX CONCURRENTLY IF EXISTS tasks_tenant_url;
CREATE INDEX CONCURRENTLY tasks_tenant_url ON tasks (tenant_id, left(url, 256) text_pattern_ops);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_tenant_url;
