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

// insertAuditOf records entry when there is one.
func insertAuditOf(ctx context.Context, q execer, entry *model.AuditEntry) error {
	if entry == nil {
		return nil
	}
	return insertAudit(ctx, q, *entry)
}

// recordAudit records the entry audit gives for outcome, when audit is not
// nil and gives one.
func recordAudit[T any](ctx context.Context, q execer, audit func(T) *model.AuditEntry, outcome T) error {
	if audit == nil {
		return nil
	}
	return insertAuditOf(ctx, q, audit(outcome))
}

// RecordAudit records an entry on its own, for changes made outside a store
// transaction (hookwheel secrets rekey, bulk cancels and replays, which
// commit in chunks) and for sign-ins.
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

// Audit entries are deleted oldest first by id, which is time order (UUIDv7):
// the primary key's range below the cutoff's id bounds the scan, so a pass
// with nothing to delete reads one index page, whatever the log's size. at
// is checked too, for an entry whose id says otherwise.
const queryPurgeAudit = `-- name: PurgeAudit
DELETE FROM audit_log
WHERE id = ANY (ARRAY(
	SELECT id FROM audit_log WHERE id < $1 AND at < $2 ORDER BY id LIMIT $3
))`

// PurgeAudit deletes up to limit audit entries recorded before before,
// oldest first, and says how many: a pass that deletes limit may have left
// more behind.
func (db *DB) PurgeAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := db.pool.Exec(ctx, queryPurgeAudit, uuidV7Floor(before), before, limit)
	if err != nil {
		return 0, fmt.Errorf("purge audit entries before %s: %w", before.Format(time.RFC3339), err)
	}
	return int(tag.RowsAffected()), nil
}

// uuidV7Floor is the least id of t's millisecond in UUIDv7 order: every
// UUIDv7 made at t or later sorts after it, every one made before t before.
func uuidV7Floor(t time.Time) uuid.UUID {
	var u uuid.UUID
	ms := uint64(max(t.UnixMilli(), 0))
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	return u
}

// revokeAudited runs a revocation: query sets revoked_at once, returning
// the row into targets and, last, whether this statement revoked it, and
// the audit entry is written only then, in the same transaction, so
// revoking twice records once. model.ErrNotFound when no row matched.
func (db *DB) revokeAudited(ctx context.Context, query string, args, targets []any, audit model.AuditEntry) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		var now bool
		if err := tx.QueryRow(ctx, query, args...).Scan(append(targets, &now)...); err != nil {
			return err
		}
		if !now {
			return nil
		}
		return insertAudit(ctx, tx, audit)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return model.ErrNotFound
	}
	return err
}
