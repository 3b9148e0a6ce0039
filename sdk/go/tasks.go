package hookwheel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
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
)

// Attempt outcomes.
const (
	OutcomeSuccess = apiclient.AttemptOutcomeSuccess
	OutcomeRetry   = apiclient.AttemptOutcomeRetry
	OutcomeFail    = apiclient.AttemptOutcomeFail
)

// MaxBatch is the most tasks one CreateTasks call takes.
const MaxBatch = 1000

// TaskRequest is a webhook to schedule. Only URL (or, for Publish, Topic)
// is required; every zero field takes the server's default.
//
// Its JSON form is the API's (url, topic, method, headers, body, run_at,
// delay, timeout, retry, labels, ordering_key, flow_key, callback,
// failure_callback, idempotency_key), durations as Go durations ("30s"):
// the lines `hookwheel batch` reads. Unknown fields are refused, as the API
// refuses them.
type TaskRequest struct {
	// URL is the absolute http or https URL to call.
	URL string
	// Topic, instead of URL, publishes the webhook to every endpoint of
	// this topic of the tenant (Publish, or an item of CreateTasks): one
	// task per endpoint, every other field applying to each.
	Topic string
	// Method is the webhook's HTTP method; default POST.
	Method string
	// Headers are sent with every attempt.
	Headers map[string]string
	// Body is sent byte for byte; empty means no body.
	Body string
	// RunAt is when to send the webhook, never earlier. Zero: Delay after
	// now, or now when Delay is zero too.
	RunAt time.Time
	// Delay is how long after the server's now to send it; exclusive with
	// RunAt.
	Delay time.Duration
	// Timeout bounds one attempt; zero is the server's default (30s).
	Timeout time.Duration
	// MaxAttempts is the number of attempts in all, the first included;
	// zero is the tenant's default (10 unless the operator changed it).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the wait between attempts; zero is
	// the tenant's default (1s and 1h unless the operator changed them).
	MinBackoff, MaxBackoff time.Duration
	// Labels are key-value pairs to find the task by (TaskFilter.Labels,
	// DeadFilter.Labels); never sent with the webhook. At most 32; keys of
	// 1 to 63 characters of a-z, 0-9 and . _ / -, starting with a letter or
	// a digit; values of at most 255 characters.
	Labels map[string]string
	// OrderingKey, when set, delivers the tenant's tasks with the same key
	// one at a time, in RunAt order and then creation order: a task waits
	// until the one before it is delivered, dead or canceled. 1 to 255
	// characters; any number of keys.
	OrderingKey string
	// FlowKey, when set, holds the task's sends to the rate and parallelism
	// set for this key (PutFlowLimit), or else for DefaultFlowKey, across
	// every node: a task over them waits, in due order, without spending an
	// attempt. 1 to 255 characters of A-Z, a-z, 0-9 and . _ - : @ + =; any
	// number of keys (one per customer, say).
	FlowKey string
	// Callback, when set, is told of the task's delivery, and
	// FailureCallback of its death: a signed POST whose body is a
	// CallbackPayload, sent as a task of its own with this task's timeout
	// and retry policy. Both are held to the rules of URL.
	Callback, FailureCallback string
	// IdempotencyKey makes the create safe to repeat: a repeat with the
	// same key and request returns the task the first created. Empty:
	// CreateTask and CreateTasks use a random key, so that their own
	// retries create one task; the webhook then carries that key as its
	// Idempotency-Key header instead of the task id.
	IdempotencyKey string
}

// apiTask is r as the API's batch item, with key as its idempotency key.
func (r TaskRequest) apiTask(key string) apiclient.BatchTaskRequest {
	t := apiclient.BatchTaskRequest{URL: r.URL, Topic: r.Topic, Headers: r.Headers, Body: r.Body, Labels: r.Labels}
	if r.OrderingKey != "" {
		t.OrderingKey = &r.OrderingKey
	}
	if r.FlowKey != "" {
		t.FlowKey = &r.FlowKey
	}
	if r.Callback != "" {
		t.Callback = &r.Callback
	}
	if r.FailureCallback != "" {
		t.FailureCallback = &r.FailureCallback
	}
	if r.Method != "" {
		t.Method = ptr(apiclient.HTTPMethod(r.Method))
	}
	if !r.RunAt.IsZero() {
		t.RunAt = ptr(r.RunAt)
	}
	t.Delay = durationOrNil(r.Delay)
	t.Timeout = durationOrNil(r.Timeout)
	t.Retry = apiRetry(r.MaxAttempts, r.MinBackoff, r.MaxBackoff)
	if key != "" {
		t.IdempotencyKey = ptr(key)
	}
	return t
}

// MarshalJSON encodes r as the API's task request.
func (r TaskRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(r.apiTask(r.IdempotencyKey))
}

// UnmarshalJSON decodes the API's task request, refusing unknown fields.
func (r *TaskRequest) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t apiclient.BatchTaskRequest
	if err := dec.Decode(&t); err != nil {
		return err
	}
	out := TaskRequest{URL: t.URL, Topic: t.Topic, Headers: t.Headers, Body: t.Body, Labels: t.Labels}
	if t.OrderingKey != nil {
		out.OrderingKey = *t.OrderingKey
	}
	if t.FlowKey != nil {
		out.FlowKey = *t.FlowKey
	}
	if t.Method != nil {
		out.Method = string(*t.Method)
	}
	if t.RunAt != nil {
		out.RunAt = *t.RunAt
	}
	if t.IdempotencyKey != nil {
		out.IdempotencyKey = *t.IdempotencyKey
	}
	if t.Callback != nil {
		out.Callback = *t.Callback
	}
	if t.FailureCallback != nil {
		out.FailureCallback = *t.FailureCallback
	}
	var err error
	for _, d := range []struct {
		field string
		from  *string
		to    *time.Duration
	}{
		{"delay", t.Delay, &out.Delay},
		{"timeout", t.Timeout, &out.Timeout},
	} {
		if *d.to, err = parseDuration(d.field, d.from); err != nil {
			return err
		}
	}
	if t.Retry != nil {
		if t.Retry.MaxAttempts != nil {
			out.MaxAttempts = *t.Retry.MaxAttempts
		}
		if out.MinBackoff, err = parseDuration("retry.min_backoff", t.Retry.MinBackoff); err != nil {
			return err
		}
		if out.MaxBackoff, err = parseDuration("retry.max_backoff", t.Retry.MaxBackoff); err != nil {
			return err
		}
	}
	*r = out
	return nil
}

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
		RunAt: item.RunAt, Delay: item.Delay, Timeout: item.Timeout, Retry: item.Retry, Labels: item.Labels,
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

// paginate walks the pages fetch returns, from the first (nil cursor) to the
// one without a next cursor. A page that hands back the cursor it was read
// with ends the walk with an error rather than reading it for ever.
func paginate[T any](fetch func(cursor *string) ([]T, *string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var cursor *string
		for {
			items, next, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range items {
				if !yield(item, nil) {
					return
				}
			}
			if next == nil || *next == "" {
				return
			}
			if cursor != nil && *next == *cursor {
				var zero T
				yield(zero, fmt.Errorf("hookwheel: the server answered cursor %q with itself", *next))
				return
			}
			cursor = next
		}
	}
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

// TaskAttempts returns every delivery attempt of the task, oldest first.
func (c *Client) TaskAttempts(ctx context.Context, id uuid.UUID) ([]Attempt, error) {
	op := "list attempts of task " + id.String()
	resp, err := c.api.ListTaskAttemptsWithResponse(repeatable(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	list, err := result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
	if err != nil {
		return nil, err
	}
	return list.Data, nil
}

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
	// DryRun counts the matching dead tasks without replaying them.
	DryRun bool
}

// ReplayDead replays every dead task matching f, as ReplayTask does one, and
// says how many matched and were replayed. Like ReplayTask it is never
// retried after a 503 or a network error; calling it again replays only the
// tasks that died since.
func (c *Client) ReplayDead(ctx context.Context, f DeadFilter) (*ReplayResult, error) {
	if f.Labels != nil && len(f.Labels) == 0 {
		return nil, errors.New("replay dead tasks: DeadFilter.Labels is empty: leave it nil for no label condition")
	}
	body := apiclient.ReplayFilter{DryRun: &f.DryRun, Labels: f.Labels}
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

func ptr[T any](v T) *T { return &v }

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

// durationOrNil is d as the API spells durations, nil for zero.
func durationOrNil(d time.Duration) *string {
	if d == 0 {
		return nil
	}
	return ptr(d.String())
}

// apiRetry is the API's retry policy of the given fields, nil when none is
// set.
func apiRetry(maxAttempts int, minBackoff, maxBackoff time.Duration) *apiclient.RetryPolicy {
	if maxAttempts == 0 && minBackoff == 0 && maxBackoff == 0 {
		return nil
	}
	p := &apiclient.RetryPolicy{MinBackoff: durationOrNil(minBackoff), MaxBackoff: durationOrNil(maxBackoff)}
	if maxAttempts != 0 {
		p.MaxAttempts = &maxAttempts
	}
	return p
}

func parseDuration(field string, s *string) (time.Duration, error) {
	if s == nil {
		return 0, nil
	}
	d, err := time.ParseDuration(*s)
	if err != nil {
		return 0, fmt.Errorf("%s: want a Go duration such as 30s or 1h30m, got %q", field, *s)
	}
	return d, nil
}
