package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/dispatcher"
)

// TestTypeScriptSDK runs the TypeScript SDK's tests (sdk/typescript: npm test,
// which builds it first) against a node of this test, with a receiver whose
// recorded requests the SDK's tests read back to verify real webhooks. Like
// the browser tests it is skipped where Node or the SDK's npm packages are
// missing, unless HOOKWHEEL_REQUIRE_BROWSER is set (`make test`), which
// installs them.
func TestTypeScriptSDK(t *testing.T) {
	sdkDir, err := filepath.Abs("../../../../sdk/typescript")
	require.NoError(t, err)
	var missing []string
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", "typescript")); err != nil {
		missing = append(missing, "sdk/typescript/node_modules (npm ci in sdk/typescript)")
	}
	if len(missing) > 0 {
		if os.Getenv(requireBrowser) != "" {
			t.Fatalf("the TypeScript SDK's tests need %s", strings.Join(missing, ", "))
		}
		t.Skipf("the TypeScript SDK's tests need %s; `make test` installs them", strings.Join(missing, ", "))
	}

	e := newEnv(t)
	n := e.startNode(func(c *app.Config) {
		c.Dispatcher = dispatcher.Config{LoadInterval: 100 * time.Millisecond, SweepInterval: time.Second}
	})
	acme := e.createTenant(n, "sdk-typescript")
	recv := newSDKReceiver(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test")
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(),
		"HOOKWHEEL_URL="+n.base,
		"HOOKWHEEL_API_KEY="+acme.apiKey,
		"RECEIVER_URL="+recv.URL,
		"RECEIVED_URL="+recv.URL+sdkReceivedPath,
		"SIGNING_SECRET="+acme.signingSecret,
		// A variable missing above fails the live tests instead of skipping them.
		"HOOKWHEEL_LIVE_REQUIRED=1",
	)
	out, err := cmd.CombinedOutput()
	t.Logf("npm test in sdk/typescript:\n%s", out)
	require.NoError(t, err, "the TypeScript SDK's tests failed")
}

// sdkReceivedPath is where the receiver lists what it got, apart from the
// paths tasks are sent to (the SDK's tests send to /<run id>/...).
const sdkReceivedPath = "/_received"

// sdkRequest is one request as the receiver got it, headers and raw body
// included, so that the SDK's tests can verify its signatures themselves.
type sdkRequest struct {
	Method  string      `json:"method"`
	Path    string      `json:"path"`
	Headers http.Header `json:"headers"`
	Body    []byte      `json:"body_base64"` // encoding/json writes []byte as standard base64
}

// newSDKReceiver records every request and answers 400 to those whose path
// contains /fail (a final failure: the task is dead at once), 200 to the
// others; GET /_received lists the requests recorded, oldest first.
func newSDKReceiver(t *testing.T) *httptest.Server {
	var (
		mu   sync.Mutex
		reqs []sdkRequest
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == sdkReceivedPath {
			mu.Lock()
			list := append([]sdkRequest{}, reqs...)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"data": list})
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		mu.Lock()
		reqs = append(reqs, sdkRequest{Method: r.Method, Path: r.URL.Path, Headers: r.Header.Clone(), Body: body})
		mu.Unlock()
		if strings.Contains(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("refused"))
			return
		}
		_, _ = w.Write([]byte("thanks"))
	}))
	t.Cleanup(srv.Close)
	return srv
}
