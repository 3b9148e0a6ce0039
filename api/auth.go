package api

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/tenants"
)

// Authentication of API calls: tenants by their bearer API key, operators by
// the admin token. Which operation needs which is the OpenAPI document's
// call (see securityMiddlewares).

const tenantContextKey = "hookwheel.tenant"

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

// tenantAuth authenticates tenant calls by their bearer API key and records
// the tenant for tenantOf. Errors are echo.HTTPErrors for writeProblem to
// render.
func tenantAuth(auth *tenants.Service) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key, ok := bearerToken(c.Request())
			if !ok {
				return unauthorized(c, "missing bearer API key in the Authorization header")
			}
			tenant, err := auth.Authenticate(c.Request().Context(), key)
			if errors.Is(err, tenants.ErrUnauthenticated) {
				return unauthorized(c, "the API key is malformed, unknown or revoked")
			}
			if err != nil {
				return err
			}
			c.Set(tenantContextKey, tenant)
			return next(c)
		}
	}
}

// authenticatedTenant is the tenant tenantAuth found for this request.
func authenticatedTenant(c echo.Context) (*model.Tenant, bool) {
	t, ok := c.Get(tenantContextKey).(*model.Tenant)
	return t, ok && t != nil
}

// tenantOf is the calling tenant, for handlers of tenant operations.
func tenantOf(c echo.Context) (*model.Tenant, error) {
	t, ok := authenticatedTenant(c)
	if !ok {
		// Only reachable if a route lost its security requirement.
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "this call needs a tenant API key")
	}
	return t, nil
}

// adminAuth admits operator calls bearing token. An empty token disables the
// operator API: every call is refused.
func adminAuth(token string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if token == "" {
				return echo.NewHTTPError(http.StatusForbidden, "the admin API is disabled: set HOOKWHEEL_ADMIN_TOKEN to enable it")
			}
			got, ok := bearerToken(c.Request())
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				return unauthorized(c, "missing or wrong admin token")
			}
			return next(c)
		}
	}
}
