package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Ids are UUIDv7, so id order is creation order; but created_at is the
// database's clock at insert and the id the API's, so the time filters read
// created_at itself (index tasks_tenant_created) rather than bounding ids.
// The URL prefix is matched twice: on left(url, urlIndexChars), which
// tasks_tenant_url indexes (migration 00013 says why not the whole URL), and
// on the URL itself. Labels are matched in the form tasks_tenant_labels
// indexes (labelsMatch). A publish's tasks are found through tasks_publish,
// a topic's through tasks_tenant_topic (migration 00021).
const queryListTasks = `-- name: ListTasks
SELECT ` + taskColumnsWithoutBody + ` FROM tasks
WHERE ` + listTasksWhere + `
ORDER BY id DESC
LIMIT $4`

// listTasksWhere is the condition of a task listing, on the parameters
// listTasksArgs gives.
const listTasksWhere = `tenant_id = $1
	AND ($2::text IS NULL OR ` + statusIs + `)
	AND ($3::uuid IS NULL OR id < $3)
	AND ($5::uuid IS NULL OR schedule_id = $5)
	AND ($6::timestamptz IS NULL OR created_at >= $6)
	AND ($7::timestamptz IS NULL OR created_at < $7)
	AND ($8::text IS NULL OR (left(url, ` + urlIndexChars + `) LIKE $9 AND url LIKE $8))
	AND ($10::text IS NULL OR idempotency_key = $10)
	AND ($11::jsonb IS NULL OR (labels IS NOT NULL AND ` + labelsIndexed + ` @> (` + tenantLabels + ` || $11::jsonb)))
	AND ($12::uuid IS NULL OR callback_of = $12)
	AND ($13::uuid IS NULL OR publish_id = $13)
	AND ($14::text IS NULL OR topic = $14)`

// queryListTasksWithBodies is ListTasks with the bodies, within a budget of
// $15 bytes, read in two steps as listbodies.go tells.
const queryListTasksWithBodies = `-- name: ListTasksWithBodies
WITH page AS (
	SELECT ` + pageBodyBytes + ` FROM tasks
	WHERE ` + listTasksWhere + `
	ORDER BY id DESC
	LIMIT $4
), ` + fittingPage + `
SELECT ` + taskColumns + `, page_rows FROM fitting JOIN tasks ON tasks.tenant_id = $1 AND tasks.id = fitting.page_id
WHERE n = 1 OR running <= $15
ORDER BY id DESC`

// statusIs matches the tasks whose status, as they are read, is $2: a
// claimed task is dispatching whatever status it keeps (ClaimTasks). Each
// ListTasks call is planned for its values, so the CASE folds to its one
// branch and a waiting or finished status still reads its range of
// tasks_tenant_status_recent.
const statusIs = `CASE WHEN $2 = 'dispatching'
		THEN status = 'dispatching' OR (status IN ('scheduled', 'retrying') AND claim_token IS NOT NULL)
		ELSE status = $2 AND claim_token IS NULL END`

// A task of tenant $1 carries every label of a JSON object when
// labelsIndexed @> (tenantLabels || object): labelsIndexed is the very
// expression migration 00017's tasks_tenant_labels indexes, the labels with
// the tenant id under the key "" (which no label has), so that GIN reads
// only this tenant's entries. "labels IS NOT NULL" beside it matches the
// index's predicate.
const (
	labelsIndexed = `(jsonb_object(ARRAY['', tenant_id::text]) || labels)`
	tenantLabels  = `jsonb_object(ARRAY['', $1::uuid::text])`
)

// labelsArg is labels as a statement parameter: NULL for none, so that a
// task without labels stores NULL (and stays out of tasks_tenant_labels) and
// a filter without labels sets no condition.
func labelsArg(labels map[string]string) any {
	if len(labels) == 0 {
		return nil
	}
	return labels
}

// urlIndexCharCount is how many characters of a URL tasks_tenant_url
// holds (migration 00013); urlIndexChars spells it for the SQL. Change both
// with a new migration.
const (
	urlIndexCharCount = 256
	urlIndexChars     = "256"
)

// likeEscaper makes text match itself in a LIKE pattern, whose default
// escape character is the backslash.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// likePrefix is the LIKE pattern of the texts that start with the first
// chars characters of prefix (all of it when chars is 0), or nil for nil.
func likePrefix(prefix *string, chars int) *string {
	if prefix == nil {
		return nil
	}
	p, n := *prefix, 0
	for i := range p { // i: where each character starts
		if chars > 0 && n == chars {
			p = p[:i]
			break
		}
		n++
	}
	pattern := likeEscaper.Replace(p) + "%"
	return &pattern
}

// listTasksArgs are the parameters of queryListTasks.
func listTasksArgs(tenantID uuid.UUID, f model.TaskFilter) []any {
	return []any{tenantID, f.Status, f.Before, f.Limit, f.ScheduleID, f.CreatedAfter, f.CreatedBefore,
		likePrefix(f.URLPrefix, 0), likePrefix(f.URLPrefix, urlIndexCharCount), f.IdempotencyKey, labelsArg(f.Labels),
		f.CallbackOf, f.PublishID, f.Topic}
}

// ListTasks returns up to f.Limit tasks, newest first, without their bodies
// (Body nil): ListTasksWithBodies reads them.
//
// Its plan is made for each call's values (an unnamed statement) rather
// than cached: which index serves a page depends on them. A rare URL prefix
// status or label reads its few matches through tasks_tenant_url,
// tasks_tenant_status_recent or tasks_tenant_labels, a common one walks tasks_tenant_recent and
// stops at the page's end; the plan Postgres caches after five calls could
// only do the walk, through every task of the tenant when nothing matches.
func (db *DB) ListTasks(ctx context.Context, tenantID uuid.UUID, f model.TaskFilter) ([]*model.Task, error) {
	args := append([]any{pgx.QueryExecModeCacheDescribe}, listTasksArgs(tenantID, f)...)
	rows, err := db.pool.Query(ctx, queryListTasks, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.Task, error) { return scanTask(r) })
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return tasks, nil
}

// ListTasksWithBodies is ListTasks with each task's body, while the bodies
// read stay within budget bytes: the list stops before the first task whose
// body would pass it, though it always holds the page's first task. cut says
// that the budget ended the list before f.Limit tasks, or before the last
// task that matched; the caller continues after the last task returned.
//
// The bodies are measured before any is read, so one call holds at most
// budget bytes of bodies, plus one body when the first task's alone passes it.
func (db *DB) ListTasksWithBodies(ctx context.Context, tenantID uuid.UUID, f model.TaskFilter, budget int64) (tasks []*model.Task, cut bool, err error) {
	args := append([]any{pgx.QueryExecModeCacheDescribe}, listTasksArgs(tenantID, f)...)
	tasks, cut, err = listWithinBudget(ctx, db.pool, queryListTasksWithBodies, append(args, budget), scanTask)
	if err != nil {
		return nil, false, fmt.Errorf("list tasks with bodies: %w", err)
	}
	return tasks, cut, nil
}
