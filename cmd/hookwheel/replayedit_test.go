package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// testReplayEditCommand runs tasks replay-dead with an edit, as
// TestClientCommands's subtest, against its world.
func testReplayEditCommand(t *testing.T, w *cliWorld) {
	t.Run("replay-dead moving tasks and changing headers", func(t *testing.T) {
		t.Parallel()
		run := uuid.NewString()
		from, to := w.receiver.URL+"/gone/"+run+"/", w.receiver.URL+"/moved/"+run+"/"
		task := w.task(t, "tasks", "create", "--url", from+"orders", "--header", "X-Old: 1", "--header", "X-Keep: 2", "--body", "b")
		w.waitTask(t, task.ID, hookwheel.StatusDead)
		edit := []string{"tasks", "replay-dead", "--url-prefix-from", from, "--url-prefix-to", to,
			"--set-header", "Authorization: Bearer new", "--remove-header", "x-old"}

		out := w.ok(t, append(edit, "--dry-run")...)
		require.Contains(t, out, "1 dead task(s) match; 1 would be changed, 0 refused; none replayed (--dry-run).\n")
		require.Contains(t, out, task.ID.String())
		require.Contains(t, out, "url      "+from+"orders\n          -> "+to+"orders\n")
		require.Contains(t, out, "set      Authorization: Bearer new\n")
		require.Contains(t, out, "remove   X-Old\n")
		var res hookwheel.ReplayResult
		require.NoError(t, json.Unmarshal([]byte(w.ok(t, append(edit, "--dry-run", "--json")...)), &res))
		require.Equal(t, 1, res.Matched)
		require.Equal(t, 1, *res.Changed)
		require.Equal(t, hookwheel.StatusDead, w.task(t, "tasks", "get", task.ID.String()).Status, "a dry run replays nothing")

		require.Equal(t, "1 dead task(s) matched; 1 changed and replayed (1 replayed in all), due now; 0 refused.\n", w.ok(t, edit...))
		got := w.waitTask(t, task.ID, hookwheel.StatusDelivered)
		require.Equal(t, to+"orders", got.URL)
		require.Equal(t, map[string]string{"X-Keep": "2", "Authorization": "Bearer new"}, got.Headers)
		require.Equal(t, "b", got.Body)
		_, paths := w.receiver.got(task.ID.String())
		require.Equal(t, []string{strings.TrimPrefix(from, w.receiver.URL) + "orders", strings.TrimPrefix(to, w.receiver.URL) + "orders"}, paths)
	})

	t.Run("replay-dead edit usage errors", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"tasks", "replay-dead", "--url-prefix-from", "https://old.example/"},
			{"tasks", "replay-dead", "--url-prefix-to", "https://new.example/"},
			{"tasks", "replay-dead", "--set-header", "no colon"},
			{"tasks", "replay-dead", "--remove-header", " "},
		} {
			r := w.run(t, "", args)
			require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		}
		r := w.run(t, "", []string{"tasks", "replay-dead", "--set-header", "Webhook-Id: forged", "--dry-run"})
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "edit.headers.set.Webhook-Id")
	})
}
