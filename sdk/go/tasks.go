package hookwheel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// The API's types, as the server answers them. Their fields are documented
// in the API reference (openapi/openapi.yaml, served at /openapi.yaml).
type (
	// Task is a scheduled webhook and its delivery state.
	Task = apiclient.Task
	// TaskStatus is where a task is in its life (StatusScheduled...).
	TaskStatus = apiclient.TaskStatus
	// Attempt is one delivery attempt of a task.
	Attempt = apiclient.Attempt
	// AttemptOutcome is what an attempt led to (OutcomeSuccess...).
	AttemptOutcome = apiclient.AttemptOutcome
	// HTTPMethod is the method of a webhook request.
	HTTPMethod = apiclient.HTTPMethod
	// RetryPolicy is a task's retry policy as the server reports it.
	RetryPolicy = apiclient.RetryPolicy
	// ReplayResult says how many dead tasks ReplayDead matched and replayed.
	ReplayResult = apiclient.ReplayResult
	// CallbackPayload is the body of a callback webhook: what the final
	// attempt of a task got (webhook.DecodeCallback reads one). A callback
	// task's Report is its own, decoded.
	CallbackPayload = apiclient.CallbackPayload
	// CallbackResponse is the response a CallbackPayload reports.
	CallbackResponse = apiclient.CallbackResponse
)

// Task statuses.
const (
	StatusScheduled   = apiclient.TaskStatusScheduled
	StatusDispatching = apiclient.TaskStatusDispatching
	StatusRetrying    = apiclient.TaskStatusRetrying
	StatusDelivered   = apiclient.TaskStatusDelivered
	StatusDead        = apiclient.TaskStatusDead
	StatusCanceled    = apiclient.TaskStatusCanceled
	// StatusExpired ends a task whose ExpiresAt came before an attempt
	// could start; final, like StatusDead.
	StatusExpired = apiclient.TaskStatusExpired
)

// Attempt outcomes.
const (
	OutcomeSuccess = apiclient.AttemptOutcomeSuccess
	OutcomeRetry   = apiclient.AttemptOutcomeRetry
	OutcomeFail    = apiclient.AttemptOutcomeFail
)

// CreateTask schedules one webhook and returns the task (for a repeat of an
// earlier request with the same IdempotencyKey, the task that request
// created). A request with a Topic is for Publish.
func (c *Client) CreateTask(ctx context.Context, req TaskRequest) (*Task, error) {
	if req.Topic != "" {
		return nil, errors.New("create task: the request names a topic: publish it with Publish")
	}
	created, err := c.createTask(ctx, "create task", req)
	if err != nil {
		return nil, err
	}
	task, err := created.AsTask()
	if err != nil {
		return nil, fmt.Errorf("create task: decode the answer: %w", err)
	}
	return &task, nil
}

// createTask sends req to POST /v1/tasks, with its IdempotencyKey or a
// random one, and returns the answer, a task or a publish.
func (c *Client) createTask(ctx context.Context, op string, req TaskRequest) (*apiclient.TaskOrPublish, error) {
	key := cmp.Or(req.IdempotencyKey, uuid.NewString())
	item := req.apiTask("")
	body := apiclient.TaskRequest{
		URL: item.URL, Topic: item.Topic, Method: item.Method, Headers: item.Headers, Body: item.Body,
		RunAt: item.RunAt, Delay: item.Delay, ExpiresAt: item.ExpiresAt, ExpiresIn: item.ExpiresIn,
		Timeout: item.Timeout, Retry: item.Retry, Labels: item.Labels,
		OrderingKey: item.OrderingKey, FlowKey: item.FlowKey, Callback: item.Callback, FailureCallback: item.FailureCallback,
	}
	// Safe to retry: the key makes the server store a repeat once.
	resp, err := c.api.CreateTaskWithResponse(repeatable(ctx), &apiclient.CreateTaskParams{IdempotencyKey: &key}, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, cmp.Or(resp.JSON201, resp.JSON200))
}

// GetTask returns the task as it is now.
func (c *Client) GetTask(ctx context.Context, id uuid.UUID) (*Task, error) {
	op := "get task " + id.String()
	resp, err := c.api.GetTaskWithResponse(repeatable(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// TaskFilter narrows ListTasks; a task is listed when it matches every field
// given. The zero TaskFilter lists every task.
type TaskFilter struct {
	// Status: only tasks in this status ("" any). StatusDead lists the dead
	// letters.
	Status TaskStatus
	// ScheduleID: only the occurrences of this schedule (uuid.Nil any).
	ScheduleID uuid.UUID
	// PublishID: only the tasks of this publish to a topic (uuid.Nil any).
	PublishID uuid.UUID
	// Topic: only the tasks published to this topic.
	Topic string
	// URLPrefix: only tasks whose URL starts with this text.
	URLPrefix string
	// IdempotencyKey: only the task created with this key.
	IdempotencyKey string
	// Labels: only tasks carrying every one of these labels (and maybe
	// others).
	Labels map[string]string
	// CallbackOf: only the callback tasks that report on this task
	// (uuid.Nil any).
	CallbackOf uuid.UUID
	// CreatedAfter (inclusive) and CreatedBefore (exclusive) bound when the
	// tasks were created; zero is unbounded.
	CreatedAfter, CreatedBefore time.Time
	// PageSize is how many tasks each call fetches, 1 to 500; zero is 100.
	PageSize int
	// IncludeBody lists each task with its body. The server bounds the
	// bodies of one page (8 MiB by default) and ends a page early rather
	// than pass the bound, so a page may hold fewer than PageSize tasks;
	// ListTasks reads on all the same. Without it tasks come without their
	// bodies, which GetTask gives one task at a time.
	IncludeBody bool
}

// ListTasks returns the tenant's tasks matching f, newest first, fetching
// page after page as the loop goes on; breaking out of the loop fetches no
// more. An error ends the sequence, as its last pair.
func (c *Client) ListTasks(ctx context.Context, f TaskFilter) iter.Seq2[Task, error] {
	params := apiclient.ListTasksParams{Limit: ptr(cmp.Or(f.PageSize, 100))}
	if f.Status != "" {
		params.Status = &f.Status
	}
	if f.ScheduleID != uuid.Nil {
		params.ScheduleID = &f.ScheduleID
	}
	if f.PublishID != uuid.Nil {
		params.PublishID = &f.PublishID
	}
	if f.Topic != "" {
		params.Topic = &f.Topic
	}
	if f.URLPrefix != "" {
		params.URL = &f.URLPrefix
	}
	if f.IdempotencyKey != "" {
		params.IdempotencyKey = &f.IdempotencyKey
	}
	params.Label = labelConditions(f.Labels)
	if f.CallbackOf != uuid.Nil {
		params.CallbackOf = &f.CallbackOf
	}
	if !f.CreatedAfter.IsZero() {
		params.CreatedAfter = &f.CreatedAfter
	}
	if !f.CreatedBefore.IsZero() {
		params.CreatedBefore = &f.CreatedBefore
	}
	if f.IncludeBody {
		params.Include = ptr(apiclient.ListTasksParamsIncludeBody)
	}
	return paginate(func(cursor *string) ([]Task, *string, error) {
		params.Cursor = cursor
		resp, err := c.api.ListTasksWithResponse(repeatable(ctx), &params)
		if err != nil {
			return nil, nil, fmt.Errorf("list tasks: %w", err)
		}
		page, err := result("list tasks", resp.HTTPResponse, resp.Body, resp.JSON200)
		if err != nil {
			return nil, nil, err
		}
		return page.Data, page.NextCursor, nil
	})
}

// CancelTask cancels a scheduled or retrying task and returns it, canceled.
// A task already dispatching or finished gets ErrConflict.
func (c *Client) CancelTask(ctx context.Context, id uuid.UUID) (*Task, error) {
	op := "cancel task " + id.String()
	// Not retried on 503 or a network error: had the first try canceled the
	// task, the repeat would answer 409.
	resp, err := c.api.CancelTaskWithResponse(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// Reschedule is a task's new time: RunAt, or Delay after the server's now.
type Reschedule struct {
	RunAt time.Time
	Delay time.Duration
}

// RescheduleTask moves a scheduled or retrying task to a new time. A task
// already dispatching or finished gets ErrConflict.
func (c *Client) RescheduleTask(ctx context.Context, id uuid.UUID, to Reschedule) (*Task, error) {
	op := "reschedule task " + id.String()
	body := apiclient.RescheduleRequest{}
	if !to.RunAt.IsZero() {
		body.RunAt = &to.RunAt
	} else {
		// Zero is "now", which the API spells as a zero delay.
		body.Delay = ptr(to.Delay.String())
	}
	resp, err := c.api.RescheduleTaskWithResponse(ctx, id, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// ReplayEdit is what to change in a task before replaying it; every zero
// field leaves the task's own.
type ReplayEdit struct {
	URL     string
	Method  string
	Headers map[string]string // replaces all of the task's headers
	Body    *string           // nil keeps the body; a pointer to "" empties it
	// Labels, when not nil, replace all of the task's labels; an empty,
	// non-nil map removes them.
	Labels map[string]string
	// Callback and FailureCallback, when not nil, replace the task's; a
	// pointer to "" removes it.
	Callback, FailureCallback *string
}

// ReplayTask sends a dead or delivered task again, due now, after applying
// edit when it is not nil. The task keeps its id, attempts and idempotency
// key. A task still on its way, or canceled, gets ErrConflict.
//
// It is never retried after a 503 or a network error: the first try may have
// replayed the task, and a repeat would send the webhook once more.
func (c *Client) ReplayTask(ctx context.Context, id uuid.UUID, edit *ReplayEdit) (*Task, error) {
	op := "replay task " + id.String()
	// Without an edit the body is {}, which replays the task as it is.
	var body apiclient.ReplayRequest
	if edit != nil {
		body = apiclient.ReplayRequest{Headers: edit.Headers, Body: edit.Body,
			Callback: edit.Callback, FailureCallback: edit.FailureCallback}
		if edit.URL != "" {
			body.URL = &edit.URL
		}
		if edit.Method != "" {
			body.Method = ptr(apiclient.HTTPMethod(edit.Method))
		}
		if edit.Labels != nil {
			body.Labels = ptr(apiclient.Labels(edit.Labels))
		}
	}
	resp, err := c.api.ReplayTaskWithResponse(ctx, id, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// TaskAttempts returns every delivery attempt of the task, oldest first,
// reading as many pages of ListTaskAttempts as it takes: a task replayed
// many times can have many, each with up to 8 KiB of response.
func (c *Client) TaskAttempts(ctx context.Context, id uuid.UUID) ([]Attempt, error) {
	var all []Attempt
	for a, err := range c.ListTaskAttempts(ctx, id, 0) {
		if err != nil {
			return nil, err
		}
		all = append(all, a)
	}
	return all, nil
}

// ListTaskAttempts returns the task's delivery attempts, oldest first,
// fetching page after page (pageSize attempts each, 1 to 500; zero is 500)
// as the loop goes on. An error ends the sequence, as its last pair.
func (c *Client) ListTaskAttempts(ctx context.Context, id uuid.UUID, pageSize int) iter.Seq2[Attempt, error] {
	op := "list attempts of task " + id.String()
	params := apiclient.ListTaskAttemptsParams{Limit: ptr(cmp.Or(pageSize, 500))}
	return paginate(func(cursor *string) ([]Attempt, *string, error) {
		params.Cursor = cursor
		resp, err := c.api.ListTaskAttemptsWithResponse(repeatable(ctx), id, &params)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", op, err)
		}
		page, err := result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
		if err != nil {
			return nil, nil, err
		}
		return page.Data, page.NextCursor, nil
	})
}

// labelConditions spells labels as the API's label parameters, "key:value"
// each, in key order so that the same filter makes the same URL.
func labelConditions(labels map[string]string) []string {
	if len(labels) == 0 {
		return nil
	}
	out := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, k+":"+labels[k])
	}
	return out
}
