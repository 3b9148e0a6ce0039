package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Target pauses (migration 00033): a tenant's targets whose tasks wait.
// Every change is announced on TenantNotifyChannel in its transaction, as a
// tenant's own changes are, so that every dispatcher rereads the paused
// targets as it commits (the set of held tenants and targets is one read).

const targetPauseColumns = `tenant_id, target, paused_at, paused_by, reason, since, last_error`

func scanTargetPause(row pgx.Row, extra ...any) (*model.TargetPause, error) {
	var p model.TargetPause
	err := row.Scan(append([]any{&p.TenantID, &p.Target, &p.PausedAt, &p.PausedBy, &p.Reason, &p.Since, &p.LastError}, extra...)...)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// A target already paused keeps its pause as it was (who, why, since
// when): pausing it again changes nothing. The update that changes nothing
// is what makes the statement return the row either way; xmax is 0 on a
// row version the statement inserted.
const queryPauseTarget = `-- name: PauseTarget
INSERT INTO target_pauses (tenant_id, target, paused_at, paused_by, reason, since, last_error)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (tenant_id, target) DO UPDATE SET target = target_pauses.target
RETURNING ` + targetPauseColumns + `, xmax = 0`

// PauseTarget pauses p.Target for p.TenantID, unless it is paused already,
// and returns the pause as it stands: the one made (created), or the one
// there was. A pause made is announced and recorded with the entry audit
// gives, in its transaction.
func (db *DB) PauseTarget(ctx context.Context, p *model.TargetPause, audit *model.AuditEntry) (*model.TargetPause, bool, error) {
	var (
		stored  *model.TargetPause
		created bool
	)
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) (err error) {
		stored, err = scanTargetPause(tx.QueryRow(ctx, queryPauseTarget, p.TenantID, p.Target, p.PausedAt, p.PausedBy,
			p.Reason, p.Since, p.LastError), &created)
		if err != nil || !created {
			return err
		}
		if err := notifyTenantChanged(ctx, tx, p.TenantID); err != nil {
			return err
		}
		return insertAuditOf(ctx, tx, audit)
	})
	if err != nil {
		return nil, false, fmt.Errorf("pause target %s of tenant %s: %w", p.Target, p.TenantID, err)
	}
	return stored, created, nil
}

const queryResumeTarget = `-- name: ResumeTarget
DELETE FROM target_pauses WHERE tenant_id = $1 AND target = $2
RETURNING ` + targetPauseColumns

// A resume starts the target's health afresh: the failures before it no
// longer count towards another pause. A resume of hookwheel's pause waits
// for a success to tell the tenant the target recovered.
const queryResetTargetHealth = `-- name: ResetTargetHealth
UPDATE target_health
SET failing_since = NULL, last_failure_at = NULL, reset_at = greatest(reset_at, $3::timestamptz),
	recovering = recovering OR $4::boolean
WHERE tenant_id = $1 AND target = $2`

// ResumeTarget lifts a tenant's pause of target at at and returns it as it
// was: model.ErrNotFound when the target was not paused. The target's
// failures until then no longer count (target_health). The resume is
// announced and recorded with audit in its transaction.
func (db *DB) ResumeTarget(ctx context.Context, tenantID uuid.UUID, target string, at time.Time, audit *model.AuditEntry) (*model.TargetPause, error) {
	var p *model.TargetPause
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) (err error) {
		if p, err = scanTargetPause(tx.QueryRow(ctx, queryResumeTarget, tenantID, target)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, queryResetTargetHealth, tenantID, target, at, p.PausedBy == model.PausedByHookwheel); err != nil {
			return err
		}
		if err := notifyTenantChanged(ctx, tx, tenantID); err != nil {
			return err
		}
		return insertAuditOf(ctx, tx, audit)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("resume target %s of tenant %s: %w", target, tenantID, err)
	}
	return p, nil
}

const queryListTargetPauses = `-- name: ListTargetPauses
SELECT ` + targetPauseColumns + ` FROM target_pauses WHERE tenant_id = $1 ORDER BY target`

// ListTargetPauses returns the tenant's paused targets in target order. A
// tenant pauses few: the list is not paged.
func (db *DB) ListTargetPauses(ctx context.Context, tenantID uuid.UUID) ([]*model.TargetPause, error) {
	rows, err := db.pool.Query(ctx, queryListTargetPauses, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list paused targets of tenant %s: %w", tenantID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.TargetPause, error) { return scanTargetPause(r) })
	if err != nil {
		return nil, fmt.Errorf("list paused targets of tenant %s: %w", tenantID, err)
	}
	return out, nil
}

const queryPausedTargets = `-- name: PausedTargets
SELECT tenant_id, target FROM target_pauses`

// PausedTargets returns every tenant's paused targets, for the dispatcher's
// set of what it holds back.
func (db *DB) PausedTargets(ctx context.Context) ([]model.PausedTarget, error) {
	rows, err := db.pool.Query(ctx, queryPausedTargets)
	if err != nil {
		return nil, fmt.Errorf("read paused targets: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[model.PausedTarget])
	if err != nil {
		return nil, fmt.Errorf("read paused targets: %w", err)
	}
	return out, nil
}
