package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestTargetPauseHoldsTasks, on a real node: a tenant's tasks to a target
// it paused are neither sent nor counted as attempts, while its tasks to
// another target go out on time; on resume every one of them is delivered,
// at its first attempt, and no more at once than the tenant's send slots at
// the target (HOOKWHEEL_SENDERS_PER_TENANT=8: 2).
func TestTargetPauseHoldsTasks(t *testing.T) {
	t.Parallel()
	const count = 30
	dbURL := storetest.DatabaseURL(t)
	node := startServe(t, "node", append(serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t)),
		"HOOKWHEEL_SENDERS_PER_TENANT=8"))
	apiKey := createTenantVia(t, node.base, chaosAdminToken, "pausing")
	client := clientFor(t, node.base, apiKey)
	held, free := newReceiver(t), newReceiver(t)
	var inFlight, most atomic.Int64
	held.setRespond(func(delivery, int) (int, http.Header) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		// A target that takes a moment to answer: what paces a backlog is
		// its answers.
		time.Sleep(20 * time.Millisecond)
		return http.StatusOK, nil
	})

	post := func(path string, body any) (int, []byte) {
		t.Helper()
		resp, b := rawRequest(t, http.MethodPost, node.base+path, apiKey, mustJSON(t, body), nil)
		return resp.StatusCode, b
	}
	status, body := post("/v1/targets/pause", map[string]string{"target": "ftp://" + held.Listener.Addr().String()})
	require.Equal(t, http.StatusUnprocessableEntity, status, string(body))
	status, body = post("/v1/targets/pause", map[string]string{"target": held.URL + "/hooks"})
	require.Equal(t, http.StatusUnprocessableEntity, status, "a path is refused: %s", body)
	status, body = post("/v1/targets/resume", map[string]string{"target": held.URL})
	require.Equal(t, http.StatusNotFound, status, string(body))

	status, body = post("/v1/targets/pause", map[string]string{"target": held.URL + "/", "reason": "migration"})
	require.Equal(t, http.StatusCreated, status, string(body))
	var pause openapi.TargetPause
	require.NoError(t, json.Unmarshal(body, &pause))
	require.Equal(t, held.URL, pause.Target, "the target is keyed as the dispatcher keys it")
	require.Equal(t, openapi.TargetPausePausedByTenant, pause.PausedBy)
	status, _ = post("/v1/targets/pause", map[string]string{"target": held.URL})
	require.Equal(t, http.StatusOK, status, "paused already")
	list, err := client.ListPausedTargetsWithResponse(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list.StatusCode(), string(list.Body))
	require.Len(t, list.JSON200.Data, 1)
	require.Equal(t, "migration", list.JSON200.Data[0].Reason)

	due := time.Now().Add(2 * time.Second)
	batch := openapi.BatchRequest{}
	for i := range count {
		batch.Tasks = append(batch.Tasks, openapi.BatchTaskRequest{URL: held.URL + "/held", RunAt: &due},
			// Some due with the held ones, some after the sweep passed over them.
			openapi.BatchTaskRequest{URL: free.URL + "/free", RunAt: ptr(due.Add(time.Duration(i%2) * 2500 * time.Millisecond))})
	}
	created, err := client.CreateTasksBatchWithResponse(context.Background(), batch)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, created.StatusCode(), string(created.Body))
	for _, res := range created.JSON200.Data {
		require.NotNil(t, res.Task, "%+v", res.Error)
	}
	free.waitFor(t, 20*time.Second, "the other target's tasks", func(ds []delivery) bool { return len(ds) == count })
	require.Empty(t, held.snapshot(), "a paused target's task was sent")
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var waiting, attempts int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE status = 'scheduled' AND claim_token IS NULL), coalesce(sum(attempts), 0)
		FROM tasks WHERE url LIKE $1`, held.URL+"/%").Scan(&waiting, &attempts))
	require.Equal(t, count, waiting, "the paused target's tasks wait")
	require.Zero(t, attempts, "the paused target's tasks counted no attempt")

	resumed := time.Now()
	status, body = post("/v1/targets/resume", map[string]string{"target": held.URL})
	require.Equal(t, http.StatusOK, status, string(body))
	ds := held.waitFor(t, 20*time.Second, "the held tasks after the resume", func(ds []delivery) bool { return len(ds) == count })
	t.Logf("%d held tasks delivered within %s of the resume, at most %d at once", count,
		time.Since(resumed).Round(time.Millisecond), most.Load())
	require.Len(t, distinctIDs(ds), count)
	for _, d := range ds {
		require.Equal(t, "1", d.header.Get("Hookwheel-Attempt"), "the pause cost no attempt")
	}
	require.LessOrEqual(t, most.Load(), int64(2), "the backlog goes out through the target's send slots")
	list, err = client.ListPausedTargetsWithResponse(context.Background())
	require.NoError(t, err)
	require.Empty(t, list.JSON200.Data)
}

// TestTargetAutoPause, on a real node with HOOKWHEEL_TARGET_DISABLE_AFTER=2s:
// a target whose every attempt fails for 2 seconds is paused by hookwheel,
// and the tenant's operations URL gets target.paused, signed with the
// tenant's signing secret; once the target answers again and is resumed,
// its next delivery brings target.recovered.
func TestTargetAutoPause(t *testing.T) {
	t.Parallel()
	dbURL := storetest.DatabaseURL(t)
	node := startServe(t, "node", append(serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t)),
		"HOOKWHEEL_TARGET_DISABLE_AFTER=2s"))
	status, body, err := apiCall(context.Background(), http.MethodPost, node.base+"/v1/admin/tenants", chaosAdminToken,
		map[string]string{"name": "failing"}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status, string(body))
	var tenant openapi.TenantCreated
	require.NoError(t, json.Unmarshal(body, &tenant))
	client := clientFor(t, node.base, tenant.APIKey)
	ops, down := newReceiver(t), newReceiver(t)
	var healthy atomic.Bool
	down.setRespond(func(delivery, int) (int, http.Header) {
		if healthy.Load() {
			return http.StatusOK, nil
		}
		return http.StatusInternalServerError, nil
	})

	// The tenant sets its operations URL itself.
	refused, err := client.UpdateSettingsWithResponse(context.Background(),
		openapi.TenantSettingsUpdate{OperationsURL: ptr("ftp://ops.example")})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, refused.StatusCode(), string(refused.Body))
	updated, err := client.UpdateSettingsWithResponse(context.Background(),
		openapi.TenantSettingsUpdate{OperationsURL: ptr(ops.URL + "/ops")})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, updated.StatusCode(), string(updated.Body))
	require.Equal(t, ops.URL+"/ops", *updated.JSON200.OperationsURL)
	settings, err := client.GetSettingsWithResponse(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, settings.StatusCode(), string(settings.Body))
	require.Equal(t, ops.URL+"/ops", *settings.JSON200.OperationsURL)

	// Five tasks a second apart, one attempt each: failures spanning four
	// seconds, fewer than would keep the breaker open past them.
	now := time.Now()
	batch := openapi.BatchRequest{}
	for i := range 5 {
		batch.Tasks = append(batch.Tasks, openapi.BatchTaskRequest{URL: down.URL + "/hook",
			RunAt: ptr(now.Add(time.Duration(i+1) * time.Second)), Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
	}
	created, err := client.CreateTasksBatchWithResponse(context.Background(), batch)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, created.StatusCode(), string(created.Body))

	ds := ops.waitFor(t, 30*time.Second, "target.paused", func(ds []delivery) bool { return len(ds) >= 1 })
	wh, err := standardwebhooks.NewWebhook(tenant.SigningSecret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(ds[0].body, ds[0].header), "signed as the tenant's webhooks are")
	require.Equal(t, "/ops", ds[0].path)
	var event struct {
		Type      string     `json:"type"`
		Target    string     `json:"target"`
		Since     *time.Time `json:"since"`
		LastError *string    `json:"last_error"`
	}
	require.NoError(t, json.Unmarshal(ds[0].body, &event))
	require.Equal(t, "target.paused", event.Type)
	require.Equal(t, down.URL, event.Target)
	require.NotNil(t, event.Since)
	require.Equal(t, "receiver answered 500 Internal Server Error", *event.LastError)
	list, err := client.ListPausedTargetsWithResponse(context.Background())
	require.NoError(t, err)
	require.Len(t, list.JSON200.Data, 1)
	require.Equal(t, openapi.TargetPausePausedByHookwheel, list.JSON200.Data[0].PausedBy)
	require.True(t, event.Since.Equal(*list.JSON200.Data[0].Since))

	healthy.Store(true)
	resumed, err := client.ResumeTargetWithResponse(context.Background(), openapi.TargetResumeRequest{Target: down.URL})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resumed.StatusCode(), string(resumed.Body))
	task, err := client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{},
		openapi.TaskRequest{URL: down.URL + "/hook"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, task.StatusCode(), string(task.Body))
	ds = ops.waitFor(t, 45*time.Second, "target.recovered", func(ds []delivery) bool { return len(ds) >= 2 })
	require.NoError(t, wh.Verify(ds[1].body, ds[1].header))
	require.NoError(t, json.Unmarshal(ds[1].body, &event))
	require.Equal(t, "target.recovered", event.Type)
	require.Equal(t, down.URL, event.Target)
}
