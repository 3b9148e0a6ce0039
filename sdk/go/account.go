package hookwheel

import (
	"context"
	"fmt"
	"time"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

type (
	// Caller is the calling tenant and the API key the call was made with.
	Caller = apiclient.Caller
	// Stats is what the tenant's webhooks did, minute by minute, and how
	// many of its tasks are in each status now.
	Stats = apiclient.TaskStats
	// MinuteStats is one minute of Stats.
	MinuteStats = apiclient.MinuteStats
)

// Me returns the tenant and the API key the client calls with: every valid
// key may call it, which makes it the way to check a key.
func (c *Client) Me(ctx context.Context) (*Caller, error) {
	resp, err := c.api.GetCallerWithResponse(repeatable(ctx))
	if err != nil {
		return nil, fmt.Errorf("who am I: %w", err)
	}
	return result("who am I", resp.HTTPResponse, resp.Body, resp.JSON200)
}

// Stats returns the tenant's delivery statistics over the last window, in
// whole minutes up to 24h; zero is the server's default, one hour.
func (c *Client) Stats(ctx context.Context, window time.Duration) (*Stats, error) {
	var params apiclient.GetStatsParams
	if window != 0 {
		params.Window = ptr(window.String())
	}
	resp, err := c.api.GetStatsWithResponse(repeatable(ctx), &params)
	if err != nil {
		return nil, fmt.Errorf("get stats: %w", err)
	}
	return result("get stats", resp.HTTPResponse, resp.Body, resp.JSON200)
}
