package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/dispatcher"
	"github.com/hookwheel/hookwheel/tenants"
)

// requireBrowser is set by `make test`, which installs Node, Chromium and the
// test's npm packages: there a missing one fails the test rather than
// skipping it.
const requireBrowser = "HOOKWHEEL_REQUIRE_BROWSER"

// TestDashboardInBrowser runs the dashboard's Playwright tests (web/tests) in
// Debian's Chromium against a node of this test, with a receiver whose
// answers the browser tests can change.
func TestDashboardInBrowser(t *testing.T) {
	webDir, err := filepath.Abs("../../../../web")
	require.NoError(t, err)
	chromium := os.Getenv("CHROMIUM_PATH")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	var missing []string
	if _, err := exec.LookPath("npx"); err != nil {
		missing = append(missing, "npx (Node.js)")
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium)
	}
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "@playwright", "test")); err != nil {
		missing = append(missing, "web/node_modules (npm ci in web/)")
	}
	if len(missing) > 0 {
		if os.Getenv(requireBrowser) != "" {
			t.Fatalf("the browser tests need %s", strings.Join(missing, ", "))
		}
		t.Skipf("the browser tests need %s; `make test` installs them", strings.Join(missing, ", "))
	}

	e := newEnv(t)
	n := e.startNode(func(c *app.Config) {
		c.Dispatcher = dispatcher.Config{LoadInterval: 100 * time.Millisecond, SweepInterval: time.Second}
		// Every browser test sends to the one receiver, several of them
		// failures on purpose: its breaker must not open between tests, by
		// a run of failures nor by their share of a minute's requests.
		c.Dispatcher.Breaker.ConsecutiveFailures = 1000
		c.Dispatcher.Breaker.MinRequests = 1000
		// The sign-up page is offered, and tested, where invites are needed.
		c.Signup = tenants.SignupInvite
	})
	acme := e.createTenant(n, "acme")
	globex := e.createTenant(n, "globex")
	recv := newScriptedReceiver(t)

	shots := os.Getenv("HOOKWHEEL_SCREENSHOT_DIR")
	if shots == "" {
		shots = filepath.Join(webDir, "screenshots")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := []string{"--no-install", "playwright", "test"}
	if grep := os.Getenv("HOOKWHEEL_PLAYWRIGHT_GREP"); grep != "" {
		// Only the browser tests whose title matches, for a change to one page.
		args = append(args, "--grep", grep)
	}
	cmd := exec.CommandContext(ctx, "npx", args...)
	cmd.Dir = webDir
	// Chromium and Node's workers are grandchildren: on a timeout the whole
	// process group goes, and the output pipe they hold does not keep the
	// test waiting past it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = append(os.Environ(),
		"HOOKWHEEL_URL="+n.base,
		"ADMIN_TOKEN=admin-token",
		"TENANT_KEY="+acme.apiKey,
		"OTHER_KEY="+globex.apiKey,
		"RECEIVER_URL="+recv.URL,
		"SCREENSHOT_DIR="+shots,
		"CHROMIUM_PATH="+chromium,
		"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1",
	)
	out, err := cmd.CombinedOutput()
	t.Logf("playwright:\n%s", out)
	require.NoError(t, err, "the browser tests failed; screenshots are in %s", shots)
}

// newScriptedReceiver answers webhooks as the browser tests expect: /ok 200
// "thanks", /fail 500 "boom" with X-Request-Id: boom-1, /flaky/... and
// /bulk/... 503 until a POST to /fix/flaky or /fix/bulk, /gone/... 410, and
// /moved/... 200 only with X-Moved: yes and without X-Old-Token (else 400).
func newScriptedReceiver(t *testing.T) *httptest.Server {
	var flakyFixed, bulkFixed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/fix/flaky":
			flakyFixed.Store(true)
		case p == "/fix/bulk":
			bulkFixed.Store(true)
		case p == "/ok":
			_, _ = w.Write([]byte("thanks"))
		case p == "/fail":
			w.Header().Set("X-Request-Id", "boom-1")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("boom"))
		case strings.HasPrefix(p, "/flaky/") && !flakyFixed.Load(), strings.HasPrefix(p, "/bulk/") && !bulkFixed.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not yet"))
		case strings.HasPrefix(p, "/gone/"):
			w.WriteHeader(http.StatusGone)
			_, _ = w.Write([]byte("moved away"))
		case strings.HasPrefix(p, "/moved/") && (r.Header.Get("X-Moved") != "yes" || r.Header.Get("X-Old-Token") != ""):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("want X-Moved: yes and no X-Old-Token"))
		default:
			_, _ = w.Write([]byte("thanks"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDashboardServed checks where the dashboard is mounted: under /ui/ of a
// node that serves the API, with / sent there, the API reference at /docs
// and the portal under /portal/, and nowhere on a dispatcher-only node.
func TestDashboardServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	res, err := noRedirect.Get(n.base + "/")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode)
	require.Equal(t, "/ui/", res.Header.Get("Location"))

	for _, path := range []string{"/ui/", "/ui/tasks/01a2021f-503b-7651-aff3-c59e9afa4a43", "/ui/static/app.js"} {
		res, err := http.Get(n.base + path)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'", path)
	}
	res, err = contractClient(t).Get(n.base + "/v1/session")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "the API still answers beside the dashboard")

	// The API reference, under a policy of its own, beside the document it
	// renders.
	for _, path := range []string{"/docs", "/docs/", "/docs/static/redoc.standalone.js"} {
		res, err := http.Get(n.base + path)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.Contains(t, res.Header.Get("Content-Security-Policy"), "worker-src blob:", path)
	}
	res, err = contractClient(t).Get(n.base + "/openapi.yaml")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)

	// The portal, which pages may frame where the dashboard may not.
	for _, path := range []string{"/portal/", "/portal/tasks/01a2021f-503b-7651-aff3-c59e9afa4a43", "/portal/static/portal.js"} {
		res, err := http.Get(n.base + path)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.Contains(t, res.Header.Get("Content-Security-Policy"), "frame-ancestors *", path)
	}

	dispatcherOnly := e.startNode(func(c *app.Config) { c.DisableAPI = true })
	for _, path := range []string{"/ui/", "/docs", "/portal/"} {
		res, err = http.Get(dispatcherOnly.base + path)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusNotFound, res.StatusCode, path)
	}
}
