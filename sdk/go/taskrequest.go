package hookwheel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// TaskRequest is a webhook to schedule. Only URL (or, for Publish, Topic)
// is required; every zero field takes the server's default.
//
// Its JSON form is the API's (url, topic, method, headers, body, run_at,
// delay, expires_at, expires_in, timeout, retry, labels, ordering_key, flow_key, callback,
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
	// ExpiresAt, when set, is when the webhook stops being worth sending:
	// no attempt starts at or after it, and a task whose attempt (or
	// retry) would is ended StatusExpired, its FailureCallback told. It
	// must come after the task is due. Zero: ExpiresIn after now, or
	// never when ExpiresIn is zero too.
	ExpiresAt time.Time
	// ExpiresIn is ExpiresAt as a time after the server's now (not after
	// the due time, as Delay is not); exclusive with ExpiresAt.
	ExpiresIn time.Duration
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
	if !r.ExpiresAt.IsZero() {
		t.ExpiresAt = ptr(r.ExpiresAt)
	}
	t.ExpiresIn = durationOrNil(r.ExpiresIn)
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
	if t.ExpiresAt != nil {
		out.ExpiresAt = *t.ExpiresAt
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
		{"expires_in", t.ExpiresIn, &out.ExpiresIn},
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
