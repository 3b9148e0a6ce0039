package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/store/storetest"
)

// buildBinary compiles hookwheel once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hookwheel")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// process is a hookwheel process under test.
type process struct {
	cmd  *exec.Cmd
	logs *syncWriter
	done chan error
}

func startProcess(t *testing.T, bin string, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	logs := &syncWriter{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, logs: logs, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of hookwheel %v:\n%s", args, logs)
		}
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// syncWriter collects a process's stdout and stderr, which exec copies from
// two goroutines.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(b)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func waitReady(t *testing.T, base string, p *process) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-p.done:
			t.Fatalf("hookwheel exited before ready: %v\n%s", err, p.logs)
		case <-poll.C:
		}
	}
	t.Fatalf("hookwheel not ready within 30s\n%s", p.logs)
}

func postJSON(t *testing.T, url, token string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// TestServeStopRestart runs the real binary: SIGTERM stops it with exit
// status 0 after finishing what it sends, and a new process fires every task
// the first left pending, none twice.
func TestServeStopRestart(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	addr := freeAddr(t)
	base := "http://" + addr
	pprofAddr, metricsAddr := freeAddr(t), freeAddr(t)
	env := []string{
		"HOOKWHEEL_PPROF_ADDR=" + pprofAddr,
		"HOOKWHEEL_METRICS_ADDR=" + metricsAddr,
		"DATABASE_URL=" + storetest.DatabaseURL(t),
		"REDIS_URL=" + storetest.RedisURL(),
		"HOOKWHEEL_ADDR=" + addr,
		"HOOKWHEEL_ADMIN_TOKEN=admin-token",
		"HOOKWHEEL_LOG_LEVEL=warn",
		"HOOKWHEEL_ALLOW_PRIVATE_TARGETS=true",
		// 100 creates at once, past the default API rate (10/s) and
		// dispatch rate per host (10/s): this test is about stopping.
		"HOOKWHEEL_DEFAULT_API_RATE=0",
		"HOOKWHEEL_DEFAULT_DISPATCH_RATE=0",
	}

	var (
		mu       sync.Mutex
		received = map[string]int{}
		arrived  = make(chan struct{}, 1)
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received[r.Header.Get("webhook-id")]++
		mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
	}))
	defer recv.Close()
	countReceived := func() (distinct, total int) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range received {
			distinct++
			total += n
		}
		return
	}

	first := startProcess(t, bin, env, "serve")
	waitReady(t, base, first)
	// Profiles and metrics are served on their own listeners only, never
	// on the API's.
	for url, want := range map[string]int{
		"http://" + pprofAddr + "/debug/pprof/": http.StatusOK,
		base + "/debug/pprof/":                  http.StatusNotFound,
		"http://" + metricsAddr + "/metrics":    http.StatusOK,
		base + "/metrics":                       http.StatusNotFound,
		"http://" + pprofAddr + "/metrics":      http.StatusNotFound,
	} {
		resp, err := http.Get(url)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, url)
	}
	status, body := postJSON(t, base+"/v1/admin/tenants", "admin-token", map[string]string{"name": "acme"})
	require.Equal(t, http.StatusCreated, status, string(body))
	var tenant struct {
		APIKey string `json:"api_key"`
	}
	require.NoError(t, json.Unmarshal(body, &tenant))

	const count = 100
	start := time.Now()
	for i := range count {
		runAt := start.Add(300*time.Millisecond + time.Duration(i)*30*time.Millisecond).Format(time.RFC3339Nano)
		status, body := postJSON(t, base+"/v1/tasks", tenant.APIKey, map[string]string{"url": recv.URL, "run_at": runAt})
		require.Equal(t, http.StatusCreated, status, string(body))
	}
	waitUntil(t, 10*time.Second, arrived, func() bool { d, _ := countReceived(); return d >= 5 })

	require.NoError(t, first.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-first.done:
		require.NoError(t, err, "SIGTERM must end hookwheel with exit status 0\n%s", first.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("hookwheel did not stop within 30s of SIGTERM\n%s", first.logs)
	}
	distinct, _ := countReceived()
	require.Less(t, distinct, count, "the first process must have left tasks pending")

	second := startProcess(t, bin, env, "serve")
	waitReady(t, base, second)
	waitUntil(t, 20*time.Second, arrived, func() bool { d, _ := countReceived(); return d == count })
	// All tasks must be recorded delivered before the final count means anything.
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/tasks?status=delivered&limit=500", nil)
		req.Header.Set("Authorization", "Bearer "+tenant.APIKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var list struct {
			Data []json.RawMessage `json:"data"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
		resp.Body.Close()
		if len(list.Data) == count {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d delivered", len(list.Data), count)
		<-time.After(50 * time.Millisecond)
	}
	distinct, total := countReceived()
	require.Equal(t, count, distinct)
	require.Equal(t, count, total, "no task may be sent twice across a graceful restart")
}

func waitUntil(t *testing.T, within time.Duration, signal <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.After(within)
	for !cond() {
		select {
		case <-signal:
		case <-deadline:
			t.Fatalf("condition not met within %s", within)
		}
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbURL := storetest.DatabaseURL(t)
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "REDIS_URL="+storetest.RedisURL())

	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), stdout.String(), stderr.String()
		}
		require.NoError(t, err)
		return 0, stdout.String(), stderr.String()
	}

	code, _, stderr := run("migrate")
	require.Equal(t, 0, code, stderr)

	code, stdout, stderr := run("tenant", "create", "--name", "acme")
	require.Equal(t, 0, code, stderr)
	var created map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &created), "stdout must be only the JSON: %q", stdout)
	for _, field := range []string{"id", "name", "api_key", "signing_secret", "created_at"} {
		require.Contains(t, created, field)
	}
	require.Equal(t, "acme", created["name"])

	// Suspend, resume and delete, each printing the tenant as it is then.
	id := created["id"].(string)
	for _, step := range []struct{ command, status string }{
		{"suspend", "suspended"}, {"suspend", "suspended"}, {"resume", "active"}, {"delete", "deleting"},
	} {
		code, stdout, stderr := run("tenants", step.command, id)
		require.Equal(t, 0, code, stderr)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &got), "stdout must be only the JSON: %q", stdout)
		require.Equal(t, step.status, got["status"], step.command)
	}
	code, _, stderr = run("tenants", "resume", id)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "is being deleted")
	code, _, stderr = run("tenants", "suspend", "019aa8e0-1b2c-7d3e-8f40-5a6b7c8d9e0f")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not found")

	for _, args := range [][]string{{}, {"frobnicate"}, {"tenant"}, {"tenant", "create"}, {"tenants", "suspend"}, {"tenants", "delete", "nope"},
		{"serve", "--api-only", "--dispatcher-only"}} {
		code, _, stderr := run(args...)
		require.Equal(t, 2, code, "hookwheel %v: %s", args, stderr)
		require.Contains(t, stderr, "Usage:", fmt.Sprint(args))
	}
}

// TestListBodyBytesEnv: HOOKWHEEL_LIST_BODY_BYTES sets the bound on a list
// answer's bodies (unset: the API's default); a bad value stops the node.
func TestListBodyBytesEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		value string
		want  int
		bad   bool
	}{
		{"", 0, false},
		{"1048576", 1 << 20, false},
		{"-1", 0, true},
		{"8MiB", 0, true},
	} {
		e, err := loadEnv(func(k string) string {
			if k == "HOOKWHEEL_LIST_BODY_BYTES" {
				return tt.value
			}
			return ""
		})
		if tt.bad {
			require.ErrorContains(t, err, "HOOKWHEEL_LIST_BODY_BYTES", "%q", tt.value)
			continue
		}
		require.NoError(t, err, "%q", tt.value)
		require.Equal(t, tt.want, e.listBodies, "%q", tt.value)
	}
}
