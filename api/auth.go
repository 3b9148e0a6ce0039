package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/session"
	"github.com/hookwheel/hookwheel/tenants"
)

// Authentication of API calls: tenants by their bearer API key, operators by
// the admin token. Which operation needs which is the OpenAPI document's
// call (see securityMiddlewares).

const callerContextKey = "hookwheel.caller"

func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func unauthorized(c echo.Context, detail string) error {
	c.Response().Header().Set("WWW-Authenticate", `Bearer realm="hookwheel"`)
	return echo.NewHTTPError(http.StatusUnauthorized, detail)
}

// tenantAuth authenticates tenant calls by their bearer API key, or a
// dashboard session (see sessionTenantCall), and records the tenant for
// tenantOf. Errors are echo.HTTPErrors for writeProblem to
// render. A client address that failed too often (throttle) is refused with
// 429 before its key is looked up; every failure is counted in failures by
// reason.
func tenantAuth(auth *tenants.Service, sessions *session.Manager, throttle *authThrottle, failures *prometheus.CounterVec) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key, ok := bearerToken(c.Request())
			if !ok && sessions != nil && hasSessionCookie(c) {
				return sessionTenantCall(c, sessions, auth, throttle, failures, next)
			}
			if !ok {
				failures.WithLabelValues("missing").Inc()
				return unauthorized(c, "missing bearer API key in the Authorization header")
			}
			caller, err := throttledAuth(c, throttle, failures, "the API key is malformed, unknown, revoked or expired",
				func(ctx context.Context) (*tenants.Caller, error) { return auth.Authenticate(ctx, key) })
			if errors.Is(err, tenants.ErrTenantSuspended) {
				failures.WithLabelValues("suspended").Inc()
				return tenantSuspended()
			}
			if err != nil {
				return err
			}
			c.Set(callerContextKey, caller)
			return next(c)
		}
	}
}

// throttledAuth checks a presented credential behind the throttle of failed
// ones: a client address that failed too often is refused with 429 before
// the credential is looked up, and one that authenticate refuses with
// tenants.ErrUnauthenticated counts against its address and answers 401
// with invalid. Both refusals are counted in failures by reason; other
// errors are authenticate's, for the caller.
func throttledAuth[T any](c echo.Context, throttle *authThrottle, failures *prometheus.CounterVec, invalid string,
	authenticate func(ctx context.Context) (T, error)) (T, error) {
	var none T
	ip := c.RealIP()
	if wait, refused := throttle.throttled(ip); refused {
		failures.WithLabelValues("throttled").Inc()
		return none, tooManyAuthFailures(c, wait)
	}
	caller, err := authenticate(c.Request().Context())
	if errors.Is(err, tenants.ErrUnauthenticated) {
		failures.WithLabelValues("invalid").Inc()
		throttle.failed(ip)
		return none, unauthorized(c, invalid)
	}
	return caller, err
}

// authenticatedCaller is the tenant and key tenantAuth found for this request.
func authenticatedCaller(c echo.Context) (*tenants.Caller, bool) {
	caller, ok := c.Get(callerContextKey).(*tenants.Caller)
	return caller, ok && caller != nil
}

// authenticatedTenant is the tenant tenantAuth found for this request.
func authenticatedTenant(c echo.Context) (*model.Tenant, bool) {
	caller, ok := authenticatedCaller(c)
	if !ok {
		return nil, false
	}
	return caller.Tenant, true
}

// tenantOf is the calling tenant, for handlers of tenant operations.
func tenantOf(c echo.Context) (*model.Tenant, error) {
	caller, err := callerOf(c)
	if err != nil {
		return nil, err
	}
	return caller.Tenant, nil
}

// callerOf is the calling tenant and key, for handlers that need the key.
func callerOf(c echo.Context) (*tenants.Caller, error) {
	caller, ok := authenticatedCaller(c)
	if !ok {
		// Only reachable if a route lost its security requirement.
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "this call needs a tenant API key")
	}
	return caller, nil
}

// actorOf names the calling tenant's key in the audit log, for handlers of
// tenant operations that change its configuration; a call made with a
// dashboard session is its key's.
func actorOf(c echo.Context) string {
	caller, ok := authenticatedCaller(c)
	if !ok {
		return ""
	}
	return caller.Actor()
}

// tooManyAuthFailures refuses a call from an address that presented too
// many invalid credentials, before its credential is looked at.
func tooManyAuthFailures(c echo.Context, wait time.Duration) error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(ceilSeconds(wait)))
	return newProblem(http.StatusTooManyRequests, "too-many-auth-failures", "Too many failed authentications",
		"this address presented too many invalid credentials; try again after the time Retry-After gives")
}

// scopeAny marks an operation that every valid key may call.
const scopeAny = "any"

// requireScope refuses, with 403, a call whose key lacks scope. It runs
// after tenantAuth.
func requireScope(scope model.Scope) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			caller, err := callerOf(c)
			if err != nil {
				return err
			}
			if !caller.Key.Allows(scope) {
				return newProblem(http.StatusForbidden, "insufficient-scope", "Insufficient scope",
					fmt.Sprintf("this call needs an API key with the %q scope; key %s has %s", scope, caller.Key.ID, model.JoinScopes(caller.Key.Scopes, ", ")))
			}
			return next(c)
		}
	}
}

// adminAuth admits operator calls bearing token. An empty token disables the
// operator API: every call is refused. A client address that presented too
// many wrong tokens or keys (throttle) is refused with 429 before its token
// is compared, so a guesser gets no more tries at the token than at a key.
func adminAuth(token string, sessions *session.Manager, throttle *authThrottle) echo.MiddlewareFunc {
	// Digests of equal length, so that the comparison's time says nothing
	// of the token's length either (ConstantTimeCompare returns at once on
	// inputs of different lengths).
	want := sha256.Sum256([]byte(token))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if token == "" {
				return echo.NewHTTPError(http.StatusForbidden, "the admin API is disabled: set HOOKWHEEL_ADMIN_TOKEN to enable it")
			}
			got, ok := bearerToken(c.Request())
			if !ok && sessions != nil && hasSessionCookie(c) {
				return sessionOperatorCall(c, sessions, token, next)
			}
			if !ok {
				return unauthorized(c, "missing or wrong admin token")
			}
			ip := c.RealIP()
			if wait, refused := throttle.throttled(ip); refused {
				return tooManyAuthFailures(c, wait)
			}
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				throttle.failed(ip)
				return unauthorized(c, "missing or wrong admin token")
			}
			return next(c)
		}
	}
}
