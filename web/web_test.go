package web_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/web"
)

func get(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(body)
}

func TestServesTheApplicationForEveryPage(t *testing.T) {
	t.Parallel()
	h := web.New()
	for _, path := range []string{"/ui/", "/ui", "/ui/sign-in", "/ui/tasks/0b9e0f6c-6e5f-4c53-8a0f-1a2b3c4d5e6f", "/ui/admin/nodes"} {
		t.Run(path, func(t *testing.T) {
			res, body := get(t, h, http.MethodGet, path)
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
			require.Contains(t, body, `<script type="module" src="/ui/static/app.js">`)
			csp := res.Header.Get("Content-Security-Policy")
			require.Contains(t, csp, "script-src 'self'")
			require.Contains(t, csp, "frame-ancestors 'none'")
			require.NotContains(t, csp, "unsafe-inline")
			require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
		})
	}
}

func TestServesAssets(t *testing.T) {
	t.Parallel()
	h := web.New()
	cases := []struct {
		method, path string
		status       int
		contentType  string
	}{
		{http.MethodGet, "/ui/static/app.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{http.MethodGet, "/ui/static/style.css", http.StatusOK, "text/css; charset=utf-8"},
		{http.MethodGet, "/ui/static/vendor/uPlot.iife.min.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{http.MethodGet, "/ui/static/favicon.svg", http.StatusOK, "image/svg+xml"},
		{http.MethodGet, "/ui/static/missing.js", http.StatusNotFound, ""},
		{http.MethodGet, "/ui/static/index.html", http.StatusNotFound, ""},
		{http.MethodGet, "/ui/static/", http.StatusNotFound, ""},
		{http.MethodPost, "/ui/tasks", http.StatusMethodNotAllowed, ""},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			res, _ := get(t, h, c.method, c.path)
			require.Equal(t, c.status, res.StatusCode)
			if c.contentType != "" {
				require.Equal(t, c.contentType, res.Header.Get("Content-Type"))
			}
			require.NotEmpty(t, res.Header.Get("Content-Security-Policy"))
		})
	}
}

// TestPageLoadsOnlyItsOwnFiles checks that every file the page names is
// served, and that it names nothing of another origin (the policy would
// refuse it).
func TestPageLoadsOnlyItsOwnFiles(t *testing.T) {
	t.Parallel()
	h := web.New()
	_, page := get(t, h, http.MethodGet, "/ui/")
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, refs)
	for _, ref := range refs {
		target := ref[1]
		if target == "#main" {
			continue
		}
		require.True(t, strings.HasPrefix(target, "/ui/static/"), "the page loads %s", target)
		res, _ := get(t, h, http.MethodGet, target)
		require.Equal(t, http.StatusOK, res.StatusCode, target)
	}
	require.NotContains(t, page, "<script>", "inline scripts are refused by the policy")
	require.NotContains(t, page, "style=", "inline styles are refused by the policy")
}

// TestVendoredUPlotIsTheLockedVersion guards the uPlot files embedded in
// static/vendor: they must be the ones npm installs from package-lock.json,
// so that upgrading the package without copying them (or editing them by
// hand) fails here.
func TestVendoredUPlotIsTheLockedVersion(t *testing.T) {
	t.Parallel()
	dist := filepath.Join("node_modules", "uplot", "dist")
	if _, err := os.Stat(dist); err != nil {
		if os.Getenv("HOOKWHEEL_REQUIRE_BROWSER") != "" {
			t.Fatalf("web/node_modules is missing: run npm ci in web/")
		}
		t.Skip("web/node_modules is missing: run npm ci in web/ (make test does)")
	}
	for _, name := range []string{"uPlot.iife.min.js", "uPlot.min.css"} {
		want, err := os.ReadFile(filepath.Join(dist, name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("static", "vendor", name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "static/vendor/%s differs from node_modules/uplot/dist/%s: copy it (cp node_modules/uplot/dist/%s static/vendor/)", name, name, name)
	}
}
