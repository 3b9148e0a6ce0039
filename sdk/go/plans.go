package hookwheel

import (
	"cmp"
	"context"
	"fmt"
	"net/http"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// The operator's plans. These calls are the admin API's: the Client must be
// made with the installation's admin token (HOOKWHEEL_ADMIN_TOKEN) in place
// of an API key.

type (
	// Plan is a named set of limits that tenants are put on; its Limits
	// are as set (an absent field takes the node's default, 0 lifts the
	// limit).
	Plan = apiclient.Plan
	// Limits are a tenant's or a plan's rate limits and quotas, as the API
	// spells them: a nil field is not set.
	Limits = apiclient.TenantLimits
)

// PutPlan creates the plan name with limits, or replaces the limits of the
// plan of that name as a whole, and returns it. A change applies to every
// tenant on the plan within seconds. Safe to retry: a repeat sets the same
// limits.
func (c *Client) PutPlan(ctx context.Context, name string, limits Limits) (*Plan, error) {
	op := fmt.Sprintf("put plan %q", name)
	resp, err := c.api.PutPlanWithResponse(repeatable(ctx), name, limits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, cmp.Or(resp.JSON201, resp.JSON200))
}

// GetPlan returns the plan name, or ErrNotFound.
func (c *Client) GetPlan(ctx context.Context, name string) (*Plan, error) {
	op := fmt.Sprintf("get plan %q", name)
	resp, err := c.api.GetPlanWithResponse(repeatable(ctx), name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// ListPlans returns every plan, by name.
func (c *Client) ListPlans(ctx context.Context) ([]Plan, error) {
	resp, err := c.api.ListPlansWithResponse(repeatable(ctx))
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	list, err := result("list plans", resp.HTTPResponse, resp.Body, resp.JSON200)
	if err != nil {
		return nil, err
	}
	return list.Data, nil
}

// DeletePlan deletes the plan name: ErrNotFound when there is none, an
// *Error of status 409 (ErrConflict) while tenants are on it. Not retried
// after a 503 or a network error: had the first try deleted it, the repeat
// would answer ErrNotFound.
func (c *Client) DeletePlan(ctx context.Context, name string) error {
	op := fmt.Sprintf("delete plan %q", name)
	resp, err := c.api.DeletePlanWithResponse(ctx, name)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if resp.StatusCode() != http.StatusNoContent {
		return responseError(op, resp.HTTPResponse, resp.Body)
	}
	return nil
}
