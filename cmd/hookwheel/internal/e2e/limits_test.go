package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store/storetest"
)

// setLimits replaces a tenant's limits through the node's admin API.
func setLimits(t *testing.T, n *node, tn *tenant, limits string) {
	t.Helper()
	resp, body := rawRequest(t, http.MethodPatch, n.base+"/v1/admin/tenants/"+tn.id.String(), "admin-token",
		[]byte(`{"limits":`+limits+`}`), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
}

// scheduleAll creates the tasks in batch calls of up to 1,000, one round
// trip each, so that a loaded machine creates them in moments, and returns
// their ids in request order.
func scheduleAll(t *testing.T, tn *tenant, reqs []openapi.TaskRequest) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, 0, len(reqs))
	for chunk := range slices.Chunk(reqs, 1000) {
		batch := openapi.BatchRequest{Tasks: make([]openapi.BatchTaskRequest, len(chunk))}
		for i, r := range chunk {
			batch.Tasks[i] = openapi.BatchTaskRequest{URL: r.URL, Method: r.Method, Headers: r.Headers, Body: r.Body,
				RunAt: r.RunAt, Delay: r.Delay, Timeout: r.Timeout, Retry: r.Retry}
		}
		resp, err := tn.client.CreateTasksBatchWithResponse(context.Background(), batch)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
		for i, res := range resp.JSON200.Data {
			require.NotNil(t, res.Task, "task %d: %+v", len(ids)+i, res.Error)
			ids = append(ids, res.Task.ID)
		}
	}
	return ids
}

// busiestSecond is the most attempts any closed one-second window of their
// send instants (attempts.started_at) holds. The limiter decides when a
// webhook leaves, so that is what is counted; arrivals at a receiver add
// whatever jitter the network and a busy machine put on each request, which
// no sender controls.
func busiestSecond(t *testing.T, dbURL string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT started_at FROM attempts ORDER BY started_at`)
	require.NoError(t, err)
	at, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(t, err)
	most, j := 0, 0
	for i := range at {
		for j < len(at) && !at[j].After(at[i].Add(time.Second)) {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// TestDispatchRateLimit: a target host limited to 50/s receives no more than
// that while 500 tasks fall due at once, measured at the receiver (GCRA with
// a burst of one: no one-second window of sends holds more than 51), and every one
// of them arrives, at its first attempt: a deferral is not an attempt.
func TestDispatchRateLimit(t *testing.T) {
	t.Parallel()
	const (
		count = 500
		rate  = 50
	)
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)
	// The override of the receiver's host, not a tenant-wide rate: the
	// per-host keying is on the path too.
	setLimits(t, n, acme, `{"targets":{"127.0.0.1":{"dispatch_rate":`+strconv.Itoa(rate)+`}}}`)

	runAt := time.Now().Add(4 * time.Second).UTC()
	reqs := make([]openapi.TaskRequest, count)
	for i := range reqs {
		reqs[i] = openapi.TaskRequest{URL: recv.URL + "/limited", RunAt: &runAt}
	}
	ids := scheduleAll(t, acme, reqs)
	require.True(t, time.Now().Before(runAt), "creating the tasks took too long for them to fall due at once")

	// 499 intervals of 20 ms: about 10 s.
	ds := recv.waitFor(t, 90*time.Second, "every task delivered", func(ds []delivery) bool {
		return len(distinctIDs(ds)) == count
	})
	busiest := busiestSecond(t, e.databaseURL)
	first, last := ds[0].arrived, ds[len(ds)-1].arrived
	t.Logf("%d deliveries over %s; busiest second: %d (limit %d/s)", len(ds), last.Sub(first).Round(time.Millisecond), busiest, rate)
	require.LessOrEqual(t, busiest, rate+1, "no one-second window may see more than the rate plus the burst of one")
	require.GreaterOrEqual(t, last.Sub(first), time.Duration(count-1)*time.Second/rate*98/100, "the rate is the bottleneck, not something else")
	require.False(t, first.Before(runAt), "never before run_at")

	require.Len(t, ds, count, "each task arrives once")
	for _, d := range ds {
		require.Equal(t, "1", d.header.Get("Hookwheel-Attempt"), "a deferral is not an attempt")
	}
	for _, id := range []uuid.UUID{ids[0], ids[count/2], ids[count-1]} {
		task := acme.waitStatus(t, id, openapi.TaskStatusDelivered, 10*time.Second)
		require.Equal(t, 1, task.Attempts)
	}
	require.Equal(t, float64(count), metric(t, n, "hookwheel_attempts_total", `outcome="success"`))
	require.Zero(t, metric(t, n, "hookwheel_attempts_total", `outcome="retry"`))
	deferred := metric(t, n, "hookwheel_deferrals_total", `reason="rate_limit"`)
	t.Logf("%v deferrals for the rate limit", deferred)
	require.GreaterOrEqual(t, deferred, float64(count-rate), "nearly every task waited for its slot")
	require.Zero(t, metric(t, n, "hookwheel_dispatch_limit_unchecked_total", ""))
}

// TestDispatchRateKeepsDueOrder: tasks falling due faster than their
// target's rate are sent at the rate, in the order they fell due.
func TestDispatchRateKeepsDueOrder(t *testing.T) {
	// Not parallel: the order the limiter keeps is the order in which
	// claims ask it, and with this package's heavy tests running beside it
	// (three-node chaos, 100 MB of bodies) a claim 200 ms later than its
	// neighbour could ask first. Alone, it runs before them.
	// Falling due twice as fast as the rate allows, so that a queue builds
	// up; spaced widely enough that they reach the limiter in due order
	// even on a busy machine (the order the limiter keeps is the order in
	// which tasks ask it), and that a send late by less than the limiter's
	// grace (half an interval, 200 ms here) keeps its slot.
	const (
		count   = 20
		spacing = 200 * time.Millisecond
	)
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)
	setLimits(t, n, acme, `{"dispatch_rate":2.5}`)

	// One webhook first, so that the dispatcher has read the tenant's
	// limits before the tasks under test fall due: the first claims would
	// otherwise wait for that read, each on its own claimer, and ask the
	// limiter in whatever order the reads end.
	warm := newReceiver(t)
	warmTask := acme.schedule(t, openapi.TaskRequest{URL: warm.URL + "/warm"})
	acme.waitStatus(t, warmTask.ID, openapi.TaskStatusDelivered, 10*time.Second)

	t0 := time.Now().Add(2 * time.Second).UTC()
	reqs := make([]openapi.TaskRequest, count)
	// Created in reverse, so that creation order says nothing.
	for i := range reqs {
		at := t0.Add(time.Duration(count-1-i) * spacing)
		reqs[i] = openapi.TaskRequest{URL: recv.URL + "/ordered", RunAt: &at}
	}
	scheduleAll(t, acme, reqs)

	ds := recv.waitFor(t, 30*time.Second, "every task delivered", func(ds []delivery) bool {
		return len(distinctIDs(ds)) == count
	})
	scheduled := make([]string, len(ds))
	for i, d := range ds {
		scheduled[i] = d.header.Get("Hookwheel-Scheduled-At")
	}
	sorted := slices.Clone(scheduled)
	slices.Sort(sorted) // RFC 3339 with nanoseconds, all UTC: text order is time order
	require.Equal(t, sorted, scheduled, "arrivals in due order")
	// Sends 400 ms apart: three in a second, four with the jitter between
	// the limiter's decision and the recorded start of a send.
	require.LessOrEqual(t, busiestSecond(t, e.databaseURL), 4)
}

// TestDispatchConcurrencyAcrossNodes: a tenant's concurrency limit for a host
// holds across dispatcher nodes (a Redis semaphore), and every task waiting
// for a slot is still delivered at its first attempt.
func TestDispatchConcurrencyAcrossNodes(t *testing.T) {
	t.Parallel()
	const (
		count = 24
		limit = 2
		slow  = 100 * time.Millisecond
	)
	e := newEnv(t)
	n1 := e.startNode()
	n2 := e.startNode()
	// Both nodes own partitions: the tasks are sent from both.
	for _, n := range []*node{n1, n2} {
		waitMetric(t, n, "hookwheel_owned_partitions", "", 15*time.Second, func(v float64) bool { return v >= 64 })
	}
	acme := e.createTenant(n1, "acme")
	setLimits(t, n1, acme, `{"dispatch_concurrency":`+strconv.Itoa(limit)+`}`)
	recv := newReceiver(t)
	var inflight, most atomic.Int64
	recv.setRespond(func(delivery, int) (int, http.Header) {
		now := inflight.Add(1)
		defer inflight.Add(-1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		<-time.After(slow) // a slow receiver, holding its slot
		return http.StatusOK, nil
	})

	runAt := time.Now().Add(2 * time.Second).UTC()
	reqs := make([]openapi.TaskRequest, count)
	for i := range reqs {
		reqs[i] = openapi.TaskRequest{URL: recv.URL + "/slow", RunAt: &runAt}
	}
	ids := scheduleAll(t, acme, reqs)
	for _, id := range ids {
		task := acme.waitStatus(t, id, openapi.TaskStatusDelivered, 30*time.Second)
		require.Equal(t, 1, task.Attempts)
	}
	require.LessOrEqual(t, most.Load(), int64(limit), "never more in flight than the limit, over both nodes")
	require.Equal(t, int64(limit), most.Load(), "and the limit is used")
	require.Len(t, recv.snapshot(), count)
	sent1 := metric(t, n1, "hookwheel_attempts_total", `outcome="success"`)
	sent2 := metric(t, n2, "hookwheel_attempts_total", `outcome="success"`)
	t.Logf("node 1 sent %v, node 2 sent %v", sent1, sent2)
	require.Equal(t, float64(count), sent1+sent2)
	require.Positive(t, sent1)
	require.Positive(t, sent2)
}

// TestDispatchConcurrencyCrowdedHost: more tasks fall due for a slow,
// concurrency-limited host than may wait for it on a node; the surplus goes
// back to the queue for a while instead of holding the node's claims, so
// another tenant's webhooks due at the same instant still leave on time, and
// every task of the slow host still arrives, each at its first attempt.
func TestDispatchConcurrencyCrowdedHost(t *testing.T) {
	t.Parallel()
	const (
		count = 60
		slow  = 40 * time.Millisecond
	)
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	other := e.createTenant(n, "other")
	setLimits(t, n, acme, `{"dispatch_concurrency":1}`)
	slowRecv := newReceiver(t)
	var inflight, most atomic.Int64
	slowRecv.setRespond(func(delivery, int) (int, http.Header) {
		now := inflight.Add(1)
		defer inflight.Add(-1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		<-time.After(slow)
		return http.StatusOK, nil
	})
	fastRecv := newReceiver(t)

	runAt := time.Now().Add(2 * time.Second).UTC()
	reqs := make([]openapi.TaskRequest, count)
	for i := range reqs {
		reqs[i] = openapi.TaskRequest{URL: slowRecv.URL + "/slow", RunAt: &runAt}
	}
	ids := scheduleAll(t, acme, reqs)
	fast := make([]openapi.TaskRequest, 20)
	for i := range fast {
		fast[i] = openapi.TaskRequest{URL: fastRecv.URL + "/fast", RunAt: &runAt}
	}
	scheduleAll(t, other, fast)
	stored := time.Now()

	ds := fastRecv.waitFor(t, 10*time.Second, "the other tenant's webhooks", func(ds []delivery) bool { return len(ds) == len(fast) })
	require.Less(t, worstLateness(t, ds, stored), time.Second, "another tenant is not held up by a crowded host")
	for _, id := range ids {
		task := acme.waitStatus(t, id, openapi.TaskStatusDelivered, 60*time.Second)
		require.Equal(t, 1, task.Attempts)
	}
	require.Equal(t, int64(1), most.Load())
	require.Len(t, slowRecv.snapshot(), count)
	require.Positive(t, metric(t, n, "hookwheel_deferrals_total", `reason="concurrency"`), "the surplus went back to the queue")
}

// TestAPILimits: a tenant over its API rate gets 429 with Retry-After and the
// RateLimit-* headers; over its pending-task quota, 429 with Retry-After;
// the tenant sees both limits and its pending count.
func TestAPILimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	setLimits(t, n, acme, `{"api_rate":0.5,"api_burst":2,"max_pending_tasks":1}`)

	for i := range 2 {
		resp, body := rawRequest(t, http.MethodGet, n.base+"/v1/limits", acme.apiKey, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, "2", resp.Header.Get("RateLimit-Limit"))
		require.Equal(t, strconv.Itoa(1-i), resp.Header.Get("RateLimit-Remaining"))
		require.NotEmpty(t, resp.Header.Get("RateLimit-Reset"))
		var view openapi.TenantLimitsView
		require.NoError(t, json.Unmarshal(body, &view))
		require.Zero(t, view.PendingTasks)
		require.Equal(t, 1, *view.Limits.MaxPendingTasks)
	}
	resp, body := rawRequest(t, http.MethodGet, n.base+"/v1/limits", acme.apiKey, nil, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
	require.Equal(t, "0", resp.Header.Get("RateLimit-Remaining"))
	var p openapi.Problem
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, http.StatusTooManyRequests, p.Status)

	// The quota, with the API rate lifted.
	setLimits(t, n, acme, `{"max_pending_tasks":1}`)
	task := []byte(`{"url":"http://127.0.0.1:9/never","delay":"1h"}`)
	resp, body = rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey, task, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	require.Empty(t, resp.Header.Get("RateLimit-Limit"), "no API rate, no RateLimit headers")
	resp, body = rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey, task, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	view, err := acme.client.GetLimitsWithResponse(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, view.StatusCode(), string(view.Body))
	require.Equal(t, 1, view.JSON200.PendingTasks)
}

// TestNodeDefaultLimits: a tenant created without limits, on a node whose
// defaults are small, is refused past them: the fourth pending task, the
// second schedule, and API calls past the default rate. Before node
// defaults, a new tenant was unlimited and every one of these passed.
func TestNodeDefaultLimits(t *testing.T) {
	t.Parallel()
	dbURL := storetest.DatabaseURL(t)
	node := startServe(t, "node", append(serveEnv(dbURL, storetest.RedisURL(), storetest.RedisPrefix(t)),
		"HOOKWHEEL_DEFAULT_MAX_PENDING_TASKS=3",
		"HOOKWHEEL_DEFAULT_MAX_SCHEDULES=1",
		"HOOKWHEEL_DEFAULT_API_RATE=1",
		"HOOKWHEEL_DEFAULT_API_BURST=10"))
	ctx := context.Background()
	call := func(apiKey, method, path string, body any) (int, []byte) {
		t.Helper()
		status, out, err := apiCall(ctx, method, node.base+path, apiKey, body, nil)
		require.NoError(t, err)
		return status, out
	}
	problemType := func(body []byte) string {
		var p struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal(body, &p), string(body))
		return p.Type
	}

	// The operator sees the defaults as the new tenant's effective limits.
	status, out := call(chaosAdminToken, http.MethodPost, "/v1/admin/tenants", map[string]string{"name": "fresh"})
	require.Equal(t, http.StatusCreated, status, string(out))
	var created struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	require.NoError(t, json.Unmarshal(out, &created))
	status, out = call(chaosAdminToken, http.MethodGet, "/v1/admin/tenants/"+created.ID, nil)
	require.Equal(t, http.StatusOK, status, string(out))
	var shown struct {
		Limits          map[string]any `json:"limits"`
		EffectiveLimits map[string]any `json:"effective_limits"`
	}
	require.NoError(t, json.Unmarshal(out, &shown))
	require.Empty(t, shown.Limits, "no limits of its own")
	require.EqualValues(t, 3, shown.EffectiveLimits["max_pending_tasks"])
	require.EqualValues(t, 1, shown.EffectiveLimits["max_schedules"])
	require.EqualValues(t, 1, shown.EffectiveLimits["api_rate"])

	// Pending tasks: three pass, the fourth gets the quota's 429.
	task := map[string]any{"url": "https://example.com/later", "delay": "1h"}
	for i := range 3 {
		status, out = call(created.APIKey, http.MethodPost, "/v1/tasks", task)
		require.Equal(t, http.StatusCreated, status, "task %d: %s", i+1, out)
	}
	status, out = call(created.APIKey, http.MethodPost, "/v1/tasks", task)
	require.Equal(t, http.StatusTooManyRequests, status, "the fourth pending task: %s", out)
	require.Contains(t, problemType(out), "quota-exceeded")

	// Schedules: one passes, the second is refused.
	schedule := map[string]any{"cron": "0 9 * * *", "url": "https://example.com/daily"}
	status, out = call(created.APIKey, http.MethodPost, "/v1/schedules", schedule)
	require.Equal(t, http.StatusCreated, status, string(out))
	status, out = call(created.APIKey, http.MethodPost, "/v1/schedules", schedule)
	require.Equal(t, http.StatusTooManyRequests, status, "the second schedule: %s", out)

	// API rate: 1/s in bursts of 10. Forty calls at once cannot all pass
	// unless they take 30 s; the first refusal says why.
	refused := 0
	for range 40 {
		status, out = call(created.APIKey, http.MethodGet, "/v1/limits", nil)
		if status == http.StatusTooManyRequests {
			require.Contains(t, problemType(out), "rate-limited")
			refused++
			continue
		}
		require.Equal(t, http.StatusOK, status, string(out))
	}
	require.Positive(t, refused, "calls past the default API rate are refused")
}
