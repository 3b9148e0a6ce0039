package e2e_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/openapi"
)

// waitGone polls a task until both it and its attempts answer 404, or fails the
// test at the deadline.
func (tn *tenant) waitGone(t *testing.T, id uuid.UUID, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		task, err := tn.client.GetTaskWithResponse(ctx, id)
		require.NoError(t, err)
		if task.StatusCode() == http.StatusNotFound {
			attempts, err := tn.client.ListTaskAttemptsWithResponse(ctx, id, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusNotFound, attempts.StatusCode(), "the task is gone, so are its attempts: %s", attempts.Body)
			return
		}
		require.Equal(t, http.StatusOK, task.StatusCode(), string(task.Body))
		if time.Now().After(deadline) {
			t.Fatalf("task %s is still there (%s) %s after it finished", id, task.JSON200.Status, within)
		}
		<-poll.C
	}
}

func (tn *tenant) attemptsOf(t *testing.T, id uuid.UUID) []openapi.Attempt {
	t.Helper()
	resp, err := tn.client.ListTaskAttemptsWithResponse(context.Background(), id, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	return resp.JSON200.Data
}

// TestRetention: with a tenant's retention set to two seconds through the
// admin API, its delivered, dead and canceled tasks and their attempts
// become 404 soon after they finished, and their idempotency keys are free
// again; its scheduled, retrying and dispatching tasks stay, however long;
// another tenant on the node default keeps its finished task; and a
// schedule firing every second goes on firing each occurrence exactly once
// while its past occurrences are purged.
func TestRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const (
		retention = 2 * time.Second
		// purgedWithin bounds how long after its retention a finished task
		// may still be seen: a purger interval, and a loaded machine.
		purgedWithin = retention + 5*time.Second
	)
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.Dispatcher.RetentionInterval = 100 * time.Millisecond })
	acme := e.createTenant(n, "acme")
	bystander := e.createTenant(n, "bystander")
	admin := clientFor(t, n.base, "admin-token")
	patched, err := admin.UpdateTenantWithResponse(ctx, acme.id, openapi.TenantUpdateRequest{Retention: ptr(retention.String())})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patched.StatusCode(), string(patched.Body))
	require.Equal(t, "2s", *patched.JSON200.Retention)

	rcv := newReceiver(t)
	// Registered after the receiver, so it runs before the receiver's Close
	// waits for the hanging request.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	rcv.setRespond(func(d delivery, _ int) (int, http.Header) {
		switch d.path {
		case "/gone":
			return http.StatusGone, nil
		case "/unavailable":
			return http.StatusServiceUnavailable, nil
		case "/hang":
			<-release
		}
		return http.StatusOK, nil
	})
	later := time.Now().Add(time.Hour)
	longBackoff := &openapi.RetryPolicy{MaxAttempts: ptr(5), MinBackoff: ptr("1h"), MaxBackoff: ptr("1h")}

	keyed, err := acme.client.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{IdempotencyKey: ptr("order-42")},
		openapi.TaskRequest{URL: rcv.URL + "/ok"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, keyed.StatusCode(), string(keyed.Body))
	finished := map[string]uuid.UUID{
		"delivered": acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/ok"}).ID,
		"keyed":     taskOf(t, keyed.JSON201).ID,
		"dead":      acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/gone"}).ID,
		"canceled":  acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/ok", RunAt: &later}).ID,
	}
	unfinishedSince := time.Now()
	unfinished := map[openapi.TaskStatus]uuid.UUID{
		openapi.TaskStatusScheduled:   acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/ok", RunAt: &later}).ID,
		openapi.TaskStatusRetrying:    acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/unavailable", Retry: longBackoff}).ID,
		openapi.TaskStatusDispatching: acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/hang", Timeout: ptr("5m")}).ID,
	}
	kept := bystander.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/ok"}).ID
	sched, err := acme.client.CreateScheduleWithResponse(ctx, openapi.ScheduleRequest{URL: rcv.URL + "/tick", Cron: "@every 1s"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, sched.StatusCode(), string(sched.Body))

	canceled, err := acme.client.CancelTaskWithResponse(ctx, finished["canceled"])
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, canceled.StatusCode(), string(canceled.Body))
	acme.waitStatus(t, finished["delivered"], openapi.TaskStatusDelivered, 10*time.Second)
	require.Len(t, acme.attemptsOf(t, finished["delivered"]), 1, "there are attempts to purge")
	acme.waitStatus(t, finished["keyed"], openapi.TaskStatusDelivered, 10*time.Second)
	acme.waitStatus(t, finished["dead"], openapi.TaskStatusDead, 10*time.Second)
	bystander.waitStatus(t, kept, openapi.TaskStatusDelivered, 10*time.Second)
	acme.waitStatus(t, unfinished[openapi.TaskStatusRetrying], openapi.TaskStatusRetrying, 10*time.Second)
	acme.waitStatus(t, unfinished[openapi.TaskStatusDispatching], openapi.TaskStatusDispatching, 10*time.Second)

	for what, id := range finished {
		t.Logf("waiting for the %s task to be purged", what)
		acme.waitGone(t, id, purgedWithin)
	}
	// The key held by the purged task is still taken, for the idempotency
	// window (24h by default): the same request answers the purged task and
	// creates nothing (TestPurgedKeyRemembered follows it to the window's
	// end).
	again, err := acme.client.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{IdempotencyKey: ptr("order-42")},
		openapi.TaskRequest{URL: rcv.URL + "/ok"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, again.StatusCode(), string(again.Body))
	require.Equal(t, finished["keyed"], taskOf(t, again.JSON200).ID)

	// The schedule: its first occurrence is purged, and three more fire
	// after that.
	ticks := func(ds []delivery) []delivery {
		return slices.DeleteFunc(ds, func(d delivery) bool { return d.path != "/tick" })
	}
	first := ticks(rcv.waitFor(t, 10*time.Second, "a first tick", func(ds []delivery) bool { return len(ticks(ds)) > 0 }))[0]
	firstID, err := uuid.Parse(first.webhookID())
	require.NoError(t, err)
	acme.waitGone(t, firstID, purgedWithin)
	firstPurged := time.Now()
	rcv.waitFor(t, 10*time.Second, "three ticks due after the first tick's task was purged", func(ds []delivery) bool {
		after := 0
		for _, d := range ticks(ds) {
			if scheduledAt(t, d).After(firstPurged) {
				after++
			}
		}
		return after >= 3
	})

	// Still there, long after retention would have purged them had they
	// finished.
	require.Greater(t, time.Since(unfinishedSince), 2*retention)
	for status, id := range unfinished {
		require.Equal(t, status, acme.task(t, id).Status)
	}
	require.Len(t, acme.attemptsOf(t, unfinished[openapi.TaskStatusRetrying]), 1)
	require.Equal(t, openapi.TaskStatusDelivered, bystander.task(t, kept).Status, "the node default is a week")
	require.Len(t, bystander.attemptsOf(t, kept), 1)

	// Each occurrence was delivered once, at the first attempt, none was
	// skipped, and none came back after its task was purged.
	var occurrences []time.Time
	for _, d := range ticks(rcv.snapshot()) {
		require.Equal(t, "1", d.header.Get("Hookwheel-Attempt"))
		occurrences = append(occurrences, scheduledAt(t, d))
	}
	slices.SortFunc(occurrences, time.Time.Compare)
	for i := 1; i < len(occurrences); i++ {
		require.Equal(t, time.Second, occurrences[i].Sub(occurrences[i-1]),
			"occurrences %s and %s: each once, every second", occurrences[i-1], occurrences[i])
	}
	require.Positive(t, metric(t, n, "hookwheel_retention_purged_total", `kind="tasks"`))
	require.Positive(t, metric(t, n, "hookwheel_retention_purged_total", `kind="attempts"`))
}

func scheduledAt(t *testing.T, d delivery) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, d.header.Get("Hookwheel-Scheduled-At"))
	require.NoError(t, err)
	return at
}

// TestPurgedKeyRemembered: tasks created with an idempotency key (alone, as
// a batch item, and as a publish to a topic), delivered, then purged by
// retention: inside HOOKWHEEL_IDEMPOTENCY_WINDOW a repeat of each answers
// the purged task or publish (200, replayed) and makes no task, so no second
// webhook; once the window has passed, the repeat creates a new task, which
// is delivered. Before, the repeat after the purge created a new task at
// once, and its receiver got the webhook twice.
func TestPurgedKeyRemembered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const (
		retention = time.Second
		window    = 8 * time.Second
	)
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) {
		c.Dispatcher.RetentionInterval = 100 * time.Millisecond
		c.Dispatcher.IdempotencyWindow = window
	})
	acme := e.createTenant(n, "acme")
	admin := clientFor(t, n.base, "admin-token")
	patched, err := admin.UpdateTenantWithResponse(ctx, acme.id, openapi.TenantUpdateRequest{Retention: ptr(retention.String())})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patched.StatusCode(), string(patched.Body))
	rcv := newReceiver(t)
	put, err := acme.client.PutTopicWithResponse(ctx, "orders", openapi.TopicRequest{Endpoints: []openapi.TopicEndpoint{
		{URL: rcv.URL + "/published"}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, put.StatusCode(), string(put.Body))

	createdAt := time.Now()
	single := func() *openapi.CreateTaskResponse {
		resp, err := acme.client.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{IdempotencyKey: ptr("single")},
			openapi.TaskRequest{URL: rcv.URL + "/single"})
		require.NoError(t, err)
		return resp
	}
	batch := func() *openapi.CreateTasksBatchResponse {
		resp, err := acme.client.CreateTasksBatchWithResponse(ctx, openapi.BatchRequest{Tasks: []openapi.BatchTaskRequest{
			{URL: rcv.URL + "/batch", IdempotencyKey: ptr("batch-item")}}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
		return resp
	}
	publish := func() *openapi.CreateTaskResponse {
		resp, err := acme.client.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{IdempotencyKey: ptr("published")},
			openapi.TaskRequest{Topic: "orders"})
		require.NoError(t, err)
		return resp
	}
	first := single()
	require.Equal(t, http.StatusCreated, first.StatusCode(), string(first.Body))
	singleID := taskOf(t, first.JSON201).ID
	firstBatch := batch()
	require.NotNil(t, firstBatch.JSON200.Data[0].Task, string(firstBatch.Body))
	batchID := firstBatch.JSON200.Data[0].Task.ID
	firstPublish := publish()
	require.Equal(t, http.StatusCreated, firstPublish.StatusCode(), string(firstPublish.Body))
	pub, err := firstPublish.JSON201.AsPublish()
	require.NoError(t, err)
	require.Len(t, pub.Tasks, 1)

	ids := []uuid.UUID{singleID, batchID, pub.Tasks[0].ID}
	for _, id := range ids {
		acme.waitStatus(t, id, openapi.TaskStatusDelivered, 10*time.Second)
	}
	for _, id := range ids {
		acme.waitGone(t, id, retention+5*time.Second)
	}
	require.Less(t, time.Since(createdAt), window, "the purge came within the window; a slower machine needs a longer one")

	// Inside the window: each repeat answers what it first made, and makes
	// nothing.
	again := single()
	require.Equal(t, http.StatusOK, again.StatusCode(), string(again.Body))
	require.Equal(t, "true", again.HTTPResponse.Header.Get("Idempotent-Replayed"))
	replayed := taskOf(t, again.JSON200)
	require.Equal(t, singleID, replayed.ID)
	require.Equal(t, openapi.TaskStatusDelivered, replayed.Status, "as it was when purged")
	againBatch := batch()
	require.NotNil(t, againBatch.JSON200.Data[0].Task, string(againBatch.Body))
	require.Equal(t, batchID, againBatch.JSON200.Data[0].Task.ID)
	require.True(t, *againBatch.JSON200.Data[0].Replayed)
	againPublish := publish()
	require.Equal(t, http.StatusOK, againPublish.StatusCode(), string(againPublish.Body))
	againPub, err := againPublish.JSON200.AsPublish()
	require.NoError(t, err)
	require.Equal(t, pub.ID, againPub.ID)
	list, err := acme.client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{})
	require.NoError(t, err)
	require.Empty(t, list.JSON200.Data, "no task made, so no webhook to come")
	require.Len(t, rcv.snapshot(), 3, "one webhook per key")

	// Past the window the purger forgets the key: the repeat creates a new
	// task, and its webhook goes out.
	deadline := createdAt.Add(window + 10*time.Second)
	var fresh *openapi.CreateTaskResponse
	for fresh = single(); fresh.StatusCode() == http.StatusOK; fresh = single() {
		require.True(t, time.Now().Before(deadline), "the key is still taken %s after its task's creation", time.Since(createdAt))
		time.Sleep(100 * time.Millisecond) // polling the API: the purger's pass gives no signal
	}
	require.Equal(t, http.StatusCreated, fresh.StatusCode(), string(fresh.Body))
	require.GreaterOrEqual(t, time.Since(createdAt), window, "remembered for the whole window")
	require.NotEqual(t, singleID, taskOf(t, fresh.JSON201).ID)
	rcv.waitFor(t, 10*time.Second, "the new task's webhook", func(ds []delivery) bool { return len(ds) == 4 })
	require.Positive(t, metric(t, n, "hookwheel_retention_purged_total", `kind="idempotency_keys"`))
}
