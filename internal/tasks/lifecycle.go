package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
)

// Get reads one of the tenant's tasks: model.ErrNotFound when it has none
// with this id.
func (s *Service) Get(ctx context.Context, tenantID, id uuid.UUID) (*model.Task, error) {
	t, err := s.store.GetTask(ctx, tenantID, id)
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}

// List reads a page of the tenant's tasks, newest first, without their
// bodies.
func (s *Service) List(ctx context.Context, tenantID uuid.UUID, f model.TaskFilter) ([]*model.Task, error) {
	ts, err := s.store.ListTasks(ctx, tenantID, f)
	if err != nil {
		return nil, fmt.Errorf("list tasks of tenant %s: %w", tenantID, err)
	}
	return ts, nil
}

// ListWithBodies is List with each task's body, within budget bytes of
// bodies: cut says that the budget ended the list early, and the next page
// starts after its last task (the store's ListTasksWithBodies).
func (s *Service) ListWithBodies(ctx context.Context, tenantID uuid.UUID, f model.TaskFilter, budget int64) (ts []*model.Task, cut bool, err error) {
	ts, cut, err = s.store.ListTasksWithBodies(ctx, tenantID, f, budget)
	if err != nil {
		return nil, false, fmt.Errorf("list tasks of tenant %s: %w", tenantID, err)
	}
	return ts, cut, nil
}

// Attempts reads at most limit delivery attempts of one of the tenant's
// tasks, in order, those numbered after after (0: from the first):
// model.ErrNotFound when it has no such task.
func (s *Service) Attempts(ctx context.Context, tenantID, id uuid.UUID, after, limit int) ([]model.Attempt, error) {
	as, err := s.store.ListAttempts(ctx, tenantID, id, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list attempts of task %s: %w", id, err)
	}
	return as, nil
}

// Cancel cancels a task still waiting for an attempt (scheduled or
// retrying). Another status gives a *ConflictError; an unknown id
// model.ErrNotFound. Other dispatchers' timers for it need no word: their
// claims find the task canceled.
func (s *Service) Cancel(ctx context.Context, tenantID, id uuid.UUID) (*model.Task, error) {
	t, err := s.store.CancelTask(ctx, tenantID, id)
	if err != nil {
		return nil, changeError("cancel", id, t, err)
	}
	s.announce.Cancel(id)
	return t, nil
}

// CancelMatching cancels every waiting task of the tenant that matches f and
// says how many. It is not atomic (the store cancels in chunks): on an error
// the tasks canceled before it stay canceled, and n counts them. One that
// cancels any task is audited as actor's once over, with f and n.
func (s *Service) CancelMatching(ctx context.Context, tenantID uuid.UUID, f model.CancelFilter, actor string) (n int, err error) {
	canceled, err := s.store.CancelTasks(ctx, tenantID, f)
	for _, id := range canceled {
		s.announce.Cancel(id)
	}
	if err != nil {
		err = fmt.Errorf("cancel tasks of tenant %s: %w", tenantID, err)
	}
	if len(canceled) > 0 {
		detail := map[string]any{"canceled": len(canceled),
			"filter": filterDetail(f.Status, f.ScheduleID, f.PublishID, f.Topic, nil, nil, f.CreatedAfter, f.CreatedBefore)}
		err = s.auditBulk(ctx, tenantID, actor, AuditTasksCanceled, detail, err)
	}
	return len(canceled), err
}

// auditBulk records a bulk change that took tasks, once it is over: with
// the request's context gone too, since the tasks it took stay taken. err
// is the change's own, which wins over the record's; an incomplete change
// says so.
func (s *Service) auditBulk(ctx context.Context, tenantID uuid.UUID, actor, action string, detail map[string]any, err error) error {
	if err != nil {
		detail["incomplete"] = true
	}
	auditErr := s.store.RecordAudit(context.WithoutCancel(ctx), *auditEntry(tenantID, actor, action, detail))
	if err != nil {
		return err
	}
	return auditErr
}

// Reschedule moves a waiting task's next attempt to at (and a scheduled
// one's run_at with it). Another status gives a *ConflictError; an unknown
// id model.ErrNotFound.
func (s *Service) Reschedule(ctx context.Context, tenantID, id uuid.UUID, at time.Time) (*model.Task, error) {
	// The store keeps microseconds, rounding up: decide on the time stored.
	at = model.RoundUpToMicro(at)
	notifyBefore := s.dueSoonBefore(s.clock.Now())
	t, err := s.store.RescheduleTask(ctx, tenantID, id, at, at.Before(notifyBefore))
	if err != nil {
		return nil, changeError("reschedule", id, t, err)
	}
	// A timer left at the old time would only cost a claim that finds the
	// task not due yet; dropping it spares that round trip.
	s.announce.Cancel(id)
	if t.NextAttemptAt != nil {
		a := s.committed(notifyBefore)
		a.task(id, *t.NextAttemptAt)
		a.send(ctx)
	}
	return t, nil
}

// Replay schedules a dead or delivered task again, due now, with the same
// webhook-id and idempotency key, its attempts continuing their count and a
// fresh retry budget. edit, when not nil, changes what is sent first, in the
// same statement: a refused replay edits nothing. Another status gives a
// *ConflictError; an unknown id model.ErrNotFound. The store announces it on
// commit: it is due at once.
//
// A replayed task is pending again, so it needs room in the tenant's
// max_pending_tasks, as a created one does: a *QuotaError otherwise. An
// edit that gives a callback task a callback URL is refused with
// ErrCallbackOfCallback.
func (s *Service) Replay(ctx context.Context, tenant *model.Tenant, id uuid.UUID, edit *model.TaskEdit) (*model.Task, error) {
	tenantID := tenant.ID
	if edit.SetsCallbacks() {
		// What the task is does not change (callback_of is set at its
		// insert and never after), so reading it first decides for good.
		t, err := s.store.GetTask(ctx, tenantID, id)
		if err != nil {
			return nil, fmt.Errorf("replay task %s: %w", id, err)
		}
		if t.CallbackOf != nil {
			return nil, ErrCallbackOfCallback
		}
	}
	if err := checkQuota(ctx, s.store, tenant, 1, nil); err != nil {
		return nil, err
	}
	t, err := s.store.ReplayTask(ctx, tenantID, id, model.RoundUpToMicro(s.clock.Now()), edit)
	if err != nil {
		return nil, changeError("replay", id, t, err)
	}
	if t.NextAttemptAt != nil {
		s.announce.Schedule(t.ID, *t.NextAttemptAt)
	}
	return t, nil
}

// ReplayMatching replays, as Replay does one, every dead task of the tenant
// that matches f, and says how many; with dryRun it only counts them. It is
// not atomic (the store replays in chunks): on an error the tasks replayed
// before it stay replayed, and replayed counts them.
//
// Replayed tasks are pending again: with max_pending_tasks set, it replays
// only as many as the quota has room for, oldest first, and matched says how
// many there were; with no room at all it gives a *QuotaError.
//
// A replay (not a dry run) that replays any task is audited as actor's once
// over, with f and the counts.
func (s *Service) ReplayMatching(ctx context.Context, tenant *model.Tenant, f model.ReplayFilter, dryRun bool, actor string) (matched, replayed int, err error) {
	if dryRun {
		return s.countDead(ctx, tenant.ID, f)
	}
	if quota := tenant.Limits.MaxPendingTasks; quota > 0 {
		pending, err := s.store.CountPendingTasks(ctx, tenant.ID, quota)
		if err != nil {
			return 0, 0, fmt.Errorf("count pending tasks of tenant %s: %w", tenant.ID, err)
		}
		if matched, _, err = s.countDead(ctx, tenant.ID, f); err != nil || matched == 0 {
			return matched, 0, err
		}
		if pending >= quota {
			return matched, 0, &QuotaError{Limit: quota, Pending: pending, Adding: matched, RetryAfter: QuotaRetryAfter}
		}
		f.Most = quota - pending
	}
	ids, at, err := s.store.ReplayTasks(ctx, tenant.ID, f, s.clock.Now())
	for _, id := range ids {
		s.announce.Schedule(id, at)
	}
	matched = max(matched, len(ids))
	if len(ids) > 0 {
		detail := map[string]any{"matched": matched, "replayed": len(ids),
			"filter": filterDetail(nil, f.ScheduleID, f.PublishID, f.Topic, f.URLPrefix, f.Labels, f.CreatedAfter, f.CreatedBefore)}
		err = s.auditBulk(ctx, tenant.ID, actor, AuditTasksReplayed, detail, err)
	}
	return matched, len(ids), err
}

func (s *Service) countDead(ctx context.Context, tenantID uuid.UUID, f model.ReplayFilter) (matched, replayed int, err error) {
	n, err := s.store.CountDeadTasks(ctx, tenantID, f)
	return n, 0, err
}

// changeError wraps a refused change: the store's model.ErrConflict comes
// with the task as it is, which a *ConflictError carries.
func changeError(op string, id uuid.UUID, current *model.Task, err error) error {
	if errors.Is(err, model.ErrConflict) && current != nil {
		return &ConflictError{Op: op, Task: current}
	}
	return fmt.Errorf("%s task %s: %w", op, id, err)
}
