package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// Security headers. Every answer of the API is data for a program (JSON,
// problem+json, YAML, Prometheus text), never a page: these headers keep a
// browser that is led to one from reading it as anything else or framing it,
// keep the URL of a call out of any request a browser makes next, and keep
// caches between a client and the API (a corporate proxy, a CDN, the
// browser's own) from storing tenants' data and the credentials some answers
// carry (a created tenant's API key and signing secret, a created key, a
// rotated secret).
//
// They are set before the handler runs, so a handler that needs other values
// (the dashboard's pages, with a policy of their own) replaces them.
var securityHeaders = []struct{ name, value string }{
	// Browsers must take the Content-Type as given: a problem+json body
	// that echoes a field name is never sniffed as HTML.
	{"X-Content-Type-Options", "nosniff"},
	// Nothing the API answers loads anything, and no page may frame it.
	{"Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"},
	{"Referrer-Policy", "no-referrer"},
	// Not even the public answers (health, metrics, the OpenAPI document)
	// are worth a cached copy, and one rule for every answer leaves no
	// authenticated route that forgot it.
	{"Cache-Control", "no-store"},
}

// SetSecurityHeaders sets the headers every answer of the API carries. For
// answers written outside the API's handlers (a dispatcher-only node's
// refusals), so that they carry them too.
func SetSecurityHeaders(h http.Header) {
	for _, sh := range securityHeaders {
		h.Set(sh.name, sh.value)
	}
}

// withSecurityHeaders sets the security headers on every answer, errors
// and unknown routes included: echo runs it for those too.
func withSecurityHeaders() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			SetSecurityHeaders(c.Response().Header())
			return next(c)
		}
	}
}
