package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

// Flow-control keys: the CRUD of a tenant's flow limits. What they limit is
// the dispatcher's; the rules of keys and numbers are the task service's.

// flowLimitRequest is the body of PUT /v1/flow-keys/{key} as sent.
type flowLimitRequest struct {
	Rate        *int    `json:"rate,omitempty"`
	Period      *string `json:"period,omitempty"`
	Parallelism *int    `json:"parallelism,omitempty"`
}

// PutFlowLimit sets the limits of one of the tenant's flow keys.
func (s *Server) PutFlowLimit(c echo.Context, key openapi.FlowLimitKey) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var req flowLimitRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var fe fieldErrors
	if msg := tasks.FlowLimitKeyProblem(key); msg != "" {
		fe.add("key", "%s", msg)
	}
	limit := model.FlowLimit{Key: key, Period: tasks.DefaultFlowPeriod}
	if req.Rate != nil {
		limit.Rate = *req.Rate
	}
	if req.Parallelism != nil {
		limit.Parallelism = *req.Parallelism
	}
	parsed := true
	if req.Period != nil {
		limit.Period, parsed = parseDuration(&fe, "period", *req.Period)
		if limit.Rate == 0 {
			fe.add("period", "is the period of a rate: give rate too, or leave period out")
		}
	}
	if parsed {
		tasks.CheckFlowLimit(&fe, limit)
	}
	if err := fe.problem(); err != nil {
		return err
	}
	created, err := s.tasks.PutFlowLimit(c.Request().Context(), tenant.ID, &limit, actorOf(c))
	var quota *tasks.FlowLimitQuotaError
	switch {
	case errors.As(err, &quota):
		s.apiLimits.refused.WithLabelValues("flow_keys").Inc()
		c.Response().Header().Set("Retry-After", fmt.Sprint(ceilSeconds(scheduleQuotaRetryAfter)))
		return newProblem(http.StatusTooManyRequests, "flow-key-quota-exceeded", "Flow key quota exceeded",
			fmt.Sprintf("this tenant may set limits for at most %d keys and has that many; delete some, or set the "+
				"default (\"*\") that every key without its own takes", quota.Limit))
	case err != nil:
		return err
	case created:
		c.Response().Header().Set(echo.HeaderLocation, "/v1/flow-keys/"+url.PathEscape(limit.Key))
		return c.JSON(http.StatusCreated, flowLimitJSON(&limit))
	}
	return c.JSON(http.StatusOK, flowLimitJSON(&limit))
}

// GetFlowLimit reads the limits of one of the tenant's flow keys.
func (s *Server) GetFlowLimit(c echo.Context, key openapi.FlowLimitKey) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	if err := checkFlowLimitKey(key); err != nil {
		return err
	}
	l, err := s.tasks.GetFlowLimit(c.Request().Context(), tenant.ID, key)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("limits of flow key " + key)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, flowLimitJSON(l))
}

// DeleteFlowLimit lifts the limits of one of the tenant's flow keys.
func (s *Server) DeleteFlowLimit(c echo.Context, key openapi.FlowLimitKey) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	if err := checkFlowLimitKey(key); err != nil {
		return err
	}
	l, err := s.tasks.DeleteFlowLimit(c.Request().Context(), tenant.ID, key, actorOf(c))
	if errors.Is(err, model.ErrNotFound) {
		return notFound("limits of flow key " + key)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, flowLimitJSON(l))
}

// ListFlowLimits pages through the tenant's flow limits in key order. The
// cursor is the last key of the page, opaque to clients as other lists' are.
func (s *Server) ListFlowLimits(c echo.Context, params openapi.ListFlowLimitsParams) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	var (
		fe     fieldErrors
		filter model.FlowLimitFilter
	)
	filter.Limit, _ = pageRequest(&fe, params.Limit, nil)
	filter.After = nameCursor(&fe, params.Cursor, func(key string) bool { return tasks.FlowLimitKeyProblem(key) == "" })
	if err := fe.problem(); err != nil {
		return err
	}
	page := filter.Limit
	filter.Limit++ // one more tells whether another page follows
	list, err := s.tasks.ListFlowLimits(c.Request().Context(), tenant.ID, filter)
	if err != nil {
		return err
	}
	var out openapi.FlowLimitList
	out.Data, out.NextCursor = paginate(list, page, func(l *model.FlowLimit) string { return encodeNameCursor(l.Key) }, flowLimitJSON)
	return c.JSON(http.StatusOK, out)
}

// checkFlowLimitKey refuses a path key no limits could be stored under.
func checkFlowLimitKey(key string) error {
	var fe fieldErrors
	if msg := tasks.FlowLimitKeyProblem(key); msg != "" {
		fe.add("key", "%s", msg)
	}
	return fe.problem()
}

func flowLimitJSON(l *model.FlowLimit) openapi.FlowLimit {
	return openapi.FlowLimit{
		Key:         l.Key,
		Rate:        l.Rate,
		Period:      formatDuration(l.Period),
		Parallelism: l.Parallelism,
		CreatedAt:   l.CreatedAt,
		UpdatedAt:   l.UpdatedAt,
	}
}
