package model

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// CreateStore runs the statements that create tasks: on the store's own
// connections, or in a transaction (store.TxStore: an application's, or the
// store's own while it holds the lock on a tenant's count of tasks created
// today). It is declared here rather than by internal/tasks, which uses
// it, because the store hands one to a function of its caller's
// (WithTasksCreated), and both must name its type.
type CreateStore interface {
	CountPendingTasks(ctx context.Context, tenantID uuid.UUID, upTo int) (int, error)
	HasIdempotencyKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error)
	HasPublishKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error)
	InsertTask(ctx context.Context, t *Task, notifyDue bool) (existing *Task, created bool, err error)
	InsertTasks(ctx context.Context, tasks []*Task, notifyBefore time.Time) ([]InsertResult, error)
	InsertPublishes(ctx context.Context, pubs []*Publish, tasks []*Task, notifyBefore time.Time) ([]PublishResult, []InsertResult, error)
}

// NextUTCMidnight is when the UTC day of now ends: a daily quota's count
// starts again from zero then.
func NextUTCMidnight(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}
