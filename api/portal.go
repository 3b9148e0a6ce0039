package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// Portal links: a tenant creates, lists and revokes them with its API key
// (tasks:read: a link shows a part of what that scope reads), and the
// portal's page reads one label's tasks with the link's token, which only
// the operations under the portalToken scheme take (portalAuth). Every
// other operation's middleware refuses the token as a malformed key or
// admin token: it is neither.

const portalContextKey = "hookwheel.portal"

const (
	// portalPage is the path of the portal's page, which web.Portal serves.
	portalPage = "/portal/"
	// maxPortalListLimit bounds a page of the portal's tasks: the page
	// shows them, a program has the tenant's API.
	maxPortalListLimit = 100
	// portalAttempts is how many attempts a portal task shows.
	portalAttempts = 100
	// portalLinkQuotaRetryAfter is the Retry-After of a link over the
	// quota: room is made by revoking one, or by the shortest-lived ending.
	portalLinkQuotaRetryAfter = time.Minute
)

// portalAuth admits the portal's calls: a bearer portal token of a usable
// link, in the same throttle of failed credentials as keys and admin
// tokens, then the link's tenant's API rate limit (limit), which its
// customer's page spends. Cookies are not read: a dashboard session opens
// no portal call, nor a portal token any other.
func portalAuth(auth *tenants.Service, throttle *authThrottle, failures *prometheus.CounterVec,
	limit func(echo.Context, *model.Tenant, echo.HandlerFunc) error) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			token, ok := bearerToken(c.Request())
			if !ok {
				failures.WithLabelValues("missing").Inc()
				return unauthorized(c, "missing portal token in the Authorization header")
			}
			caller, err := throttledAuth(c, throttle, failures, "the portal link is malformed, unknown, revoked or expired",
				func(ctx context.Context) (*tenants.PortalCaller, error) { return auth.AuthenticatePortal(ctx, token) })
			if err != nil {
				return err
			}
			c.Set(portalContextKey, caller)
			return limit(c, caller.Tenant, next)
		}
	}
}

// portalOf is the link and tenant portalAuth found for this request.
func portalOf(c echo.Context) (*tenants.PortalCaller, error) {
	caller, ok := c.Get(portalContextKey).(*tenants.PortalCaller)
	if !ok || caller == nil {
		// Only reachable if a portal route lost its security requirement.
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "this call needs a portal token")
	}
	return caller, nil
}

// portalLinkRequest is the body of POST /v1/portal-links, expires_in as
// text so that a bad one is named.
type portalLinkRequest struct {
	Label       *string `json:"label"`
	ExpiresIn   *string `json:"expires_in"`
	Name        string  `json:"name"`
	Description string  `json:"description"`
}

// CreatePortalLink creates a portal link for one of the calling tenant's
// labels and answers its URL, the only time the token is shown.
func (s *Server) CreatePortalLink(c echo.Context) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	var req portalLinkRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var (
		fe   fieldErrors
		spec = tenants.PortalLinkSpec{Name: req.Name, Description: req.Description}
	)
	if req.Label == nil {
		fe.add("label", "is required: the label whose tasks the link shows, such as customer:42")
	} else {
		label, errs := tasks.ParseLabelFilter("label", []string{*req.Label})
		addLabelErrors(&fe, errs)
		for k, v := range label {
			spec.LabelKey, spec.LabelValue = k, v
		}
	}
	if req.ExpiresIn != nil {
		d, err := time.ParseDuration(*req.ExpiresIn)
		if err != nil || d <= 0 {
			fe.add("expires_in", "must be a positive duration such as 1h or 24h")
		}
		spec.ExpiresIn = d
	}
	if err := fe.problem(); err != nil {
		return err
	}
	created, err := s.tenants.CreatePortalLink(c.Request().Context(), caller.Tenant.ID, spec, caller.Key, caller.Actor())
	if errors.Is(err, tenants.ErrTooManyPortalLinks) {
		s.apiLimits.refused.WithLabelValues("portal_links").Inc()
		c.Response().Header().Set("Retry-After", strconv.Itoa(ceilSeconds(portalLinkQuotaRetryAfter)))
		return newProblem(http.StatusTooManyRequests, "portal-link-quota-exceeded", "Portal link quota exceeded",
			err.Error()+"; revoke one to make room, or give links a shorter expires_in")
	}
	if err != nil {
		return credentialError(err, caller.Tenant.ID)
	}
	out := openapi.PortalLinkCreated{URL: s.portalOrigin(c) + portalPage + "#" + created.Token}
	link := portalLinkJSON(&created.Link)
	out.ID, out.Label, out.Name, out.Description = link.ID, link.Label, link.Name, link.Description
	out.CreatedAt, out.CreatedBy, out.ExpiresAt = link.CreatedAt, link.CreatedBy, link.ExpiresAt
	return c.JSON(http.StatusCreated, out)
}

// portalOrigin is the origin a link's URL begins with: the configured
// public URL, else the one this call reached, as its Host names it and with
// the scheme the connection (or a trusted proxy) says.
func (s *Server) portalOrigin(c echo.Context) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if s.proxies.secure(c.Request()) {
		scheme = "https"
	}
	return scheme + "://" + c.Request().Host
}

// ListPortalLinks pages through the calling tenant's live links.
func (s *Server) ListPortalLinks(c echo.Context, params openapi.ListPortalLinksParams) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	var fe fieldErrors
	page, before := pageRequest(&fe, params.Limit, params.Cursor)
	if err := fe.problem(); err != nil {
		return err
	}
	list, err := s.tenants.ListPortalLinks(c.Request().Context(), caller.Tenant.ID, before, page+1)
	if err != nil {
		return err
	}
	data, next := paginate(list, page, func(l model.PortalLink) string { return encodeCursor(l.ID) },
		func(l model.PortalLink) openapi.PortalLink { return portalLinkJSON(&l) })
	return c.JSON(http.StatusOK, openapi.PortalLinkList{Data: data, NextCursor: next})
}

// RevokePortalLink ends one of the calling tenant's links.
func (s *Server) RevokePortalLink(c echo.Context, id openapi.PortalLinkID) error {
	caller, err := callerOf(c)
	if err != nil {
		return err
	}
	link, err := s.tenants.RevokePortalLink(c.Request().Context(), caller.Tenant.ID, id, caller.Actor())
	if errors.Is(err, model.ErrNotFound) {
		return notFound("portal link " + id.String())
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, portalLinkJSON(link))
}

func portalLinkJSON(l *model.PortalLink) openapi.PortalLink {
	return openapi.PortalLink{
		ID: l.ID, Label: l.Label(), Name: l.Name, Description: l.Description, CreatedAt: l.CreatedAt,
		CreatedBy: l.CreatedBy, ExpiresAt: l.ExpiresAt, RevokedAt: l.RevokedAt,
	}
}

// ListPortalTasks pages through the tasks carrying the link's label.
func (s *Server) ListPortalTasks(c echo.Context, params openapi.ListPortalTasksParams) error {
	p, err := portalOf(c)
	if err != nil {
		return err
	}
	var fe fieldErrors
	page, before := pageRequest(&fe, params.Limit, params.Cursor)
	if page > maxPortalListLimit {
		fe.add("limit", "must be between 1 and %d", maxPortalListLimit)
	}
	filter := model.TaskFilter{Labels: map[string]string{p.Link.LabelKey: p.Link.LabelValue}, Before: before, Limit: page + 1}
	if params.Status != nil {
		if !params.Status.Valid() {
			fe.add("status", "must be one of the task statuses")
		}
		status := model.TaskStatus(*params.Status)
		filter.Status = &status
	}
	if err := fe.problem(); err != nil {
		return err
	}
	list, err := s.tasks.List(c.Request().Context(), p.Tenant.ID, filter)
	if err != nil {
		return err
	}
	data, next := paginate(list, page, func(t *model.Task) string { return encodeCursor(t.ID) }, portalTaskJSON)
	return c.JSON(http.StatusOK, openapi.PortalTaskList{
		Label: p.Link.Label(), Name: p.Link.Name, Description: p.Link.Description, ExpiresAt: p.Link.ExpiresAt,
		Data: data, NextCursor: next,
	})
}

// GetPortalTask reads one task of the link's label with its first
// attempts. A task without the label is not found, word for word as an id
// that names nothing: the portal learns nothing of the tenant's other tasks.
func (s *Server) GetPortalTask(c echo.Context, id openapi.TaskID) error {
	p, err := portalOf(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	t, err := s.tasks.Get(ctx, p.Tenant.ID, id)
	if errors.Is(err, model.ErrNotFound) || (err == nil && !hasLabel(t, p.Link)) {
		return notFound("task " + id.String())
	}
	if err != nil {
		return err
	}
	// The task first, its attempts after: an attempt is written with its
	// task's outcome, so the later read holds every attempt the task counts.
	attempts, err := s.tasks.Attempts(ctx, p.Tenant.ID, id, 0, portalAttempts+1)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("task " + id.String())
	}
	if err != nil {
		return err
	}
	more := len(attempts) > portalAttempts
	attempts = attempts[:min(len(attempts), portalAttempts)]
	base := portalTaskJSON(t)
	out := openapi.PortalTaskDetail{
		ID: base.ID, Status: base.Status, Method: base.Method, URL: base.URL, RunAt: base.RunAt, CreatedAt: base.CreatedAt,
		UpdatedAt: base.UpdatedAt, Attempts: base.Attempts, MaxAttempts: base.MaxAttempts, NextAttemptAt: base.NextAttemptAt,
		LastStatusCode: base.LastStatusCode, LastError: base.LastError,
		Body: string(t.Body), AttemptList: make([]openapi.PortalAttempt, len(attempts)), MoreAttempts: more,
	}
	for i, a := range attempts {
		out.AttemptList[i] = openapi.PortalAttempt{
			Attempt: a.Attempt, StartedAt: a.StartedAt, DurationMs: a.Duration.Milliseconds(), StatusCode: a.StatusCode,
			Error: a.Error, Outcome: openapi.AttemptOutcome(a.Outcome), ResponseBody: a.ResponseBody,
		}
	}
	return c.JSON(http.StatusOK, out)
}

func hasLabel(t *model.Task, l *model.PortalLink) bool {
	v, ok := t.Labels[l.LabelKey]
	return ok && v == l.LabelValue
}

// portalTaskJSON is a task as a portal shows it: what its receiver saw and
// when, never the tenant's headers, labels, keys or callbacks.
func portalTaskJSON(t *model.Task) openapi.PortalTask {
	return openapi.PortalTask{
		ID: t.ID, Status: openapi.TaskStatus(t.Status), Method: openapi.HTTPMethod(t.Method), URL: portalURL(t.URL),
		RunAt: t.RunAt, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Attempts: t.Attempts, MaxAttempts: t.MaxAttempts,
		NextAttemptAt: t.NextAttemptAt, LastStatusCode: t.LastStatusCode, LastError: t.LastError,
	}
}

// portalURL is a task's URL as a portal shows it: scheme, host, port and
// path, without the query and fragment, where a receiver's credentials are
// often passed (?token=...).
func portalURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}
