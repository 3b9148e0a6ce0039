-- +goose Up

-- Replay (POST /v1/tasks/{id}/replay) schedules a dead or delivered task again
-- with a fresh retry budget while its attempt numbers keep counting, so that
-- attempt records, Redis fire-once keys and the Hookwheel-Attempt header never
-- repeat a number. attempt_base is the value of attempts when the task was last
-- replayed (0 if never): the retry policy counts attempts - attempt_base
-- against max_attempts. A constant default makes this a catalogue-only change,
-- with no table rewrite.
ALTER TABLE tasks ADD COLUMN attempt_base integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE tasks DROP COLUMN attempt_base;
