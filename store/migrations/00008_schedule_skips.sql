-- +goose Up
-- An occurrence of a schedule that would take its tenant over
-- max_pending_tasks is not made a task; the schedule keeps count of those it
-- skipped, and when it last did, for the tenant to see.
ALTER TABLE schedules
	ADD COLUMN skipped_occurrences bigint NOT NULL DEFAULT 0,
	ADD COLUMN last_skipped_at timestamptz;

-- +goose Down
ALTER TABLE schedules DROP COLUMN skipped_occurrences, DROP COLUMN last_skipped_at;
