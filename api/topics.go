package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

// Topics: the CRUD of a tenant's topics, and the answers of a publish to
// one (POST /v1/tasks or a batch item with "topic"). What a publish makes
// is the task service's (internal/tasks).

// publish publishes a validated task to its topic and answers the publish.
func (s *Server) publish(c echo.Context, tenant *model.Tenant, task *model.Task) error {
	res, err := s.tasks.Publish(c.Request().Context(), tenant, task)
	var (
		quota *tasks.QuotaError
		daily *tasks.DailyQuotaError
	)
	switch {
	case errors.As(err, &quota):
		return s.quotaExceeded(c, quota)
	case errors.As(err, &daily):
		return s.dailyQuotaExceeded(c, daily)
	case err != nil:
		if p := publishProblem(err, *task.Topic, "Idempotency-Key"); p != nil {
			return p
		}
		return err
	case res.Replayed:
		c.Response().Header().Set("Idempotent-Replayed", "true")
		return c.JSON(http.StatusOK, publishJSON(res.Publish))
	}
	traceTaskCount(c, len(res.Publish.Tasks))
	c.Response().Header().Set(echo.HeaderLocation, "/v1/publishes/"+res.Publish.ID.String())
	return c.JSON(http.StatusCreated, publishJSON(res.Publish))
}

// publishProblem is the problem a publish to topic failed with, when err is
// one the client caused; keyName names its idempotency key in the request.
func publishProblem(err error, topic, keyName string) *problem {
	var (
		fe     fieldErrors
		fanout *tasks.FanoutError
	)
	switch {
	case errors.Is(err, tasks.ErrKeyReused):
		return newProblem(http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused",
			"this "+keyName+" was already used by a different publish; use a new key for a new publish")
	case errors.Is(err, tasks.ErrNoSuchTopic):
		fe.add("topic", "names no topic of this tenant; create it with PUT /v1/topics/%s", url.PathEscape(topic))
	case errors.Is(err, tasks.ErrTopicEmpty):
		fe.add("topic", "has no endpoints to publish to; give it some with PUT /v1/topics/%s", url.PathEscape(topic))
	case errors.As(err, &fanout):
		fe.add(fanout.Field, "%s", fanout.Message)
		return &problem{status: http.StatusUnprocessableEntity, slug: "fan-out-too-large", title: "Publish too large",
			detail: "the publish would store more than one call may", fields: fe}
	default:
		return nil
	}
	p, _ := fe.problem().(*problem)
	return p
}

// parsePublishFields reads the publish_id and topic of a bulk call's filter
// (nil: none).
func parsePublishFields(fe *fieldErrors, publishID, topic *string) (*uuid.UUID, *string) {
	var id *uuid.UUID
	if publishID != nil {
		parsed, err := uuid.Parse(*publishID)
		if err != nil {
			fe.add("publish_id", "must be a publish id (a UUID)")
		} else {
			id = &parsed
		}
	}
	if topic != nil {
		tasks.CheckTopicName(fe, "topic", *topic)
	}
	return id, topic
}

func publishJSON(p *model.Publish) openapi.Publish {
	counts := p.StatusCounts()
	out := openapi.Publish{
		ID:             p.ID,
		Topic:          p.Topic,
		CreatedAt:      p.CreatedAt,
		IdempotencyKey: p.IdempotencyKey,
		TaskCount:      p.TaskCount,
		StatusCounts: openapi.PublishStatusCounts{
			Scheduled:   counts[model.StatusScheduled],
			Dispatching: counts[model.StatusDispatching],
			Retrying:    counts[model.StatusRetrying],
			Delivered:   counts[model.StatusDelivered],
			Dead:        counts[model.StatusDead],
			Canceled:    counts[model.StatusCanceled],
			Expired:     counts[model.StatusExpired],
		},
		Tasks: make([]openapi.Task, len(p.Tasks)),
	}
	for i, t := range p.Tasks {
		out.Tasks[i] = taskWithoutBodyJSON(t)
	}
	return out
}

// GetPublish reads a publish to a topic with its tasks.
func (s *Server) GetPublish(c echo.Context, id openapi.PublishID) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	p, err := s.tasks.GetPublish(c.Request().Context(), tenant.ID, id)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("publish " + id.String())
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, publishJSON(p))
}

// topicRequest is the body of PUT /v1/topics/{name} as sent. The endpoints
// stay raw until each is decoded on its own, so that a problem in one is
// reported under its index.
type topicRequest struct {
	Description *string            `json:"description,omitempty"`
	Endpoints   *[]json.RawMessage `json:"endpoints"`
}

// topicEndpointRequest is one endpoint of a topicRequest.
type topicEndpointRequest struct {
	URL  *string `json:"url"`
	Name *string `json:"name,omitempty"`
}

// PutTopic creates a topic or replaces its endpoints and description.
func (s *Server) PutTopic(c echo.Context, name openapi.TopicName) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var req topicRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	topic, err := s.validateTopic(name, &req, tenant)
	if err != nil {
		return err
	}
	created, err := s.tasks.PutTopic(c.Request().Context(), tenant, topic, actorOf(c))
	var quota *tasks.TopicQuotaError
	switch {
	case errors.As(err, &quota):
		s.apiLimits.refused.WithLabelValues("topics").Inc()
		c.Response().Header().Set("Retry-After", fmt.Sprint(ceilSeconds(scheduleQuotaRetryAfter)))
		return newProblem(http.StatusTooManyRequests, "topic-quota-exceeded", "Topic quota exceeded",
			fmt.Sprintf("this tenant may have at most %d topics and has that many; delete one to make room", quota.Limit))
	case err != nil:
		return err
	case created:
		c.Response().Header().Set(echo.HeaderLocation, "/v1/topics/"+url.PathEscape(topic.Name))
		return c.JSON(http.StatusCreated, topicJSON(topic))
	}
	return c.JSON(http.StatusOK, topicJSON(topic))
}

// validateTopic turns the name and body of PUT /v1/topics/{name} into the
// topic to store, or field errors.
func (s *Server) validateTopic(name string, req *topicRequest, tenant *model.Tenant) (*model.Topic, error) {
	var fe fieldErrors
	tasks.CheckTopicName(&fe, "name", name)
	topic := &model.Topic{Name: name}
	if req.Description != nil {
		d := *req.Description
		switch {
		case utf8.RuneCountInString(d) > tasks.MaxTopicDescription:
			fe.add("description", "must be at most %d characters", tasks.MaxTopicDescription)
		case strings.ContainsRune(d, 0):
			fe.add("description", "must not contain NUL characters")
		default:
			topic.Description = d
		}
	}
	switch {
	case req.Endpoints == nil:
		fe.add("endpoints", "is required (an empty list leaves the topic without endpoints)")
	case len(*req.Endpoints) > tasks.MaxTopicEndpoints:
		fe.add("endpoints", "must hold at most %d endpoints, not %d", tasks.MaxTopicEndpoints, len(*req.Endpoints))
	default:
		topic.Endpoints = s.checkEndpoints(&fe, *req.Endpoints, tenant)
	}
	if err := fe.problem(); err != nil {
		return nil, err
	}
	return topic, nil
}

// checkEndpoints decodes and checks a topic's endpoints, each under
// "endpoints[i]": a URL by the rules of a task's, an optional name by the
// rules of a topic's, and neither given twice.
func (s *Server) checkEndpoints(fe *fieldErrors, raw []json.RawMessage, tenant *model.Tenant) []model.TopicEndpoint {
	endpoints := make([]model.TopicEndpoint, 0, len(raw))
	urls, names := map[string]int{}, map[string]int{}
	for i, item := range raw {
		field := fmt.Sprintf("endpoints[%d]", i)
		var req topicEndpointRequest
		if msg := decodeEndpoint(item, &req); msg != nil {
			fe.add(field+msg.Field, "%s", msg.Message)
			continue
		}
		var ep model.TopicEndpoint
		if req.URL == nil || *req.URL == "" {
			fe.add(field+".url", "is required")
		} else {
			ep.URL = s.rules().CheckURL(fe, field+".url", *req.URL, tenant)
			if first, dup := urls[ep.URL]; dup && ep.URL != "" {
				fe.add(field+".url", "is the URL of endpoints[%d] too; a topic sends to each URL once", first)
			} else if ep.URL != "" {
				urls[ep.URL] = i
			}
		}
		if req.Name != nil {
			switch first, dup := names[*req.Name]; {
			case tasks.TopicNameProblem(*req.Name) != "":
				fe.add(field+".name", "%s", tasks.TopicNameProblem(*req.Name))
			case dup:
				fe.add(field+".name", "is the name of endpoints[%d] too; names are unique within a topic", first)
			default:
				names[*req.Name] = i
				ep.Name = *req.Name
			}
		}
		endpoints = append(endpoints, ep)
	}
	return endpoints
}

// decodeEndpoint decodes one endpoint strictly; a failure comes back as the
// field below the endpoint it concerns (".url", or "" for the endpoint
// itself) and its message.
func decodeEndpoint(raw json.RawMessage, dst *topicEndpointRequest) *openapi.FieldError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return &openapi.FieldError{Field: "." + typeErr.Field, Message: fmt.Sprintf("must be a JSON %s, not %s",
			jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &openapi.FieldError{Field: "." + name, Message: "is not a known field"}
	default:
		return &openapi.FieldError{Message: `must be an object such as {"url": "https://example.com/hook"}`}
	}
}

func topicJSON(t *model.Topic) openapi.Topic {
	endpoints := make([]openapi.TopicEndpoint, len(t.Endpoints))
	for i, ep := range t.Endpoints {
		endpoints[i] = openapi.TopicEndpoint{URL: ep.URL, Name: ep.Name}
	}
	return openapi.Topic{Name: t.Name, Description: t.Description, Endpoints: endpoints,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// GetTopic reads one topic.
func (s *Server) GetTopic(c echo.Context, name openapi.TopicName) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	t, err := s.tasks.GetTopic(c.Request().Context(), tenant.ID, name)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("topic " + name)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, topicJSON(t))
}

// DeleteTopic deletes one topic, leaving the tasks published to it alone.
func (s *Server) DeleteTopic(c echo.Context, name openapi.TopicName) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	t, err := s.tasks.DeleteTopic(c.Request().Context(), tenant.ID, name, actorOf(c))
	if errors.Is(err, model.ErrNotFound) {
		return notFound("topic " + name)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, topicJSON(t))
}

// ListTopics pages through the tenant's topics in name order. The cursor is
// the last name of the page, opaque to clients as other lists' are.
func (s *Server) ListTopics(c echo.Context, params openapi.ListTopicsParams) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var (
		fe     fieldErrors
		filter model.TopicFilter
	)
	filter.Limit, _ = pageRequest(&fe, params.Limit, nil)
	filter.After = nameCursor(&fe, params.Cursor, tasks.ValidTopicName)
	if err := fe.problem(); err != nil {
		return err
	}
	page := filter.Limit
	filter.Limit++ // one more tells whether another page follows
	list, err := s.tasks.ListTopics(c.Request().Context(), tenant.ID, filter)
	if err != nil {
		return err
	}
	var out openapi.TopicList
	out.Data, out.NextCursor = paginate(list, page, func(t *model.Topic) string { return encodeNameCursor(t.Name) }, topicJSON)
	return c.JSON(http.StatusOK, out)
}
