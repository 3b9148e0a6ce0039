package hookwheel

import (
	"context"
	"fmt"
	"time"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

type (
	// Usage is what the tenant used on each UTC day of a range (every day
	// listed, zeros for a day without usage), the totals, and the plan and
	// daily limits that apply now.
	Usage = apiclient.TenantUsage
	// UsageDay is one day of Usage.
	UsageDay = apiclient.UsageDay
	// UsageCounts are Usage's totals.
	UsageCounts = apiclient.UsageCounts
)

// Usage returns the tenant's usage from the UTC day of from to that of to,
// both included (at most 400 days). A zero from is the first of the current
// month, a zero to today. Any valid key may call it.
func (c *Client) Usage(ctx context.Context, from, to time.Time) (*Usage, error) {
	var params apiclient.GetUsageParams
	if !from.IsZero() {
		params.From = ptr(from.UTC().Format(time.DateOnly))
	}
	if !to.IsZero() {
		params.To = ptr(to.UTC().Format(time.DateOnly))
	}
	resp, err := c.api.GetUsageWithResponse(repeatable(ctx), &params)
	if err != nil {
		return nil, fmt.Errorf("get usage: %w", err)
	}
	return result("get usage", resp.HTTPResponse, resp.Body, resp.JSON200)
}
