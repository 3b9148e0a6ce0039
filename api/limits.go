package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/failopen"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
)

// Rate limits and quotas: the per-tenant API rate limit (a middleware after
// authentication), the pending-task quota (checked before tasks are stored),
// the tenant's view of both (GET /v1/limits) and the limits part of the
// admin API.

// Bounds of the values an operator may set: beyond them a number is a typo,
// and the limiters' microsecond arithmetic stays exact.
const (
	maxLimitRate        = 1_000_000
	maxLimitBurst       = 1_000_000
	maxLimitPending     = 1_000_000_000
	maxLimitSchedules   = 1_000_000
	maxLimitConcurrency = 100_000
	maxLimitTargets     = 1000
	maxLimitPerDay      = 1_000_000_000
)

const (
	// apiLimitTimeout bounds the rate-limit decision: Redis answers in well
	// under a millisecond, and a slow one must not slow every call down.
	apiLimitTimeout = 250 * time.Millisecond
	// apiLimitSkip is how long the API goes without rate-limit decisions
	// after Redis failed, so that calls do not each wait for a dead Redis.
	apiLimitSkip = 5 * time.Second
)

// APIRateLimiter decides tenants' API rate limits. *store.Redis is one.
type APIRateLimiter interface {
	AllowAPIRequest(ctx context.Context, tenantID uuid.UUID, rate float64, burst int) (model.RateDecision, error)
}

// apiLimits holds what the limits need beyond the Server: the limiter, its
// metrics, and when Redis last failed.
type apiLimits struct {
	limiter   APIRateLimiter // nil: no API rate limiting
	logger    *slog.Logger
	refused   *prometheus.CounterVec
	unchecked prometheus.Counter
	// down skips decisions for a while after Redis failed.
	down *failopen.Window
}

func newAPILimits(cfg Config) (*apiLimits, error) {
	l := &apiLimits{
		limiter: cfg.RateLimiter,
		logger:  cfg.Logger,
		down:    failopen.New(failopen.Config{Skip: apiLimitSkip, Clock: cfg.Clock}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwheel_api_limit_refusals_total",
			Help: "Tenant API calls refused with 429, by limit: rate (api_rate), pending_tasks (max_pending_tasks), tasks_per_day (tasks_per_day), batch_bytes (the batch bytes a node reads at once), list_bytes (the bodies of lists with bodies a node answers at once), schedules (max_schedules), topics (the topics a tenant may have), flow_keys (the flow keys a tenant may set limits for), keys (the usable API keys a tenant may create for itself) or portal_links (the live portal links a tenant may hold).",
		}, []string{"limit"}),
		unchecked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwheel_api_rate_limit_unchecked_total",
			Help: "Tenant API calls let through without a rate-limit decision because Redis failed (the limiter fails open).",
		}),
	}
	for _, c := range []prometheus.Collector{l.refused, l.unchecked} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("register api limit metrics: %w", err)
		}
	}
	l.refused.WithLabelValues("rate")
	l.refused.WithLabelValues("pending_tasks")
	l.refused.WithLabelValues("tasks_per_day")
	return l, nil
}

// thenMiddleware runs inner after outer: rateLimit needs the tenant that
// authentication found.
func thenMiddleware(outer, inner echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc { return outer(inner(next)) }
}

// rateLimit applies the tenant's api_rate to each of its calls, with one
// Redis round trip (GCRA, store/lua/gcra.lua). Every response of a tenant
// with an API rate carries RateLimit-Limit (the burst), RateLimit-Remaining
// and RateLimit-Reset (seconds until the full burst is back), the names of
// the IETF draft; a call over the limit gets 429 with Retry-After. A tenant
// without an API rate costs nothing. When Redis fails, calls go through
// unchecked (counted in hookwheel_api_rate_limit_unchecked_total): a limiter
// outage must not become an API outage.
func (l *apiLimits) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		tenant, ok := authenticatedTenant(c)
		if !ok {
			return next(c)
		}
		return l.limitTenant(c, tenant, next)
	}
}

// limitTenant applies tenant's API rate limit to a call, then runs next:
// the rate limit of tenant calls, and of the portal calls its links open.
func (l *apiLimits) limitTenant(c echo.Context, tenant *model.Tenant, next echo.HandlerFunc) error {
	if tenant.Limits.APIRate <= 0 || l.limiter == nil {
		return next(c)
	}
	d, ok := l.decide(c.Request().Context(), tenant)
	if !ok {
		return next(c)
	}
	h := c.Response().Header()
	h.Set("RateLimit-Limit", strconv.Itoa(d.Limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(d.Remaining))
	h.Set("RateLimit-Reset", strconv.Itoa(ceilSeconds(d.Reset)))
	if !d.Allowed {
		l.refused.WithLabelValues("rate").Inc()
		retryAfter := max(1, ceilSeconds(d.RetryAfter))
		h.Set("Retry-After", strconv.Itoa(retryAfter))
		return newProblem(http.StatusTooManyRequests, "rate-limited", "Too many requests",
			fmt.Sprintf("this tenant may make %s API requests per second, in bursts of up to %d; retry in %d s",
				strconv.FormatFloat(tenant.Limits.APIRate, 'f', -1, 64), d.Limit, retryAfter))
	}
	return next(c)
}

// decide asks Redis, unless it failed a moment ago. ok is false when no
// decision could be had.
func (l *apiLimits) decide(ctx context.Context, tenant *model.Tenant) (d model.RateDecision, ok bool) {
	if l.down.Skipping() {
		l.unchecked.Inc()
		return d, false
	}
	ctx, cancel := context.WithTimeout(ctx, apiLimitTimeout)
	defer cancel()
	d, err := l.limiter.AllowAPIRequest(ctx, tenant.ID, tenant.Limits.APIRate, tenant.Limits.EffectiveAPIBurst())
	if err != nil {
		l.unchecked.Inc()
		l.down.Failed()
		l.logger.Warn("API rate limiting failed; letting calls through unchecked for a while",
			"tenant", tenant.ID, "err", err, "retry_in", l.down.Skip())
		return d, false
	}
	return d, true
}

// ceilSeconds rounds up to whole seconds, as Retry-After and RateLimit-Reset
// count: rounding down would invite a retry that is refused again.
func ceilSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

// quotaExceeded renders the service's refusal of a task over the tenant's
// max_pending_tasks: 429 with Retry-After, counted.
func (s *Server) quotaExceeded(c echo.Context, q *tasks.QuotaError) error {
	s.apiLimits.refused.WithLabelValues("pending_tasks").Inc()
	c.Response().Header().Set("Retry-After", strconv.Itoa(ceilSeconds(q.RetryAfter)))
	detail := fmt.Sprintf("this tenant may have at most %d pending tasks (scheduled, retrying or dispatching) and has %d", q.Limit, q.Pending)
	if q.Pending >= q.Limit {
		detail = fmt.Sprintf("this tenant may have at most %d pending tasks (scheduled, retrying or dispatching) and has that many", q.Limit)
	}
	if q.Adding > 1 {
		detail += fmt.Sprintf("; this request would add %d", q.Adding)
	}
	return newProblem(http.StatusTooManyRequests, "quota-exceeded", "Pending task quota exceeded",
		detail+"; retry once some have been delivered")
}

// dailyQuotaExceeded renders the service's refusal of tasks over the
// tenant's tasks_per_day: 429 with Retry-After until the next UTC midnight
// (whole seconds, rounded up), counted.
func (s *Server) dailyQuotaExceeded(c echo.Context, q *tasks.DailyQuotaError) error {
	s.apiLimits.refused.WithLabelValues("tasks_per_day").Inc()
	c.Response().Header().Set("Retry-After", strconv.Itoa(ceilSeconds(q.RetryAfter(s.cfg.Clock.Now()))))
	return newProblem(http.StatusTooManyRequests, "quota-exceeded", "Daily task quota exceeded", dailyQuotaDetail(q))
}

func dailyQuotaDetail(q *tasks.DailyQuotaError) string {
	detail := fmt.Sprintf("this tenant may create %d tasks per UTC day (tasks_per_day) and has created %d today", q.Limit, q.Created)
	if q.Adding > 1 {
		detail += fmt.Sprintf("; this request would add %d", q.Adding)
	}
	return detail + "; retry after the next UTC midnight"
}

// GetLimits shows the calling tenant its limits and how many of its tasks
// are pending. The count is exact: an index-only range scan over the
// tenant's pending tasks, so it costs in proportion to them.
func (s *Server) GetLimits(c echo.Context) error {
	tenant, err := tenantOf(c)
	if err != nil {
		return err
	}
	pending, err := s.tasks.Pending(c.Request().Context(), tenant.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, openapi.TenantLimitsView{Plan: tenant.Plan, Limits: limitsJSON(tenant.Limits), PendingTasks: pending})
}

// limitsJSON shows limits as the API spells them: unlimited fields are
// absent; a host override shows what it overrides, 0 included (it lifts the
// tenant's limit for that host).
func limitsJSON(l model.Limits) openapi.TenantLimits {
	out := openapi.TenantLimits{
		APIRate:             positiveFloat32(l.APIRate),
		APIBurst:            positiveInt(l.APIBurst),
		MaxPendingTasks:     positiveInt(l.MaxPendingTasks),
		MaxSchedules:        positiveInt(l.MaxSchedules),
		MaxTimeout:          durationOrNil(l.MaxTimeout),
		DispatchRate:        positiveFloat32(l.DispatchRate),
		DispatchConcurrency: positiveInt(l.DispatchConcurrency),
		TasksPerDay:         positiveInt(l.TasksPerDay),
		DeliveriesPerDay:    positiveInt(l.DeliveriesPerDay),
	}
	if len(l.Targets) > 0 {
		out.Targets = make(map[string]openapi.TargetLimits, len(l.Targets))
		for host, t := range l.Targets {
			var o openapi.TargetLimits
			if t.DispatchRate != nil {
				r := float32(*t.DispatchRate)
				o.DispatchRate = &r
			}
			o.DispatchConcurrency = t.DispatchConcurrency
			out.Targets[host] = o
		}
	}
	return out
}

// overridesJSON shows a tenant's own limits, or a plan's, as the admin API
// takes them: a field it does not set is absent (the layer below applies),
// one it sets to model.Unlimited is 0.
func overridesJSON(l model.Limits) openapi.TenantLimits {
	out := limitsJSON(l.Resolve())
	if l.APIRate < 0 {
		out.APIRate = new(float32)
	}
	if l.APIBurst < 0 {
		out.APIBurst = new(int)
	}
	if l.MaxPendingTasks < 0 {
		out.MaxPendingTasks = new(int)
	}
	if l.MaxSchedules < 0 {
		out.MaxSchedules = new(int)
	}
	if l.MaxTimeout < 0 {
		zero := "0s"
		out.MaxTimeout = &zero
	}
	if l.DispatchRate < 0 {
		out.DispatchRate = new(float32)
	}
	if l.DispatchConcurrency < 0 {
		out.DispatchConcurrency = new(int)
	}
	if l.TasksPerDay < 0 {
		out.TasksPerDay = new(int)
	}
	if l.DeliveriesPerDay < 0 {
		out.DeliveriesPerDay = new(int)
	}
	return out
}

func positiveFloat32(f float64) *float32 {
	if f <= 0 {
		return nil
	}
	v := float32(f)
	return &v
}

func durationOrNil(d time.Duration) *string {
	if d <= 0 {
		return nil
	}
	s := formatDuration(d)
	return &s
}

func positiveInt(n int) *int {
	if n <= 0 {
		return nil
	}
	return &n
}

// limitsUpdate is the "limits" member of PATCH /v1/admin/tenants/{id}: absent
// keeps the tenant's limits, null or {} gives it the node's defaults for all,
// an object replaces them as a whole. In the object, a field left out takes
// the node's default and 0 lifts the limit (model.Unlimited).
type limitsUpdate struct {
	given bool
	req   limitsRequest
}

// limitsRequest is a limits object as sent. Rates are float64 (the
// generated type's float32 would store 0.1 as 0.10000000149), and each
// host's override stays raw so that its errors can be named by host.
type limitsRequest struct {
	APIRate             *float64                   `json:"api_rate"`
	APIBurst            *int                       `json:"api_burst"`
	MaxPendingTasks     *int                       `json:"max_pending_tasks"`
	MaxSchedules        *int                       `json:"max_schedules"`
	MaxTimeout          *string                    `json:"max_timeout"`
	DispatchRate        *float64                   `json:"dispatch_rate"`
	DispatchConcurrency *int                       `json:"dispatch_concurrency"`
	Targets             map[string]json.RawMessage `json:"targets"`
	TasksPerDay         *int                       `json:"tasks_per_day"`
	DeliveriesPerDay    *int                       `json:"deliveries_per_day"`
}

type targetLimitsRequest struct {
	DispatchRate        *float64 `json:"dispatch_rate"`
	DispatchConcurrency *int     `json:"dispatch_concurrency"`
}

func (u *limitsUpdate) UnmarshalJSON(b []byte) error {
	u.given = true
	if bytes.Equal(b, jsonNull) {
		return nil
	}
	return decodeNested("limits", b, &u.req)
}

// validate checks the update and returns the limits to store; errors go to
// fe, named by path ("limits.targets.api.partner.com.dispatch_rate").
func (u *limitsUpdate) validate(fe *fieldErrors, nodeMaxTimeout time.Duration) model.Limits {
	return u.req.validate(fe, "limits.", nodeMaxTimeout)
}

// validate checks a limits object, a tenant's or a plan's, and returns the
// limits to store; errors go to fe, each field named after prefix.
func (r limitsRequest) validate(fe *fieldErrors, prefix string, nodeMaxTimeout time.Duration) model.Limits {
	var l model.Limits
	l.APIRate = limitRate(fe, prefix+"api_rate", r.APIRate)
	l.APIBurst = limitInt(fe, prefix+"api_burst", r.APIBurst, maxLimitBurst)
	if l.APIBurst > 0 && l.APIRate < 0 {
		fe.add(prefix+"api_burst", "applies only with an api_rate (this one lifts it)")
	}
	l.MaxPendingTasks = limitInt(fe, prefix+"max_pending_tasks", r.MaxPendingTasks, maxLimitPending)
	l.MaxSchedules = limitInt(fe, prefix+"max_schedules", r.MaxSchedules, maxLimitSchedules)
	if r.MaxTimeout != nil {
		if *r.MaxTimeout == "0" {
			l.MaxTimeout = model.Unlimited
		} else if d, ok := parseDuration(fe, prefix+"max_timeout", *r.MaxTimeout); ok {
			switch {
			case d == 0:
				l.MaxTimeout = model.Unlimited
			case d < tasks.MinTimeout || d > nodeMaxTimeout:
				fe.add(prefix+"max_timeout", "must be between %s and the node's %s (HOOKWHEEL_MAX_TIMEOUT), or 0s for the node's", tasks.MinTimeout, nodeMaxTimeout)
			default:
				l.MaxTimeout = d
			}
		}
	}
	l.DispatchRate = limitRate(fe, prefix+"dispatch_rate", r.DispatchRate)
	l.DispatchConcurrency = limitInt(fe, prefix+"dispatch_concurrency", r.DispatchConcurrency, maxLimitConcurrency)
	l.TasksPerDay = limitInt(fe, prefix+"tasks_per_day", r.TasksPerDay, maxLimitPerDay)
	l.DeliveriesPerDay = limitInt(fe, prefix+"deliveries_per_day", r.DeliveriesPerDay, maxLimitPerDay)
	if len(r.Targets) > maxLimitTargets {
		fe.add(prefix+"targets", "must name at most %d hosts", maxLimitTargets)
		return l
	}
	// Sorted, so that errors come in a stable order.
	hosts := make([]string, 0, len(r.Targets))
	for h := range r.Targets {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, given := range hosts {
		field := prefix + "targets." + given
		host, ok := model.HostKey(given)
		if !ok {
			fe.add(field, "must be a host name such as api.partner.com (no scheme, port or path)")
			continue
		}
		if _, dup := l.Targets[host]; dup {
			fe.add(field, "names the same host as another entry (%s)", host)
			continue
		}
		var t targetLimitsRequest
		if err := decodeNested(field, r.Targets[given], &t); err != nil {
			addDecodeError(fe, field, err)
			continue
		}
		var o model.TargetLimits
		if t.DispatchRate != nil {
			// A host's 0 is stored as 0: it lifts the tenant's limit there.
			rate := max(0, limitRate(fe, field+".dispatch_rate", t.DispatchRate))
			o.DispatchRate = &rate
		}
		if t.DispatchConcurrency != nil {
			n := max(0, limitInt(fe, field+".dispatch_concurrency", t.DispatchConcurrency, maxLimitConcurrency))
			o.DispatchConcurrency = &n
		}
		if l.Targets == nil {
			l.Targets = make(map[string]model.TargetLimits, len(hosts))
		}
		l.Targets[host] = o
	}
	return l
}

// limitRate and limitInt read one of a tenant's own limits: absent is 0
// (the node's default applies), 0 is model.Unlimited.
func limitRate(fe *fieldErrors, field string, v *float64) float64 {
	switch {
	case v == nil:
		return 0
	case *v == 0:
		return model.Unlimited
	case *v < 0:
		fe.add(field, "must be at least 0 (0 means unlimited)")
	case *v > maxLimitRate:
		fe.add(field, "must be at most %d per second", maxLimitRate)
	default:
		return *v
	}
	return 0
}

func limitInt(fe *fieldErrors, field string, v *int, most int) int {
	switch {
	case v == nil:
		return 0
	case *v == 0:
		return model.Unlimited
	case *v < 0:
		fe.add(field, "must be at least 0 (0 means unlimited)")
	case *v > most:
		fe.add(field, "must be at most %d", most)
	default:
		return *v
	}
	return 0
}

// addDecodeError reports a nested decoding error by field, as decodeJSON
// reports the outer ones.
func addDecodeError(fe *fieldErrors, field string, err error) {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		fe.add(field+"."+typeErr.Field, "must be a JSON %s", jsonTypeName(typeErr.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		fe.add(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "is not a known field")
	default:
		fe.add(field, "must be an object with dispatch_rate and/or dispatch_concurrency")
	}
}
