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
	"path/filepath"
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
	"github.com/hookwheel/hookwheel/internal/testenv"
	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
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
		DatabaseURL:    testenv.DatabaseURL(t),
		RedisURL:       testenv.RedisURL(),
		RedisKeyPrefix: testenv.RedisPrefix(t),
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

	t.Run("create, get and cancel", func(t *testing.T) {
		t.Parallel()
		out := w.ok(t, "tasks", "create", "--url", rcv+"/later", "--in", "1h", "--header", "X-Order: 42",
			"--header", "Content-Type:application/json", "--body", `{"order":42}`, "--max-attempts", "3", "--timeout", "5s")
		require.Contains(t, out, "Scheduled.")
		require.Regexp(t, `Status:\s+scheduled \(waiting for its time\)`, out)
		require.Contains(t, out, "POST "+rcv+"/later")
		require.Contains(t, out, "X-Order: 42")
		require.Contains(t, out, "(in 1h00m)")
		require.Contains(t, out, "0 made, 3 allowed; each may take 5s")

		task := w.task(t, "tasks", "create", "--url", rcv+"/later", "--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"--method", "put", "--body-file", "-")
		require.Equal(t, hookwheel.HTTPMethod("PUT"), task.Method)
		require.Equal(t, hookwheel.StatusScheduled, task.Status)

		out = w.ok(t, "tasks", "get", task.ID.String())
		require.Contains(t, out, task.ID.String())
		require.Contains(t, out, "PUT "+rcv+"/later")
		require.Equal(t, task.ID, w.task(t, "tasks", "get", "--json", task.ID.String()).ID, "flags before or after the id")

		out = w.ok(t, "tasks", "cancel", task.ID.String())
		require.Contains(t, out, "Canceled: it will not be sent.")
		require.Regexp(t, `Status:\s+canceled`, out)

		r := w.run(t, "", []string{"tasks", "cancel", task.ID.String()})
		require.Equal(t, exitConflict, r.code, r.stderr)
		require.Contains(t, r.stderr, "409")
		require.Contains(t, r.stderr, "canceled")

		r = w.run(t, "", []string{"tasks", "get", uuid.NewString()})
		require.Equal(t, exitNotFound, r.code, r.stderr)
		require.Contains(t, r.stderr, "404")
	})

	t.Run("the same idempotency key makes one task", func(t *testing.T) {
		t.Parallel()
		key := "cli-" + uuid.NewString()
		args := []string{"tasks", "create", "--url", rcv + "/once", "--in", "1h", "--idempotency-key", key}
		first, again := w.task(t, args...), w.task(t, args...)
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, key, *first.IdempotencyKey)

		r := w.run(t, "", []string{"tasks", "create", "--url", rcv + "/other", "--idempotency-key", key})
		require.Equal(t, exitRefused, r.code, "the same key with another request is refused: %s", r.stderr)
		require.Contains(t, r.stderr, "422")
	})

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		prefix := rcv + "/list/" + uuid.NewString()
		var ids []string
		for i := range 3 {
			ids = append(ids, w.task(t, "tasks", "create", "--url", fmt.Sprintf("%s/%d", prefix, i), "--in", "1h",
				"--body", fmt.Sprintf(`{"n": %d}`, i)).ID.String())
		}
		out := w.ok(t, "tasks", "list", "--url", prefix, "--limit", "2")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Regexp(t, `^ID\s+STATUS\s+NEXT ATTEMPT\s+ATTEMPTS\s+LAST RESULT\s+REQUEST$`, lines[0])
		require.Contains(t, lines[1], ids[2], "newest first")
		require.Contains(t, lines[2], ids[1])
		require.Regexp(t, `scheduled\s+\S+ \(in 1h00m\)`, lines[1])
		require.Contains(t, out, "(the 2 newest shown; --limit N or --all for more)")

		var listed []hookwheel.Task
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "list", "--url", prefix, "--all", "--json")), &listed))
		require.Len(t, listed, 3)
		for _, task := range listed {
			require.Empty(t, task.Body, "no body unless asked")
		}
		listed = nil
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "list", "--url", prefix, "--include-body", "--json")), &listed))
		require.Len(t, listed, 3)
		require.Equal(t, `{"n": 2}`, listed[0].Body)

		require.Equal(t, "No tasks.\n", w.ok(t, "tasks", "list", "--url", prefix, "--status", "dead"))
		r := w.run(t, "", []string{"tasks", "list", "--status", "lost"})
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "want scheduled, dispatching")
	})

	t.Run("labels", func(t *testing.T) {
		t.Parallel()
		run := "run-" + uuid.NewString()[:8]
		out := w.ok(t, "tasks", "create", "--url", rcv+"/labelled", "--in", "1h", "--label", "team=payments", "--label", "run="+run)
		require.Regexp(t, `Label:\s+run=`+run, out)
		require.Regexp(t, `Label:\s+team=payments`, out)
		other := w.task(t, "tasks", "create", "--url", rcv+"/labelled", "--in", "1h", "--label", "team=search", "--label", "run="+run)
		require.Equal(t, map[string]string{"team": "search", "run": run}, map[string]string(other.Labels))

		var listed []hookwheel.Task
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "list", "--label", "run="+run, "--label", "team=search", "--json")), &listed))
		require.Len(t, listed, 1)
		require.Equal(t, other.ID, listed[0].ID)
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "list", "--label", "run="+run, "--json")), &listed))
		require.Len(t, listed, 2)

		r := w.run(t, "", []string{"tasks", "list", "--label", "team"})
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "want key=value")
		r = w.run(t, "", []string{"tasks", "create", "--url", rcv + "/labelled", "--label", "Team=x"})
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "labels.Team")
	})

	t.Run("callbacks", func(t *testing.T) {
		t.Parallel()
		out := w.ok(t, "tasks", "create", "--url", rcv+"/paid", "--in", "1h", "--callback", rcv+"/paid-done",
			"--failure-callback", rcv+"/paid-failed")
		require.Regexp(t, `Callback:\s+on delivery, POST `+rcv+`/paid-done`, out)
		require.Regexp(t, `Failure callback:\s+on death, POST `+rcv+`/paid-failed`, out)

		task := w.task(t, "tasks", "create", "--url", rcv+"/charge", "--callback", rcv+"/charge-done")
		require.Equal(t, rcv+"/charge-done", *task.Callback)
		w.waitTask(t, task.ID, hookwheel.StatusDelivered)
		delivered := w.task(t, "tasks", "get", "--json", task.ID.String())
		require.NotNil(t, delivered.CallbackTaskID, "the delivery made its callback task")
		var listed []hookwheel.Task
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "list", "--callback-of", task.ID.String(), "--json")), &listed))
		require.Len(t, listed, 1)
		require.Equal(t, *delivered.CallbackTaskID, listed[0].ID)
		require.Regexp(t, `Reports on:\s+`+task.ID.String(), w.ok(t, "tasks", "get", listed[0].ID.String()))

		r := w.run(t, "", []string{"tasks", "create", "--url", rcv + "/x", "--callback", "/relative"})
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "callback")
		r = w.run(t, "", []string{"tasks", "list", "--callback-of", "nope"})
		require.Equal(t, exitUsage, r.code, r.stderr)
	})

	t.Run("delivery, attempts, replay and edited replay", func(t *testing.T) {
		t.Parallel()
		path := "/deliver/" + uuid.NewString()
		task := w.task(t, "tasks", "create", "--url", rcv+path, "--body", "first")
		w.waitTask(t, task.ID, hookwheel.StatusDelivered)

		out := w.ok(t, "tasks", "attempts", task.ID.String())
		require.Regexp(t, `(?m)^#\s+STARTED\s+TOOK\s+OUTCOME\s+STATUS\s+ERROR OR RESPONSE$`, out)
		require.Regexp(t, `(?m)^1\s+\S+ \((now|\S+ ago)\)\s+\S+\s+success\s+200\s`, out)
		var attempts []hookwheel.Attempt
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "attempts", task.ID.String(), "--json")), &attempts))
		require.Len(t, attempts, 1)

		out = w.ok(t, "tasks", "replay", task.ID.String())
		require.Contains(t, out, "Replayed: it is due now")
		pollUntil(t, 30*time.Second, "the replay", func() bool { b, _ := w.receiver.got(task.ID.String()); return len(b) == 2 })
		w.waitTask(t, task.ID, hookwheel.StatusDelivered)

		out = w.ok(t, "tasks", "replay", task.ID.String(), "--url", rcv+path+"/moved", "--body", "edited")
		require.Contains(t, out, "Edited and replayed")
		require.Contains(t, out, rcv+path+"/moved")
		pollUntil(t, 30*time.Second, "the edited replay", func() bool { b, _ := w.receiver.got(task.ID.String()); return len(b) == 3 })
		bodies, paths := w.receiver.got(task.ID.String())
		require.Equal(t, []string{"first", "first", "edited"}, bodies)
		require.Equal(t, path+"/moved", paths[2])

		// A task on its way cannot be replayed.
		later := w.task(t, "tasks", "create", "--url", rcv+path, "--in", "1h")
		r := w.run(t, "", []string{"tasks", "replay", later.ID.String()})
		require.Equal(t, exitConflict, r.code, r.stderr)
	})

	t.Run("dead letters and replay-dead", func(t *testing.T) {
		t.Parallel()
		prefix := rcv + "/gone/" + uuid.NewString()
		task := w.task(t, "tasks", "create", "--url", prefix+"/x")
		w.waitTask(t, task.ID, hookwheel.StatusDead)
		out := w.ok(t, "tasks", "get", task.ID.String())
		require.Contains(t, out, "dead (failed for good; `hookwheel tasks replay "+task.ID.String()+"` sends it again)")
		require.Regexp(t, `Last result:\s+410`, out)

		require.Contains(t, w.ok(t, "tasks", "list", "--status", "dead", "--url", prefix), task.ID.String())
		require.Equal(t, "1 dead task(s) match; none replayed (--dry-run).\n",
			w.ok(t, "tasks", "replay-dead", "--url", prefix, "--dry-run"))
		require.Equal(t, "1 dead task(s) matched; 1 replayed, due now.\n", w.ok(t, "tasks", "replay-dead", "--url", prefix))
		pollUntil(t, 30*time.Second, "the replayed dead task", func() bool { b, _ := w.receiver.got(task.ID.String()); return len(b) == 2 })
		w.waitTask(t, task.ID, hookwheel.StatusDead)
		require.JSONEq(t, `{"matched":1,"replayed":0}`, w.ok(t, "tasks", "replay-dead", "--url", prefix, "--dry-run", "--json"))
	})

	t.Run("reschedule", func(t *testing.T) {
		t.Parallel()
		task := w.task(t, "tasks", "create", "--url", rcv+"/move", "--in", "1h")
		moved := w.task(t, "tasks", "reschedule", task.ID.String(), "--in", "2h")
		require.WithinDuration(t, time.Now().Add(2*time.Hour), *moved.NextAttemptAt, time.Minute)
		at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
		out := w.ok(t, "tasks", "reschedule", task.ID.String(), "--at", at.Format(time.RFC3339))
		require.Contains(t, out, "Rescheduled.")
		require.Contains(t, out, at.Format(time.RFC3339))
		r := w.run(t, "", []string{"tasks", "reschedule", task.ID.String()})
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "say when")
	})

	t.Run("schedules", func(t *testing.T) {
		t.Parallel()
		out := w.ok(t, "schedules", "create", "--cron", "0 9 * * *", "--timezone", "Europe/Paris", "--url", rcv+"/daily",
			"--body", "report", "--paused")
		require.Contains(t, out, "Created.")
		require.Regexp(t, `State:\s+paused`, out)
		require.Contains(t, out, "0 9 * * * (in Europe/Paris)")

		var s hookwheel.Schedule
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "schedules", "create", "--cron", "@every 1h", "--url", rcv+"/hourly", "--json")), &s))
		id := s.ID.String()
		require.Contains(t, w.ok(t, "schedules", "list"), id)
		var list []hookwheel.Schedule
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "schedules", "list", "--json", "--all")), &list))
		require.GreaterOrEqual(t, len(list), 2)
		require.Contains(t, w.ok(t, "schedules", "get", id), "@every 1h (in UTC)")

		out = w.ok(t, "schedules", "next", id, "--count", "3")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 4)
		require.Regexp(t, `^#\s+LOCAL TIME\s+UTC\s+IN$`, lines[0])
		var next []hookwheel.FireTime
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "schedules", "next", id, "--json")), &next))
		require.Len(t, next, 10)

		// update sends only what its flags name.
		out = w.ok(t, "schedules", "update", id, "--cron", "30 8 * * 1-5", "--timezone", "America/New_York",
			"--url", rcv+"/v2", "--header", "X-Version: 2", "--label", "team=ops", "--body", "v2", "--max-attempts", "3")
		require.Contains(t, out, "Updated;")
		require.Contains(t, out, "30 8 * * 1-5 (in America/New_York)")
		var updated hookwheel.Schedule
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "schedules", "update", id, "--remove-header", "x-version",
			"--reset", "body", "--paused=true", "--json")), &updated))
		require.Equal(t, rcv+"/v2", updated.URL)
		require.Empty(t, updated.Headers)
		require.Empty(t, updated.Body)
		require.Equal(t, 3, *updated.Retry.MaxAttempts)
		require.Equal(t, map[string]string{"team": "ops"}, map[string]string(updated.Labels))
		require.True(t, updated.Paused)
		require.Nil(t, updated.NextRunAt)
		r := w.run(t, "", []string{"schedules", "update", id})
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "name something to change")
		r = w.run(t, "", []string{"schedules", "update", id, "--cron", "61 * * * *"})
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "cron")
		r = w.run(t, "", []string{"schedules", "update", uuid.NewString(), "--cron", "@hourly"})
		require.Equal(t, exitNotFound, r.code, r.stderr)

		require.Regexp(t, `State:\s+paused`, w.ok(t, "schedules", "pause", id))
		require.Regexp(t, `State:\s+active`, w.ok(t, "schedules", "resume", id))
		require.Contains(t, w.ok(t, "schedules", "delete", id), "Deleted")
		r = w.run(t, "", []string{"schedules", "get", id})
		require.Equal(t, exitNotFound, r.code, r.stderr)

		r = w.run(t, "", []string{"schedules", "create", "--url", rcv})
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "--cron and --url are required")
		r = w.run(t, "", []string{"schedules", "create", "--cron", "every day", "--url", rcv})
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "cron")
	})

	t.Run("batch", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		prefix := rcv + "/batch/" + uuid.NewString()
		file := filepath.Join(dir, "tasks.jsonl")
		require.NoError(t, os.WriteFile(file, []byte(strings.Join([]string{
			`{"url": "` + prefix + `/1", "delay": "1h", "idempotency_key": "` + prefix + `"}`,
			`{"url": "not a URL"}`,
			``,
			`{"url": "` + prefix + `/3", "runAt": "2030-01-01T00:00:00Z"}`,
			`not JSON`,
			`{"url": "` + prefix + `/1", "delay": "1h", "idempotency_key": "` + prefix + `"}`,
			`{"url": "` + prefix + `/7", "delay": "1h", "body": "hello"}`,
		}, "\n")), 0o600))

		r := w.run(t, "", []string{"batch", file})
		require.Equal(t, exitRefused, r.code, "a batch with failed lines fails: %s", r.stderr)
		require.Contains(t, r.stderr, "3 of 6 line(s) failed; the others are scheduled")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Regexp(t, `^LINE\s+RESULT\s+TASK\s+DETAIL$`, lines[0])
		require.Regexp(t, `^1\s+scheduled\s+\S{36}\s+POST `+prefix+`/1, due \S+ \(in 1h00m\)$`, lines[1])
		require.Regexp(t, `^2\s+failed\s+-\s+422 .*url: `, lines[2])
		require.Regexp(t, `^4\s+failed\s+-\s+not a task .*unknown field "runAt"`, lines[3])
		require.Regexp(t, `^5\s+failed\s+-\s+not a task`, lines[4])
		require.Regexp(t, `^6\s+repeat\s+\S{36}\s+an earlier request had the same idempotency key`, lines[5])
		require.Regexp(t, `^7\s+scheduled\s`, lines[6])
		require.Equal(t, "6 line(s): 3 scheduled (1 of them by an earlier request with the same idempotency key), 3 failed.", lines[8])

		// --json from standard input: one JSON object per line.
		input, err := os.ReadFile(file)
		require.NoError(t, err)
		r = w.run(t, string(input), []string{"batch", "--json", "-"})
		require.Equal(t, exitRefused, r.code)
		var results []batchLineJSON
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var res batchLineJSON
			require.NoError(t, json.Unmarshal([]byte(l), &res), l)
			results = append(results, res)
		}
		require.Len(t, results, 6)
		require.True(t, results[0].Replayed, "the first line's key was used by the run above")
		require.Equal(t, 422, results[1].Error.Status)
		require.Equal(t, "url", results[1].Error.Errors[0].Field)
		require.Equal(t, 7, results[5].Line)
		require.NotNil(t, results[5].Task)

		// More lines than one call takes: sent in chunks, all scheduled.
		var many strings.Builder
		for i := range hookwheel.MaxBatch + 500 {
			fmt.Fprintf(&many, `{"url": "%s/many/%d", "delay": "1h"}`+"\n", prefix, i)
		}
		r = w.run(t, many.String(), []string{"batch", "-"})
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, fmt.Sprintf("%d line(s): %d scheduled, 0 failed.", hookwheel.MaxBatch+500, hookwheel.MaxBatch+500))
		var listed []hookwheel.Task
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "list", "--url", prefix+"/many/", "--all", "--json")), &listed))
		require.Len(t, listed, hookwheel.MaxBatch+500)

		// Lines whose bytes pass what one call carries: sent in several
		// calls, each within the server's limit on a batch request.
		var big strings.Builder
		body := strings.Repeat("x", 900<<10)
		for i := range 40 { // 36 MB: more than the 32 MiB one batch request may carry
			fmt.Fprintf(&big, `{"url": "%s/big/%d", "delay": "1h", "body": "%s"}`+"\n", prefix, i, body)
		}
		r = w.run(t, big.String(), []string{"batch", "-"})
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "40 line(s): 40 scheduled, 0 failed.")

		for _, tc := range []struct {
			name, stdin string
			args        []string
		}{
			{"no file", "", []string{"batch"}},
			{"a missing file", "", []string{"batch", filepath.Join(dir, "missing.jsonl")}},
			{"an empty input", "\n\n", []string{"batch", "-"}},
		} {
			r := w.run(t, tc.stdin, tc.args)
			require.Equal(t, exitUsage, r.code, "%s: %s", tc.name, r.stderr)
		}
	})

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
			require.Contains(t, r.stderr, "want", "the usage of the command group follows the error")
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
