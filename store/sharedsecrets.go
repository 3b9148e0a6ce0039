package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookwheel/hookwheel/internal/model"
)

// The no-op update makes the statement return the row whatever happened: the
// one it inserted, the one it found, or the one another node inserted while
// it waited on the conflict, which DO NOTHING would leave unreturned (the
// statement's snapshot predates that row).
const querySharedSecret = `-- name: SharedSecret
INSERT INTO shared_secrets (name, value) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET name = excluded.name
RETURNING value`

// SharedSecret returns the stored value of the shared secret name, storing
// candidate first when there is none: every node that asks gets the value
// of the first that did, whichever it was.
func (db *DB) SharedSecret(ctx context.Context, name, candidate string) (string, error) {
	var value string
	if err := db.pool.QueryRow(ctx, querySharedSecret, name, candidate).Scan(&value); err != nil {
		return "", fmt.Errorf("shared secret %s: %w", name, err)
	}
	return value, nil
}

const queryListSharedSecrets = `-- name: ListSharedSecrets
SELECT name, value FROM shared_secrets ORDER BY name`

// ListSharedSecrets reads every shared secret as stored, by name.
func (db *DB) ListSharedSecrets(ctx context.Context) (map[string]string, error) {
	rows, err := db.pool.Query(ctx, queryListSharedSecrets)
	if err != nil {
		return nil, fmt.Errorf("list shared secrets: %w", err)
	}
	out := map[string]string{}
	var name, value string
	if _, err := pgx.ForEachRow(rows, []any{&name, &value}, func() error {
		out[name] = value
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list shared secrets: %w", err)
	}
	return out, nil
}

const queryReplaceSharedSecret = `-- name: ReplaceSharedSecret
UPDATE shared_secrets SET value = $3 WHERE name = $1 AND value = $2`

// ReplaceSharedSecret stores value for name if it still holds old: the same
// secret sealed again, never another secret. model.ErrConflict when it no
// longer holds old (another node re-sealed it first).
func (db *DB) ReplaceSharedSecret(ctx context.Context, name, old, value string) error {
	tag, err := db.pool.Exec(ctx, queryReplaceSharedSecret, name, old, value)
	if err != nil {
		return fmt.Errorf("re-seal shared secret %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("re-seal shared secret %s: %w", name, model.ErrConflict)
	}
	return nil
}
