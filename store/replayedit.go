package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// A bulk edit reads the tasks it matches a chunk at a time (their URL and
// headers, never their bodies), works out each one's change in Go, by the
// rules of creation, and writes the chunk's changes in one statement. The
// read takes no lock: the write changes a task only while it is still dead
// with the URL and headers the change was worked out from, and leaves out
// any other, as the bulk replay leaves out a task replayed meanwhile.

const queryDeadTasksToEdit = `-- name: DeadTasksToEdit
SELECT id, url, headers FROM tasks
WHERE ` + replayMatch + ` AND id > $9
ORDER BY id
LIMIT $10`

// Rows are locked in id order, as every bulk statement locks them, and
// FOR UPDATE re-checks each locked row's conditions against its latest
// version. Only url, headers and what a replay sets are written: the body
// and every other field stay, and nothing is metered (usage counts
// attempts, which the replayed tasks make later).
const queryEditReplayTasks = `-- name: EditReplayTasks
WITH edits AS (
	SELECT * FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[])
		AS e(id, was_url, was_headers, url, headers)
), victims AS (
	SELECT t.id FROM tasks t JOIN edits e ON e.id = t.id
	WHERE t.tenant_id = $1 AND t.status = 'dead' AND t.url = e.was_url AND t.headers = e.was_headers::jsonb
	ORDER BY t.id
	FOR UPDATE OF t
)
UPDATE tasks t SET status = 'scheduled', next_attempt_at = $7, attempt_base = t.attempts, updated_at = now(),
	url = e.url, headers = e.headers::jsonb
FROM victims v JOIN edits e ON e.id = v.id
WHERE t.id = v.id
RETURNING t.id, pg_notify('` + DueNotifyChannel + `', t.id::text || ' ' || $8::text)`

// DeadTasksToEdit reads up to limit dead tasks of the tenant matching f
// (f.Most aside), in id order after the id after (uuid.Nil: from the first):
// what a bulk edit works out its changes from.
func (db *DB) DeadTasksToEdit(ctx context.Context, tenantID uuid.UUID, f model.ReplayFilter, after uuid.UUID, limit int) ([]model.EditTarget, error) {
	rows, err := db.pool.Query(ctx, queryDeadTasksToEdit, tenantID, f.ScheduleID, f.CreatedAfter, f.CreatedBefore,
		likePrefix(f.URLPrefix, 0), labelsArg(f.Labels), f.PublishID, f.Topic, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read dead tasks of tenant %s to edit: %w", tenantID, err)
	}
	targets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.EditTarget, error) {
		var t model.EditTarget
		err := r.Scan(&t.ID, &t.URL, &t.Headers)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("read dead tasks of tenant %s to edit: %w", tenantID, err)
	}
	return targets, nil
}

// EditReplayTasks applies each change, in one statement, to the tenant's task
// it names, and replays it as ReplayTasks does: due at at (rounded up to the
// microsecond), a fresh retry budget, announced on DueNotifyChannel on
// commit. A change whose task is no longer dead, or no longer has the URL
// and headers of its Was, is left out. A change's Edit must set both URL and
// Headers. It returns the ids changed and the instant they are due.
func (db *DB) EditReplayTasks(ctx context.Context, tenantID uuid.UUID, changes []model.TaskChange, at time.Time) ([]uuid.UUID, time.Time, error) {
	at = model.RoundUpToMicro(at)
	if len(changes) == 0 {
		return nil, at, nil
	}
	ids := make([]uuid.UUID, len(changes))
	wasURLs, urls := make([]string, len(changes)), make([]string, len(changes))
	wasHeaders, headers := make([]string, len(changes)), make([]string, len(changes))
	for i, c := range changes {
		if c.Edit.URL == nil || c.Edit.Headers == nil {
			return nil, at, fmt.Errorf("edit and replay task %s: the change must set the URL and the headers", c.Was.ID)
		}
		ids[i], wasURLs[i], urls[i] = c.Was.ID, c.Was.URL, *c.Edit.URL
		var err error
		if wasHeaders[i], err = headersJSON(c.Was.Headers); err != nil {
			return nil, at, err
		}
		if headers[i], err = headersJSON(c.Edit.Headers); err != nil {
			return nil, at, err
		}
	}
	rows, err := db.pool.Query(ctx, queryEditReplayTasks, tenantID, ids, wasURLs, wasHeaders, urls, headers, at, fmt.Sprint(at.UnixMicro()))
	if err != nil {
		return nil, at, fmt.Errorf("edit and replay dead tasks of tenant %s: %w", tenantID, err)
	}
	changed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (uuid.UUID, error) {
		var (
			id      uuid.UUID
			ignored *string
		)
		err := r.Scan(&id, &ignored)
		return id, err
	})
	if err != nil {
		return changed, at, fmt.Errorf("edit and replay dead tasks of tenant %s: %w", tenantID, err)
	}
	return changed, at, nil
}

// headersJSON is a task's headers as the jsonb they are stored as: an object,
// never null.
func headersJSON(h map[string]string) (string, error) {
	if h == nil {
		h = map[string]string{}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode headers: %w", err)
	}
	return string(b), nil
}
