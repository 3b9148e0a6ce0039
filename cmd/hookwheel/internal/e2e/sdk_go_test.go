package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSDKGo runs the Go SDK's own tests (sdk/go, a module of its own) against
// a live node: its live tests create, read, list, cancel, batch, replay and
// schedule through the SDK, and verify with its webhook package the
// webhooks this test's receiver got. It fails when any of them fails, or
// skips.
func TestSDKGo(t *testing.T) {
	t.Parallel()
	sdkDir, err := filepath.Abs("../../../../sdk/go")
	require.NoError(t, err)
	e := newEnv(t)
	n := e.startNode()
	tn := e.createTenant(n, "sdk-go")

	// The receiver of the SDK's tests: it records every webhook, answers
	// the status a path segment /status/NNN/ names (200 elsewhere), and
	// shows what it got at GET /deliveries/{webhook-id}.
	rcv := newReceiver(t)
	rcv.setRespond(func(d delivery, _ int) (int, http.Header) {
		if _, rest, ok := strings.Cut(d.path, "/status/"); ok {
			if code, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0]); err == nil {
				return code, nil
			}
		}
		return http.StatusOK, nil
	})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/deliveries/")
		if !ok || r.Method != http.MethodGet {
			rcv.Config.Handler.ServeHTTP(w, r)
			return
		}
		type shown struct {
			Method string      `json:"method"`
			URL    string      `json:"url"`
			Header http.Header `json:"header"`
			Body   []byte      `json:"body"`
		}
		out := []shown{}
		for _, d := range rcv.snapshot() {
			if d.webhookID() == id {
				out = append(out, shown{d.method, d.path, d.header, d.body})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(front.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "./...")
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(),
		"HOOKWHEEL_URL="+n.base,
		"HOOKWHEEL_API_KEY="+tn.apiKey,
		"HOOKWHEEL_RECEIVER_URL="+front.URL,
		"HOOKWHEEL_SIGNING_SECRET="+tn.signingSecret,
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	require.NoError(t, err, "go test ./... in sdk/go:\n%s", out.String())

	// Every live test ran: none skipped for want of the environment.
	for _, name := range []string{"TestLiveTasks", "TestLiveBatch", "TestLiveSchedules", "TestLiveCallerAndErrors", "TestLiveWebhooks",
		"TestLiveTopics", "TestLiveTopicWebhooks", "TestLiveFlowKeys", "TestLiveFlowKeyWebhooks"} {
		require.Contains(t, out.String(), "--- PASS: "+name+" ", "sdk/go:\n%s", out.String())
	}
	require.NotContains(t, out.String(), "--- SKIP", "sdk/go:\n%s", out.String())
	require.NotEmpty(t, distinctIDs(rcv.snapshot()), "the SDK's tests sent webhooks to the receiver")
}
