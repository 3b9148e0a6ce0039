package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// TestClientUsage: the tenant reads its usage as a table or JSON after a
// task is created; the operator reads every tenant's as CSV; bad days are
// usage errors.
func TestClientUsage(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	w.ok(t, "tasks", "create", "--url", "https://example.com/hook", "--in", "1h")
	today := time.Now().UTC().Format(time.DateOnly)

	out := w.ok(t, "usage", "--from", today, "--to", today)
	require.Regexp(t, `(?m)^DATE\s+TASKS CREATED\s+DELIVERIES`, out)
	require.Regexp(t, `(?m)^`+today+`\s+1\s+0\s+0\s+0\s+0\s+0$`, out)
	require.Regexp(t, `(?m)^total\s+1\s`, out)
	require.Contains(t, out, "Plan: none; tasks per day: unlimited; deliveries per day: unlimited")
	var u hookwheel.Usage
	require.NoError(t, json.Unmarshal([]byte(w.ok(t, "usage", "--json")), &u))
	require.EqualValues(t, 1, u.Totals.TasksCreated)

	require.Equal(t, exitUsage, w.run(t, "", []string{"usage", "--from", "yesterday"}).code)
	require.Equal(t, exitUsage, w.run(t, "", []string{"usage", "--all"}).code, "no admin token")
	r := w.run(t, "", []string{"usage", "--from", "2026-11-02", "--to", "2026-11-01"})
	require.Equal(t, exitRefused, r.code, "the API refuses it: %s", r.stderr)

	r = w.run(t, "", []string{"usage", "--all", "--from", today}, "HOOKWHEEL_ADMIN_TOKEN=admin-token")
	require.Zero(t, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	require.True(t, strings.HasPrefix(lines[0], "date,tenant_id,tenant_name,plan,"))
	require.Equal(t, today+","+w.tenantID+",cli,,1,0,0,0,0,0", lines[1])
	require.Equal(t, exitAuth, w.run(t, "", []string{"usage", "--all"}, "HOOKWHEEL_ADMIN_TOKEN=wrong").code)
}
