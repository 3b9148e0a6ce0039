package hookwheel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/google/uuid"

	"github.com/hookwheel/hookwheel/sdk/go/internal/apiclient"
)

// The API's types of topics, as the server answers them.
type (
	// Topic is a named set of endpoint URLs that webhooks are published to.
	Topic = apiclient.Topic
	// TopicEndpoint is one URL of a topic, with an optional name.
	TopicEndpoint = apiclient.TopicEndpoint
	// Publish is one publish to a topic: the task made for each endpoint,
	// and how many of them are in each status.
	Publish = apiclient.Publish
	// PublishStatusCounts counts a publish's tasks by status.
	PublishStatusCounts = apiclient.PublishStatusCounts
)

// TopicSpec is what PutTopic sets a topic to, replacing what it had.
type TopicSpec struct {
	// Description says what the topic is for, for people.
	Description string
	// Endpoints are the topic's URLs, at most 100, in the order publishes
	// make their tasks; none leaves the topic without endpoints (publishing
	// to it is then refused).
	Endpoints []TopicEndpoint
}

// PutTopic creates the topic name, or replaces its endpoints and
// description, and returns it. A tenant may have at most 1,000 topics
// (ErrRateLimited past it, as for other quotas). Safe to retry: a repeat
// sets the same topic.
func (c *Client) PutTopic(ctx context.Context, name string, spec TopicSpec) (*Topic, error) {
	op := fmt.Sprintf("put topic %q", name)
	body := apiclient.TopicRequest{Description: spec.Description, Endpoints: spec.Endpoints}
	if body.Endpoints == nil {
		body.Endpoints = []TopicEndpoint{}
	}
	resp, err := c.api.PutTopicWithResponse(repeatable(ctx), name, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, cmp.Or(resp.JSON201, resp.JSON200))
}

// GetTopic returns the topic name as it is now.
func (c *Client) GetTopic(ctx context.Context, name string) (*Topic, error) {
	op := fmt.Sprintf("get topic %q", name)
	resp, err := c.api.GetTopicWithResponse(repeatable(ctx), name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// ListTopics returns the tenant's topics in name order, fetching page after
// page (pageSize topics each, 1 to 500; zero is 100) as the loop goes on.
// An error ends the sequence, as its last pair.
func (c *Client) ListTopics(ctx context.Context, pageSize int) iter.Seq2[Topic, error] {
	params := apiclient.ListTopicsParams{Limit: ptr(cmp.Or(pageSize, 100))}
	return paginate(func(cursor *string) ([]Topic, *string, error) {
		params.Cursor = cursor
		resp, err := c.api.ListTopicsWithResponse(repeatable(ctx), &params)
		if err != nil {
			return nil, nil, fmt.Errorf("list topics: %w", err)
		}
		page, err := result("list topics", resp.HTTPResponse, resp.Body, resp.JSON200)
		if err != nil {
			return nil, nil, err
		}
		return page.Data, page.NextCursor, nil
	})
}

// DeleteTopic deletes the topic name and returns it as it was; the tasks
// already published to it are left alone. Not retried after a 503 or a
// network error: had the first try deleted it, the repeat would answer
// ErrNotFound.
func (c *Client) DeleteTopic(ctx context.Context, name string) (*Topic, error) {
	op := fmt.Sprintf("delete topic %q", name)
	resp, err := c.api.DeleteTopicWithResponse(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}

// Publish publishes req to every endpoint of its Topic: one task per
// endpoint, stored together, each delivered, retried and dead-lettered on
// its own. It returns the publish with its tasks (for a repeat of an
// earlier request with the same IdempotencyKey, the publish that request
// made, as it is now). A topic the tenant does not have, or without
// endpoints, is ErrInvalid.
func (c *Client) Publish(ctx context.Context, req TaskRequest) (*Publish, error) {
	op := fmt.Sprintf("publish to topic %q", req.Topic)
	if req.Topic == "" || req.URL != "" {
		return nil, errors.New("publish: the request needs a Topic, and no URL")
	}
	created, err := c.createTask(ctx, op, req)
	if err != nil {
		return nil, err
	}
	pub, err := created.AsPublish()
	if err != nil {
		return nil, fmt.Errorf("%s: decode the answer: %w", op, err)
	}
	return &pub, nil
}

// GetPublish returns a publish to a topic with its tasks as they are now.
func (c *Client) GetPublish(ctx context.Context, id uuid.UUID) (*Publish, error) {
	op := "get publish " + id.String()
	resp, err := c.api.GetPublishWithResponse(repeatable(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return result(op, resp.HTTPResponse, resp.Body, resp.JSON200)
}
