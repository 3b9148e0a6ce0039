package hookwheel

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// FlowLimit is the rate and parallelism of the tasks with one flow key
// (TaskRequest.FlowKey), as the server answers them. Its Period is a Go
// duration ("1s"); a Rate or Parallelism of 0 leaves that side unlimited.
type FlowLimit = apiclient.FlowLimit

// DefaultFlowKey, given to PutFlowLimit, sets the limits of every flow key
// that has none of its own: each such key is limited apart, by the same
// numbers.
const DefaultFlowKey = "*"

// FlowLimitSpec is what PutFlowLimit sets a flow key's limits to, replacing
// what the key had. At least one of Rate and Parallelism is required.
type FlowLimitSpec struct {
	// Rate is the most sends per Period, spaced evenly (100 per second is
	// one every 10 ms, never 100 at once); 0 leaves the rate unlimited.
	Rate int
	// Period is the period of Rate, 1s to 24h; zero is the server's
	// default, a second.
	Period time.Duration
	// Parallelism is the most of the key's webhooks in flight at once,
	// across every node; 0 leaves it unlimited.
	Parallelism int
}

// PutFlowLimit sets the limits of the tasks whose FlowKey is key (or, with
// DefaultFlowKey, of every key without limits of its own), replacing any
// the key had, and returns them. A task over its key's limits waits without
// spending an attempt. A change holds for the tasks claimed from then on.
// Safe to retry: a repeat sets the same limits.
func (c *Client) PutFlowLimit(ctx context.Context, key string, spec FlowLimitSpec) (*FlowLimit, error) {
	op := fmt.Sprintf("put flow limit %q", key)
	body := apiclient.FlowLimitRequest{Period: durationOrNil(spec.Period)}
	if spec.Rate != 0 {
		body.Rate = &spec.Rate
	}
	if spec.Parallelism != 0 {
		body.Parallelism = &spec.Parallelism
	}
	resp, err := c.api.PutFlowLimitWithResponse(repeatable(ctx), key, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, cmp.Or(resp.JSON201, resp.JSON200))
}

// GetFlowLimit returns the limits of key. A key without limits of its own
// is ErrNotFound: its tasks then go by DefaultFlowKey's limits, if set.
func (c *Client) GetFlowLimit(ctx context.Context, key string) (*FlowLimit, error) {
	op := fmt.Sprintf("get flow limit %q", key)
	resp, err := c.api.GetFlowLimitWithResponse(repeatable(ctx), key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// ListFlowLimits returns the limits the tenant set, one per key, in key
// order, fetching page after page (pageSize limits each, 1 to 500; zero is
// 100) as the loop goes on. Keys that tasks name without limits of their
// own are not listed. An error ends the sequence, as its last pair.
func (c *Client) ListFlowLimits(ctx context.Context, pageSize int) iter.Seq2[FlowLimit, error] {
	params := apiclient.ListFlowLimitsParams{Limit: ptr(cmp.Or(pageSize, 100))}
	return paginate(func(cursor *string) ([]FlowLimit, *string, error) {
		params.Cursor = cursor
		resp, err := c.api.ListFlowLimitsWithResponse(repeatable(ctx), &params)
		if err != nil {
			return nil, nil, fmt.Errorf("list flow limits: %w", err)
		}
		page, err := result("list flow limits", resp.HTTPResponse, resp.Body, resp.JSON200)
		if err != nil {
			return nil, nil, err
		}
		return page.Data, page.NextCursor, nil
	})
}

// DeleteFlowLimit lifts the limits of key and returns them as they were:
// its tasks are unlimited from their next claim on, or go by
// DefaultFlowKey's limits if set. Not retried after a 503 or a network
// error: had the first try deleted them, the repeat would answer
// ErrNotFound.
func (c *Client) DeleteFlowLimit(ctx context.Context, key string) (*FlowLimit, error) {
	op := fmt.Sprintf("delete flow limit %q", key)
	resp, err := c.api.DeleteFlowLimitWithResponse(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}
