package tenants

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/labstack/echo/v4"
)

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

// Middleware authenticates tenant calls by their bearer API key and records
// the tenant for TenantID. Errors are echo.HTTPErrors for the API's error
// handler to render.
func (s *Service) Middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key, ok := bearerToken(c.Request())
			if !ok {
				return unauthorized(c, "missing bearer API key in the Authorization header")
			}
			tenant, err := s.Authenticate(c.Request().Context(), key)
			if errors.Is(err, ErrUnauthenticated) {
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

// Tenant is the tenant authenticated by Middleware for this request.
func Tenant(c echo.Context) (*model.Tenant, bool) {
	t, ok := c.Get(tenantContextKey).(*model.Tenant)
	return t, ok && t != nil
}

// AdminMiddleware admits operator calls bearing token. An empty token
// disables the operator API: every call is refused.
func AdminMiddleware(token string) echo.MiddlewareFunc {
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
