package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

const queryInsertAudit = `-- name: InsertAudit
INSERT INTO audit_log (id, tenant_id, actor, action, detail) VALUES ($1, $2, $3, $4, $5)
RETURNING at`

// insertAudit records entry inside the transaction of the change it
// describes, so that no change commits without its record nor a record
// without its change.
func insertAudit(ctx context.Context, q execer, entry model.AuditEntry) error {
	if entry.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("audit id: %w", err)
		}
		entry.ID = id
	}
	detail := entry.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	if err := q.QueryRow(ctx, queryInsertAudit, entry.ID, entry.TenantID, entry.Actor, entry.Action, detail).Scan(&entry.At); err != nil {
		return fmt.Errorf("record audit %s: %w", entry.Action, err)
	}
	return nil
}

// RecordAudit records an entry on its own, for changes made outside a store
// transaction (hookwheel secrets rekey).
func (db *DB) RecordAudit(ctx context.Context, entry model.AuditEntry) error {
	return insertAudit(ctx, db.pool, entry)
}

const queryListAudit = `-- name: ListAudit
SELECT id, tenant_id, actor, action, detail, at FROM audit_log
WHERE ($1::uuid IS NULL OR tenant_id = $1) AND ($2::uuid IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3`

// ListAudit returns audit entries newest first.
func (db *DB) ListAudit(ctx context.Context, f model.AuditFilter) ([]model.AuditEntry, error) {
	rows, err := db.pool.Query(ctx, queryListAudit, f.TenantID, f.Before, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.AuditEntry, error) {
		var e model.AuditEntry
		err := r.Scan(&e.ID, &e.TenantID, &e.Actor, &e.Action, &e.Detail, &e.At)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return entries, nil
}
