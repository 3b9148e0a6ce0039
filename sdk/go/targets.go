package hookwheel

import (
	"cmp"
	"context"
	"fmt"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// TargetPause is one of the tenant's paused targets, as the server answers
// it: Target is "scheme://host:port", PausedBy "tenant" or "hookwheel" (every
// attempt to it failed for the server's HOOKWHEEL_TARGET_DISABLE_AFTER; then
// Since and LastError say since when and what).
type TargetPause = apiclient.TargetPause

// PauseTarget holds the tenant's tasks to target ("https://host:port", every
// path of it) until ResumeTarget: they wait, not sent and not counted as
// attempts. reason may be empty. A target paused already keeps its pause as
// it was, which is returned. Safe to retry.
func (c *Client) PauseTarget(ctx context.Context, target, reason string) (*TargetPause, error) {
	op := fmt.Sprintf("pause target %s", target)
	body := apiclient.TargetPauseRequest{Target: target}
	if reason != "" {
		body.Reason = &reason
	}
	resp, err := c.api.PauseTargetWithResponse(repeatable(ctx), body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, cmp.Or(resp.JSON201, resp.JSON200))
}

// ResumeTarget lifts the tenant's pause of target, its own or hookwheel's,
// and returns the pause as it was; ErrNotFound when the target was not
// paused. The tasks that waited go out at the target's pace.
func (c *Client) ResumeTarget(ctx context.Context, target string) (*TargetPause, error) {
	op := fmt.Sprintf("resume target %s", target)
	resp, err := c.api.ResumeTargetWithResponse(ctx, apiclient.TargetResumeRequest{Target: target})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// ListPausedTargets returns the tenant's paused targets, by target.
func (c *Client) ListPausedTargets(ctx context.Context) ([]TargetPause, error) {
	const op = "list paused targets"
	resp, err := c.api.ListPausedTargetsWithResponse(repeatable(ctx))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	list, err := result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
	if err != nil {
		return nil, err
	}
	return list.Data, nil
}
