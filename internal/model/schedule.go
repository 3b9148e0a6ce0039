package model

import (
	"time"

	"github.com/google/uuid"
)

// Schedule is a recurring webhook: every occurrence of Cron in Timezone
// becomes a task carrying the schedule's request and retry policy. The store
// does not read cron expressions; the callers that decide occurrence times
// (the API, the dispatcher's materialiser) pass them in.
type Schedule struct {
	ID          uuid.UUID
	TenantID    uuid.UUID
	Cron        string
	Timezone    string
	Paused      bool
	URL         string
	Method      string
	Headers     map[string]string
	Body        []byte
	Timeout     time.Duration
	MaxAttempts int
	MinBackoff  time.Duration
	MaxBackoff  time.Duration
	// Labels are copied to every occurrence's task; nil when none.
	Labels map[string]string
	// OrderingKey is copied to every occurrence's task: occurrences of one
	// schedule then never overlap, whatever their receiver's speed.
	OrderingKey *string
	// FlowKey is copied to every occurrence's task.
	FlowKey *string
	// Callback and FailureCallback are copied to every occurrence's task;
	// nil when none.
	Callback, FailureCallback *string
	// TraceParent and TraceState are the W3C trace context the schedule
	// was created in (see Task), copied to every occurrence's task; empty
	// when none.
	TraceParent, TraceState string
	// NextRunAt is the next occurrence not yet materialised as a task; nil
	// while paused, or once the schedule has no occurrence left.
	NextRunAt *time.Time
	// LastRunAt is the latest occurrence materialised as a task.
	LastRunAt *time.Time
	// CreatedAt is also the anchor of an @every schedule.
	CreatedAt time.Time
	UpdatedAt time.Time
	// SkippedOccurrences counts the occurrences not made tasks because the
	// tenant was at its max_pending_tasks then; LastSkippedAt is the latest.
	SkippedOccurrences int64
	LastSkippedAt      *time.Time
}

// ScheduleFilter selects a page of a tenant's schedules, newest first.
type ScheduleFilter struct {
	// Before, when set, continues a listing after the schedule with this id.
	Before *uuid.UUID
	Limit  int
}
