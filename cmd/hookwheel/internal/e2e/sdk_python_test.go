package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/dispatcher"
)

// TestPythonSDK runs the Python SDK's tests (sdk/python: python3 -m pytest)
// against a node of this test, with the receiver of TestTypeScriptSDK, whose
// recorded requests the SDK's live tests read back to verify real webhooks.
// It is skipped where no Python 3.11+ with pytest is found, unless
// HOOKWHEEL_REQUIRE_BROWSER is set (`make test`, whose deploy/dev/web.sh
// ensure installs Debian's python3-pytest, and python3-mypy for the SDK's
// type check).
func TestPythonSDK(t *testing.T) {
	sdkDir, err := filepath.Abs("../../../../sdk/python")
	require.NoError(t, err)
	python := pythonWithPytest()
	if python == "" {
		const why = "the Python SDK's tests need Python 3.11+ with pytest (Debian: apt-get install python3-pytest)"
		if os.Getenv(requireBrowser) != "" {
			t.Fatal(why)
		}
		t.Skip(why + "; `make test` installs it")
	}

	e := newEnv(t)
	n := e.startNode(func(c *app.Config) {
		c.Dispatcher = dispatcher.Config{LoadInterval: 100 * time.Millisecond, SweepInterval: time.Second}
	})
	tn := e.createTenant(n, "sdk-python")
	recv := newSDKReceiver(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// No cache nor bytecode written into the source tree.
	cmd := exec.CommandContext(ctx, python, "-B", "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rs")
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(),
		"HOOKWHEEL_URL="+n.base,
		"HOOKWHEEL_API_KEY="+tn.apiKey,
		"RECEIVER_URL="+recv.URL,
		"RECEIVED_URL="+recv.URL+sdkReceivedPath,
		"SIGNING_SECRET="+tn.signingSecret,
		// A variable missing above fails the live tests instead of skipping them.
		"HOOKWHEEL_LIVE_REQUIRED=1",
	)
	out, err := cmd.CombinedOutput()
	t.Logf("%s -m pytest in sdk/python:\n%s", python, out)
	require.NoError(t, err, "the Python SDK's tests failed")
	// The live tests ran, not skipped: one of each kind passed.
	for _, name := range []string{
		"test_live.py::TestTasks::test_lists_every_task_across_small_pages_then_cancels_them PASSED",
		"test_live.py::TestDeliveredWebhooks::test_verifies_the_webhook_the_server_sent PASSED",
		"test_live.py::TestDeliveredWebhooks::test_counts_dead_tasks_for_a_bulk_replay_then_replays_them PASSED",
	} {
		require.Contains(t, string(out), name)
	}
}

// pythonWithPytest is the first of python3 on PATH and Debian's
// /usr/bin/python3 (PATH may name another, a pyenv's say, without Debian's
// packages) that is 3.11 or later and imports pytest; "" when none is.
func pythonWithPytest() string {
	candidates := []string{"python3", "/usr/bin/python3"}
	if p := os.Getenv("HOOKWHEEL_PYTHON"); p != "" {
		candidates = []string{p}
	}
	for _, c := range candidates {
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		check := exec.Command(path, "-c", "import sys, pytest; sys.exit(sys.version_info < (3, 11))")
		if err := check.Run(); err == nil {
			return path
		}
	}
	return ""
}
