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

// PortalLink is a link to a read-only page of one label's tasks and their
// attempts, for the tenant's own customer, as the server answers it
// (without its token).
type PortalLink = apiclient.PortalLink

// PortalLinkCreated is a created link with its URL, shown only once: the
// token rides in the URL's fragment.
type PortalLinkCreated = apiclient.PortalLinkCreated

// PortalLinkSpec is what CreatePortalLink makes.
type PortalLinkSpec struct {
	// Label is the label whose tasks the page shows, "key:value" (as a
	// task's Labels, and TaskFilter.Labels, spell one). Required.
	Label string
	// ExpiresIn is how long the link opens, 1s to 30 days; zero is the
	// server's default, an hour.
	ExpiresIn time.Duration
	// Name heads the page, Description is a line under it; both optional.
	Name, Description string
}

// CreatePortalLink creates a link to a read-only page of the tasks carrying
// spec.Label and their attempts, and nothing else of the tenant's, to hand
// to the customer that label stands for (or to show in a frame of the
// tenant's own application). Its URL is in the answer only. Not retried
// after a 503 or a network error: a repeat would make a second link.
func (c *Client) CreatePortalLink(ctx context.Context, spec PortalLinkSpec) (*PortalLinkCreated, error) {
	op := fmt.Sprintf("create portal link for %q", spec.Label)
	body := apiclient.PortalLinkRequest{Label: spec.Label, ExpiresIn: durationOrNil(spec.ExpiresIn)}
	if spec.Name != "" {
		body.Name = &spec.Name
	}
	if spec.Description != "" {
		body.Description = &spec.Description
	}
	resp, err := c.api.CreatePortalLinkWithResponse(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON201)
}

// ListPortalLinks returns the tenant's live portal links (neither expired
// nor revoked), newest first, fetching page after page (pageSize links each,
// 1 to 500; zero is 100) as the loop goes on. An error ends the sequence,
// as its last pair.
func (c *Client) ListPortalLinks(ctx context.Context, pageSize int) iter.Seq2[PortalLink, error] {
	params := apiclient.ListPortalLinksParams{Limit: ptr(cmp.Or(pageSize, 100))}
	return paginate(func(cursor *string) ([]PortalLink, *string, error) {
		params.Cursor = cursor
		resp, err := c.api.ListPortalLinksWithResponse(repeatable(ctx), &params)
		if err != nil {
			return nil, nil, fmt.Errorf("list portal links: %w", err)
		}
		page, err := result("list portal links", resp.HTTPResponse, resp.Body, resp.JSON200)
		if err != nil {
			return nil, nil, err
		}
		return page.Data, page.NextCursor, nil
	})
}

// RevokePortalLink ends a portal link at once, on every node, and returns
// it. Revoking a revoked link answers the same, so it is safe to retry.
func (c *Client) RevokePortalLink(ctx context.Context, id uuid.UUID) (*PortalLink, error) {
	op := "revoke portal link " + id.String()
	resp, err := c.api.RevokePortalLinkWithResponse(repeatable(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}
