package web_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/web"
)

// TestPortalPage: every path under /portal/ is the portal's page, framed
// as configured, with the dashboard's policy otherwise; its three files are
// served, nothing else of the embedded tree.
func TestPortalPage(t *testing.T) {
	t.Parallel()
	open, err := web.Portal("")
	require.NoError(t, err)
	closed, err := web.Portal("'none'")
	require.NoError(t, err)
	listed, err := web.Portal("https://app.example.com  'self'")
	require.NoError(t, err)

	for _, path := range []string{"/portal/", "/portal/tasks/0b9e0f6c-6e5f-4c53-8a0f-1a2b3c4d5e6f"} {
		res, body := get(t, open, http.MethodGet, path)
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.Contains(t, body, `<script type="module" src="/portal/static/portal.js">`)
		csp := res.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self'")
		require.Contains(t, csp, "frame-ancestors *")
		require.NotContains(t, csp, "'none'; frame-ancestors")
		require.NotContains(t, csp, "unsafe-inline")
		require.Empty(t, res.Header.Get("X-Frame-Options"))
		require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
	}
	res, _ := get(t, closed, http.MethodGet, "/portal/")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
	res, _ = get(t, listed, http.MethodGet, "/portal/")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors https://app.example.com 'self'")

	res, _ = get(t, open, http.MethodGet, "/portal")
	require.Equal(t, http.StatusMovedPermanently, res.StatusCode)
	require.Equal(t, "/portal/", res.Header.Get("Location"))
	for path, status := range map[string]int{
		"/portal/static/portal.js":   http.StatusOK,
		"/portal/static/style.css":   http.StatusOK,
		"/portal/static/favicon.svg": http.StatusOK,
		"/portal/static/app.js":      http.StatusNotFound,
		"/portal/static/index.html":  http.StatusNotFound,
		"/portal/static/":            http.StatusNotFound,
	} {
		res, _ := get(t, open, http.MethodGet, path)
		require.Equal(t, status, res.StatusCode, path)
	}
	res, _ = get(t, open, http.MethodPost, "/portal/")
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
}

// TestParseFrameAncestors: sources are kept, and nothing that could end
// the directive or the header gets in.
func TestParseFrameAncestors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                          "*",
		"  ":                        "*",
		"'none'":                    "'none'",
		"'self' https://*.acme.io":  "'self' https://*.acme.io",
		"https: http://[::1]:8080 ": "https: http://[::1]:8080",
	} {
		got, err := web.ParseFrameAncestors(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"'none' 'self'", "*; script-src *", "https://a.example,https://b.example", "'unsafe-inline'", "https://a.example\x00", "https://é.example"} {
		_, err := web.ParseFrameAncestors(bad)
		require.Error(t, err, bad)
	}
}
