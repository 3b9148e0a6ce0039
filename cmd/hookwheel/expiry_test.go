package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testExpiryFlags runs tasks create and topics publish with an expiry, as
// TestClientCommands's subtests, against its world.
func testExpiryFlags(t *testing.T, w *cliWorld) {
	rcv := w.receiver.URL

	t.Run("tasks create with an expiry", func(t *testing.T) {
		t.Parallel()
		task := w.task(t, "tasks", "create", "--url", rcv+"/code", "--in", "1h", "--expires-in", "2h")
		require.NotNil(t, task.ExpiresAt)
		require.WithinDuration(t, time.Now().Add(2*time.Hour), *task.ExpiresAt, time.Minute, "from now, as --in is")

		at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
		task = w.task(t, "tasks", "create", "--url", rcv+"/code", "--in", "1h", "--expires-at", at.Format(time.RFC3339))
		require.True(t, at.Equal(*task.ExpiresAt), "got %s", task.ExpiresAt)
		out := w.ok(t, "tasks", "get", task.ID.String())
		require.Regexp(t, `Expires:\s+.*no attempt starts after it`, out)

		// Refused by the server, by its field: not after the due time.
		r := w.run(t, "", []string{"tasks", "create", "--url", rcv + "/code", "--in", "1h", "--expires-in", "30m"})
		require.Equal(t, exitRefused, r.code, r.stderr)
		require.Contains(t, r.stderr, "expires_in")
	})

	t.Run("expiry usage errors", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"tasks", "create", "--url", rcv, "--expires-at", "soon"},
			{"tasks", "create", "--url", rcv, "--expires-at", "2030-01-01T00:00:00Z", "--expires-in", "1h"},
			{"tasks", "create", "--url", rcv, "--expires-in", "-1m"},
			{"tasks", "create", "--url", rcv, "--expires-in", "0s"},
			{"tasks", "list", "--status", "expird"},
		} {
			r := w.run(t, "", args)
			require.Equal(t, exitUsage, r.code, "hookwheel %s: %s", strings.Join(args, " "), r.stderr)
		}
		r := w.run(t, "", []string{"tasks", "list", "--status", "expired"})
		require.Equal(t, exitOK, r.code, r.stderr)
	})
}
