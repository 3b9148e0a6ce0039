package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// testTaskCommands runs the tasks commands, as TestClientCommands's
// subtests, against its world.
func testTaskCommands(t *testing.T, w *cliWorld) {
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

		// Three attempts now: --limit shows the oldest, --all every one.
		w.waitTask(t, task.ID, hookwheel.StatusDelivered)
		out = w.ok(t, "tasks", "attempts", task.ID.String(), "--limit", "2")
		require.Regexp(t, `(?m)^2\s`, out)
		require.NotRegexp(t, `(?m)^3\s`, out)
		require.Contains(t, out, "(the 2 oldest shown; --limit N or --all for more)")
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, "tasks", "attempts", task.ID.String(), "--all", "--json")), &attempts))
		require.Len(t, attempts, 3)
		require.Equal(t, 3, attempts[2].Attempt)

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
}
