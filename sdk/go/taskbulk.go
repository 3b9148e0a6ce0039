package hookwheel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// MaxBatch is the most tasks one CreateTasks call takes.
const MaxBatch = 1000

// BatchResult is one item's result in CreateTasks: Task (Publish for an
// item with a Topic), or Err.
type BatchResult struct {
	// Task is the task the item created (or, for a repeat of an earlier
	// item or request with its idempotency key, the one that created).
	Task *Task
	// Publish is the publish an item with a Topic made (or, for a repeat,
	// the one the earlier publish made), with its tasks.
	Publish *Publish
	// Replayed is true when the item repeated an earlier one.
	Replayed bool
	// Err is why the item was refused; nothing was stored for it.
	Err *Error
}

// CreateTasks schedules up to MaxBatch webhooks in one call and returns one
// result per request, in order: each item is validated and stored on its
// own, so some may fail while others succeed. The error is for the call as a
// whole (nothing stored then). Items without an IdempotencyKey get a random
// one, so that the call is safe to retry.
func (c *Client) CreateTasks(ctx context.Context, reqs []TaskRequest) ([]BatchResult, error) {
	op := fmt.Sprintf("create %d tasks", len(reqs))
	body := apiclient.BatchRequest{Tasks: make([]apiclient.BatchTaskRequest, len(reqs))}
	for i, r := range reqs {
		body.Tasks[i] = r.apiTask(cmp.Or(r.IdempotencyKey, uuid.NewString()))
	}
	// Safe to retry: every item carries a key.
	resp, err := c.api.CreateTasksBatchWithResponse(repeatable(ctx), body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	answer, err := result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
	if err != nil {
		return nil, err
	}
	if len(answer.Data) != len(reqs) {
		return nil, &Error{Op: op, StatusCode: resp.StatusCode(), Title: "unexpected answer",
			Detail: fmt.Sprintf("%d results for %d items", len(answer.Data), len(reqs))}
	}
	out := make([]BatchResult, len(answer.Data))
	for i, item := range answer.Data {
		switch {
		case item.Error != nil:
			out[i].Err = problemError(fmt.Sprintf("task %d of the batch", i+1), *item.Error)
		case item.Task != nil:
			out[i].Task = item.Task
			out[i].Replayed = item.Replayed != nil && *item.Replayed
		case item.Publish != nil:
			out[i].Publish = item.Publish
			out[i].Replayed = item.Replayed != nil && *item.Replayed
		default:
			out[i].Err = &Error{Op: fmt.Sprintf("task %d of the batch", i+1), StatusCode: resp.StatusCode(),
				Title: "unexpected answer", Detail: "neither a task, a publish nor an error"}
		}
	}
	return out, nil
}

// DeadFilter narrows ReplayDead; a dead task is replayed when it matches
// every field given. The zero DeadFilter replays every dead task.
type DeadFilter struct {
	// URLPrefix: only tasks whose URL starts with this text.
	URLPrefix string
	// ScheduleID: only the occurrences of this schedule (uuid.Nil any).
	ScheduleID uuid.UUID
	// PublishID: only the tasks of this publish to a topic (uuid.Nil any).
	PublishID uuid.UUID
	// Topic: only the tasks published to this topic.
	Topic string
	// Labels: only tasks carrying every one of these labels, as in
	// TaskFilter. A non-nil empty map is refused: sent as no condition at
	// all, it would replay every dead task.
	Labels map[string]string
	// CreatedAfter (inclusive) and CreatedBefore (exclusive); zero is
	// unbounded.
	CreatedAfter, CreatedBefore time.Time
	// DryRun counts the matching dead tasks without replaying them; with
	// Edit, it also says what the edit would change and refuse.
	DryRun bool
	// Edit, when not nil, changes every matched task before it is replayed.
	Edit *DeadEdit
}

// ReplayDead replays every dead task matching f, as ReplayTask does one, and
// says how many matched and were replayed; with f.Edit, changes each first,
// and says how many it changed and refused (with f.DryRun, would, with a
// sample of the changes). Like ReplayTask it is never retried after a 503 or
// a network error; calling it again replays only the tasks that died since.
func (c *Client) ReplayDead(ctx context.Context, f DeadFilter) (*ReplayResult, error) {
	if f.Labels != nil && len(f.Labels) == 0 {
		return nil, errors.New("replay dead tasks: DeadFilter.Labels is empty: leave it nil for no label condition")
	}
	body := apiclient.ReplayFilter{DryRun: &f.DryRun, Labels: f.Labels, Edit: f.Edit.body()}
	if f.URLPrefix != "" {
		body.URL = &f.URLPrefix
	}
	if f.ScheduleID != uuid.Nil {
		body.ScheduleID = &f.ScheduleID
	}
	if f.PublishID != uuid.Nil {
		body.PublishID = &f.PublishID
	}
	if f.Topic != "" {
		body.Topic = &f.Topic
	}
	if !f.CreatedAfter.IsZero() {
		body.CreatedAfter = &f.CreatedAfter
	}
	if !f.CreatedBefore.IsZero() {
		body.CreatedBefore = &f.CreatedBefore
	}
	resp, err := c.api.ReplayTasksWithResponse(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("replay dead tasks: %w", err)
	}
	return result("replay dead tasks", resp.HTTPResponse, resp.Body, resp.JSON200)
}

// CancelFilter names the tasks CancelTasks cancels; at least one field must
// be given.
type CancelFilter struct {
	// Status: StatusScheduled or StatusRetrying; "" both.
	Status TaskStatus
	// ScheduleID: only the occurrences of this schedule.
	ScheduleID uuid.UUID
	// PublishID: only the tasks of this publish to a topic.
	PublishID uuid.UUID
	// Topic: only the tasks published to this topic.
	Topic string
	// CreatedAfter (inclusive) and CreatedBefore (exclusive).
	CreatedAfter, CreatedBefore time.Time
}

// CancelTasks cancels every scheduled or retrying task matching f and says
// how many it canceled. A repeat cancels what is left, so it is retried like
// a read.
func (c *Client) CancelTasks(ctx context.Context, f CancelFilter) (int, error) {
	var body apiclient.CancelFilter
	if f.Status != "" {
		body.Status = ptr(apiclient.CancelFilterStatus(f.Status))
	}
	if f.ScheduleID != uuid.Nil {
		body.ScheduleID = &f.ScheduleID
	}
	if f.PublishID != uuid.Nil {
		body.PublishID = &f.PublishID
	}
	if f.Topic != "" {
		body.Topic = &f.Topic
	}
	if !f.CreatedAfter.IsZero() {
		body.CreatedAfter = &f.CreatedAfter
	}
	if !f.CreatedBefore.IsZero() {
		body.CreatedBefore = &f.CreatedBefore
	}
	resp, err := c.api.CancelTasksWithResponse(repeatable(ctx), body)
	if err != nil {
		return 0, fmt.Errorf("cancel tasks: %w", err)
	}
	res, err := result("cancel tasks", resp.HTTPResponse, resp.Body, resp.JSON200)
	if err != nil {
		return 0, err
	}
	return res.Canceled, nil
}
