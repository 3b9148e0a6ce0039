package webhook

import (
	"encoding/json"
	"fmt"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// Callback is the body of a callback webhook: what the final attempt of a
// task got, sent to the task's callback URL once it is delivered and to its
// failure_callback once it is dead or expired. It is hookwheel.CallbackPayload; its
// Response.Body holds the first 64 KiB of the receiver's answer, decoded
// from base64, and Response.BodyTruncated says whether there was more.
// With no answer at all (a timeout, a connection error), Response.StatusCode
// is nil and Error says what happened. A task that expired before an
// attempt could start reports the attempt before (0 when none was made),
// with no response.
type Callback = apiclient.CallbackPayload

// Callback statuses.
const (
	CallbackDelivered = apiclient.CallbackPayloadStatusDelivered
	CallbackDead      = apiclient.CallbackPayloadStatusDead
	CallbackExpired   = apiclient.CallbackPayloadStatusExpired
)

// DecodeCallback reads the body of a callback webhook. Verify the request
// first: a callback is signed like every webhook (its webhook-id is the
// callback task's own id, not the reported task's). Fields it does not know
// are ignored, so that a receiver keeps working when hookwheel adds some.
func DecodeCallback(body []byte) (*Callback, error) {
	var c Callback
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("webhook: decode callback: %w", err)
	}
	if !c.Status.Valid() {
		return nil, fmt.Errorf("webhook: decode callback: status %q is none of delivered, dead and expired", c.Status)
	}
	if c.Attempt < 1 && !(c.Status == CallbackExpired && c.Attempt == 0) {
		return nil, fmt.Errorf("webhook: decode callback: no attempt number")
	}
	return &c, nil
}
