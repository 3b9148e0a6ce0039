package tasks

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/schedule"
	"github.com/hookwheel/hookwheel/internal/tracing"
)

// Recurring schedules. A schedule is stored with its first occurrence; the
// dispatcher that owns its partition materialises each occurrence as a task
// ahead of time. What happens here is what stopping and restarting one means
// for the occurrences already materialised.

// CreateSchedule stores a schedule of the tenant, giving it its id and
// tenant. sc.NextRunAt is its first occurrence (nil when paused). The
// creation is audited as actor's.
func (s *Service) CreateSchedule(ctx context.Context, tenant *model.Tenant, sc *model.Schedule, actor string) error {
	if quota := tenant.Limits.MaxSchedules; quota > 0 {
		// Checked, not reserved, as max_pending_tasks is: concurrent
		// creations may overshoot it by what they add together.
		n, err := s.store.CountSchedules(ctx, tenant.ID, quota)
		if err != nil {
			return fmt.Errorf("create schedule: %w", err)
		}
		if n >= quota {
			return &ScheduleQuotaError{Limit: quota}
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("create schedule id: %w", err)
	}
	sc.ID, sc.TenantID = id, tenant.ID
	if sc.TraceParent == "" {
		// Every occurrence's webhooks continue the trace of the create.
		sc.TraceParent, sc.TraceState = tracing.Carried(ctx)
	}
	if err := s.store.InsertSchedule(ctx, sc, auditEntry(tenant.ID, actor, AuditScheduleCreated, scheduleDetail(sc))); err != nil {
		return fmt.Errorf("create schedule: %w", err)
	}
	return nil
}

// GetSchedule reads one of the tenant's schedules: model.ErrNotFound when it
// has none with this id.
func (s *Service) GetSchedule(ctx context.Context, tenantID, id uuid.UUID) (*model.Schedule, error) {
	sc, err := s.store.GetSchedule(ctx, tenantID, id)
	if err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", id, err)
	}
	return sc, nil
}

// ListSchedules reads a page of the tenant's schedules, newest first.
func (s *Service) ListSchedules(ctx context.Context, tenantID uuid.UUID, f model.ScheduleFilter) ([]*model.Schedule, error) {
	scs, err := s.store.ListSchedules(ctx, tenantID, f)
	if err != nil {
		return nil, fmt.Errorf("list schedules of tenant %s: %w", tenantID, err)
	}
	return scs, nil
}

// ListSchedulesWithBodies is ListSchedules with each schedule's body, within
// budget bytes of bodies: cut says that the budget ended the list early.
func (s *Service) ListSchedulesWithBodies(ctx context.Context, tenantID uuid.UUID, f model.ScheduleFilter, budget int64) (scs []*model.Schedule, cut bool, err error) {
	scs, cut, err = s.store.ListSchedulesWithBodies(ctx, tenantID, f, budget)
	if err != nil {
		return nil, false, fmt.Errorf("list schedules of tenant %s: %w", tenantID, err)
	}
	return scs, cut, nil
}

// PauseSchedule stops a schedule and cancels its waiting occurrences; a
// pause that changes something is audited as actor's.
func (s *Service) PauseSchedule(ctx context.Context, tenantID, id uuid.UUID, actor string) (*model.Schedule, error) {
	sc, canceled, err := s.store.PauseSchedule(ctx, tenantID, id,
		auditEntry(tenantID, actor, AuditSchedulePaused, map[string]any{"schedule_id": id}))
	if err != nil {
		return nil, fmt.Errorf("pause schedule %s: %w", id, err)
	}
	s.forget(canceled)
	return sc, nil
}

// DeleteSchedule deletes a schedule and cancels its waiting occurrences,
// audited as actor's.
func (s *Service) DeleteSchedule(ctx context.Context, tenantID, id uuid.UUID, actor string) (*model.Schedule, error) {
	sc, canceled, err := s.store.DeleteSchedule(ctx, tenantID, id,
		auditEntry(tenantID, actor, AuditScheduleDeleted, map[string]any{"schedule_id": id}))
	if err != nil {
		return nil, fmt.Errorf("delete schedule %s: %w", id, err)
	}
	s.forget(canceled)
	return sc, nil
}

// forget tells the local dispatcher that canceled occurrences need no timer.
// Only hygiene: a canceled task's timer finds nothing to claim.
func (s *Service) forget(canceled []uuid.UUID) {
	for _, id := range canceled {
		s.announce.Cancel(id)
	}
}

// ResumeSchedule restarts a paused schedule from its first occurrence after
// now: what it missed while paused is not sent. A resume that changes
// something is audited as actor's.
func (s *Service) ResumeSchedule(ctx context.Context, tenantID, id uuid.UUID, actor string) (*model.Schedule, error) {
	now := s.clock.Now()
	sc, err := s.store.ResumeSchedule(ctx, tenantID, id, func(sc *model.Schedule) (*time.Time, error) {
		sch, err := schedule.Parse(sc.Cron, sc.Timezone, sc.CreatedAt)
		if err != nil {
			return nil, fmt.Errorf("read stored schedule: %w", err)
		}
		next := sch.Next(now)
		if next.IsZero() {
			return nil, nil
		}
		return &next, nil
	}, auditEntry(tenantID, actor, AuditScheduleResumed, map[string]any{"schedule_id": id}))
	if err != nil {
		return nil, fmt.Errorf("resume schedule %s: %w", id, err)
	}
	return sc, nil
}

// NextRuns previews the next n occurrences of a schedule after now, whether
// or not it is paused, in the schedule's time zone.
func (s *Service) NextRuns(ctx context.Context, tenantID, id uuid.UUID, n int) ([]time.Time, error) {
	sc, err := s.GetSchedule(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	sch, err := schedule.Parse(sc.Cron, sc.Timezone, sc.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("read stored schedule %s: %w", id, err)
	}
	times := sch.NextN(s.clock.Now(), n)
	for i, at := range times {
		times[i] = at.In(sch.Location())
	}
	return times, nil
}

// UpdateSchedule changes a schedule in place. edit gets the schedule as it
// is now, under its row lock (so it sees what a materialiser committed
// last), and returns the schedule as the caller wants it, validated: its
// cron, timezone, paused, request, retry policy, labels and ordering key are taken, the
// rest is decided here. An error of edit is returned wrapped, and nothing
// changes.
//
// What the change means for its occurrences:
//   - paused, it is a pause: the waiting occurrences are canceled;
//   - unpaused, it is a resume: NextRunAt is the first occurrence after now;
//   - a new cron or timezone: NextRunAt is the first occurrence of the new
//     recurrence after now (an @every schedule stays anchored at its
//     creation);
//   - otherwise NextRunAt is kept, and the new request applies from the
//     next occurrence materialised.
//
// Occurrences already materialised, and not canceled by a pause, keep their
// time and their request: an occurrence is a task from the moment it is
// materialised, and a task is changed only through the task calls. One at an
// instant that the new recurrence also has stands for that occurrence: the
// unique (schedule, occurrence) index keeps a second from being made.
//
// A change that leaves the schedule as it was writes nothing (UpdatedAt is
// kept, nothing audited). Another tenant's, a deleted or an unknown id is
// model.ErrNotFound. A change is audited as actor's, with the schedule as
// written.
func (s *Service) UpdateSchedule(ctx context.Context, tenantID, id uuid.UUID, edit func(*model.Schedule) (*model.Schedule, error), actor string) (*model.Schedule, error) {
	now := s.clock.Now()
	sc, canceled, err := s.store.UpdateSchedule(ctx, tenantID, id, func(before *model.Schedule) (*model.Schedule, error) {
		want, err := edit(before)
		if err != nil {
			return nil, err
		}
		after := *before
		after.Cron, after.Timezone, after.Paused = want.Cron, want.Timezone, want.Paused
		after.URL, after.Method, after.Headers, after.Body = want.URL, want.Method, want.Headers, want.Body
		after.Timeout, after.MaxAttempts, after.MinBackoff, after.MaxBackoff = want.Timeout, want.MaxAttempts, want.MinBackoff, want.MaxBackoff
		after.Labels, after.OrderingKey, after.FlowKey = want.Labels, want.OrderingKey, want.FlowKey
		after.Callback, after.FailureCallback = want.Callback, want.FailureCallback
		switch {
		case after.Paused:
			after.NextRunAt = nil
		case before.Paused || after.Cron != before.Cron || after.Timezone != before.Timezone:
			sch, err := schedule.Parse(after.Cron, after.Timezone, before.CreatedAt)
			if err != nil {
				return nil, fmt.Errorf("read changed schedule: %w", err)
			}
			after.NextRunAt = nil
			if next := sch.Next(now); !next.IsZero() {
				after.NextRunAt = &next
			}
		}
		if sameSchedule(before, &after) {
			return before, nil
		}
		return &after, nil
	}, func(written *model.Schedule) *model.AuditEntry {
		return auditEntry(tenantID, actor, AuditScheduleUpdated, scheduleDetail(written))
	})
	if err != nil {
		return nil, fmt.Errorf("update schedule %s: %w", id, err)
	}
	s.forget(canceled)
	return sc, nil
}

// sameSchedule reports whether a and b differ in nothing UpdateSchedule
// writes.
func sameSchedule(a, b *model.Schedule) bool {
	sameNext := (a.NextRunAt == nil) == (b.NextRunAt == nil) && (a.NextRunAt == nil || a.NextRunAt.Equal(*b.NextRunAt))
	return sameNext && a.Cron == b.Cron && a.Timezone == b.Timezone && a.Paused == b.Paused &&
		a.URL == b.URL && a.Method == b.Method && maps.Equal(a.Headers, b.Headers) && bytes.Equal(a.Body, b.Body) &&
		a.Timeout == b.Timeout && a.MaxAttempts == b.MaxAttempts && a.MinBackoff == b.MinBackoff &&
		a.MaxBackoff == b.MaxBackoff && maps.Equal(a.Labels, b.Labels) && equalText(a.OrderingKey, b.OrderingKey) && equalText(a.FlowKey, b.FlowKey) &&
		equalText(a.Callback, b.Callback) && equalText(a.FailureCallback, b.FailureCallback)
}

// equalText reports whether two optional texts are both absent or equal.
func equalText(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
