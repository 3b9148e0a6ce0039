package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

const queryAnnounceDue = `-- name: AnnounceDue
SELECT pg_notify('` + DueNotifyChannel + `', d.id::text || ' ' || d.payload)
FROM unnest($1::uuid[], $2::text[]) AS d(id, payload)`

// AnnounceDue announces committed tasks on DueNotifyChannel, each due at
// the time it maps to, as the statements that store tasks do for those
// falling due soon. It is for tasks found to need an announcement only
// after their write committed: a loader pass that ran while the write was in
// flight may have widened its window past them without seeing them. The
// statement is its own transaction, so the notifications go out at once.
func (db *DB) AnnounceDue(ctx context.Context, due map[uuid.UUID]time.Time) error {
	if len(due) == 0 {
		return nil
	}
	ids := make([][16]byte, 0, len(due))
	payloads := make([]string, 0, len(due))
	for id, at := range due {
		ids = append(ids, id)
		payloads = append(payloads, strconv.FormatInt(at.UnixMicro(), 10))
	}
	if _, err := db.pool.Exec(ctx, queryAnnounceDue, ids, payloads); err != nil {
		return fmt.Errorf("announce %d due tasks: %w", len(due), err)
	}
	return nil
}
