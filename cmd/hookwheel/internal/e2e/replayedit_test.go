package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
)

// TestBulkEditAndReplay: a receiver moved. The dead tasks that went to its
// old host, which fails, are moved in one call to the new one, with a new
// credential header and without the old one, and are delivered there: the
// same webhooks (webhook-id), their bodies as they were.
func TestBulkEditAndReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	tn := e.createTenant(n, "acme")
	other := e.createTenant(n, "globex")
	ctx := context.Background()

	oldHost, newHost := newReceiver(t), newReceiver(t)
	oldHost.setRespond(func(delivery, int) (int, http.Header) { return http.StatusServiceUnavailable, nil })

	// Fewer than the 5 failures in a row that open a target's breaker.
	const tasks = 4
	byID := map[string]openapi.Task{}
	for i := range tasks {
		task := tn.schedule(t, openapi.TaskRequest{URL: fmt.Sprintf("%s/hooks/%d", oldHost.URL, i),
			Headers: map[string]string{"X-Old-Token": "stale", "Content-Type": "text/plain"},
			Body:    fmt.Sprintf("order %d", i), Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
		byID[task.ID.String()] = task
	}
	// Another tenant's dead task to the same host is out of reach.
	othersTask := other.schedule(t, openapi.TaskRequest{URL: oldHost.URL + "/hooks/x", Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
	for _, task := range byID {
		tn.waitStatus(t, task.ID, openapi.TaskStatusDead, 30*time.Second)
	}
	other.waitStatus(t, othersTask.ID, openapi.TaskStatusDead, 30*time.Second)

	edit := &openapi.ReplayEdit{
		URLPrefix: &openapi.ReplayURLPrefix{From: oldHost.URL + "/hooks/", To: newHost.URL + "/v2/hooks/"},
		Headers: &openapi.ReplayHeaderEdit{Set: map[string]string{"Authorization": "Bearer new"},
			Remove: []string{"X-Old-Token"}},
	}
	dry, err := tn.client.ReplayTasksWithResponse(ctx, openapi.ReplayFilter{Edit: edit, DryRun: ptr(true)})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dry.StatusCode(), string(dry.Body))
	require.Equal(t, tasks, dry.JSON200.Matched)
	require.Zero(t, dry.JSON200.Replayed)
	require.Equal(t, tasks, *dry.JSON200.Changed)
	require.Len(t, dry.JSON200.Sample, tasks)
	for _, c := range dry.JSON200.Sample {
		require.Equal(t, strings.Replace(byID[c.ID.String()].URL, oldHost.URL+"/hooks/", newHost.URL+"/v2/hooks/", 1), c.URLAfter)
	}
	for _, task := range byID {
		require.Equal(t, openapi.TaskStatusDead, tn.task(t, task.ID).Status, "a dry run changes nothing")
	}

	done, err := tn.client.ReplayTasksWithResponse(ctx, openapi.ReplayFilter{Edit: edit})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, done.StatusCode(), string(done.Body))
	require.Equal(t, tasks, done.JSON200.Replayed)
	require.Equal(t, tasks, *done.JSON200.Changed)
	require.Zero(t, *done.JSON200.Refused)

	ds := newHost.waitFor(t, 30*time.Second, "every moved task delivered to the new host", func(ds []delivery) bool {
		return len(distinctIDs(ds)) == tasks
	})
	for _, d := range ds {
		task, ok := byID[d.webhookID()]
		require.True(t, ok, "webhook-id %q is one of the moved tasks'", d.webhookID())
		require.Equal(t, strings.Replace(task.URL, oldHost.URL, "", 1), strings.Replace(d.path, "/v2", "", 1), "the rest of the URL kept")
		require.True(t, strings.HasPrefix(d.path, "/v2/hooks/"), d.path)
		require.Equal(t, "Bearer new", d.header.Get("Authorization"), "the header set")
		require.Empty(t, d.header.Values("X-Old-Token"), "the header removed")
		require.Equal(t, "text/plain", d.header.Get("Content-Type"), "the other headers kept")
		require.Equal(t, task.Body, string(d.body), "the body as it was")
	}
	for _, task := range byID {
		got := tn.waitStatus(t, task.ID, openapi.TaskStatusDelivered, 30*time.Second)
		require.Equal(t, 2, got.Attempts, "the attempt count goes on")
	}
	require.Len(t, oldHost.snapshot(), tasks+1, "nothing more to the old host: one attempt of each task, and the other tenant's")
	require.Equal(t, openapi.TaskStatusDead, other.task(t, othersTask.ID).Status)
	require.Equal(t, oldHost.URL+"/hooks/x", other.task(t, othersTask.ID).URL)
}
