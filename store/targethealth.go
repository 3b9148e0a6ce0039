package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Target health (migration 00033): each tenant's targets that failed
// lately, written from the dispatchers' reports (RecordTargetHealth), and
// hookwheel's pauses of those that failed every attempt for too long.

// A success resets the rows of targets failing (or recovering) before it:
// the failures it follows no longer count. A failure reported after it (a
// run another node saw end later) leaves the row failing from the success
// on. Rows neither failing nor recovering are not touched: a healthy
// target's success writes nothing. The rows are locked in key order, as
// every writer of target_health locks them. Whether the row was recovering
// is read in the CTE, before the update clears it: that success is the one
// target.recovered tells of.
const queryRecordTargetSuccesses = `-- name: RecordTargetSuccesses
WITH s AS (
	SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS s(tenant_id, target, at)
), old AS (
	SELECT h.tenant_id, h.target, h.recovering AS was_recovering
	FROM target_health h JOIN s ON h.tenant_id = s.tenant_id AND h.target = s.target
	WHERE (h.failing_since IS NOT NULL OR h.recovering) AND (h.reset_at IS NULL OR h.reset_at < s.at)
	ORDER BY h.tenant_id, h.target
	FOR UPDATE OF h
)
UPDATE target_health h
SET reset_at = s.at,
	failing_since = CASE WHEN h.last_failure_at > s.at THEN greatest(h.failing_since, s.at) END,
	last_failure_at = CASE WHEN h.last_failure_at > s.at THEN h.last_failure_at END,
	recovering = false
FROM old
	JOIN s ON s.tenant_id = old.tenant_id AND s.target = old.target
	JOIN tenants tn ON tn.id = old.tenant_id
WHERE h.tenant_id = old.tenant_id AND h.target = old.target
RETURNING h.tenant_id, h.target, s.at, old.was_recovering, tn.operations_url`

// A run of failures reported counts from the row's reset on (the last
// success, or resume): a run that ended before it is ignored, one that
// began before it counts from it. The row's run starts at the earliest
// start any node reported, and ends at the latest failure, whose error it
// keeps.
const queryRecordTargetFailures = `-- name: RecordTargetFailures
INSERT INTO target_health AS h (tenant_id, target, failing_since, last_failure_at, last_error)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[])
ORDER BY 1, 2
ON CONFLICT (tenant_id, target) DO UPDATE SET
	failing_since = CASE WHEN excluded.last_failure_at <= coalesce(h.reset_at, '-infinity') THEN h.failing_since
		ELSE least(h.failing_since, greatest(excluded.failing_since, h.reset_at)) END,
	last_failure_at = CASE WHEN excluded.last_failure_at <= coalesce(h.reset_at, '-infinity') THEN h.last_failure_at
		ELSE greatest(h.last_failure_at, excluded.last_failure_at) END,
	last_error = CASE WHEN excluded.last_failure_at > coalesce(h.last_failure_at, '-infinity')
		AND excluded.last_failure_at > coalesce(h.reset_at, '-infinity') THEN excluded.last_error ELSE h.last_error END
RETURNING h.tenant_id, h.target, h.failing_since, h.last_failure_at, h.last_error`

// A target failing for DisableAfter is paused unless it is paused already
// (the tenant's own pause stays as it was) or its tenant is not active.
const queryPauseFailingTargets = `-- name: PauseFailingTargets
WITH p AS (
	INSERT INTO target_pauses (tenant_id, target, paused_at, paused_by, reason, since, last_error)
	SELECT c.tenant_id, c.target, $5::timestamptz, '` + model.PausedByHookwheel + `', $6::text, c.since, c.last_error
	FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::text[]) AS c(tenant_id, target, since, last_error)
		JOIN tenants tn ON tn.id = c.tenant_id AND tn.status = 'active'
	ORDER BY 1, 2
	ON CONFLICT (tenant_id, target) DO NOTHING
	RETURNING ` + targetPauseColumns + `
)
SELECT p.*, tn.operations_url FROM p JOIN tenants tn ON tn.id = p.tenant_id`

// RecordTargetHealth writes a dispatcher's report of its tenants' targets,
// in one transaction: the successes (resetting the targets failing before
// them), then the runs of failures; then pauses, as hookwheel's, the
// targets whose every attempt failed for r.DisableAfter, announced like a
// tenant's pause and audited, and makes event's task for each pause and for
// each target that recovered after hookwheel's pause was resumed, of a
// tenant with an operations URL: stored as one of the tenant's tasks, due at
// once and announced, so that it is signed, sent and retried as any
// webhook. It returns the pauses made.
func (db *DB) RecordTargetHealth(ctx context.Context, r model.TargetHealthReport,
	event func(model.TargetEvent) (*model.Task, error),
) ([]*model.TargetPause, error) {
	var paused []*model.TargetPause
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		paused = nil
		var events []model.TargetEvent
		if len(r.Successes) > 0 {
			recovered, err := recordTargetSuccesses(ctx, tx, r.Successes)
			if err != nil {
				return err
			}
			events = append(events, recovered...)
		}
		if len(r.Failures) > 0 {
			failing, err := recordTargetFailures(ctx, tx, r.Failures, r.DisableAfter)
			if err != nil {
				return err
			}
			if len(failing) > 0 {
				made, err := pauseFailingTargets(ctx, tx, failing, r)
				if err != nil {
					return err
				}
				for _, m := range made {
					paused = append(paused, m.pause)
					if m.ops != nil {
						events = append(events, model.TargetEvent{Type: model.EventTargetPaused, TenantID: m.pause.TenantID,
							OperationsURL: *m.ops, Target: m.pause.Target, Pause: m.pause, At: m.pause.PausedAt})
					}
				}
			}
		}
		announced := map[uuid.UUID]bool{}
		for _, p := range paused {
			if !announced[p.TenantID] {
				announced[p.TenantID] = true
				if err := notifyTenantChanged(ctx, tx, p.TenantID); err != nil {
					return err
				}
			}
			err := insertAudit(ctx, tx, model.AuditEntry{TenantID: &p.TenantID, Actor: model.ActorHookwheel,
				Action: model.EventTargetPaused, Detail: map[string]any{"target": p.Target, "reason": p.Reason}})
			if err != nil {
				return err
			}
		}
		for _, e := range events {
			task, err := event(e)
			if err != nil {
				return err
			}
			if _, _, err := insertTask(ctx, tx, createShard(), task, true); err != nil {
				return fmt.Errorf("store the %s event of %s: %w", e.Type, e.Target, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record the health of %d targets: %w", len(r.Successes)+len(r.Failures), err)
	}
	return paused, nil
}

// recordTargetSuccesses writes the successes and returns the events of the
// targets that recovered, for the tenants with an operations URL.
func recordTargetSuccesses(ctx context.Context, tx pgx.Tx, successes []model.TargetSuccess) ([]model.TargetEvent, error) {
	tenants, targets, at := make([]uuid.UUID, len(successes)), make([]string, len(successes)), make([]time.Time, len(successes))
	for i, s := range successes {
		tenants[i], targets[i], at[i] = s.TenantID, s.Target, s.At
	}
	rows, err := tx.Query(ctx, queryRecordTargetSuccesses, tenants, targets, at)
	if err != nil {
		return nil, fmt.Errorf("record target successes: %w", err)
	}
	var events []model.TargetEvent
	var (
		e         model.TargetEvent
		recovered bool
		ops       *string
	)
	_, err = pgx.ForEachRow(rows, []any{&e.TenantID, &e.Target, &e.At, &recovered, &ops}, func() error {
		if recovered && ops != nil {
			events = append(events, model.TargetEvent{Type: model.EventTargetRecovered, TenantID: e.TenantID,
				OperationsURL: *ops, Target: e.Target, At: e.At})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record target successes: %w", err)
	}
	return events, nil
}

// failingTarget is a target whose every attempt failed for DisableAfter.
type failingTarget struct {
	tenant    uuid.UUID
	target    string
	since     time.Time
	lastError string
}

// recordTargetFailures writes the runs of failures and returns the targets
// failing for disableAfter.
func recordTargetFailures(ctx context.Context, tx pgx.Tx, failures []model.TargetFailures, disableAfter time.Duration) ([]failingTarget, error) {
	n := len(failures)
	tenants, targets, first, last, errs := make([]uuid.UUID, n), make([]string, n), make([]time.Time, n), make([]time.Time, n), make([]string, n)
	for i, f := range failures {
		tenants[i], targets[i], first[i], last[i], errs[i] = f.TenantID, f.Target, f.First, f.Last, f.LastError
	}
	rows, err := tx.Query(ctx, queryRecordTargetFailures, tenants, targets, first, last, errs)
	if err != nil {
		return nil, fmt.Errorf("record target failures: %w", err)
	}
	var (
		out         []failingTarget
		f           failingTarget
		since, till *time.Time
		lastError   *string
	)
	_, err = pgx.ForEachRow(rows, []any{&f.tenant, &f.target, &since, &till, &lastError}, func() error {
		if since != nil && till != nil && till.Sub(*since) >= disableAfter {
			out = append(out, failingTarget{tenant: f.tenant, target: f.target, since: *since, lastError: deref(lastError)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record target failures: %w", err)
	}
	return out, nil
}

// pauseMade is a pause hookwheel made, with its tenant's operations URL.
type pauseMade struct {
	pause *model.TargetPause
	ops   *string
}

func pauseFailingTargets(ctx context.Context, tx pgx.Tx, failing []failingTarget, r model.TargetHealthReport) ([]pauseMade, error) {
	n := len(failing)
	tenants, targets, since, errs := make([]uuid.UUID, n), make([]string, n), make([]time.Time, n), make([]string, n)
	for i, f := range failing {
		tenants[i], targets[i], since[i], errs[i] = f.tenant, f.target, f.since, f.lastError
	}
	rows, err := tx.Query(ctx, queryPauseFailingTargets, tenants, targets, since, errs, r.At, r.Reason)
	if err != nil {
		return nil, fmt.Errorf("pause failing targets: %w", err)
	}
	made, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pauseMade, error) {
		var m pauseMade
		var err error
		m.pause, err = scanTargetPause(row, &m.ops)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("pause failing targets: %w", err)
	}
	return made, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// A row is pruned once no node has reported an attempt to its target for
// the idle time: neither a failure nor a success. Kept are the rows of
// targets paused (no attempt goes to them, and the resume of hookwheel's
// pause marks the row recovering) and of those still recovering, for the
// success that tells the tenant. The rows are locked in key order, as
// every writer of target_health locks them, skipping those a writer holds:
// they are not idle.
const queryPruneTargetHealth = `-- name: PruneTargetHealth
DELETE FROM target_health
WHERE (tenant_id, target) IN (
	SELECT h.tenant_id, h.target FROM target_health h
	WHERE NOT h.recovering AND coalesce(greatest(h.last_failure_at, h.reset_at), '-infinity') < $1
		AND NOT EXISTS (SELECT 1 FROM target_pauses p WHERE p.tenant_id = h.tenant_id AND p.target = h.target)
	ORDER BY h.tenant_id, h.target
	LIMIT $2
	FOR UPDATE OF h SKIP LOCKED
)`

// PruneTargetHealth deletes up to limit rows of targets no attempt was
// reported to since before, and says how many: a target that failed and
// was then left alone starts afresh when it is next tried, rather than
// being paused for a failure run with a gap longer than the run itself.
func (db *DB) PruneTargetHealth(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := db.pool.Exec(ctx, queryPruneTargetHealth, before, limit)
	if err != nil {
		return 0, fmt.Errorf("prune target health before %s: %w", before.Format(time.RFC3339), err)
	}
	return int(tag.RowsAffected()), nil
}
