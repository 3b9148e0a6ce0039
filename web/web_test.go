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

// TestVendoredUPlotIsTheLockedVersion guards the files embedded in
// static/vendor, uPlot's and Redoc's: they must be the ones npm installs
// from package-lock.json, so that upgrading a package without copying them
// (or editing them by hand) fails here.
func TestVendoredUPlotIsTheLockedVersion(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("node_modules"); err != nil {
		if os.Getenv("HOOKWHEEL_REQUIRE_BROWSER") != "" {
			t.Fatalf("web/node_modules is missing: run npm ci in web/")
		}
		t.Skip("web/node_modules is missing: run npm ci in web/ (make test does)")
	}
	for _, f := range []struct{ installed, vendored string }{
		{"uplot/dist/uPlot.iife.min.js", "uPlot.iife.min.js"},
		{"uplot/dist/uPlot.min.css", "uPlot.min.css"},
		{"uplot/LICENSE", "uPlot.LICENSE"},
		{"redoc/bundles/redoc.standalone.js", "docs/redoc.standalone.js"},
		{"redoc/bundles/redoc.standalone.js.LICENSE.txt", "docs/redoc.standalone.js.LICENSE.txt"},
		{"redoc/LICENSE", "docs/redoc.LICENSE"},
	} {
		want, err := os.ReadFile(filepath.Join("node_modules", filepath.FromSlash(f.installed)))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("static", "vendor", filepath.FromSlash(f.vendored)))
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "static/vendor/%s differs from node_modules/%s: copy it (cp node_modules/%s static/vendor/%s)",
			f.vendored, f.installed, f.installed, f.vendored)
	}
}

// TestServesTheAPIReference: /docs is a page of the package's own files
// under a policy of its own, which allows what Redoc needs (inline styles, a
// worker from a Blob URL) and still no script but the page's own files.
func TestServesTheAPIReference(t *testing.T) {
	t.Parallel()
	docs, dashboard := web.Docs(), web.New()
	const policy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
		"img-src 'self' data:; connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	for _, path := range []string{"/docs", "/docs/"} {
		t.Run(path, func(t *testing.T) {
			res, page := get(t, docs, http.MethodGet, path)
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
			require.Equal(t, policy, res.Header.Get("Content-Security-Policy"))
			require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
			require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
			require.Contains(t, page, `<script src="/docs/static/redoc.standalone.js" defer></script>`)
			require.NotContains(t, page, "<script>", "inline scripts are refused by the policy")
			require.NotContains(t, page, "style=", "the page's own styles are in its stylesheet")

			// Every file the page names is served; it names nothing of
			// another origin.
			refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
			require.NotEmpty(t, refs)
			for _, ref := range refs {
				target := ref[1]
				switch {
				case target == "/openapi.yaml" || target == "/ui/":
					continue // the API's and the dashboard's
				case strings.HasPrefix(target, "/docs/static/"):
					res, _ := get(t, docs, http.MethodGet, target)
					require.Equal(t, http.StatusOK, res.StatusCode, target)
				case strings.HasPrefix(target, "/ui/static/"):
					res, _ := get(t, dashboard, http.MethodGet, target)
					require.Equal(t, http.StatusOK, res.StatusCode, target)
				default:
					t.Errorf("the page loads %s", target)
				}
			}
		})
	}
	for _, c := range []struct {
		method, path string
		status       int
		contentType  string
	}{
		{http.MethodGet, "/docs/static/docs.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{http.MethodGet, "/docs/static/docs.css", http.StatusOK, "text/css; charset=utf-8"},
		{http.MethodGet, "/docs/static/redoc.standalone.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{http.MethodGet, "/docs/static/index.html", http.StatusNotFound, ""},
		{http.MethodGet, "/docs/static/", http.StatusNotFound, ""},
		{http.MethodGet, "/docs/elsewhere", http.StatusNotFound, ""},
		{http.MethodPost, "/docs", http.StatusMethodNotAllowed, ""},
	} {
		res, _ := get(t, docs, c.method, c.path)
		require.Equal(t, c.status, res.StatusCode, "%s %s", c.method, c.path)
		if c.contentType != "" {
			require.Equal(t, c.contentType, res.Header.Get("Content-Type"), c.path)
		}
		require.Equal(t, policy, res.Header.Get("Content-Security-Policy"), c.path)
	}
}

// TestRedocServedLoadsNothingFromElsewhere: the bundle the page gets is the
// vendored one with Redocly's logo, its one request to another origin,
// replaced by an empty image.
func TestRedocServedLoadsNothingFromElsewhere(t *testing.T) {
	t.Parallel()
	vendored, err := os.ReadFile(filepath.Join("static", "vendor", "docs", "redoc.standalone.js"))
	require.NoError(t, err)
	res, served := get(t, web.Docs(), http.MethodGet, "/docs/static/redoc.standalone.js")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NotContains(t, served, "cdn.redoc.ly")
	require.Equal(t, strings.Replace(string(vendored), `src:"https://cdn.redoc.ly/redoc/logo-mini.svg"`, `src:"data:,"`, 1), served)
}
