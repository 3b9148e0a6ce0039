// Package api is hookwheel's HTTP API: the echo server implementing the
// interface generated from openapi/openapi.yaml, its middleware, request
// authentication, request validation and problem+json errors. It holds no
// SQL and no lifecycle rules: handlers decode a request, call the task or
// tenant service, and render what it answers.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwheel/hookwheel/internal/clock"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/internal/session"
	"github.com/hookwheel/hookwheel/internal/tasks"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// Pinger is a dependency that readiness checks.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config configures the API server. Zero fields take the documented defaults.
type Config struct {
	// Tasks runs the task and schedule lifecycle. Required.
	Tasks *tasks.Service
	// EncryptionStatus is /readyz's "encryption" entry: whether signing
	// secrets are sealed at rest. Informational: it never makes the node
	// unready. Empty leaves the entry out.
	EncryptionStatus string
	// Tenants authenticates calls and manages tenants. Required.
	Tenants *tenants.Service
	// Ready are the dependencies /readyz checks, by the name its answer
	// gives them ("postgres"): one unreachable makes the node not ready.
	// Default: none, and /readyz answers ready while the process runs.
	Ready map[string]Pinger
	// Degradable are dependencies the node works on without ("redis": the
	// limiters and the fire-once check go on without it, with Postgres
	// still preventing double claims). One unreachable leaves the node
	// ready, with status "degraded": taking a node out of its load
	// balancer for it would turn a Redis outage into an API outage.
	Degradable map[string]Pinger
	// RateLimiter applies tenants' API rate limits. Optional: without it no
	// call is rate limited.
	RateLimiter APIRateLimiter
	// Guard refuses, at creation, task URLs whose host is a literal address
	// webhooks may not reach. Optional: without it URLs are not checked here
	// (the dispatcher still checks every address it dials).
	Guard *netguard.Guard
	// Breakers reports the circuit breakers of the local dispatcher, for the
	// admin API, and each tenant's targets, for GET /v1/targets. Optional
	// (API-only nodes have none).
	Breakers BreakerSource
	// AdminToken guards /v1/admin. Empty disables the admin API.
	AdminToken string
	// Sessions issues and checks the dashboard's sign-in sessions, which
	// every tenant and operator call then accepts in place of a bearer
	// credential. Optional: without it signing in answers 404 and calls
	// need a bearer credential.
	Sessions *session.Manager
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MetricsElsewhere answers GET /metrics with 404: the node serves its
	// metrics on a listener of its own (HOOKWHEEL_METRICS_ADDR), so that
	// whoever can reach the API cannot read them. Default false: served here.
	MetricsElsewhere bool
	// Registerer receives the API's metrics and Gatherer serves /metrics.
	// Default: a registry of the server's own.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Limits of a task request.
	Limits Limits
	// AuthFailures throttles client addresses that present invalid API keys.
	AuthFailures AuthFailureLimit
	// TrustedProxies are the addresses of proxies in front of the API: a
	// call from one of them is taken to come from the address its
	// X-Forwarded-For names (for the throttle of failed authentications
	// and the audit log), and to have been reached over HTTPS when its
	// X-Forwarded-Proto says so (for the session cookie's Secure flag).
	// Default none: the client is the connection's peer, and HTTPS is the
	// connection's own TLS.
	TrustedProxies []netip.Prefix
	// Signup signs tenants up (POST /v1/signup) in its mode and keeps the
	// operator's invites. Optional: without it sign-up is off and the
	// invite calls answer 404.
	Signup *tenants.Signup
	// SignupLimiter decides SignupLimit across nodes. Without it, every
	// sign-up is refused with 503: sign-ups are never taken uncounted.
	SignupLimiter SignupLimiter
	// SignupLimit bounds sign-ups per client address and in all.
	SignupLimit SignupLimit
	// PublicURL is the origin the URLs of portal links begin with
	// (HOOKWHEEL_PUBLIC_URL), such as https://hooks.example.com. Default:
	// the origin the creating call reached, as its Host header names it.
	PublicURL string
	// TracerProvider makes the requests' spans (tracing.go). Default: none
	// made; a request's traceparent is still carried to the tasks it
	// creates.
	TracerProvider trace.TracerProvider
}

// Limits bound what a task request may ask for.
type Limits struct {
	// MaxBody is the largest webhook body, in bytes. Default 1 MiB.
	MaxBody int
	// MaxScheduleAhead is how far ahead a task may be scheduled. Default 365 days.
	MaxScheduleAhead time.Duration
	// DefaultTimeout is a task's per-attempt timeout when it gives none (30s);
	// MaxTimeout the longest it may give (5m): an attempt holds a
	// connection and a share of its tenant's senders while it waits, and a
	// receiver that never answers holds them this long.
	DefaultTimeout, MaxTimeout time.Duration
	// BatchBytesInFlight bounds the request bodies of the batch calls a
	// node reads at once, a tenant's at most half of it; a call beyond it
	// gets 429. Default 64 MiB, and at least twice the largest batch.
	BatchBytesInFlight int64
	// ListBodyBytes bounds the bodies one list answer carries when asked
	// for them (include=body): a page whose bodies would pass it is cut
	// short, with its cursor, though it always holds one item. It bounds
	// what one list call holds in memory, whatever a tenant stored. Default
	// DefaultListBodyBytes (8 MiB).
	ListBodyBytes int64
	// ListBytesInFlight bounds the bodies that the lists with bodies a node
	// answers at once may hold, a tenant's at most half of it: each such
	// call reserves ListBodyBytes while it runs, and one beyond the bound
	// gets 429, so that many slow readers of long pages cannot add up what
	// ListBodyBytes bounds per call. Default 64 MiB, and at least twice
	// ListBodyBytes.
	ListBytesInFlight int64
}

// DefaultListBodyBytes is the default of Limits.ListBodyBytes.
const DefaultListBodyBytes = 8 << 20

func (c *Config) setDefaults() error {
	if c.Tasks == nil || c.Tenants == nil {
		return errors.New("api: Config.Tasks and Config.Tenants are required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registerer == nil || c.Gatherer == nil {
		reg := prometheus.NewRegistry()
		c.Registerer, c.Gatherer = reg, reg
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Limits.MaxBody <= 0 {
		c.Limits.MaxBody = tasks.DefaultMaxBody
	}
	if c.Limits.MaxScheduleAhead <= 0 {
		c.Limits.MaxScheduleAhead = tasks.DefaultMaxScheduleAhead
	}
	if c.Limits.DefaultTimeout <= 0 {
		c.Limits.DefaultTimeout = tasks.DefaultTimeout
	}
	if c.Limits.MaxTimeout <= 0 {
		c.Limits.MaxTimeout = tasks.DefaultMaxTimeout
	}
	if c.Limits.ListBodyBytes <= 0 {
		c.Limits.ListBodyBytes = DefaultListBodyBytes
	}
	if c.Limits.ListBytesInFlight <= 0 {
		c.Limits.ListBytesInFlight = max(64<<20, 2*c.Limits.ListBodyBytes)
	}
	if c.Limits.BatchBytesInFlight <= 0 {
		c.Limits.BatchBytesInFlight = max(64<<20, 2*batchBodyLimit(c.Limits.MaxBody))
	}
	return nil
}

// Server serves the HTTP API. It is an http.Handler.
type Server struct {
	cfg     Config
	tasks   *tasks.Service
	tenants *tenants.Service
	logger  *slog.Logger
	clock   clock.Clock
	echo    *echo.Echo
	metrics http.Handler
	// apiLimits applies tenants' API rate limits and counts refusals.
	apiLimits *apiLimits
	// batches bounds the memory batch calls hold.
	batches *batchGate
	lists   *batchGate // the bodies of list answers that carry them
	// throttle counts failed authentications per client address, sign-ins
	// included.
	throttle *authThrottle
	// proxies are Config.TrustedProxies: whose forwarding headers count.
	proxies trustedProxies
	// signups applies Config.SignupLimit.
	signups *signupLimits
}

var _ openapi.ServerInterface = (*Server)(nil)

// New builds the server and its routes, all taken from the OpenAPI document:
// each operation gets the authentication its security requirement names.
func New(cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		tasks:   cfg.Tasks,
		tenants: cfg.Tenants,
		logger:  cfg.Logger,
		clock:   cfg.Clock,
		metrics: promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{Registry: cfg.Registerer}),
		batches: newBatchGate(cfg.Limits.BatchBytesInFlight),
		lists:   newBatchGate(cfg.Limits.ListBytesInFlight),
		proxies: trustedProxies(cfg.TrustedProxies),
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.writeProblem
	e.IPExtractor = s.proxies.ipExtractor()

	requests := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hookwheel_http_request_duration_seconds",
		Help:    "API requests by route, method and status code.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
	}, []string{"route", "method", "code"})
	if err := cfg.Registerer.Register(requests); err != nil {
		return nil, fmt.Errorf("register api metrics: %w", err)
	}

	e.Use(
		// First, so that every answer carries them, whatever refuses it.
		withSecurityHeaders(),
		// Outside the others, so that its span covers them and sees the
		// status they answered.
		traceRequests(cfg.TracerProvider),
		logRequests(cfg.Logger),
		middleware.RecoverWithConfig(middleware.RecoverConfig{DisablePrintStack: true}),
		measure(requests),
		// A JSON string may spell one body byte in up to six characters
		// (\u00XX); four times the body limit leaves room for ordinary
		// escaping and the other fields. The batch route applies a larger
		// limit of its own (batch.go).
		middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{
			Limit:   strconv.Itoa(4*cfg.Limits.MaxBody + 64<<10),
			Skipper: isBatchRoute,
		}),
	)
	limits, err := newAPILimits(cfg)
	if err != nil {
		return nil, err
	}
	s.apiLimits = limits
	if s.signups, err = newSignupLimits(cfg); err != nil {
		return nil, err
	}
	authFailures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookwheel_api_auth_failures_total",
		Help: "Tenant API calls refused for their key, by reason: missing, invalid (malformed, unknown, revoked or a wrong secret) or throttled (the client address failed too often).",
	}, []string{"reason"})
	if err := cfg.Registerer.Register(authFailures); err != nil {
		return nil, fmt.Errorf("register api metrics: %w", err)
	}
	for _, reason := range []string{"missing", "invalid", "throttled"} {
		authFailures.WithLabelValues(reason)
	}
	// One throttle for both kinds of credential: an address guessing
	// admin tokens is an address guessing keys.
	throttle := newAuthThrottle(cfg.AuthFailures, cfg.Clock)
	s.throttle = throttle
	tenantAuthMW := tenantAuth(cfg.Tenants, cfg.Sessions, throttle, authFailures)
	auth, err := securityMiddlewares(map[string]echo.MiddlewareFunc{
		"apiKey":        thenMiddleware(tenantAuthMW, limits.rateLimit),
		"adminToken":    adminAuth(cfg.AdminToken, cfg.Sessions, throttle),
		"sessionCookie": sessionAuth(cfg.Sessions),
		"portalToken":   portalAuth(cfg.Tenants, throttle, authFailures, limits.limitTenant),
	})
	if err != nil {
		return nil, err
	}
	openapi.RegisterHandlersWithOptions(e, s, openapi.RegisterHandlersOptions{OperationMiddlewares: auth})
	s.echo = e
	return s, nil
}

// securityMiddlewares maps each operation of the OpenAPI document to the
// middleware its security requirement calls for, so that the document, not a
// hand-kept list, decides what is protected.
// bySchema is the middleware of each security scheme: tenant calls are
// rate limited after authentication (the limit needs the tenant).
func securityMiddlewares(bySchema map[string]echo.MiddlewareFunc) (map[string][]echo.MiddlewareFunc, error) {
	// The document as written: its operation ids key the generated
	// registration (GetSwagger's copy has them normalised).
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	if err != nil {
		return nil, fmt.Errorf("load openapi document: %w", err)
	}
	out := make(map[string][]echo.MiddlewareFunc)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			reqs := doc.Security
			if op.Security != nil {
				reqs = *op.Security
			}
			mw, err := requirementMiddleware(reqs, bySchema)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			if mw == nil {
				continue
			}
			out[op.OperationID] = []echo.MiddlewareFunc{mw}
			if _, tenantCall := reqs[0]["apiKey"]; tenantCall {
				scope, err := operationScope(op)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", method, path, err)
				}
				if scope != scopeAny {
					out[op.OperationID] = append(out[op.OperationID], requireScope(model.Scope(scope)))
				}
			}
		}
	}
	return out, nil
}

// operationScope is the scope a tenant operation needs, from its
// x-hookwheel-scope: every tenant operation must name one (or "any"), so that
// a new operation cannot be left open to every key by omission.
func operationScope(op *openapi3.Operation) (string, error) {
	scope, ok := op.Extensions["x-hookwheel-scope"].(string)
	if !ok {
		return "", errors.New("a tenant operation needs x-hookwheel-scope")
	}
	if scope != scopeAny && !slices.Contains(model.Scopes()[1:], model.Scope(scope)) {
		return "", fmt.Errorf("x-hookwheel-scope %q is not a scope", scope)
	}
	return scope, nil
}

func requirementMiddleware(reqs openapi3.SecurityRequirements, bySchema map[string]echo.MiddlewareFunc) (echo.MiddlewareFunc, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if len(reqs) > 1 || len(reqs[0]) != 1 {
		return nil, errors.New("only a single security scheme per operation is supported")
	}
	for name := range reqs[0] {
		mw, ok := bySchema[name]
		if !ok {
			return nil, fmt.Errorf("unknown security scheme %q", name)
		}
		return mw, nil
	}
	return nil, nil
}

func measure(h *prometheus.HistogramVec) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			h.WithLabelValues(route, c.Request().Method, strconv.Itoa(c.Response().Status)).Observe(time.Since(start).Seconds())
			return nil
		}
	}
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Healthz answers while the process runs.
func (s *Server) Healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, openapi.Health{Status: openapi.HealthStatusOk})
}

// Readyz answers 200 when every dependency of Config.Ready is reachable,
// "degraded" when one of Config.Degradable is not.
func (s *Server) Readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	// ping records one dependency's result. The error names internal
	// addresses, users and databases, and /readyz answers anyone who can
	// reach the port: it goes to the log, the answer only says which
	// dependency failed.
	ping := func(name string, dep Pinger) bool {
		if err := dep.Ping(ctx); err != nil {
			s.logger.Warn("readiness check failed", "dependency", name, "err", err)
			checks[name] = "unreachable"
			return false
		}
		checks[name] = "ok"
		return true
	}
	ready, status := true, openapi.HealthStatusOk
	for name, dep := range s.cfg.Ready {
		if !ping(name, dep) {
			ready = false
		}
	}
	for name, dep := range s.cfg.Degradable {
		if !ping(name, dep) {
			status = openapi.HealthStatusDegraded
		}
	}
	if s.cfg.EncryptionStatus != "" {
		checks["encryption"] = s.cfg.EncryptionStatus
	}
	if ready {
		return c.JSON(http.StatusOK, openapi.Health{Status: status, Checks: checks})
	}
	body, err := json.Marshal(openapi.NotReady{
		Type:   problemTypePrefix + "not-ready",
		Title:  "Not ready",
		Status: http.StatusServiceUnavailable,
		Detail: "a dependency is unreachable",
		Checks: checks,
	})
	if err != nil {
		return err
	}
	return c.Blob(http.StatusServiceUnavailable, "application/problem+json", body)
}

// Metrics serves Prometheus metrics, unless they are served elsewhere.
func (s *Server) Metrics(c echo.Context) error {
	if s.cfg.MetricsElsewhere {
		return newProblem(http.StatusNotFound, "not-found", "Not found", "no such resource: metrics are not served on this port")
	}
	s.metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}

// GetOpenAPI serves the OpenAPI document, byte for byte openapi/openapi.yaml.
func (s *Server) GetOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", openapi.Spec())
}

func netipToIPNet(p netip.Prefix) *net.IPNet {
	p = p.Masked()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
