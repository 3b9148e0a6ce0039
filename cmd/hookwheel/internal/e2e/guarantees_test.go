package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/dispatcher"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/store"
)

// metric reads one sample from a node's /metrics; labels like `reason="breaker"`.
func metric(t testing.TB, n *node, name, labels string) float64 {
	t.Helper()
	return metricAt(t, n.base, name, labels)
}

// metricAt reads one sample from the /metrics of the node at base; 0 when
// it has none.
func metricAt(t testing.TB, base, name, labels string) float64 {
	t.Helper()
	resp, err := contractClient(t).Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	want := name
	if labels != "" {
		want += "{" + labels + "}"
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, want+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}

func waitMetric(t *testing.T, n *node, name, labels string, within time.Duration, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(within)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		v := metric(t, n, name, labels)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("metric %s{%s} = %v, still not as expected after %s", name, labels, v, within)
		}
		<-poll.C
	}
}

// TestBreakerDefersWithoutSpendingAttempts: a target that fails trips its
// breaker; while open, its tasks are deferred, not attempted; the probe after
// the cooldown succeeds, the breaker closes and every task is delivered,
// with each request the receiver saw recorded as exactly one attempt.
func TestBreakerDefersWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) {
		// The cooldown outlasts the checks made while the breaker is open,
		// however slow the machine: a probe before them would be a fourth
		// send.
		c.Dispatcher.Breaker = dispatcher.BreakerConfig{ConsecutiveFailures: 3, Cooldown: 4 * time.Second, ReleasePace: 5 * time.Millisecond}
		c.Dispatcher.MaxPerTarget = 1 // one send at a time: exactly three failures trip it
	})
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)
	var healthy atomic.Bool
	recv.setRespond(func(delivery, int) (int, http.Header) {
		if healthy.Load() {
			return http.StatusOK, nil
		}
		return http.StatusInternalServerError, nil
	})

	// All due at once, in one call: tasks created one by one on a loaded
	// machine could fall due after the cooldown and be its probe.
	const count = 20
	items := make([]openapi.BatchTaskRequest, count)
	for i := range items {
		items[i] = openapi.BatchTaskRequest{URL: recv.URL + "/sick", Retry: &openapi.RetryPolicy{
			MaxAttempts: ptr(10), MinBackoff: ptr("5s"), MaxBackoff: ptr("10s")}}
	}
	created, err := acme.client.CreateTasksBatchWithResponse(context.Background(), openapi.BatchRequest{Tasks: items})
	require.NoError(t, err)
	require.NotNil(t, created.JSON200, "batch: %s", created.Body)
	ids := make([]uuid.UUID, count)
	for i, r := range created.JSON200.Data {
		require.NotNil(t, r.Task, "item %d: %+v", i, r.Error)
		ids[i] = r.Task.ID
	}
	waitMetric(t, n, "hookwheel_breaker_state", `target="`+targetOf(recv.URL)+`"`, 5*time.Second, func(v float64) bool { return v == 2 })
	waitMetric(t, n, "hookwheel_deferrals_total", `reason="breaker"`, 5*time.Second, func(v float64) bool { return v >= count-3 })
	require.Len(t, recv.snapshot(), 3, "an open breaker sends nothing")

	breakers := n.Breakers()
	require.Len(t, breakers, 1)
	require.Equal(t, "open", breakers[0].State)
	require.False(t, breakers[0].NextProbeAt.IsZero())
	resp, body := rawRequest(t, http.MethodGet, n.base+"/v1/admin/breakers", "admin-token", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var list openapi.BreakerList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Data, 1)
	require.Equal(t, openapi.BreakerStateOpen, list.Data[0].State)
	require.Equal(t, targetOf(recv.URL), list.Data[0].Target)
	require.NotNil(t, list.Data[0].NextProbeAt)

	healthy.Store(true)
	// The three that failed retry after their 5s backoff; the deferred
	// seventeen come back from the probe on, paced.
	recv.waitFor(t, 20*time.Second, "every task delivered", func(ds []delivery) bool {
		ok := 0
		for _, d := range ds {
			if d.header.Get("Hookwheel-Attempt") != "" {
				ok++
			}
		}
		return len(distinctIDs(ds)) == count && ok >= count+3
	})
	totalAttempts := 0
	for _, id := range ids {
		task := acme.waitStatus(t, id, openapi.TaskStatusDelivered, 20*time.Second)
		totalAttempts += task.Attempts
	}
	require.Equal(t, len(recv.snapshot()), totalAttempts, "every request is one recorded attempt; deferrals are none")
	require.Equal(t, count+3, totalAttempts, "17 delivered at their first attempt, 3 at their second")
	waitMetric(t, n, "hookwheel_breaker_state", `target="`+targetOf(recv.URL)+`"`, 5*time.Second, func(v float64) bool { return v == 0 })
}

func targetOf(raw string) string {
	host := strings.TrimPrefix(raw, "http://")
	return "http://" + host
}

// TestHangingTargetDoesNotDelayOthers: while one target hangs and has far
// more tasks due than there are senders, another target's webhooks still
// leave on time, because a target may hold only MaxPerTarget senders.
func TestHangingTargetDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) {
		c.Dispatcher.Senders = 16
		c.Dispatcher.MaxPerTarget = 4
	})
	acme := e.createTenant(n, "acme")

	release := make(chan struct{})
	var hangOnce sync.Once
	hanging := newReceiver(t)
	// Registered after the receiver, so it runs before the receiver's
	// Close, which waits for the handlers blocked on release.
	t.Cleanup(func() { hangOnce.Do(func() { close(release) }) })
	hanging.setRespond(func(delivery, int) (int, http.Header) {
		<-release
		return http.StatusOK, nil
	})
	healthy := newReceiver(t)

	// A timeout longer than the test: a hanging send that timed out would
	// free its slot for the next one, and the test counts them.
	hang := make([]openapi.TaskRequest, 60)
	for i := range hang {
		hang[i] = openapi.TaskRequest{URL: hanging.URL + "/hang", Timeout: ptr("2m")}
	}
	scheduleAll(t, acme, hang)
	hanging.waitFor(t, 5*time.Second, "the hanging target holding its senders", func(ds []delivery) bool { return len(ds) == 4 })

	start := time.Now().Add(300 * time.Millisecond)
	ok := make([]openapi.TaskRequest, 40)
	for i := range ok {
		at := start.Add(time.Duration(i) * 10 * time.Millisecond)
		ok[i] = openapi.TaskRequest{URL: healthy.URL + "/ok", RunAt: &at}
	}
	scheduleAll(t, acme, ok)
	stored := time.Now()
	ds := healthy.waitFor(t, 10*time.Second, "the healthy target's tasks", func(ds []delivery) bool { return len(ds) == 40 })
	worst := worstLateness(t, ds, stored)
	// Without the per-target limit the hanging target would hold all 16
	// senders for its timeout.
	require.Less(t, worst, 2*time.Second, "a healthy target's webhooks must not wait for a hanging one")
	require.Len(t, hanging.snapshot(), 4, "the hanging target never gets more than its share of senders")
	hangOnce.Do(func() { close(release) })
}

// TestSSRFGuard: a literal internal address is refused at creation; a host
// name that resolves to one is refused when dialled, as a final failure with
// a clear error; redirects are recorded, never followed.
func TestSSRFGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) {
		// Allow exactly 127.0.0.2, where the redirecting receiver listens.
		c.Targets = netguard.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
	})
	acme := e.createTenant(n, "acme")

	for _, url := range []string{"http://127.0.0.1:9/x", "http://[::1]/x", "http://169.254.169.254/latest/meta-data",
		"http://10.0.0.1/x", "http://[::ffff:127.0.0.1]/x", "http://0.0.0.0/x", "http://localhost/x"} {
		resp, body := rawRequest(t, http.MethodPost, n.base+"/v1/tasks", acme.apiKey, mustJSON(t, map[string]string{"url": url}), nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s: %s", url, body)
		require.Contains(t, string(body), `"field":"url"`, url)
		require.Contains(t, string(body), "blocked", url)
	}

	// A host name is only resolved when dialled. Stored directly, as if it
	// had been accepted before the rules changed.
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: e.databaseURL})
	require.NoError(t, err)
	defer db.Close()
	local := newReceiver(t)
	task := &model.Task{ID: uuid.Must(uuid.NewV7()), TenantID: acme.id, URL: strings.Replace(local.URL, "127.0.0.1", "localhost", 1) + "/x",
		Method: http.MethodPost, RunAt: time.Now(), Timeout: 5 * time.Second, MaxAttempts: 5, MinBackoff: time.Second, MaxBackoff: time.Hour}
	_, created, err := db.InsertTask(context.Background(), task, true)
	require.NoError(t, err)
	require.True(t, created)
	dead := acme.waitStatus(t, task.ID, openapi.TaskStatusDead, 10*time.Second)
	require.Equal(t, 1, dead.Attempts, "a blocked address is final: no retry")
	require.Contains(t, *dead.LastError, "target host resolves to a blocked address range (loopback)")
	require.NotContains(t, *dead.LastError, "127.0.0.1", "the error names the host, not what it resolved to")
	require.Empty(t, local.snapshot(), "nothing may reach the blocked address")

	// A redirect is the receiver's answer: recorded, final, not followed.
	target := newReceiver(t)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	redirector := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/stolen", http.StatusFound)
	})}
	go func() { _ = redirector.Serve(ln) }()
	t.Cleanup(func() { _ = redirector.Close() })
	redirected := acme.schedule(t, openapi.TaskRequest{URL: "http://" + ln.Addr().String() + "/hook"})
	dead = acme.waitStatus(t, redirected.ID, openapi.TaskStatusDead, 10*time.Second)
	require.Equal(t, 302, *dead.LastStatusCode)
	require.Equal(t, 1, dead.Attempts)
	require.Empty(t, target.snapshot(), "a redirect is never followed")
}

// TestTransportRetriesOnlyUnsentRequests: a connection that cannot be made
// is redialled within the attempt; a request that got an answer is not.
func TestTransportRetriesOnlyUnsentRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")

	closedPort := fmt.Sprintf("127.1.255.254:%d", refusedPort)
	refused := acme.schedule(t, openapi.TaskRequest{URL: "http://" + closedPort + "/nobody", Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
	dead := acme.waitStatus(t, refused.ID, openapi.TaskStatusDead, 10*time.Second)
	require.Equal(t, 1, dead.Attempts)
	require.Contains(t, *dead.LastError, "refused")
	require.Equal(t, 2.0, metric(t, n, "hookwheel_transport_retries_total", ""), "two redials within the one attempt")

	answered := newReceiver(t)
	answered.setRespond(func(delivery, int) (int, http.Header) { return http.StatusServiceUnavailable, nil })
	task := acme.schedule(t, openapi.TaskRequest{URL: answered.URL + "/busy", Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
	acme.waitStatus(t, task.ID, openapi.TaskStatusDead, 10*time.Second)
	require.Len(t, answered.snapshot(), 1, "a request that got an answer is never resent by the transport")
	require.Equal(t, 2.0, metric(t, n, "hookwheel_transport_retries_total", ""))
}

// TestDeadLetterReplay: a task that exhausted its attempts is listed as a
// dead letter; replayed, it is sent again with the same webhook-id and
// Idempotency-Key, its attempts continuing their count with a fresh budget.
func TestDeadLetterReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)
	var fixed atomic.Bool
	recv.setRespond(func(delivery, int) (int, http.Header) {
		if fixed.Load() {
			return http.StatusOK, nil
		}
		return http.StatusServiceUnavailable, nil
	})

	resp, err := acme.client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{IdempotencyKey: ptr("invoice-7")},
		openapi.TaskRequest{URL: recv.URL + "/dlq", Retry: &openapi.RetryPolicy{MaxAttempts: ptr(2), MinBackoff: ptr("100ms"), MaxBackoff: ptr("100ms")}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), string(resp.Body))
	id := taskOf(t, resp.JSON201).ID
	dead := acme.waitStatus(t, id, openapi.TaskStatusDead, 10*time.Second)
	require.Equal(t, 2, dead.Attempts)

	list, err := acme.client.ListTasksWithResponse(context.Background(), &openapi.ListTasksParams{Status: ptr(openapi.TaskStatusDead)})
	require.NoError(t, err)
	require.Len(t, list.JSON200.Data, 1)
	require.Equal(t, id, list.JSON200.Data[0].ID)

	fixed.Store(true)
	replayed, err := acme.client.ReplayTaskWithBodyWithResponse(context.Background(), id, "application/json", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, replayed.StatusCode(), string(replayed.Body))
	require.Equal(t, openapi.TaskStatusScheduled, replayed.JSON200.Status)

	done := acme.waitStatus(t, id, openapi.TaskStatusDelivered, 10*time.Second)
	require.Equal(t, 3, done.Attempts, "attempts continue their count")
	ds := recv.snapshot()
	require.Len(t, ds, 3)
	for i, d := range ds {
		require.Equal(t, id.String(), d.webhookID())
		require.Equal(t, "invoice-7", d.header.Get("Idempotency-Key"))
		require.Equal(t, strconv.Itoa(i+1), d.header.Get("Hookwheel-Attempt"))
	}
}

// TestDeadLetterEditAndReplay: a dead letter replayed with a new URL, method,
// headers and body is sent as edited, to the new receiver only, still as the
// same webhook (webhook-id, Idempotency-Key, attempt count).
func TestDeadLetterEditAndReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	gone := newReceiver(t)
	gone.setRespond(func(delivery, int) (int, http.Header) { return http.StatusGone, nil })
	moved := newReceiver(t)

	resp, err := acme.client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{IdempotencyKey: ptr("invoice-8")},
		openapi.TaskRequest{URL: gone.URL + "/old", Headers: map[string]string{"X-Version": "1"}, Body: `{"v": 1}`,
			Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), string(resp.Body))
	id := taskOf(t, resp.JSON201).ID
	acme.waitStatus(t, id, openapi.TaskStatusDead, 10*time.Second)

	method := openapi.HTTPMethod(http.MethodPut)
	replayed, err := acme.client.ReplayTaskWithResponse(context.Background(), id, openapi.ReplayRequest{
		URL: ptr(moved.URL + "/new"), Method: &method, Headers: map[string]string{"X-Version": "2"}, Body: ptr(`{"v": 2}`),
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, replayed.StatusCode(), string(replayed.Body))

	done := acme.waitStatus(t, id, openapi.TaskStatusDelivered, 10*time.Second)
	require.Equal(t, 2, done.Attempts)
	require.Equal(t, moved.URL+"/new", done.URL)
	ds := moved.snapshot()
	require.Len(t, ds, 1)
	d := ds[0]
	require.Equal(t, http.MethodPut, d.method)
	require.Equal(t, "/new", d.path)
	require.Equal(t, `{"v": 2}`, string(d.body))
	require.Equal(t, "2", d.header.Get("X-Version"))
	require.Equal(t, id.String(), d.webhookID())
	require.Equal(t, "invoice-8", d.header.Get("Idempotency-Key"))
	require.Equal(t, "2", d.header.Get("Hookwheel-Attempt"))
	require.Len(t, gone.snapshot(), 1, "the old receiver got the first attempt only")
}

// TestDeadLettersReplayedInBulk: every dead letter to a receiver that came
// back is replayed in one call, after a dry run counted them; the one sent
// elsewhere stays dead.
func TestDeadLettersReplayedInBulk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv, other := newReceiver(t), newReceiver(t)
	var fixed atomic.Bool
	down := func(delivery, int) (int, http.Header) {
		if fixed.Load() {
			return http.StatusOK, nil
		}
		return http.StatusServiceUnavailable, nil
	}
	recv.setRespond(down)
	other.setRespond(func(delivery, int) (int, http.Header) { return http.StatusServiceUnavailable, nil })

	var ids []uuid.UUID
	for i := range 3 {
		task := acme.schedule(t, openapi.TaskRequest{URL: fmt.Sprintf("%s/hook/%d", recv.URL, i), Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
		ids = append(ids, task.ID)
	}
	elsewhere := acme.schedule(t, openapi.TaskRequest{URL: other.URL + "/hook", Retry: &openapi.RetryPolicy{MaxAttempts: ptr(1)}})
	for _, id := range append(ids, elsewhere.ID) {
		acme.waitStatus(t, id, openapi.TaskStatusDead, 10*time.Second)
	}

	filter := openapi.ReplayFilter{URL: ptr(recv.URL + "/hook/"), DryRun: ptr(true)}
	dry, err := acme.client.ReplayTasksWithResponse(context.Background(), filter)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dry.StatusCode(), string(dry.Body))
	require.Equal(t, openapi.ReplayResult{Matched: 3}, *dry.JSON200)

	fixed.Store(true)
	filter.DryRun = nil
	res, err := acme.client.ReplayTasksWithResponse(context.Background(), filter)
	require.NoError(t, err)
	require.Equal(t, openapi.ReplayResult{Matched: 3, Replayed: 3}, *res.JSON200)
	for _, id := range ids {
		done := acme.waitStatus(t, id, openapi.TaskStatusDelivered, 10*time.Second)
		require.Equal(t, 2, done.Attempts)
	}
	require.Equal(t, openapi.TaskStatusDead, acme.task(t, elsewhere.ID).Status)
	require.Len(t, other.snapshot(), 1)
}

// TestStaleTimerRearmsAtNewTime: a dispatcher can hold a timer older than the
// row, when a loader read the row just before the API moved the task and
// armed the old time over the new one. The claim at the old time then finds
// the task moved later; it must be armed again at the time Postgres has, not
// forgotten until a sweep. Here the row is moved in SQL behind the node's
// back, and the sweep is an hour away.
func TestStaleTimerRearmsAtNewTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) {
		c.Dispatcher.SweepInterval = time.Hour
		c.Dispatcher.LoadInterval = 20 * time.Second
	})
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)

	// A first delivery shows the node owns its partitions and has loaded
	// them, so the next task's timer is armed by the API, from the row as
	// created.
	acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/warm-up"})
	recv.waitFor(t, 10*time.Second, "the warm-up task", func(ds []delivery) bool { return len(ds) == 1 })

	task := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/moved", Delay: ptr("1s")})
	conn, err := pgx.Connect(context.Background(), e.databaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var movedTo time.Time
	require.NoError(t, conn.QueryRow(context.Background(), `
		UPDATE tasks SET run_at = run_at + interval '1500 ms', next_attempt_at = next_attempt_at + interval '1500 ms'
		WHERE id = $1 AND status = 'scheduled' AND claim_token IS NULL RETURNING next_attempt_at`, task.ID).Scan(&movedTo))

	ds := recv.waitFor(t, 10*time.Second, "the moved task", func(ds []delivery) bool { return len(ds) == 2 })
	moved := ds[1]
	require.Equal(t, "/moved", moved.path)
	require.False(t, moved.arrived.Before(movedTo), "arrived %s before its new time", movedTo.Sub(moved.arrived))
	require.Less(t, moved.arrived.Sub(movedTo), time.Second, "arrived late")
}

// TestTenantTargetGrants: a private range granted to one tenant opens it to
// that tenant's webhooks alone. Before, the only way was
// HOOKWHEEL_TARGET_ALLOW_CIDRS, which opened it to every tenant, who could
// then read the start of its answers through /attempts.
func TestTenantTargetGrants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode(func(c *app.Config) { c.Targets = netguard.Config{} })
	acme, other := e.createTenant(n, "acme"), e.createTenant(n, "other")
	internal := newReceiver(t)

	resp, body := rawRequest(t, http.MethodPatch, n.base+"/v1/admin/tenants/"+acme.id.String(), "admin-token",
		[]byte(`{"target_allow_cidrs": ["127.0.0.1/32"]}`), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))

	sent := acme.schedule(t, openapi.TaskRequest{URL: internal.URL + "/granted"})
	acme.waitStatus(t, sent.ID, openapi.TaskStatusDelivered, 10*time.Second)

	resp, body = rawRequest(t, http.MethodPost, n.base+"/v1/tasks", other.apiKey, mustJSON(t, map[string]string{"url": internal.URL + "/x"}), nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, string(body))

	// Stored directly, as if accepted before the grant was withdrawn: the
	// dial is refused although a connection to the host sits in a pool.
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: e.databaseURL})
	require.NoError(t, err)
	defer db.Close()
	task := &model.Task{ID: uuid.Must(uuid.NewV7()), TenantID: other.id, URL: internal.URL + "/not-granted",
		Method: http.MethodPost, RunAt: time.Now(), Timeout: 5 * time.Second, MaxAttempts: 5, MinBackoff: time.Second, MaxBackoff: time.Hour}
	_, created, err := db.InsertTask(context.Background(), task, true)
	require.NoError(t, err)
	require.True(t, created)
	dead := other.waitStatus(t, task.ID, openapi.TaskStatusDead, 10*time.Second)
	require.Contains(t, *dead.LastError, "blocked")
	require.Len(t, internal.snapshot(), 1, "only the granted tenant's webhook reached the internal receiver")
}
