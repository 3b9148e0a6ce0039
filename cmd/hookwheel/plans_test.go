package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	hookwheel "github.com/hookwheel/hookwheel/sdk/go"
)

// TestClientPlans runs the plans commands against a live node with the
// admin token: a plan put, replaced, read, listed and deleted; a plan in
// use refused deletion with the conflict's exit status.
func TestClientPlans(t *testing.T) {
	t.Parallel()
	w := startCLIWorld(t)
	admin := "HOOKWHEEL_ADMIN_TOKEN=admin-token"
	run := func(args ...string) cliRun {
		t.Helper()
		return w.run(t, "", args, admin)
	}
	ok := func(args ...string) string {
		t.Helper()
		r := run(args...)
		require.Equal(t, 0, r.code, "hookwheel %v: %s", args, r.stderr)
		return r.stdout
	}

	r := w.run(t, "", []string{"plans", "list"})
	require.Equal(t, exitUsage, r.code, "no admin token: %s", r.stderr)
	require.Contains(t, r.stderr, "HOOKWHEEL_ADMIN_TOKEN")
	require.Equal(t, exitAuth, w.run(t, "", []string{"plans", "list"}, "HOOKWHEEL_ADMIN_TOKEN=wrong").code)

	require.Contains(t, ok("plans", "list"), "No plans")
	out := ok("plans", "put", "free", "--tasks-per-day", "1000", "--max-pending-tasks", "50", "--api-rate", "0")
	require.Contains(t, out, "Saved:")
	require.Regexp(t, `Plan:\s+free`, out)
	require.Regexp(t, `Tasks per day:\s+1000`, out)
	require.Regexp(t, `API rate:\s+unlimited`, out)
	require.Regexp(t, `Max schedules:\s+node default`, out)
	// A put replaces the limits whole.
	out = ok("plans", "put", "free", "--deliveries-per-day", "7")
	require.Regexp(t, `Tasks per day:\s+node default`, out)
	var plan hookwheel.Plan
	require.NoError(t, json.Unmarshal([]byte(ok("plans", "get", "free", "--json")), &plan))
	require.Equal(t, 7, *plan.Limits.DeliveriesPerDay)
	require.Nil(t, plan.Limits.TasksPerDay)
	ok("plans", "put", "pro", "--tasks-per-day", "100000")
	out = ok("plans", "list")
	require.Regexp(t, `(?m)^NAME\s+TASKS/DAY\s+DELIVERIES/DAY`, out)
	require.Regexp(t, `(?m)^free\s+node default\s+7\s`, out)
	require.Regexp(t, `(?m)^pro\s+100000\s`, out)
	var all []hookwheel.Plan
	require.NoError(t, json.Unmarshal([]byte(ok("plans", "list", "--json")), &all))
	require.Len(t, all, 2)

	r = run("plans", "put", "Not A Name")
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Equal(t, exitNotFound, run("plans", "get", "gold").code)

	// A tenant on the plan holds it.
	req, err := http.NewRequest(http.MethodPatch, w.base+"/v1/admin/tenants/"+w.tenantID, strings.NewReader(`{"plan": "free"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer admin-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r = run("plans", "delete", "free")
	require.Equal(t, exitConflict, r.code, r.stderr)
	require.Contains(t, r.stderr, "in use")
	require.Contains(t, ok("plans", "delete", "pro"), "Deleted plan pro.")
	require.Equal(t, exitNotFound, run("plans", "delete", "pro").code)
}
