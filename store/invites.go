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

// Invites to sign up (migration 00031): created by the operator, redeemed
// once by a sign-up, revoked while unused.

const inviteColumns = `id, code_hash, prefix, note, created_by, created_at, expires_at, used_at, used_by`

func inviteTargets(i *model.Invite) []any {
	return []any{&i.ID, &i.CodeHash, &i.Prefix, &i.Note, &i.CreatedBy, &i.CreatedAt, &i.ExpiresAt, &i.UsedAt, &i.UsedBy}
}

const queryInsertInvite = `-- name: InsertInvite
INSERT INTO invites (id, code_hash, prefix, note, created_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING created_at`

// CreateInvite stores an invite with its audit entry.
func (db *DB) CreateInvite(ctx context.Context, inv *model.Invite, audit model.AuditEntry) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, queryInsertInvite, inv.ID, inv.CodeHash, inv.Prefix, inv.Note, inv.CreatedBy, inv.ExpiresAt).
			Scan(&inv.CreatedAt)
		if err != nil {
			return fmt.Errorf("insert invite: %w", err)
		}
		return insertAudit(ctx, tx, audit)
	})
	if err != nil {
		return fmt.Errorf("create invite %s: %w", inv.ID, err)
	}
	return nil
}

const queryListInvites = `-- name: ListInvites
SELECT ` + inviteColumns + ` FROM invites
WHERE ($1::uuid IS NULL OR id < $1)
ORDER BY id DESC
LIMIT $2`

// ListInvites returns up to limit invites, newest first, older than the
// invite before when it is given.
func (db *DB) ListInvites(ctx context.Context, before *uuid.UUID, limit int) ([]model.Invite, error) {
	rows, err := db.pool.Query(ctx, queryListInvites, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.Invite, error) {
		var i model.Invite
		err := r.Scan(inviteTargets(&i)...)
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	return list, nil
}

const queryDeleteUnusedInvite = `-- name: DeleteUnusedInvite
DELETE FROM invites WHERE id = $1 AND used_at IS NULL
RETURNING ` + inviteColumns

const queryInviteExists = `-- name: InviteExists
SELECT 1 FROM invites WHERE id = $1`

// RevokeInvite deletes an unused invite, with the audit entry audit gives
// for it, and returns it: its code signs up no one from then on.
// ErrNotFound when there is no such invite, ErrConflict when it is used
// (its row records who signed up with it).
func (db *DB) RevokeInvite(ctx context.Context, id uuid.UUID, audit func(*model.Invite) *model.AuditEntry) (*model.Invite, error) {
	var inv model.Invite
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, queryDeleteUnusedInvite, id).Scan(inviteTargets(&inv)...)
		if errors.Is(err, pgx.ErrNoRows) {
			var one int
			switch err := tx.QueryRow(ctx, queryInviteExists, id).Scan(&one); {
			case errors.Is(err, pgx.ErrNoRows):
				return model.ErrNotFound
			case err != nil:
				return fmt.Errorf("find invite: %w", err)
			}
			return model.ErrConflict
		}
		if err != nil {
			return fmt.Errorf("delete invite: %w", err)
		}
		return recordAudit(ctx, tx, audit, &inv)
	})
	if errors.Is(err, model.ErrNotFound) || errors.Is(err, model.ErrConflict) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("revoke invite %s: %w", id, err)
	}
	return &inv, nil
}

// queryRedeemInvite takes the invite whose code hashes to $1 for a sign-up,
// in one statement: the UPDATE sets used_at only on a row whose used_at is
// still NULL and which has not expired. Two sign-ups racing for one code
// both reach the row; the second waits for the first's lock and, under READ
// COMMITTED, checks the condition again on the row the first committed, so
// it updates nothing. found reads the row as the statement's snapshot saw
// it, to tell the caller why a code that updated nothing did not redeem.
const queryRedeemInvite = `-- name: RedeemInvite
WITH found AS (
	SELECT id, used_at, expires_at FROM invites WHERE code_hash = $1
), redeemed AS (
	UPDATE invites SET used_at = now()
	WHERE code_hash = $1 AND used_at IS NULL AND expires_at > now()
	RETURNING ` + inviteColumns + `
)
SELECT r.*, f.used_at IS NOT NULL, f.expires_at <= now()
FROM found f LEFT JOIN redeemed r ON true`

// RedeemInvite marks the invite whose code hashes to codeHash used, and
// returns it; its used_by is set by CompleteInvite once the tenant exists.
// A code is redeemed once, however many sign-ups race for it. Otherwise
// model.ErrInviteUnknown, ErrInviteUsed or ErrInviteExpired.
func (db *DB) RedeemInvite(ctx context.Context, codeHash []byte) (*model.Invite, error) {
	// The redeemed columns are NULL when the UPDATE took nothing.
	var (
		id, usedBy           *uuid.UUID
		hash                 []byte
		prefix, note, by     *string
		created, expires, at *time.Time
		used, expired        bool
	)
	err := db.pool.QueryRow(ctx, queryRedeemInvite, codeHash).
		Scan(&id, &hash, &prefix, &note, &by, &created, &expires, &at, &usedBy, &used, &expired)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, model.ErrInviteUnknown
	case err != nil:
		return nil, fmt.Errorf("redeem invite: %w", err)
	case id != nil:
		return &model.Invite{ID: *id, CodeHash: hash, Prefix: *prefix, Note: *note, CreatedBy: *by, CreatedAt: *created,
			ExpiresAt: *expires, UsedAt: at, UsedBy: usedBy}, nil
	case used:
		return nil, model.ErrInviteUsed
	case expired:
		return nil, model.ErrInviteExpired
	}
	// Unused and unexpired as the snapshot saw it, yet not updated: a
	// sign-up racing for the same code took it first.
	return nil, model.ErrInviteUsed
}

const queryCompleteInvite = `-- name: CompleteInvite
UPDATE invites SET used_by = $2 WHERE id = $1 AND used_at IS NOT NULL AND used_by IS NULL`

// CompleteInvite records the tenant a redeemed invite signed up, with the
// sign-up's audit entry.
func (db *DB) CompleteInvite(ctx context.Context, id, tenantID uuid.UUID, audit model.AuditEntry) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, queryCompleteInvite, id, tenantID)
		if err != nil {
			return fmt.Errorf("set used_by: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("invite is not redeemed, or records another tenant already")
		}
		return insertAudit(ctx, tx, audit)
	})
	if err != nil {
		return fmt.Errorf("complete invite %s for tenant %s: %w", id, tenantID, err)
	}
	return nil
}

const queryReleaseInvite = `-- name: ReleaseInvite
UPDATE invites SET used_at = NULL WHERE id = $1 AND used_by IS NULL`

// ReleaseInvite gives a redeemed invite back, unused, when the sign-up that
// redeemed it failed to make its tenant.
func (db *DB) ReleaseInvite(ctx context.Context, id uuid.UUID) error {
	if _, err := db.pool.Exec(ctx, queryReleaseInvite, id); err != nil {
		return fmt.Errorf("release invite %s: %w", id, err)
	}
	return nil
}
