package model

import (
	"net/netip"
	"time"

	"github.com/google/uuid"
)

// TaskStatus is where a task is in its life.
type TaskStatus string

// The task statuses. scheduled and retrying wait for an attempt; dispatching
// is owned by one sender; delivered, dead, canceled and expired are final.
const (
	StatusScheduled   TaskStatus = "scheduled"
	StatusDispatching TaskStatus = "dispatching"
	StatusRetrying    TaskStatus = "retrying"
	StatusDelivered   TaskStatus = "delivered"
	StatusDead        TaskStatus = "dead"
	StatusCanceled    TaskStatus = "canceled"
	// StatusExpired ends a task whose next attempt would have started at or
	// after its ExpiresAt: no attempt is made, and its failure callback
	// hears of it as of a death.
	StatusExpired TaskStatus = "expired"
)

// Task is a scheduled HTTP callback.
type Task struct {
	ID             uuid.UUID
	TenantID       uuid.UUID
	Status         TaskStatus
	URL            string
	Method         string
	Headers        map[string]string
	Body           []byte
	RunAt          time.Time
	NextAttemptAt  *time.Time
	Timeout        time.Duration
	MaxAttempts    int
	MinBackoff     time.Duration
	MaxBackoff     time.Duration
	Attempts       int
	AttemptBase    int // Attempts when last replayed (0 if never); MaxAttempts more attempts are allowed after it
	LastStatusCode *int
	LastError      *string
	IdempotencyKey *string
	RequestHash    []byte
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// ScheduleID is the schedule this task is an occurrence of, if any.
	ScheduleID *uuid.UUID
	// Labels are the task's own key-value pairs, which lists filter on;
	// nil (or empty) when it has none.
	Labels map[string]string
	// OrderingKey, when set, delivers the task only after every task of its
	// tenant with the same key ordered before it (by RunAt, then creation)
	// is delivered, dead or canceled, and never while another is in flight.
	OrderingKey *string
	// FlowKey, when set, holds the task's sends to the rate and parallelism
	// its tenant set for the key (FlowLimit), across every node.
	FlowKey *string
	// Callback is the URL told of the task's delivery, FailureCallback the
	// one told of its death; nil when none. A callback task has neither.
	Callback, FailureCallback *string
	// CallbackOf, on a callback task, is the task whose outcome it reports.
	CallbackOf *uuid.UUID
	// CallbackTaskID is the latest callback task the task's outcome made;
	// nil before one was made.
	CallbackTaskID *uuid.UUID
	// PublishID is the publish to a topic this task is one endpoint's
	// delivery of, if any; Topic is that topic's name, and EndpointName the
	// endpoint's, when it has one.
	PublishID    *uuid.UUID
	Topic        *string
	EndpointName *string
	// ExpiresAt, when set, is the instant from which no attempt of the task
	// may start (ExpiredAt); nil: it never expires.
	ExpiresAt *time.Time
	// TraceParent and TraceState are the W3C trace context the task was
	// created in, as the traceparent and tracestate headers spell it; empty
	// when it was created outside any trace. Each attempt's webhook is a
	// child of it (package tracing).
	TraceParent, TraceState string
}

// ExpiredAt reports whether an attempt of t starting at at would start too
// late: at or after its ExpiresAt.
func (t *Task) ExpiredAt(at time.Time) bool {
	return t.ExpiresAt != nil && !at.Before(*t.ExpiresAt)
}

// TaskFilter selects a page of a tenant's tasks, newest first. Every
// condition set must hold.
type TaskFilter struct {
	Status *TaskStatus
	// ScheduleID keeps only the occurrences of this schedule.
	ScheduleID *uuid.UUID
	// PublishID keeps only the tasks of this publish; Topic, the tasks
	// published to this topic.
	PublishID *uuid.UUID
	Topic     *string
	// CreatedAfter keeps tasks created at or after it; CreatedBefore, tasks
	// created strictly before it, so that consecutive ranges do not overlap.
	CreatedAfter, CreatedBefore *time.Time
	// URLPrefix keeps tasks whose URL starts with it, byte for byte.
	URLPrefix *string
	// IdempotencyKey keeps the task created with this key.
	IdempotencyKey *string
	// Labels keeps the tasks carrying every one of these pairs (and maybe
	// others); nil or empty sets no condition.
	Labels map[string]string
	// CallbackOf keeps the callback tasks that report on this task.
	CallbackOf *uuid.UUID
	// Before, when set, continues a listing after the task with this id.
	Before *uuid.UUID
	Limit  int
}

// CancelFilter selects the waiting tasks of a tenant that CancelTasks cancels.
// Every condition set must hold.
type CancelFilter struct {
	// Status is scheduled or retrying; nil means both.
	Status     *TaskStatus
	ScheduleID *uuid.UUID
	// PublishID and Topic keep a publish's tasks, a topic's.
	PublishID *uuid.UUID
	Topic     *string
	// CreatedAfter is inclusive, CreatedBefore exclusive, as in TaskFilter.
	CreatedAfter, CreatedBefore *time.Time
}

// ReplayFilter selects the dead tasks of a tenant that ReplayTasks replays.
// Every condition set must hold.
type ReplayFilter struct {
	ScheduleID *uuid.UUID
	// PublishID and Topic keep a publish's tasks, a topic's.
	PublishID *uuid.UUID
	Topic     *string
	// URLPrefix keeps tasks whose URL starts with it, byte for byte.
	URLPrefix *string
	// Labels keeps the tasks carrying every one of these pairs, as in
	// TaskFilter.
	Labels map[string]string
	// CreatedAfter is inclusive, CreatedBefore exclusive, as in TaskFilter.
	CreatedAfter, CreatedBefore *time.Time
	// Most bounds how many tasks a replay takes (0: no bound): the room the
	// tenant's pending-task quota leaves.
	Most int
}

// TaskEdit is what a replay changes in a task before sending it again,
// already validated as at creation. Each field left nil keeps the task's
// own; an empty (non-nil) Headers, Body or Labels replaces them with none,
// and an empty Callback or FailureCallback removes it.
type TaskEdit struct {
	URL     *string
	Method  *string
	Headers map[string]string
	Body    []byte
	Labels  map[string]string

	Callback, FailureCallback *string
}

// BulkEdit is what a bulk replay changes in every task it matches before
// replaying it, already validated as at creation. URLFrom, when not empty,
// also narrows the match to the tasks whose URL starts with it, and is
// replaced there by URLTo. SetHeaders (by canonical name) are set, replacing
// a header of the same name in other letters, and RemoveHeaders removed; the
// result of each task is checked again, as a create's would be.
type BulkEdit struct {
	URLFrom, URLTo string
	SetHeaders     map[string]string
	RemoveHeaders  []string
}

// EditTarget is what a bulk edit reads of a dead task to change it: what it
// may change, and nothing of the body.
type EditTarget struct {
	ID      uuid.UUID
	URL     string
	Headers map[string]string
}

// TaskChange is a bulk edit worked out for one task: Edit sets its URL and
// headers, applied only while the task is still dead and as Was read it.
type TaskChange struct {
	Was  EditTarget
	Edit TaskEdit
}

// SetsCallbacks reports whether the edit gives the task a callback URL
// (not only removes one).
func (e *TaskEdit) SetsCallbacks() bool {
	return e != nil && (e.Callback != nil && *e.Callback != "" || e.FailureCallback != nil && *e.FailureCallback != "")
}

// Attempt is the record of one delivery attempt.
type Attempt struct {
	TaskID       uuid.UUID
	Attempt      int
	StartedAt    time.Time
	Duration     time.Duration
	StatusCode   *int
	Error        *string
	Outcome      string
	ResponseBody *string
	// ResponseHeaders are the response's headers the attempt keeps, as a
	// JSON object of canonical names to values (store.EncodeResponseHeaders
	// says which); nil when no response came.
	ResponseHeaders *string
}

// ClaimedTask is a task one sender now owns for one attempt.
type ClaimedTask struct {
	Task
	// Attempt is the 1-based number of the attempt this claim is for.
	Attempt int
	// ClaimToken proves ownership when the attempt is recorded.
	ClaimToken uuid.UUID
	// ClaimedAt is when the claimer took it, by the dispatcher's clock: read
	// before the claim statement was sent, so the lease Postgres set (its
	// own now() plus the timeout and margin) runs out no sooner than
	// ClaimedAt plus the same.
	ClaimedAt time.Time
	// LeaseEpoch is the node's lease epoch when the claim was taken: it
	// changes whenever the node's registration may have lapsed, after which
	// other nodes may have handed the claim back and sent it themselves.
	LeaseEpoch uint64
	// SigningSecrets are the tenant's, as stored (see Tenant.SigningSecrets).
	SigningSecrets []SigningSecret
	// TenantMaxTimeout is the tenant's max_timeout (0: none): the attempt's
	// timeout is cut to it.
	TenantMaxTimeout time.Duration
	// TargetAllowCIDRs are the private ranges granted to the tenant, which
	// its webhooks may reach.
	TargetAllowCIDRs []netip.Prefix
	// BodySize is the body's length in bytes. A claim leaves a long body
	// out (Body is nil while BodySize is not 0): it is read just before the
	// send.
	BodySize int
	// TenantPlan is the tenant's plan when claimed ("" for none): the
	// label of the usage metrics, which are by plan, never by tenant.
	TenantPlan string
	// Flow is what limits the sends of a task with a FlowKey: its key's own
	// limits, else the tenant's default for keys ("*"); zero when neither
	// exists (or the task has no key).
	Flow FlowLimit
}

// BodyDeferred reports whether the claim left the body out, to be read
// before sending.
func (c *ClaimedTask) BodyDeferred() bool { return c.Body == nil && c.BodySize > 0 }

// DefaultLookahead is how far ahead a dispatcher keeps due tasks loaded in its
// timing wheel. A task stored (or moved) to fall due sooner than that is
// already past the loader's read, so whoever stores it must announce it to the
// dispatchers; both sides take this one default.
const DefaultLookahead = 30 * time.Second

// InsertResult is what storing one task of a batch did.
type InsertResult struct {
	// Created says the task was stored; its Status, NextAttemptAt, CreatedAt
	// and UpdatedAt are then filled in.
	Created bool
	// Existing, when the task was not created, is the task that already holds
	// its idempotency key: stored before, or created by an earlier task of
	// the same call. The caller tells a replay from a reused key by comparing
	// RequestHash.
	Existing *Task
}
