package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/dispatcher"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// cliWorld is a hookwheel node run in the test process, a tenant on it, and
// a receiver for its webhooks: what the client commands talk to.
type cliWorld struct {
	base, apiKey, tenantID string
	receiver               *cliReceiver
}

func startCLIWorld(t *testing.T) *cliWorld {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	node, err := app.New(ctx, app.Config{
		DatabaseURL:    storetest.DatabaseURL(t),
		RedisURL:       storetest.RedisURL(),
		RedisKeyPrefix: storetest.RedisPrefix(t),
		Addr:           "127.0.0.1:0",
		AdminToken:     "admin-token",
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dispatcher:     dispatcher.Config{LoadInterval: 200 * time.Millisecond, SweepInterval: time.Second},
		// The receiver listens on loopback.
		Targets: netguard.Config{AllowPrivate: true},
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("node did not stop within 30s")
		}
	})
	created, err := node.Tenants().Create(ctx, "cli", model.ActorCLI)
	require.NoError(t, err)
	return &cliWorld{base: "http://" + node.Addr(), apiKey: created.APIKey, tenantID: created.Tenant.ID.String(),
		receiver: newCLIReceiver(t)}
}

// cliReceiver records the webhooks it gets; it answers 410 under /gone/,
// which kills a task at once, and 200 elsewhere.
type cliReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string][]string // by webhook-id
	paths  map[string][]string
}

func newCLIReceiver(t *testing.T) *cliReceiver {
	r := &cliReceiver{bodies: map[string][]string{}, paths: map[string][]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id := req.Header.Get("webhook-id")
		r.mu.Lock()
		r.bodies[id] = append(r.bodies[id], string(body))
		r.paths[id] = append(r.paths[id], req.URL.Path)
		r.mu.Unlock()
		if strings.HasPrefix(req.URL.Path, "/gone/") {
			w.WriteHeader(http.StatusGone)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

// got returns the bodies and paths of the webhook id received so far.
func (r *cliReceiver) got(id string) (bodies, paths []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies[id]...), append([]string(nil), r.paths[id]...)
}

// cliRun is one client command's outcome.
type cliRun struct {
	code           int
	stdout, stderr string
}

// run runs a client command in-process against the world, with env
// overriding HOOKWHEEL_URL and HOOKWHEEL_API_KEY ("NAME=value").
func (w *cliWorld) run(t *testing.T, stdin string, args []string, env ...string) cliRun {
	t.Helper()
	vars := map[string]string{"HOOKWHEEL_URL": w.base, "HOOKWHEEL_API_KEY": w.apiKey}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var out bytes.Buffer
	err := runClient(context.Background(), args, console{
		getenv: func(k string) string { return vars[k] }, stdin: strings.NewReader(stdin), stdout: &out, now: time.Now,
	})
	r := cliRun{stdout: out.String()}
	if err != nil {
		r.code, r.stderr = exitCode(err), err.Error()
	}
	return r
}

// ok runs a command that must succeed, and returns its output.
func (w *cliWorld) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := w.run(t, "", args)
	require.Equal(t, 0, r.code, "hookwheel %s: %s", strings.Join(args, " "), r.stderr)
	return r.stdout
}

// task runs a command that prints a task with --json, and decodes it.
func (w *cliWorld) task(t *testing.T, args ...string) hookwheel.Task {
	t.Helper()
	var task hookwheel.Task
	out := w.ok(t, append(args, "--json")...)
	require.NoError(t, json.Unmarshal([]byte(out), &task), out)
	return task
}

// waitTask polls `tasks get` until the task is in status.
func (w *cliWorld) waitTask(t *testing.T, id uuid.UUID, status hookwheel.TaskStatus) hookwheel.Task {
	t.Helper()
	var task hookwheel.Task
	pollUntil(t, 30*time.Second, fmt.Sprintf("task %s %s", id, status), func() bool {
		task = w.task(t, "tasks", "get", id.String())
		return task.Status == status
	})
	return task
}

func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		<-tick.C
	}
}

// TestClientCommands runs every client command against a live node, as a
// person or a script would, and checks the output and the exit status.
func TestClientCommands(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	rcv := w.receiver.URL

	testTaskCommands(t, w)
	testReplayEditCommand(t, w)
	testExpiryFlags(t, w)
	testScheduleCommands(t, w)
	testBatchCommand(t, w)

	t.Run("usage errors", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"tasks"},
			{"tasks", "frobnicate"},
			{"tasks", "create"},
			{"tasks", "create", "--url", rcv, "--at", "tomorrow"},
			{"tasks", "create", "--url", rcv, "--at", "2030-01-01T00:00:00Z", "--in", "1h"},
			{"tasks", "create", "--url", rcv, "--body", "a", "--body-file", "b"},
			{"tasks", "create", "--url", rcv, "--header", "no colon"},
			{"tasks", "create", "--url", rcv, "--in", "soon"},
			{"tasks", "create", "--url", rcv, "--frobnicate"},
			{"tasks", "get"},
			{"tasks", "get", "not-an-id"},
			{"tasks", "get", uuid.NewString(), uuid.NewString()},
			{"schedules"},
			{"schedules", "next", "not-an-id"},
		} {
			r := w.run(t, "", args)
			require.Equal(t, exitUsage, r.code, "hookwheel %s: %s", strings.Join(args, " "), r.stderr)
			require.Contains(t, r.stderr, "Usage:", "the usage of the command group follows the error")
		}
		r := w.run(t, "", []string{"tasks", "create", "-h"})
		require.Equal(t, 0, r.code)
		require.Contains(t, r.stdout, "Flags of tasks create:")
		require.Contains(t, r.stdout, "-idempotency-key")
	})

	t.Run("errors of credentials and of the network", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		r := w.run(t, "", []string{"tasks", "get", id}, "HOOKWHEEL_API_KEY=")
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "set HOOKWHEEL_API_KEY")

		r = w.run(t, "", []string{"tasks", "get", id}, "HOOKWHEEL_API_KEY=hw_nosuchkey_nosuchsecret")
		require.Equal(t, exitAuth, r.code, r.stderr)
		require.Contains(t, r.stderr, "401")

		r = w.run(t, "", []string{"tasks", "get", id}, "HOOKWHEEL_URL=http://127.0.0.1:1")
		require.Equal(t, exitUnavailable, r.code, r.stderr)
		require.Contains(t, r.stderr, "no answer from http://127.0.0.1:1")

		r = w.run(t, "", []string{"tasks", "get", id}, "HOOKWHEEL_URL=localhost:8080")
		require.Equal(t, exitUsage, r.code, r.stderr)
	})
}

// TestClientRateLimited runs a command as a tenant over its API rate: the
// server asks to come back later than the client waits, and the command
// says so with its own exit status.
func TestClientRateLimited(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	req, err := http.NewRequest(http.MethodPatch, w.base+"/v1/admin/tenants/"+w.tenantID,
		strings.NewReader(`{"limits": {"api_rate": 0.001, "api_burst": 1}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer admin-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))

	var r cliRun
	pollUntil(t, 30*time.Second, "a 429", func() bool {
		r = w.run(t, "", []string{"tasks", "list"})
		return r.code == exitRateLimited
	})
	require.Contains(t, r.stderr, "429")
	require.Contains(t, r.stderr, "retry after")
}

// TestClientExitStatus runs the real binary: its exit status is the one the
// usage text documents.
func TestClientExitStatus(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	bin := buildBinary(t)
	run := func(env []string, args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), stderr.String()
		}
		require.NoError(t, err)
		return 0, stderr.String()
	}
	env := []string{"HOOKWHEEL_URL=" + w.base, "HOOKWHEEL_API_KEY=" + w.apiKey,
		// A server setting that would stop `serve` is no business of a client.
		"HOOKWHEEL_LOG_LEVEL=loud"}

	code, stderr := run(env, "tasks", "get", uuid.NewString())
	require.Equal(t, exitNotFound, code, stderr)
	require.Contains(t, stderr, "hookwheel: get task")
	code, stderr = run(env, "tasks", "list", "--limit", "1")
	require.Equal(t, 0, code, stderr)
	code, stderr = run(append(env, "HOOKWHEEL_API_KEY="), "tasks", "list")
	require.Equal(t, exitUsage, code, stderr)
	code, stderr = run(append(env, "HOOKWHEEL_API_KEY=hw_nosuchkey_nosuchsecret"), "schedules", "list")
	require.Equal(t, exitAuth, code, stderr)
	code, _ = run(env, "help")
	require.Equal(t, 0, code)
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	api := func(status int) error {
		return clientError{fmt.Errorf("wrapped: %w", &hookwheel.Error{StatusCode: status, Title: http.StatusText(status)})}
	}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"usage", usageError{"no command given"}, exitUsage},
		{"usage of a client command", commandUsageError{msg: "missing ID"}, exitUsage},
		{"not found", api(404), exitNotFound},
		{"conflict", api(409), exitConflict},
		{"unauthorized", api(401), exitAuth},
		{"forbidden", api(403), exitAuth},
		{"rate limited", api(429), exitRateLimited},
		{"invalid", api(422), exitRefused},
		{"bad request", api(400), exitRefused},
		{"server error", api(500), exitUnavailable},
		{"unavailable", api(503), exitUnavailable},
		{"network", clientError{&url.Error{Op: "Get", URL: "http://x", Err: errors.New("connection refused")}}, exitUnavailable},
		{"a failed batch line", clientError{errors.New("1 of 2 line(s) failed")}, exitRefused},
		{"a server command's failure", errors.New("connect to Postgres"), exitRefused},
	} {
		require.Equal(t, tc.want, exitCode(tc.err), tc.name)
	}
}

func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{400 * time.Millisecond, "0s"},
		{42 * time.Second, "42s"},
		{59*time.Second + 600*time.Millisecond, "1m00s"},
		{5*time.Minute + 12*time.Second, "5m12s"},
		{42*time.Minute + 20*time.Second, "42m"},
		{59*time.Minute + 50*time.Second, "1h00m"},
		{5*time.Hour + 12*time.Minute, "5h12m"},
		{-5 * time.Hour, "5h00m"},
		{3*24*time.Hour + 4*time.Hour + 10*time.Minute, "3d4h"},
		{45 * 24 * time.Hour, "45d"},
	} {
		require.Equal(t, tc.want, humanDuration(tc.d), tc.d.String())
	}
	require.Equal(t, "now", relative(300*time.Millisecond))
	require.Equal(t, "in 5m12s", relative(5*time.Minute+12*time.Second))
	require.Equal(t, "42s ago", relative(-42*time.Second))
	require.Equal(t, `a\nb`, oneLine("a\nb", 10))
	require.Equal(t, "abc… (6 bytes)", oneLine("abcdef", 3))
	// What a receiver answers reaches the terminal only as text.
	require.Equal(t, `a\x1b]52;c;eA==\x07b\x0dc\x9b\xff`, oneLine("a\x1b]52;c;eA==\x07b\rc\u009b\xff", 100))
	require.Equal(t, "caf\u00e9 \ufffd", oneLine("caf\u00e9 \ufffd", 100), "text, and a real U+FFFD, as they are")
}
