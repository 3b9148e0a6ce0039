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

// Flow limits: the rate and parallelism a tenant gives its tasks' flow keys
// (migration 00024). The claim reads them with each keyed task
// (flowLimitOf in claims.go); these statements are the API's.

const flowLimitColumns = `tenant_id, key, rate, period_ms, parallelism, created_at, updated_at`

func scanFlowLimit(row pgx.Row, extra ...any) (*model.FlowLimit, error) {
	var (
		l        model.FlowLimit
		periodMs int64
	)
	err := row.Scan(append([]any{&l.TenantID, &l.Key, &l.Rate, &periodMs, &l.Parallelism, &l.CreatedAt, &l.UpdatedAt}, extra...)...)
	if err != nil {
		return nil, err
	}
	l.Period = time.Duration(periodMs) * time.Millisecond
	return &l, nil
}

// A key that has limits is replaced whatever the quota; a new one is inserted
// only while the tenant has fewer than $6, counted as the topics' quota is
// (which checks and does not reserve). xmax is 0 on a row version the
// statement inserted (see queryPutTopic).
const queryPutFlowLimit = `-- name: PutFlowLimit
INSERT INTO flow_limits (tenant_id, key, rate, period_ms, parallelism)
SELECT $1, $2, $3, $4, $5
WHERE EXISTS (SELECT 1 FROM flow_limits WHERE tenant_id = $1 AND key = $2)
	OR (SELECT count(*) FROM (SELECT 1 FROM flow_limits WHERE tenant_id = $1 LIMIT $6) n) < $6
ON CONFLICT (tenant_id, key) DO UPDATE
	SET rate = excluded.rate, period_ms = excluded.period_ms, parallelism = excluded.parallelism, updated_at = now()
RETURNING ` + flowLimitColumns + `, xmax = 0`

// PutFlowLimit sets the limits of the tenant's flow key l.Key, replacing
// any it had, and fills in l's times. created says whether it had none. A
// new key past the tenant's maxLimits fails with model.ErrFlowLimitQuota.
// audit, when not nil, gives the entry recording the change, which is
// written in the same transaction.
func (db *DB) PutFlowLimit(ctx context.Context, l *model.FlowLimit, maxLimits int, audit func(created bool) *model.AuditEntry) (created bool, err error) {
	var stored *model.FlowLimit
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		stored, err = scanFlowLimit(tx.QueryRow(ctx, queryPutFlowLimit, l.TenantID, l.Key, l.Rate,
			l.Period.Milliseconds(), l.Parallelism, maxLimits), &created)
		if err != nil {
			return err
		}
		return recordAudit(ctx, tx, audit, created)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, model.ErrFlowLimitQuota
	}
	if err != nil {
		return false, fmt.Errorf("put flow limit %q: %w", l.Key, err)
	}
	*l = *stored
	return created, nil
}

const queryGetFlowLimit = `-- name: GetFlowLimit
SELECT ` + flowLimitColumns + ` FROM flow_limits WHERE tenant_id = $1 AND key = $2`

// GetFlowLimit reads the limits of one of a tenant's flow keys;
// ErrNotFound when it has none of its own.
func (db *DB) GetFlowLimit(ctx context.Context, tenantID uuid.UUID, key string) (*model.FlowLimit, error) {
	l, err := scanFlowLimit(db.pool.QueryRow(ctx, queryGetFlowLimit, tenantID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get flow limit %q: %w", key, err)
	}
	return l, nil
}

const queryListFlowLimits = `-- name: ListFlowLimits
SELECT ` + flowLimitColumns + ` FROM flow_limits
WHERE tenant_id = $1 AND ($2::text IS NULL OR key > $2)
ORDER BY key
LIMIT $3`

// ListFlowLimits returns up to f.Limit of the tenant's flow limits in key
// order, byte by byte (the column's collation), walking the primary key.
func (db *DB) ListFlowLimits(ctx context.Context, tenantID uuid.UUID, f model.FlowLimitFilter) ([]*model.FlowLimit, error) {
	rows, err := db.pool.Query(ctx, queryListFlowLimits, tenantID, f.After, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list flow limits: %w", err)
	}
	limits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*model.FlowLimit, error) { return scanFlowLimit(r) })
	if err != nil {
		return nil, fmt.Errorf("list flow limits: %w", err)
	}
	return limits, nil
}

const queryDeleteFlowLimit = `-- name: DeleteFlowLimit
DELETE FROM flow_limits WHERE tenant_id = $1 AND key = $2
RETURNING ` + flowLimitColumns

// DeleteFlowLimit deletes the limits of one of a tenant's flow keys and
// returns them as they were; ErrNotFound when it had none. audit, when
// given, is recorded in the same transaction.
func (db *DB) DeleteFlowLimit(ctx context.Context, tenantID uuid.UUID, key string, audit *model.AuditEntry) (*model.FlowLimit, error) {
	var l *model.FlowLimit
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) (err error) {
		if l, err = scanFlowLimit(tx.QueryRow(ctx, queryDeleteFlowLimit, tenantID, key)); err != nil {
			return err
		}
		return insertAuditOf(ctx, tx, audit)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("delete flow limit %q: %w", key, err)
	}
	return l, nil
}
