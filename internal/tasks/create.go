package tasks

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Created is the outcome of a create that did not fail.
type Created struct {
	// Task is the task created or, when Replayed, the task an earlier request
	// with the same idempotency key created, as it is now.
	Task *model.Task
	// Replayed says the request repeated an earlier one: nothing was stored.
	Replayed bool
}

// Create stores one task of tenant, due at t.RunAt. It gives t its id and
// tenant. A task carrying an idempotency key the tenant already used is not
// stored: the earlier task is returned, Replayed, when t.RequestHash matches
// its own, and with ErrKeyReused when it does not. Over the tenant's
// pending-task quota it fails with a *QuotaError, unless its idempotency key
// names a task the tenant already has (a client retrying a create that
// succeeded gets its task back, not a refusal).
//
// A task due within the look-ahead window is announced on commit by the
// store and told to the local dispatcher (see announcement).
func (s *Service) Create(ctx context.Context, tenant *model.Tenant, t *model.Task) (Created, error) {
	notifyBefore := s.dueSoonBefore(s.clock.Now())
	res, err := CreateWith(ctx, s.store, tenant, t, notifyBefore)
	if err != nil || res.Replayed {
		return res, err
	}
	a := s.committed(notifyBefore)
	a.task(t.ID, t.RunAt)
	a.send(ctx)
	return res, nil
}

// Creator is what creating tasks needs of the store: *store.DB is one, and
// so is a store.TxStore, which runs the statements in a caller's
// transaction.
type Creator interface {
	CountPendingTasks(ctx context.Context, tenantID uuid.UUID, upTo int) (int, error)
	HasIdempotencyKey(ctx context.Context, tenantID uuid.UUID, key string) (bool, error)
	InsertTask(ctx context.Context, t *model.Task, notifyDue bool) (existing *model.Task, created bool, err error)
	InsertTasks(ctx context.Context, tasks []*model.Task, notifyBefore time.Time) ([]model.InsertResult, error)
}

// CreateWith is Create through st, without telling anyone of the task but
// by the notification st's insert sends on commit when the task falls due
// before notifyBefore. The Service calls it and then announces; a program
// inserting tasks in its own transaction calls it with st bound to that
// transaction, and decides notifyBefore for a commit that may come long
// after (see package txenqueue).
func CreateWith(ctx context.Context, st Creator, tenant *model.Tenant, t *model.Task, notifyBefore time.Time) (Created, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Created{}, fmt.Errorf("create task id: %w", err)
	}
	t.ID, t.TenantID = id, tenant.ID
	if err := checkQuota(ctx, st, tenant, 1, t.IdempotencyKey); err != nil {
		return Created{}, err
	}
	existing, created, err := st.InsertTask(ctx, t, t.RunAt.Before(notifyBefore))
	if err != nil {
		return Created{}, fmt.Errorf("create task: %w", err)
	}
	if !created {
		if !bytes.Equal(existing.RequestHash, t.RequestHash) {
			return Created{Task: existing}, ErrKeyReused
		}
		return Created{Task: existing, Replayed: true}, nil
	}
	return Created{Task: t}, nil
}

// BatchResult is what became of one task of a batch.
type BatchResult struct {
	Created
	// Err, when set, is why the task was not stored: a *QuotaError, or
	// ErrKeyReused (Task is then the task holding the key).
	Err error
}

// CreateBatch stores tasks of tenant in one statement, giving each its id
// and tenant; results[i] is what became of tasks[i]. Each task is created,
// replayed or refused for its key as by Create. The pending-task quota
// admits tasks in order: those that do not fit are refused with a
// *QuotaError each and not stored. The idempotency exception of Create does
// not apply here: a batch is counted as sent.
//
// The error is for the batch as a whole, which the store takes all or
// nothing: none of the tasks is then stored.
func (s *Service) CreateBatch(ctx context.Context, tenant *model.Tenant, tasks []*model.Task) ([]BatchResult, error) {
	notifyBefore := s.dueSoonBefore(s.clock.Now())
	results, err := CreateBatchWith(ctx, s.store, tenant, tasks, notifyBefore)
	if err != nil {
		return nil, err
	}
	a := s.committed(notifyBefore)
	for _, res := range results {
		if res.Err == nil && !res.Replayed {
			a.task(res.Task.ID, res.Task.RunAt)
		}
	}
	a.send(ctx)
	return results, nil
}

// CreateBatchWith is CreateBatch through st, without telling anyone of the
// tasks but by the notification st's insert sends on commit for those due
// before notifyBefore (as CreateWith).
func CreateBatchWith(ctx context.Context, st Creator, tenant *model.Tenant, tasks []*model.Task, notifyBefore time.Time) ([]BatchResult, error) {
	for _, t := range tasks {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("create task id: %w", err)
		}
		t.ID, t.TenantID = id, tenant.ID
	}
	results := make([]BatchResult, len(tasks))
	admitted := tasks
	if quota := tenant.Limits.MaxPendingTasks; quota > 0 && len(tasks) > 0 {
		current, err := st.CountPendingTasks(ctx, tenant.ID, quota)
		if err != nil {
			return nil, fmt.Errorf("count pending tasks of tenant %s: %w", tenant.ID, err)
		}
		room := max(0, quota-current)
		if room < len(tasks) {
			refused := &QuotaError{Limit: quota, Pending: current, Adding: len(tasks), RetryAfter: QuotaRetryAfter}
			for i := room; i < len(tasks); i++ {
				results[i].Err = refused
			}
			admitted = tasks[:room]
		}
	}

	stored, err := st.InsertTasks(ctx, admitted, notifyBefore)
	if err != nil {
		return nil, fmt.Errorf("create %d tasks: %w", len(admitted), err)
	}
	for i, res := range stored {
		t := admitted[i]
		switch {
		case res.Created:
			results[i].Task = t
		case bytes.Equal(res.Existing.RequestHash, t.RequestHash):
			results[i].Task, results[i].Replayed = res.Existing, true
		default:
			results[i].Task, results[i].Err = res.Existing, ErrKeyReused
		}
	}
	return results, nil
}

// checkQuota refuses, with a *QuotaError, n more tasks that would bring the
// tenant's pending tasks above its max_pending_tasks. key, when set, is the
// idempotency key of the one task asked for: a key the tenant already used
// creates nothing, so it passes.
//
// Cost: nothing for a tenant without the quota; otherwise one query counting
// the tenant's pending tasks up to the quota (an index-only range scan, about
// 0.35 µs per pending task, so at most a few milliseconds for a quota of
// 10,000). It checks, it does not reserve: concurrent requests of one tenant
// may each pass and together overshoot the quota by what they add.
func checkQuota(ctx context.Context, st Creator, tenant *model.Tenant, n int, key *string) error {
	quota := tenant.Limits.MaxPendingTasks
	if quota <= 0 || n <= 0 {
		return nil
	}
	pending, err := st.CountPendingTasks(ctx, tenant.ID, quota)
	if err != nil {
		return fmt.Errorf("count pending tasks of tenant %s: %w", tenant.ID, err)
	}
	if pending+n <= quota {
		return nil
	}
	if key != nil && *key != "" {
		exists, err := st.HasIdempotencyKey(ctx, tenant.ID, *key)
		if err != nil {
			return fmt.Errorf("look up idempotency key of tenant %s: %w", tenant.ID, err)
		}
		if exists {
			return nil
		}
	}
	return &QuotaError{Limit: quota, Pending: pending, Adding: n, RetryAfter: QuotaRetryAfter}
}

// Pending counts the tenant's pending tasks (scheduled, retrying or
// dispatching), exactly: it costs in proportion to them.
func (s *Service) Pending(ctx context.Context, tenantID uuid.UUID) (int, error) {
	n, err := s.store.CountPendingTasks(ctx, tenantID, 0)
	if err != nil {
		return 0, fmt.Errorf("count pending tasks of tenant %s: %w", tenantID, err)
	}
	return n, nil
}
