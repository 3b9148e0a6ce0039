package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// The operator API: tenants and what the dispatcher knows of targets.

// BreakerStatus is one target's circuit breaker as a dispatcher node sees it.
type BreakerStatus struct {
	Target                string
	State                 string
	Requests, Failures    uint32
	ConsecutiveFailures   uint32
	OpenedAt, NextProbeAt time.Time
	InFlight, Waiting     int
	// RecentClaims ranks the target for the metrics' labels; Tenants
	// counts the tenants sending to it lately.
	RecentClaims float64
	Tenants      int
}

// BreakerSource is the dispatcher running in this process.
type BreakerSource interface {
	NodeID() uuid.UUID
	BreakerStatuses() []BreakerStatus
	// TenantTargets are the targets the tenant's tasks went to lately, as
	// the tenant may see them.
	TenantTargets(tenant uuid.UUID) []TargetStatus
}

// CreateTenant creates a tenant and shows its credentials, once.
func (s *Server) CreateTenant(c echo.Context) error {
	var req openapi.TenantCreateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var fe fieldErrors
	if n := utf8.RuneCountInString(req.Name); n < 1 || n > 200 {
		fe.add("name", "must be 1 to 200 characters")
	} else if strings.ContainsRune(req.Name, 0) {
		fe.add("name", "must not contain NUL characters")
	}
	if req.Plan != nil && !tenants.ValidPlanName(*req.Plan) {
		fe.add("plan", "names no plan (%q): plan names are lowercase letters, digits, '-' and '_'", *req.Plan)
	}
	if err := fe.problem(); err != nil {
		return err
	}
	created, err := s.tenants.CreateOn(c.Request().Context(), req.Name, req.Plan, model.ActorOperator)
	if errors.Is(err, model.ErrNoSuchPlan) {
		return noSuchPlan(*req.Plan)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, TenantCreatedJSON(created))
}

// TenantCreatedJSON is the response body of a created tenant, shared with
// the CLI's "tenant create" so both print the same JSON.
func TenantCreatedJSON(c *tenants.Created) openapi.TenantCreated {
	return openapi.TenantCreated{
		ID:            c.Tenant.ID,
		Name:          c.Tenant.Name,
		APIKey:        c.APIKey,
		SigningSecret: c.SigningSecret,
		CreatedAt:     c.Tenant.CreatedAt,
		Plan:          c.Tenant.Plan,
	}
}

// GetTenant reads a tenant and its settings.
func (s *Server) GetTenant(c echo.Context, id openapi.TenantID) error {
	t, err := s.tenants.Get(c.Request().Context(), id)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("tenant " + id.String())
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, TenantJSON(t))
}

// tenantUpdate is the body of PATCH /v1/admin/tenants/{id}: each field
// absent is kept, null is reset to hookwheel's default, a value is set.
type tenantUpdate struct {
	Retry *retryDefaultsUpdate `json:"retry"`
	// Limits replaces the tenant's limits as a whole (see limitsUpdate).
	Limits limitsUpdate `json:"limits"`
	// TargetAllowCIDRs, when given, replaces the private ranges granted to
	// the tenant; null withdraws them.
	TargetAllowCIDRs json.RawMessage `json:"target_allow_cidrs"`
	// Retention, when given, replaces how long the tenant's finished tasks
	// are kept; null goes back to the node default.
	Retention json.RawMessage `json:"retention"`
	// Plan, when given, puts the tenant on that plan; null on none.
	Plan json.RawMessage `json:"plan"`
	// OperationsURL, when given, is where the tenant's operations events
	// go; null: nowhere.
	OperationsURL json.RawMessage `json:"operations_url"`
}

// minRetention is the shortest retention a tenant may be given: purging
// is a pass every few seconds, so less would promise what it cannot keep.
const minRetention = time.Second

type retryDefaultsUpdate struct {
	MaxAttempts json.RawMessage `json:"max_attempts"`
	MinBackoff  json.RawMessage `json:"min_backoff"`
	MaxBackoff  json.RawMessage `json:"max_backoff"`
}

func (r *retryDefaultsUpdate) UnmarshalJSON(b []byte) error {
	type plain retryDefaultsUpdate
	return decodeNested("retry", b, (*plain)(r))
}

// UpdateTenant changes a tenant's settings.
func (s *Server) UpdateTenant(c echo.Context, id openapi.TenantID) error {
	var req tenantUpdate
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	t, err := s.tenants.Get(ctx, id)
	if errors.Is(err, model.ErrNotFound) {
		return notFound("tenant " + id.String())
	}
	if err != nil {
		return err
	}
	defaults := t.Retry
	if r := req.Retry; r != nil {
		var fe fieldErrors
		patchInt(&fe, "retry.max_attempts", r.MaxAttempts, &defaults.MaxAttempts)
		patchDuration(&fe, "retry.min_backoff", r.MinBackoff, &defaults.MinBackoff)
		patchDuration(&fe, "retry.max_backoff", r.MaxBackoff, &defaults.MaxBackoff)
		if len(fe) == 0 {
			tasks.AddPolicyErrors(&fe, tasks.TenantPolicy(defaults))
		}
		if err := fe.problem(); err != nil {
			return err
		}
	}
	var limits model.Limits
	if req.Limits.given {
		var fe fieldErrors
		limits = req.Limits.validate(&fe, s.cfg.Limits.MaxTimeout)
		if err := fe.problem(); err != nil {
			return err
		}
	}
	var grants []netip.Prefix
	if req.TargetAllowCIDRs != nil {
		var fe fieldErrors
		grants = parseTargetGrants(&fe, req.TargetAllowCIDRs)
		if err := fe.problem(); err != nil {
			return err
		}
	}
	var plan *string
	if req.Plan != nil && !bytes.Equal(req.Plan, jsonNull) {
		var fe fieldErrors
		if err := json.Unmarshal(req.Plan, &plan); err != nil {
			fe.add("plan", "must be a plan's name, or null for none")
		} else if !tenants.ValidPlanName(*plan) {
			fe.add("plan", "names no plan (%q): plan names are lowercase letters, digits, '-' and '_'", *plan)
		}
		if err := fe.problem(); err != nil {
			return err
		}
	}
	retention := t.Retention
	if req.Retention != nil {
		var fe fieldErrors
		patchDuration(&fe, "retention", req.Retention, &retention)
		if len(fe) == 0 && retention != nil && *retention < minRetention {
			fe.add("retention", "must be at least %s, or null for the node default", minRetention)
		}
		if err := fe.problem(); err != nil {
			return err
		}
	}
	var opsURL *string
	if req.OperationsURL != nil {
		var fe fieldErrors
		opsURL = s.parseOperationsURL(&fe, req.OperationsURL, t)
		if err := fe.problem(); err != nil {
			return err
		}
	}
	if req.Plan != nil {
		t, err = s.tenants.SetPlan(ctx, id, plan, model.ActorOperator)
		switch {
		case errors.Is(err, model.ErrNotFound):
			return notFound("tenant " + id.String())
		case errors.Is(err, model.ErrNoSuchPlan):
			return noSuchPlan(*plan)
		case err != nil:
			return err
		}
	}
	if req.Retry != nil {
		t, err = s.tenants.SetRetryDefaults(ctx, id, defaults, model.ActorOperator)
		if errors.Is(err, model.ErrNotFound) {
			return notFound("tenant " + id.String())
		}
		if err != nil {
			return err
		}
	}
	if req.Limits.given {
		t, err = s.tenants.SetLimits(ctx, id, limits, model.ActorOperator)
		if errors.Is(err, model.ErrNotFound) {
			return notFound("tenant " + id.String())
		}
		if err != nil {
			return err
		}
	}
	if req.TargetAllowCIDRs != nil {
		t, err = s.tenants.SetTargetGrants(ctx, id, grants, model.ActorOperator)
		if errors.Is(err, model.ErrNotFound) {
			return notFound("tenant " + id.String())
		}
		if err != nil {
			return err
		}
	}
	if req.Retention != nil {
		t, err = s.tenants.SetRetention(ctx, id, retention, model.ActorOperator)
		if errors.Is(err, model.ErrNotFound) {
			return notFound("tenant " + id.String())
		}
		if err != nil {
			return err
		}
	}
	if req.OperationsURL != nil {
		t, err = s.tenants.SetOperationsURL(ctx, id, opsURL, model.ActorOperator)
		if errors.Is(err, model.ErrNotFound) {
			return notFound("tenant " + id.String())
		}
		if err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, TenantJSON(t))
}

var jsonNull = []byte("null")

// parseOperationsURL reads a tenant's operations_url as given, by the
// operator or the tenant itself: null is none (nil), anything else must be
// a URL that passes the checks of t's tasks' URLs, private ranges granted
// to t included. A refusal is added to fe, and nil returned.
func (s *Server) parseOperationsURL(fe *fieldErrors, raw json.RawMessage, t *model.Tenant) *string {
	if bytes.Equal(raw, jsonNull) {
		return nil
	}
	var opsURL *string
	if err := json.Unmarshal(raw, &opsURL); err != nil || opsURL == nil || *opsURL == "" {
		fe.add("operations_url", "must be a URL, or null for none")
		return nil
	}
	if s.rules().CheckURL(fe, "operations_url", *opsURL, t) == "" {
		return nil
	}
	return opsURL
}

func patchInt(fe *fieldErrors, field string, raw json.RawMessage, dst **int) {
	switch {
	case raw == nil:
	case bytes.Equal(raw, jsonNull):
		*dst = nil
	default:
		var n int
		if err := json.Unmarshal(raw, &n); err != nil {
			fe.add(field, "must be an integer or null")
			return
		}
		*dst = &n
	}
}

func patchDuration(fe *fieldErrors, field string, raw json.RawMessage, dst **time.Duration) {
	switch {
	case raw == nil:
	case bytes.Equal(raw, jsonNull):
		*dst = nil
	default:
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			fe.add(field, "must be a duration string such as 30s, or null")
			return
		}
		d, ok := parseDuration(fe, field, text)
		if ok {
			*dst = &d
		}
	}
}

// TenantJSON is a tenant as the admin API shows it, shared with the
// command line.
func TenantJSON(t *model.Tenant) openapi.Tenant {
	p := tasks.TenantPolicy(t.Retry)
	return openapi.Tenant{
		ID:        t.ID,
		Name:      t.Name,
		CreatedAt: t.CreatedAt,
		Retry: openapi.RetryDefaults{
			MaxAttempts: p.MaxAttempts,
			MinBackoff:  formatDuration(p.MinBackoff),
			MaxBackoff:  formatDuration(p.MaxBackoff),
		},
		Plan:             t.Plan,
		Limits:           overridesJSON(t.LimitOverrides),
		EffectiveLimits:  limitsJSON(t.Limits),
		TargetAllowCidrs: cidrStrings(t.TargetAllowCIDRs),
		Retention:        formatOptionalDuration(t.Retention),
		Status:           tenantStatusJSON(t.Status),
		Deletion:         tenantDeletionJSON(t.Deletion),
		OperationsURL:    t.OperationsURL,
	}
}

func formatOptionalDuration(d *time.Duration) *string {
	if d == nil {
		return nil
	}
	s := formatDuration(*d)
	return &s
}

func cidrStrings(cidrs []netip.Prefix) []string {
	out := make([]string, len(cidrs))
	for i, p := range cidrs {
		out[i] = p.String()
	}
	return out
}

// maxTargetGrants bounds the ranges granted to one tenant; each is checked
// on every dial of its sends.
const maxTargetGrants = 100

// parseTargetGrants reads target_allow_cidrs: a list of CIDRs, or null.
func parseTargetGrants(fe *fieldErrors, raw json.RawMessage) []netip.Prefix {
	if bytes.Equal(raw, jsonNull) {
		return nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		fe.add("target_allow_cidrs", "must be a list of CIDRs such as [\"10.20.0.0/16\"], or null")
		return nil
	}
	if len(list) > maxTargetGrants {
		fe.add("target_allow_cidrs", "must hold at most %d ranges", maxTargetGrants)
		return nil
	}
	cidrs := make([]netip.Prefix, 0, len(list))
	for i, text := range list {
		p, err := netip.ParsePrefix(strings.TrimSpace(text))
		if err != nil {
			fe.add(fmt.Sprintf("target_allow_cidrs[%d]", i), "must be a CIDR such as 10.20.0.0/16 or fd00::/8")
			continue
		}
		cidrs = append(cidrs, p.Masked())
	}
	return cidrs
}

// ListBreakers shows the circuit breakers of this node's dispatcher.
func (s *Server) ListBreakers(c echo.Context) error {
	out := openapi.BreakerList{Data: []openapi.Breaker{}}
	if s.cfg.Breakers == nil {
		return c.JSON(http.StatusOK, out)
	}
	out.Node = s.cfg.Breakers.NodeID()
	for _, b := range s.cfg.Breakers.BreakerStatuses() {
		item := openapi.Breaker{
			Target:              b.Target,
			State:               openapi.BreakerState(b.State),
			Requests:            int(b.Requests),
			Failures:            int(b.Failures),
			ConsecutiveFailures: int(b.ConsecutiveFailures),
			InFlight:            b.InFlight,
			Waiting:             b.Waiting,
			RecentClaims:        b.RecentClaims,
			Tenants:             b.Tenants,
		}
		if !b.OpenedAt.IsZero() {
			item.OpenedAt = &b.OpenedAt
		}
		if !b.NextProbeAt.IsZero() {
			item.NextProbeAt = &b.NextProbeAt
		}
		out.Data = append(out.Data, item)
	}
	return c.JSON(http.StatusOK, out)
}

// ListTenants pages through every tenant, oldest first, with how many of
// its tasks wait.
func (s *Server) ListTenants(c echo.Context, params openapi.ListTenantsParams) error {
	var fe fieldErrors
	page, after := pageRequest(&fe, params.Limit, params.Cursor)
	if err := fe.problem(); err != nil {
		return err
	}
	// One more tells whether another page follows.
	list, err := s.tenants.List(c.Request().Context(), after, page+1)
	if err != nil {
		return err
	}
	data, next := paginate(list, page, func(t model.TenantSummary) string { return encodeCursor(t.ID) }, tenantSummaryJSON)
	return c.JSON(http.StatusOK, openapi.TenantList{Data: data, NextCursor: next})
}

func tenantSummaryJSON(t model.TenantSummary) openapi.TenantSummary {
	j := TenantJSON(&t.Tenant)
	return openapi.TenantSummary{
		ID:               j.ID,
		Name:             j.Name,
		CreatedAt:        j.CreatedAt,
		Retry:            j.Retry,
		Plan:             j.Plan,
		Limits:           j.Limits,
		EffectiveLimits:  j.EffectiveLimits,
		TargetAllowCidrs: j.TargetAllowCidrs,
		Retention:        j.Retention,
		Status:           openapi.TenantSummaryStatus(j.Status),
		Deletion:         j.Deletion,
		WaitingTasks:     t.WaitingTasks,
	}
}

// ListNodes shows the live dispatcher nodes and the partitions each holds.
func (s *Server) ListNodes(c echo.Context) error {
	nodes, unowned, err := s.tasks.Nodes(c.Request().Context())
	if err != nil {
		return err
	}
	out := openapi.NodeList{Data: make([]openapi.Node, len(nodes)), Partitions: model.Partitions, UnownedPartitions: unowned}
	for i, n := range nodes {
		partitions := make([]int, len(n.Partitions))
		for j, p := range n.Partitions {
			partitions[j] = int(p)
		}
		out.Data[i] = openapi.Node{ID: n.ID, Name: n.Name, StartedAt: n.StartedAt, HeartbeatAt: n.HeartbeatAt,
			ExpiresAt: n.ExpiresAt, Partitions: partitions}
	}
	return c.JSON(http.StatusOK, out)
}
