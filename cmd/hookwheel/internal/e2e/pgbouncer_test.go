package e2e_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// TestPgBouncer runs hookwheel behind a PgBouncer in transaction mode (1.18:
// no named prepared statements across server connections) with few server
// connections: an API-only node and dispatcher-only nodes whose DATABASE_URL
// goes through the pooler and whose direct URL carries LISTEN and
// migrations. Every kind of call and delivery works; a task stored through
// the API node inside the dispatcher's loaded window fires on time, which
// only NOTIFY heard on the direct connection can bring about (the sweep is
// off); and two dispatchers share the partitions through the pooler.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	pooled := storetest.PrivatePgBouncer(t, e.databaseURL)
	viaPooler := func(c *app.Config) {
		c.DatabaseURL, c.DatabaseDirectURL = pooled, e.databaseURL
	}
	apiOnly := func(c *app.Config) { c.DisableDispatcher = true }
	dispatcherOnly := func(c *app.Config) {
		c.DisableAPI = true
		c.Dispatcher.SweepInterval = time.Hour
		c.Dispatcher.RetentionInterval = 100 * time.Millisecond
	}
	rcv := newReceiver(t)
	rcv.setRespond(func(d delivery, nth int) (int, http.Header) {
		if d.path == "/gone" && nth == 1 {
			return http.StatusGone, nil
		}
		return http.StatusOK, nil
	})

	api := e.startNode(viaPooler, apiOnly)
	d1 := e.startNode(viaPooler, dispatcherOnly)
	acme := e.createTenant(api, "acme")
	wantDelivered := func(id openapi.TaskID) {
		t.Helper()
		acme.waitStatus(t, id, openapi.TaskStatusDelivered, 10*time.Second)
	}

	// LISTEN through the direct URL: once d1 holds every partition and has
	// loaded its window, a task stored through the API node and due inside
	// that window reaches d1's wheel only by NOTIFY.
	waitMetric(t, d1, "hookwheel_owned_partitions", "", 10*time.Second, func(v float64) bool { return v == model.Partitions })
	passes := metric(t, d1, "hookwheel_loader_pass_seconds_count", "")
	waitMetric(t, d1, "hookwheel_loader_pass_seconds_count", "", 10*time.Second, func(v float64) bool { return v >= passes+2 })
	loaded := metric(t, d1, "hookwheel_loader_tasks_total", "")
	soon := acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/soon", Delay: ptr("1s")})
	stored := time.Now()
	ds := rcv.waitFor(t, 5*time.Second, "the task due in 1s", func(ds []delivery) bool { return len(ds) == 1 })
	require.Equal(t, soon.ID.String(), ds[0].webhookID())
	require.Less(t, worstLateness(t, ds, stored), time.Second, "fired on time, not by a later rescan")
	require.Equal(t, loaded, metric(t, d1, "hookwheel_loader_tasks_total", ""), "announced, not loaded")
	wantDelivered(soon.ID)

	// One by one and in batch.
	created := []openapi.TaskID{soon.ID}
	for range 5 {
		created = append(created, acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/one"}).ID)
	}
	items := make([]openapi.BatchTaskRequest, 20)
	for i := range items {
		items[i] = openapi.BatchTaskRequest{URL: rcv.URL + "/batch", Delay: ptr(strconv.Itoa(i*50) + "ms")}
	}
	batch, err := acme.client.CreateTasksBatchWithResponse(ctx, openapi.BatchRequest{Tasks: items})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, batch.StatusCode(), string(batch.Body))
	for _, r := range batch.JSON200.Data {
		require.Nil(t, r.Error)
		created = append(created, r.Task.ID)
	}
	for _, id := range created {
		wantDelivered(id)
	}

	// A schedule fires, through the materializer's statements.
	sched, err := acme.client.CreateScheduleWithResponse(ctx, openapi.ScheduleRequest{URL: rcv.URL + "/tick", Cron: "@every 1s"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, sched.StatusCode(), string(sched.Body))
	rcv.waitFor(t, 10*time.Second, "two occurrences", func(ds []delivery) bool {
		n := 0
		for _, d := range ds {
			if d.header.Get("Hookwheel-Schedule-Id") == sched.JSON201.ID.String() {
				n++
			}
		}
		return n >= 2
	})
	deleted, err := acme.client.DeleteScheduleWithResponse(ctx, sched.JSON201.ID)
	require.NoError(t, err)
	require.Less(t, deleted.StatusCode(), 300, string(deleted.Body))

	// Cancel, and replay a dead task.
	later := time.Now().Add(time.Hour)
	waiting := acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/later", RunAt: &later})
	canceled, err := acme.client.CancelTaskWithResponse(ctx, waiting.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, canceled.StatusCode(), string(canceled.Body))
	require.Equal(t, openapi.TaskStatusCanceled, canceled.JSON200.Status)
	gone := acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/gone"})
	acme.waitStatus(t, gone.ID, openapi.TaskStatusDead, 10*time.Second)
	replayed, err := acme.client.ReplayTaskWithResponse(ctx, gone.ID, openapi.ReplayRequest{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, replayed.StatusCode(), string(replayed.Body))
	wantDelivered(gone.ID)
	require.Equal(t, 2, acme.task(t, gone.ID).Attempts)

	// Listing page by page sees every task once.
	seen := map[openapi.TaskID]bool{}
	var cursor *string
	for {
		page, err := acme.client.ListTasksWithResponse(ctx, &openapi.ListTasksParams{Limit: ptr(7), Cursor: cursor})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, page.StatusCode(), string(page.Body))
		for _, task := range page.JSON200.Data {
			require.False(t, seen[task.ID], "task %s listed twice", task.ID)
			seen[task.ID] = true
		}
		if cursor = page.JSON200.NextCursor; cursor == nil {
			break
		}
	}
	for _, id := range append(created, waiting.ID, gone.ID) {
		require.True(t, seen[id], "task %s listed", id)
	}

	// API keys: a read-only key reads and may not write; a revoked key is
	// refused.
	key, err := acme.client.CreateKeyWithResponse(ctx, openapi.APIKeyRequest{Name: ptr("reader"), Scopes: []openapi.Scope{openapi.ScopeTasksRead}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, key.StatusCode(), string(key.Body))
	reader := clientFor(t, api.base, key.JSON201.APIKey)
	got, err := reader.GetTaskWithResponse(ctx, soon.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode(), string(got.Body))
	refused, err := reader.CreateTaskWithResponse(ctx, &openapi.CreateTaskParams{}, openapi.TaskRequest{URL: rcv.URL + "/no"})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, refused.StatusCode(), string(refused.Body))
	revoked, err := acme.client.RevokeKeyWithResponse(ctx, key.JSON201.ID)
	require.NoError(t, err)
	require.Less(t, revoked.StatusCode(), 300, string(revoked.Body))
	got, err = reader.GetTaskWithResponse(ctx, soon.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, got.StatusCode(), "revoked through the node that serves the call")

	// Retention: the purger deletes through the pooler.
	admin := clientFor(t, api.base, "admin-token")
	patched, err := admin.UpdateTenantWithResponse(ctx, acme.id, openapi.TenantUpdateRequest{Retention: ptr("1s")})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patched.StatusCode(), string(patched.Body))
	acme.waitGone(t, soon.ID, 10*time.Second)

	// A second dispatcher: the two share the partitions, and each task is
	// sent once.
	d2 := e.startNode(viaPooler, dispatcherOnly)
	waitMetric(t, d2, "hookwheel_owned_partitions", "", 10*time.Second, func(v float64) bool { return v > 0 })
	waitMetric(t, d1, "hookwheel_owned_partitions", "", 10*time.Second, func(v float64) bool { return v < model.Partitions })
	before := len(rcv.snapshot())
	var shared []openapi.TaskID
	for range 40 {
		shared = append(shared, acme.schedule(t, openapi.TaskRequest{URL: rcv.URL + "/shared"}).ID)
	}
	rcv.waitFor(t, 15*time.Second, "the shared tasks", func(ds []delivery) bool { return len(ds) >= before+len(shared) })
	for id, n := range distinctIDs(rcv.snapshot()[before:]) {
		require.Equal(t, 1, n, "task %s sent once", id)
	}
	require.Positive(t, metricSum(t, d2.base, "hookwheel_attempts_total"), "the second dispatcher sent its share")
}

// TestPgBouncerWithoutDirectURL: a node pointed at a transaction pooler with
// no direct URL refuses to start when it would dispatch (LISTEN) or migrate,
// saying which variable to set; an API-only node that does not migrate needs
// no session and serves through the pooler alone.
func TestPgBouncerWithoutDirectURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pooled := storetest.PrivatePgBouncer(t, e.databaseURL)
	for name, mutate := range map[string]func(*app.Config){
		"serve":            func(*app.Config) {},
		"dispatcher-only":  func(c *app.Config) { c.DisableAPI, c.SkipMigrate = true, true },
		"api-only migrate": func(c *app.Config) { c.DisableDispatcher = true },
	} {
		cfg := app.Config{DatabaseURL: pooled, RedisURL: storetest.RedisURL(), RedisKeyPrefix: e.redisPrefix, Addr: "127.0.0.1:0", Logger: testLogger()}
		mutate(&cfg)
		_, err := app.New(context.Background(), cfg)
		require.ErrorIs(t, err, app.ErrPoolerWithoutDirectURL, name)
		require.ErrorContains(t, err, "HOOKWHEEL_DATABASE_DIRECT_URL", name)
	}

	api := e.startNode(func(c *app.Config) {
		c.DatabaseURL, c.DisableDispatcher, c.SkipMigrate = pooled, true, true
	})
	acme := e.createTenant(api, "acme")
	task := acme.schedule(t, openapi.TaskRequest{URL: "https://example.com/hook", Delay: ptr("1h")})
	require.Equal(t, openapi.TaskStatusScheduled, acme.task(t, task.ID).Status)
}

// metricSum adds up every sample of one metric on the /metrics at base
// (0 when it has none).
func metricSum(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := contractClient(t).Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		require.NoError(t, err, line)
		sum += v
	}
	require.NoError(t, sc.Err())
	return sum
}
