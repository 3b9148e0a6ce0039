package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// testScheduleCommands runs the schedules commands, as
// TestClientCommands's subtests, against its world.
func testScheduleCommands(t *testing.T, w *cliWorld) {
	rcv := w.receiver.URL

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
}
