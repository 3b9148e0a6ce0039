package hookwheel

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

type (
	// Schedule is a recurring webhook.
	Schedule = apiclient.Schedule
	// FireTime is one coming occurrence of a schedule, in its time zone
	// (Local) and in UTC.
	FireTime = apiclient.FireTime
)

// ScheduleRequest is a recurring webhook: the same request sent at every
// occurrence of Cron in Timezone. URL and Cron are required; every zero
// field takes the server's default.
type ScheduleRequest struct {
	// Cron is 5 fields (minute hour day-of-month month day-of-week), 6
	// with seconds first, a descriptor (@daily...) or "@every <duration>".
	Cron string
	// Timezone is the IANA zone Cron is read in; default UTC.
	Timezone string
	// Paused creates the schedule paused.
	Paused bool

	// The request of every occurrence, as in TaskRequest.
	URL                    string
	Method                 string
	Headers                map[string]string
	Body                   string
	Timeout                time.Duration
	MaxAttempts            int
	MinBackoff, MaxBackoff time.Duration
	// Labels are carried by every occurrence's task, as TaskRequest.Labels.
	Labels map[string]string
	// OrderingKey is carried by every occurrence's task, as
	// TaskRequest.OrderingKey: an occurrence then never overlaps the one
	// before it.
	OrderingKey string
	// FlowKey is carried by every occurrence's task, as TaskRequest.FlowKey:
	// the occurrences are held to the key's limits.
	FlowKey string
	// Callback and FailureCallback are carried by every occurrence's task,
	// as TaskRequest's.
	Callback, FailureCallback string
}

// CreateSchedule creates a schedule. It is not retried after a 503 or a
// network error: the API takes no idempotency key for schedules, and a
// repeat of a create that went through would make a second schedule.
func (c *Client) CreateSchedule(ctx context.Context, req ScheduleRequest) (*Schedule, error) {
	body := apiclient.ScheduleRequest{
		Cron: req.Cron, URL: req.URL, Headers: req.Headers, Body: req.Body, Labels: req.Labels,
		Timeout: durationOrNil(req.Timeout), Retry: apiRetry(req.MaxAttempts, req.MinBackoff, req.MaxBackoff),
	}
	if req.Timezone != "" {
		body.Timezone = &req.Timezone
	}
	if req.OrderingKey != "" {
		body.OrderingKey = &req.OrderingKey
	}
	if req.FlowKey != "" {
		body.FlowKey = &req.FlowKey
	}
	if req.Method != "" {
		body.Method = ptr(apiclient.HTTPMethod(req.Method))
	}
	if req.Paused {
		body.Paused = &req.Paused
	}
	if req.Callback != "" {
		body.Callback = &req.Callback
	}
	if req.FailureCallback != "" {
		body.FailureCallback = &req.FailureCallback
	}
	resp, err := c.api.CreateScheduleWithResponse(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	return result("create schedule", resp.HTTPResponse, resp.Body, resp.JSON201)
}

// GetSchedule returns the schedule as it is now.
func (c *Client) GetSchedule(ctx context.Context, id uuid.UUID) (*Schedule, error) {
	op := "get schedule " + id.String()
	resp, err := c.api.GetScheduleWithResponse(repeatable(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// ScheduleFilter tunes ListSchedules.
type ScheduleFilter struct {
	// PageSize is how many schedules each call fetches, 1 to 500; zero is
	// 100.
	PageSize int
	// IncludeBody lists each schedule with its body, within the server's
	// bound on the bodies of one page (8 MiB by default), which ends a page
	// early rather than pass it. Without it schedules come without their
	// bodies, which GetSchedule gives one at a time.
	IncludeBody bool
}

// ListSchedules returns the tenant's schedules, newest first, fetching page
// after page as the loop goes on. An error ends the sequence, as its last
// pair.
func (c *Client) ListSchedules(ctx context.Context, f ScheduleFilter) iter.Seq2[Schedule, error] {
	params := apiclient.ListSchedulesParams{Limit: ptr(cmp.Or(f.PageSize, 100))}
	if f.IncludeBody {
		params.Include = ptr(apiclient.ListSchedulesParamsIncludeBody)
	}
	return paginate(func(cursor *string) ([]Schedule, *string, error) {
		params.Cursor = cursor
		resp, err := c.api.ListSchedulesWithResponse(repeatable(ctx), &params)
		if err != nil {
			return nil, nil, fmt.Errorf("list schedules: %w", err)
		}
		page, err := result("list schedules", resp.HTTPResponse, resp.Body, resp.JSON200)
		if err != nil {
			return nil, nil, err
		}
		return page.Data, page.NextCursor, nil
	})
}

// PauseSchedule stops the schedule: its occurrences not yet dispatched are
// canceled and no new ones are made until it is resumed. Pausing a paused
// schedule changes nothing, so the call is retried like a read.
func (c *Client) PauseSchedule(ctx context.Context, id uuid.UUID) (*Schedule, error) {
	op := "pause schedule " + id.String()
	resp, err := c.api.PauseScheduleWithResponse(repeatable(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// ResumeSchedule restarts a paused schedule from its next occurrence after
// now (the missed ones are not sent). Resuming a running schedule changes
// nothing, so the call is retried like a read.
func (c *Client) ResumeSchedule(ctx context.Context, id uuid.UUID) (*Schedule, error) {
	op := "resume schedule " + id.String()
	resp, err := c.api.ResumeScheduleWithResponse(repeatable(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// DeleteSchedule deletes the schedule, cancels its occurrences not yet
// dispatched, and returns the schedule as it was. It is not retried after a
// 503 or a network error: had the first try deleted it, the repeat would
// answer 404.
func (c *Client) DeleteSchedule(ctx context.Context, id uuid.UUID) (*Schedule, error) {
	op := "delete schedule " + id.String()
	resp, err := c.api.DeleteScheduleWithResponse(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// NextScheduleTimes returns the schedule's next count occurrences after now
// (1 to 100; zero is 10), the times a paused schedule would fire at if
// resumed now.
func (c *Client) NextScheduleTimes(ctx context.Context, id uuid.UUID, count int) ([]FireTime, error) {
	op := "next times of schedule " + id.String()
	params := apiclient.NextScheduleTimesParams{}
	if count != 0 {
		params.Count = &count
	}
	resp, err := c.api.NextScheduleTimesWithResponse(repeatable(ctx), id, &params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	list, err := result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
	if err != nil {
		return nil, err
	}
	return list.Data, nil
}
