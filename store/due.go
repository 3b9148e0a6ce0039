package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/jackc/pgx/v5"
)

func scanDueTask(r pgx.CollectableRow) (model.DueTask, error) {
	var d model.DueTask
	err := r.Scan(&d.ID, &d.At)
	return d, err
}

const queryListDue = `-- name: ListDue
SELECT id, next_attempt_at FROM tasks
WHERE status IN ('scheduled', 'retrying')
	AND partition = ANY($5)
	AND (next_attempt_at, id) > ($1, $2)
	AND next_attempt_at <= $3
ORDER BY next_attempt_at, id
LIMIT $4`

// ListDue pages through the waiting tasks of the given partitions falling due
// after the cursor and no later than until, in due order. It walks the
// tasks_due partial index, one range per partition, so its cost depends on
// how many tasks fall due in the window, not on how many wait further ahead.
//
// The tasks claimed without an ordering key keep their waiting status
// (ClaimTasks), and come too: a claim passes them over, as it does a task
// another node claimed first. Asking for claim_token IS NULL here would
// read each task's row besides its index entry, and make the scan through
// a backlog of 100,000 due tasks take four times as long (130 ms against
// 32).
func (db *DB) ListDue(ctx context.Context, partitions []int16, after model.DueCursor, until time.Time, limit int) ([]model.DueTask, error) {
	rows, err := db.pool.Query(ctx, queryListDue, after.At, after.ID, until, limit, partitions)
	if err != nil {
		return nil, fmt.Errorf("list due tasks: %w", err)
	}
	due, err := pgx.CollectRows(rows, scanDueTask)
	if err != nil {
		return nil, fmt.Errorf("list due tasks: %w", err)
	}
	return due, nil
}

const queryListDueExcept = `-- name: ListDueExcept
SELECT id, next_attempt_at FROM tasks
WHERE status IN ('scheduled', 'retrying')
	AND partition = ANY($5)
	AND (next_attempt_at, id) > ($1, $2)
	AND next_attempt_at <= $3
	AND tenant_id <> ALL($6::uuid[])
	AND (tenant_id <> ALL($7::uuid[]) OR (tenant_id::text || ' ' || coalesce(hookwheel_target_key(url), '')) <> ALL($8::text[]))
ORDER BY next_attempt_at, id
LIMIT $4`

// ListDueExcept is ListDue without the tasks held (those of the tenants in
// held, and those to the targets it pauses), for the sweep: a suspended
// tenant's backlog of overdue tasks, or a paused target's, would otherwise
// fill every page of it and hide the strays behind. It reads each task's
// row besides its index entry (see ListDue), so it is ListDue itself while
// nothing is held.
func (db *DB) ListDueExcept(ctx context.Context, partitions []int16, after model.DueCursor, until time.Time, limit int,
	held *model.Held,
) ([]model.DueTask, error) {
	if heldNothing(held) {
		return db.ListDue(ctx, partitions, after, until, limit)
	}
	tenants, targetTenants, targets := heldArgs(held)
	rows, err := db.pool.Query(ctx, queryListDueExcept, after.At, after.ID, until, limit, partitions, tenants, targetTenants, targets)
	if err != nil {
		return nil, fmt.Errorf("list due tasks not held: %w", err)
	}
	due, err := pgx.CollectRows(rows, scanDueTask)
	if err != nil {
		return nil, fmt.Errorf("list due tasks of tenants not held: %w", err)
	}
	return due, nil
}

// OFFSET 0 keeps the conditions out of the scan, which is by id alone, for
// the reason given at ClaimTasks: tasks_due would match them too.
const queryWaitingAfter = `-- name: WaitingAfter
SELECT id, next_attempt_at FROM (
	SELECT id, status, claim_token, next_attempt_at FROM tasks WHERE id = ANY($1::uuid[]) OFFSET 0
) t
WHERE status IN ('scheduled', 'retrying') AND claim_token IS NULL AND next_attempt_at > $2`

// WaitingAfter returns those of the given tasks that still wait for an
// attempt due after the given time: the tasks a claim left out because they
// were moved later.
func (db *DB) WaitingAfter(ctx context.Context, ids []uuid.UUID, after time.Time) ([]model.DueTask, error) {
	rows, err := db.pool.Query(ctx, queryWaitingAfter, ids, after)
	if err != nil {
		return nil, fmt.Errorf("read %d unclaimed tasks: %w", len(ids), err)
	}
	due, err := pgx.CollectRows(rows, scanDueTask)
	if err != nil {
		return nil, fmt.Errorf("read %d unclaimed tasks: %w", len(ids), err)
	}
	return due, nil
}

// ListenDue calls fn for each task announced on DueNotifyChannel until ctx is
// done or the connection fails, as Listen does with Due alone.
func (db *DB) ListenDue(ctx context.Context, ready func(), fn func(model.DueTask)) error {
	return db.Listen(ctx, ready, model.Listeners{Due: fn})
}

func parseDueNotification(payload string) (model.DueTask, error) {
	idText, atText, ok := strings.Cut(payload, " ")
	if !ok {
		return model.DueTask{}, errors.New("want \"<id> <unix micros>\"")
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return model.DueTask{}, fmt.Errorf("parse task id: %w", err)
	}
	micros, err := strconv.ParseInt(atText, 10, 64)
	if err != nil {
		return model.DueTask{}, fmt.Errorf("parse due time: %w", err)
	}
	return model.DueTask{ID: id, At: time.UnixMicro(micros)}, nil
}
