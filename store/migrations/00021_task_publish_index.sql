-- +goose NO TRANSACTION
-- +goose Up

-- The tasks of one publish (GET /v1/publishes/{id}, GET /v1/tasks?publish_id=,
-- and the purger's check that a publish has none left): at most one per
-- endpoint, so a probe reads a hundred rows at most. And a tenant's tasks
-- published to a topic, newest first (GET /v1/tasks?topic=), walked as
-- tasks_tenant_recent is. Both partial, so that a task that is not a
-- publish's never enters them; built CONCURRENTLY, as 00013's and 00017's
-- are, so that a large tasks table keeps taking writes meanwhile. An
-- interrupted build leaves an invalid index, which running the migration
-- again drops first.
DROP INDEX CONCURRENTLY IF EXISTS tasks_publish;
CREATE INDEX CONCURRENTLY tasks_publish ON tasks (publish_id) WHERE publish_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS tasks_tenant_topic;
CREATE INDEX CONCURRENTLY tasks_tenant_topic ON tasks (tenant_id, topic, id DESC) WHERE topic IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_tenant_topic;
DROP INDEX CONCURRENTLY IF EXISTS tasks_publish;
