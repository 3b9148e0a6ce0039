package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// TestScheduleUpdate: a schedule that would fire once a year is patched to
// fire every 2 seconds with another URL, method, header and body. It then
// fires at the new times, each occurrence with the new request, and never
// with the old one.
func TestScheduleUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	rcv := newReceiver(t)

	created := scheduleCall(t, http.MethodPost, n.base+"/v1/schedules", acme.apiKey, map[string]any{
		"cron": "0 0 1 1 *", "url": rcv.URL + "/old", "body": "old", "headers": map[string]string{"X-Version": "1"},
	}, http.StatusCreated)

	patchStart := time.Now()
	resp, body := rawRequest(t, http.MethodPatch, n.base+"/v1/schedules/"+created.ID, acme.apiKey, mustJSON(t, map[string]any{
		"cron": "*/2 * * * * *", "url": rcv.URL + "/new", "method": "PUT", "body": "new",
		"headers": map[string]any{"X-Version": "2"},
	}), map[string]string{"Content-Type": "application/merge-patch+json"})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var patched openapi.Schedule
	require.NoError(t, json.Unmarshal(body, &patched))
	require.Equal(t, "*/2 * * * * *", patched.Cron)
	require.NotNil(t, patched.NextRunAt)
	require.True(t, patched.NextRunAt.After(patchStart.Add(-time.Second)), "next_run_at %s is recomputed from now", patched.NextRunAt)
	require.LessOrEqual(t, patched.NextRunAt.Sub(patchStart), 2*time.Second)

	ds := rcv.waitFor(t, 20*time.Second, "two occurrences of the patched schedule", func(ds []delivery) bool { return len(ds) >= 2 })
	scheduleCall(t, http.MethodDelete, n.base+"/v1/schedules/"+created.ID, acme.apiKey, nil, http.StatusOK)
	for _, d := range rcv.snapshot() {
		require.Equal(t, "/new", d.path, "no occurrence goes to the old URL")
	}
	for _, d := range ds[:2] {
		require.Equal(t, http.MethodPut, d.method)
		require.Equal(t, "new", string(d.body))
		require.Equal(t, "2", d.header.Get("X-Version"))
		require.Equal(t, created.ID, d.header.Get("Hookwheel-Schedule-Id"))
		at, err := time.Parse(time.RFC3339Nano, d.header.Get("Hookwheel-Scheduled-At"))
		require.NoError(t, err)
		require.Zero(t, at.UnixNano()%int64(2*time.Second), "occurrence %s is a tick of */2", at)
		require.False(t, at.Before(patchStart.Truncate(time.Second)), "occurrence %s precedes the patch", at)
		require.False(t, d.arrived.Before(at), "occurrence %s arrived early", at)
	}
}
