package store

import (
	"context"
	"fmt"
)

const querySharedSecret = `-- name: SharedSecret
WITH made AS (
	INSERT INTO shared_secrets (name, value) VALUES ($1, $2)
	ON CONFLICT (name) DO NOTHING
	RETURNING value
)
SELECT value FROM made
UNION ALL
SELECT value FROM shared_secrets WHERE name = $1
LIMIT 1`

// SharedSecret returns the stored value of the shared secret name, storing
// candidate first when there is none: every node that asks gets the value
// of the first that did, whichever it was. The insert's row is not visible
// to the statement's own read, hence the union of the two.
func (db *DB) SharedSecret(ctx context.Context, name, candidate string) (string, error) {
	var value string
	if err := db.pool.QueryRow(ctx, querySharedSecret, name, candidate).Scan(&value); err != nil {
		return "", fmt.Errorf("shared secret %s: %w", name, err)
	}
	return value, nil
}
