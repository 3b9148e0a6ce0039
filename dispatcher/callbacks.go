package dispatcher

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookwheel/hookwheel/internal/model"
)

// CallbackBodyMax is how much of the receiver's response body a callback
// carries: the first 64 KiB, with body_truncated saying whether there was
// more. The sender reads this much of a response only for a task with a
// callback URL (others read MaxResponseBody), so the cost is bounded per
// send in flight, and the callback task's body stays under 100 KiB once
// base64-encoded.
const CallbackBodyMax = 64 << 10

// callbackPayload is the JSON body of a callback webhook: what the source
// task's final attempt got. The OpenAPI document describes it as
// CallbackPayload, for receivers to generate types from.
type callbackPayload struct {
	TaskID   string           `json:"task_id"`
	Status   model.TaskStatus `json:"status"`
	Attempt  int              `json:"attempt"`
	Error    *string          `json:"error"`
	Response callbackResponse `json:"response"`
}

// callbackResponse is the final attempt's response. With no response (a
// timeout, a connection error), StatusCode is null, Headers {} and Body "",
// and the payload's error says what happened.
type callbackResponse struct {
	StatusCode *int `json:"status_code"`
	// Headers are the ones the attempt keeps (store.EncodeResponseHeaders:
	// bounded, never a credential), as its JSON object.
	Headers json.RawMessage `json:"headers"`
	// Body is the first CallbackBodyMax bytes, base64 (standard, padded).
	Body          []byte `json:"body"`
	BodyTruncated bool   `json:"body_truncated"`
}

// callbackHeaders are the headers of every callback webhook, besides the
// signature and hookwheel's own that every webhook carries.
var callbackHeaders = map[string]string{"Content-Type": "application/json"}

// callbackURL is the URL told of the outcome status, or nil when the task
// names none for it. Only delivered, dead and expired are outcomes; an
// expiry is told where a death is.
func callbackURL(c *model.ClaimedTask, status model.TaskStatus) *string {
	switch status {
	case model.StatusDelivered:
		return c.Callback
	case model.StatusDead, model.StatusExpired:
		return c.FailureCallback
	}
	return nil
}

// wantsResponseBody reports whether a send of c may end in a callback, and
// so reads up to CallbackBodyMax of the response rather than what an
// attempt keeps.
func wantsResponseBody(c *model.ClaimedTask) bool {
	return c.Callback != nil || c.FailureCallback != nil
}

// newCallbackTask is the callback task of c's final attempt, which result
// describes, with the response body read (up to CallbackBodyMax, and one
// byte more when there was more), due at now. Its id is in c's partition:
// the node that records the outcome owns the source's partition, so it owns
// the callback too and can send it without waiting for another node.
func newCallbackTask(c *model.ClaimedTask, url string, result *model.AttemptResult, body []byte, now time.Time) (*model.Task, error) {
	id, err := model.NewTaskIDIn(model.PartitionOf(c.ID))
	if err != nil {
		return nil, err
	}
	headers := json.RawMessage(`{}`)
	if result.ResponseHeaders != nil {
		headers = json.RawMessage(*result.ResponseHeaders)
	}
	truncated := len(body) > CallbackBodyMax
	if truncated {
		body = body[:CallbackBodyMax]
	}
	if body == nil {
		body = []byte{}
	}
	attempt := c.Attempt
	if result.Unattempted {
		// The claim's attempt never started: the final attempt is the one
		// before it (0 for a task that expired before its first).
		attempt--
	}
	payload, err := json.Marshal(callbackPayload{
		TaskID:  c.ID.String(),
		Status:  result.Status,
		Attempt: attempt,
		Error:   result.Error,
		Response: callbackResponse{
			StatusCode:    result.StatusCode,
			Headers:       headers,
			Body:          body,
			BodyTruncated: truncated,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("encode the callback of task %s: %w", c.ID, err)
	}
	return &model.Task{
		ID:         id,
		TenantID:   c.TenantID,
		URL:        url,
		Method:     "POST",
		Headers:    callbackHeaders,
		Body:       payload,
		RunAt:      now,
		CallbackOf: &c.ID,
	}, nil
}
