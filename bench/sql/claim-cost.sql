-- claim-cost.sql: what a claim and an outcome cost Postgres per task, with
-- nothing else running, on a database migrated by `hookwheel migrate`.
--
--   createdb claimcost
--   DATABASE_URL=postgres://postgres@127.0.0.1:5432/claimcost hookwheel migrate
--   PGOPTIONS='-c exp.mode=status' psql -v n=100000 -d claimcost -f bench/sql/claim-cost.sql
--
-- exp.mode=status claims as ClaimTasks did before migration 00026, and still
-- does for a task with an ordering key (the status becomes 'dispatching', so
-- every index of tasks gets a new entry); exp.mode=hot claims as ClaimTasks
-- does a task without one, touching no indexed column (attempts,
-- claim_token, claimed_by and lease_expires_at only), which Postgres does as
-- a heap-only (HOT) update when the row's page has room: migration 00026
-- sets the table's fillfactor to 45 for it (compare others with ALTER TABLE
-- tasks SET (fillfactor = N) before running).
-- Both then record the outcome as RecordAttempts does. It prints µs of
-- statement time and bytes of WAL per task, how many updates were HOT, and
-- the table's size once vacuumed.
-- It empties tasks and attempts first.
\set ON_ERROR_STOP 1
INSERT INTO tenants (id, name) VALUES ('00000000-0000-0000-0000-000000000001', 'claim-cost') ON CONFLICT DO NOTHING;
TRUNCATE attempts, tasks CASCADE;
INSERT INTO tasks (id, tenant_id, status, url, method, headers, body, run_at, next_attempt_at, timeout_ms, max_attempts,
  min_backoff_ms, max_backoff_ms)
SELECT gen_random_uuid(), '00000000-0000-0000-0000-000000000001', 'scheduled', 'http://127.0.0.1:9/hook/' || g, 'POST',
  '{"Content-Type": "application/json"}', '\x7b7d', now(), now(), 30000, 10, 1000, 60000
FROM generate_series(1, :n) g;
VACUUM ANALYZE tasks;
SELECT pg_stat_reset_single_table_counters('tasks'::regclass);
CREATE TEMP TABLE batches AS
  SELECT b, array_agg(id) ids FROM (SELECT id, row_number() OVER (ORDER BY id) / 100 AS b FROM tasks) x GROUP BY b;
SELECT pg_current_wal_lsn() AS lsn0 \gset
SELECT clock_timestamp() AS t0 \gset
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT ids FROM batches LOOP
    IF current_setting('exp.mode') = 'status' THEN
      UPDATE tasks SET status = 'dispatching', attempts = attempts + 1, claim_token = gen_random_uuid(),
        claimed_by = '00000000-0000-0000-0000-000000000002', lease_expires_at = now() + interval '40 s', updated_at = now()
      WHERE id = ANY(r.ids) AND status IN ('scheduled', 'retrying');
    ELSE
      UPDATE tasks SET attempts = attempts + 1, claim_token = gen_random_uuid(),
        claimed_by = '00000000-0000-0000-0000-000000000002', lease_expires_at = now() + interval '40 s'
      WHERE id = ANY(r.ids) AND status IN ('scheduled', 'retrying') AND claim_token IS NULL;
    END IF;
  END LOOP;
END $$;
SELECT round(extract(epoch FROM clock_timestamp() - :'t0') * 1e6 / :n, 1) AS claim_us_per_task,
  round(pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0') / :n) AS claim_wal_bytes_per_task;
SELECT pg_current_wal_lsn() AS lsn1 \gset
SELECT clock_timestamp() AS t1 \gset
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT ids FROM batches LOOP
    UPDATE tasks SET status = 'delivered', next_attempt_at = NULL, lease_expires_at = NULL, claim_token = NULL,
      claimed_by = NULL, last_status_code = 200, updated_at = now()
    WHERE id = ANY(r.ids);
  END LOOP;
END $$;
SELECT round(extract(epoch FROM clock_timestamp() - :'t1') * 1e6 / :n, 1) AS outcome_us_per_task,
  round(pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn1') / :n) AS outcome_wal_bytes_per_task;
SELECT pg_sleep(1);
SELECT n_tup_upd AS updates, n_tup_hot_upd AS hot_updates FROM pg_stat_user_tables WHERE relname = 'tasks';
VACUUM tasks;
SELECT pg_size_pretty(pg_relation_size('tasks')) AS table_size_after_vacuum;
