package hookwheel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ScheduleUpdate is a change to a schedule, sent as a JSON merge patch: each
// field set (non-nil) replaces the schedule's, each field left nil keeps it,
// and each name in Reset goes back to the default a create without it gets.
type ScheduleUpdate struct {
	// Cron is the new recurrence; the schedule's next_run_at is recomputed
	// from now, as it is for a new Timezone.
	Cron     *string
	Timezone *string
	// Paused true pauses the schedule, false resumes it, as PauseSchedule
	// and ResumeSchedule do.
	Paused *bool

	URL    *string
	Method *string
	// Headers are merged into the schedule's by name (in any case): a nil
	// value removes that header, the others are set.
	Headers map[string]*string
	Body    *string
	Timeout *time.Duration
	// The retry policy, field by field.
	MaxAttempts            *int
	MinBackoff, MaxBackoff *time.Duration
	// Labels are merged into the schedule's by key: a nil value removes
	// that label, the others are set.
	Labels map[string]*string
	// OrderingKey sets the ordering key of the occurrences made from now on.
	OrderingKey *string
	// FlowKey sets the flow key of the occurrences made from now on.
	FlowKey *string
	// Callback and FailureCallback are the new callback URLs of the
	// occurrences made from now on; Reset removes them.
	Callback, FailureCallback *string

	// Reset names the fields to set back to their defaults: "timezone"
	// (UTC), "method" (POST), "headers", "labels", "ordering_key" and
	// "flow_key" (none), "body" (empty), "timeout" (the server's default),
	// "paused" (running), "callback" and "failure_callback" (none),
	// "retry" (the tenant's policy) or one of its fields,
	// "retry.max_attempts", "retry.min_backoff", "retry.max_backoff".
	// A field both set and reset is an error.
	Reset []string
}

// resettable are the names ScheduleUpdate.Reset takes.
var resettable = []string{"timezone", "method", "headers", "body", "timeout", "paused", "labels", "ordering_key", "flow_key", "callback", "failure_callback",
	"retry", "retry.max_attempts", "retry.min_backoff", "retry.max_backoff"}

// patch is the merge patch u stands for.
func (u ScheduleUpdate) patch() (map[string]any, error) {
	p := map[string]any{}
	retry := map[string]any{}
	set := func(m map[string]any, name string, v any) { m[name] = v }
	if u.Cron != nil {
		set(p, "cron", *u.Cron)
	}
	if u.Timezone != nil {
		set(p, "timezone", *u.Timezone)
	}
	if u.Paused != nil {
		set(p, "paused", *u.Paused)
	}
	if u.URL != nil {
		set(p, "url", *u.URL)
	}
	if u.Method != nil {
		set(p, "method", *u.Method)
	}
	if u.Headers != nil {
		set(p, "headers", u.Headers)
	}
	if u.Body != nil {
		set(p, "body", *u.Body)
	}
	if u.Timeout != nil {
		set(p, "timeout", u.Timeout.String())
	}
	if u.Labels != nil {
		set(p, "labels", u.Labels)
	}
	if u.OrderingKey != nil {
		set(p, "ordering_key", *u.OrderingKey)
	}
	if u.FlowKey != nil {
		set(p, "flow_key", *u.FlowKey)
	}
	if u.Callback != nil {
		set(p, "callback", *u.Callback)
	}
	if u.FailureCallback != nil {
		set(p, "failure_callback", *u.FailureCallback)
	}
	if u.MaxAttempts != nil {
		set(retry, "max_attempts", *u.MaxAttempts)
	}
	if u.MinBackoff != nil {
		set(retry, "min_backoff", u.MinBackoff.String())
	}
	if u.MaxBackoff != nil {
		set(retry, "max_backoff", u.MaxBackoff.String())
	}
	for _, name := range u.Reset {
		if !slices.Contains(resettable, name) {
			return nil, fmt.Errorf("cannot reset %q: not one of %s", name, strings.Join(resettable, ", "))
		}
		m, field := p, name
		if sub, ok := strings.CutPrefix(name, "retry."); ok {
			m, field = retry, sub
		}
		if name == "retry" && len(retry) > 0 {
			return nil, fmt.Errorf("retry is both set and reset")
		}
		if _, given := m[field]; given {
			return nil, fmt.Errorf("%s is both set and reset", name)
		}
		m[field] = nil
	}
	if _, reset := p["retry"]; !reset && len(retry) > 0 {
		p["retry"] = retry
	}
	return p, nil
}

// UpdateSchedule changes the schedule in place and returns it as changed.
// A new Cron or Timezone recomputes its next run from now; the occurrences
// already made tasks (about 30 s ahead) keep their time and request. A bad
// value gets an *Error listing the fields (ErrInvalid), another
// tenant's or an unknown schedule ErrNotFound. A merge patch leaves the
// schedule the same however often it is applied, so the call is retried like
// a read.
func (c *Client) UpdateSchedule(ctx context.Context, id uuid.UUID, u ScheduleUpdate) (*Schedule, error) {
	op := "update schedule " + id.String()
	patch, err := u.patch()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	resp, err := c.api.UpdateScheduleWithBodyWithResponse(repeatable(ctx), id, "application/merge-patch+json", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}
