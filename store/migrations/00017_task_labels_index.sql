-- +goose NO TRANSACTION
-- +goose Up

-- The label filter of a tenant's list. A GIN index over labels alone would
-- send a label that many tenants use (env:prod) through every tenant's
-- tasks with it; the tenant belongs in the index. A two-column GIN index
-- (tenant_id, labels) needs the btree_gin extension, which a managed
-- database's role may not be allowed to create, so the tenant goes into the
-- indexed document instead, under the key "" that no label can have (keys
-- are 1 to 63 characters): store.ListTasks asks for the tenant's "" and the
-- labels wanted together, and GIN intersects the two posting lists, driven
-- by the rarer. jsonb_path_ops hashes each key with its value, which is all
-- that containment needs, in a smaller index than the default opclass.
--
-- Partial, so that inserting a task without labels never touches it; GIN's
-- pending list (fastupdate, on by default) keeps inserting a labelled one
-- cheap too. Built CONCURRENTLY, as 00010's and 00013's indexes are, so that
-- an installation with a large tasks table keeps writing while it builds
-- (hence no transaction, and a migration of its own: 00015 adds the column
-- under a lock timeout, which here would cut the build short); an interrupted build leaves an invalid index,
-- which running the migration again drops first.
DROP INDEX CONCURRENTLY IF EXISTS tasks_tenant_labels;
CREATE INDEX CONCURRENTLY tasks_tenant_labels ON tasks
    USING gin ((jsonb_object(ARRAY['', tenant_id::text]) || labels) jsonb_path_ops)
    WHERE labels IS NOT NULL;

-- Whether a label is rare enough for the index, or so common that walking
-- tasks_tenant_recent finds a page sooner, is the planner's call (ListTasks
-- plans each call for its values), and it needs statistics on the indexed
-- expression for it. ANALYZE takes none for a partial index's expressions,
-- and without them every label is guessed to match 1% of all tasks, which
-- walks the tenant's tasks for a rare label. Expression statistics
-- (Postgres 14 and later) give the planner the labels' frequencies.
DROP STATISTICS IF EXISTS tasks_tenant_labels_stats;
CREATE STATISTICS tasks_tenant_labels_stats ON (jsonb_object(ARRAY['', tenant_id::text]) || labels) FROM tasks;

-- +goose Down
DROP STATISTICS IF EXISTS tasks_tenant_labels_stats;
DROP INDEX CONCURRENTLY IF EXISTS tasks_tenant_labels;
