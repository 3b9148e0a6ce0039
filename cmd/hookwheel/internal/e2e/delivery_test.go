package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/cmd/hookwheel/internal/app"
	"github.com/hookwheel/hookwheel/openapi"
)

// TestCreateFireReceive follows one task from the API to a real receiver,
// which checks both signatures with their reference libraries.
func TestCreateFireReceive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)

	body := `{"order": 42}`
	task := acme.schedule(t, openapi.TaskRequest{
		URL:     recv.URL + "/hooks/order-timeout?x=1",
		Method:  ptr(openapi.HTTPMethodPUT),
		Headers: map[string]string{"Content-Type": "application/json", "X-Custom": "yes"},
		Body:    body,
		Delay:   ptr("300ms"),
	})
	require.Equal(t, openapi.TaskStatusScheduled, task.Status)

	ds := recv.waitFor(t, 10*time.Second, "one delivery", func(ds []delivery) bool { return len(ds) >= 1 })
	d := ds[0]
	require.False(t, d.arrived.Before(task.RunAt), "fired %s before run_at %s", task.RunAt.Sub(d.arrived), task.RunAt)
	require.Equal(t, http.MethodPut, d.method)
	require.Equal(t, "/hooks/order-timeout", d.path)
	require.Equal(t, body, string(d.body))
	require.Equal(t, "application/json", d.header.Get("Content-Type"))
	require.Equal(t, "yes", d.header.Get("X-Custom"))
	require.Equal(t, task.ID.String(), d.header.Get("webhook-id"))
	require.Equal(t, task.ID.String(), d.header.Get("Idempotency-Key"), "without a key, the task id")
	require.Equal(t, "1", d.header.Get("Hookwheel-Attempt"))
	scheduledAt, err := time.Parse(time.RFC3339Nano, d.header.Get("Hookwheel-Scheduled-At"))
	require.NoError(t, err)
	require.True(t, scheduledAt.Equal(task.RunAt), "Hookwheel-Scheduled-At %s, run_at %s", scheduledAt, task.RunAt)

	// Standard Webhooks, verified by the official library.
	wh, err := standardwebhooks.NewWebhook(acme.signingSecret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(d.body, d.header))
	require.Error(t, wh.Verify([]byte(`{"order": 43}`), d.header), "a tampered body must not verify")

	// The JWT, verified by golang-jwt with the same secret.
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(acme.signingSecret, "whsec_"))
	require.NoError(t, err)
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(d.header.Get("Hookwheel-Signature"), claims,
		func(*jwt.Token) (any, error) { return key, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("hookwheel"), jwt.WithSubject(task.URL),
		jwt.WithIssuedAt(), jwt.WithExpirationRequired())
	require.NoError(t, err)
	require.Equal(t, task.ID.String(), claims["jti"])
	sum := sha256.Sum256(d.body)
	require.Equal(t, base64.RawURLEncoding.EncodeToString(sum[:]), claims["body"])

	done := acme.waitStatus(t, task.ID, openapi.TaskStatusDelivered, 5*time.Second)
	require.Equal(t, 1, done.Attempts)
	require.Equal(t, 200, *done.LastStatusCode)
	require.Nil(t, done.NextAttemptAt)
	attempts, err := acme.client.ListTaskAttemptsWithResponse(context.Background(), task.ID, nil)
	require.NoError(t, err)
	require.Len(t, attempts.JSON200.Data, 1)
	a := attempts.JSON200.Data[0]
	require.Equal(t, 1, a.Attempt)
	require.Equal(t, openapi.AttemptOutcomeSuccess, a.Outcome)
	require.Equal(t, 200, *a.StatusCode)
	require.Equal(t, `{"ok":true}`, *a.ResponseBody)
}

// TestThousandDueInOneSecond: 1,000 tasks due at the same instant each
// arrive exactly once, none early.
func TestThousandDueInOneSecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)

	const count = 1000
	runAt := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	ids := make(map[string]bool, count)
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				// Spread over the second: every 1 ms.
				at := runAt.Add(time.Duration(i) * time.Millisecond)
				task := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/bulk", Body: "x", RunAt: &at})
				mu.Lock()
				ids[task.ID.String()] = true
				mu.Unlock()
			}
		}()
	}
	for i := range count {
		work <- i
	}
	close(work)
	wg.Wait()
	require.Len(t, ids, count)

	recv.waitFor(t, 30*time.Second, "all 1000 delivered", func(ds []delivery) bool { return len(distinctIDs(ds)) == count })
	// Every task is delivered once its attempt is recorded; wait for that so
	// a late duplicate would have had its chance to show.
	waitAllDelivered(t, acme, count)
	ds := recv.snapshot()
	require.Len(t, ds, count, "no task may arrive twice")
	for id, c := range distinctIDs(ds) {
		require.True(t, ids[id], "unknown webhook-id %s", id)
		require.Equal(t, 1, c, "task %s arrived %d times", id, c)
	}
	for _, d := range ds {
		at, err := time.Parse(time.RFC3339Nano, d.header.Get("Hookwheel-Scheduled-At"))
		require.NoError(t, err)
		require.False(t, d.arrived.Before(at), "task %s arrived %s early", d.webhookID(), at.Sub(d.arrived))
	}
}

func waitAllDelivered(t *testing.T, tn *tenant, count int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		delivered := 0
		var cursor *string
		for {
			resp, err := tn.client.ListTasksWithResponse(context.Background(), &openapi.ListTasksParams{
				Status: ptr(openapi.TaskStatusDelivered), Limit: ptr(500), Cursor: cursor})
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode())
			delivered += len(resp.JSON200.Data)
			if resp.JSON200.NextCursor == nil {
				break
			}
			cursor = resp.JSON200.NextCursor
		}
		if delivered == count {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks delivered", delivered, count)
		}
		<-poll.C
	}
}

// TestCanceledNeverFires cancels a task and checks that a task due after it
// arrives while the canceled one never does.
func TestCanceledNeverFires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)

	canceled := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/canceled", Delay: ptr("400ms")})
	resp, err := acme.client.CancelTaskWithResponse(context.Background(), canceled.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	require.Equal(t, openapi.TaskStatusCanceled, resp.JSON200.Status)
	// A far one, canceled before the loader ever saw it.
	far := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/canceled", Delay: ptr("1s")})
	_, err = acme.client.CancelTaskWithResponse(context.Background(), far.ID)
	require.NoError(t, err)

	sentinel := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/sentinel", Delay: ptr("1500ms")})
	ds := recv.waitFor(t, 10*time.Second, "the sentinel", func(ds []delivery) bool {
		return distinctIDs(ds)[sentinel.ID.String()] > 0
	})
	require.Len(t, ds, 1, "only the sentinel may arrive")
	require.Equal(t, 0, acme.task(t, canceled.ID).Attempts)
	require.Equal(t, openapi.TaskStatusCanceled, acme.task(t, far.ID).Status)
}

// TestRetryThenSuccess: a 503 is retried after the backoff with the same
// webhook-id and Idempotency-Key; a 400 kills the task at once.
func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.startNode()
	acme := e.createTenant(n, "acme")
	recv := newReceiver(t)
	recv.setRespond(func(d delivery, nth int) (int, http.Header) {
		if strings.HasSuffix(d.path, "/gone") {
			return http.StatusBadRequest, nil
		}
		if nth == 1 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})

	resp, err := acme.client.CreateTaskWithResponse(context.Background(), &openapi.CreateTaskParams{IdempotencyKey: ptr("order-42")},
		openapi.TaskRequest{URL: recv.URL + "/flaky", Retry: &openapi.RetryPolicy{MinBackoff: ptr("500ms"), MaxBackoff: ptr("1s")}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), string(resp.Body))
	flaky := taskOf(t, resp.JSON201)
	gone := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/gone"})

	ds := recv.waitFor(t, 10*time.Second, "two attempts of the flaky task", func(ds []delivery) bool {
		return distinctIDs(ds)[flaky.ID.String()] == 2
	})
	var first, second delivery
	for _, d := range ds {
		if d.webhookID() == flaky.ID.String() {
			if d.header.Get("Hookwheel-Attempt") == "1" {
				first = d
			} else {
				second = d
			}
		}
	}
	require.Equal(t, "2", second.header.Get("Hookwheel-Attempt"))
	require.Equal(t, "order-42", first.header.Get("Idempotency-Key"))
	require.Equal(t, "order-42", second.header.Get("Idempotency-Key"))
	// Backoff after attempt 1 is min_backoff ±20%, clamped to [min, max]: at least 500ms.
	require.GreaterOrEqual(t, second.arrived.Sub(first.arrived), 500*time.Millisecond)

	done := acme.waitStatus(t, flaky.ID, openapi.TaskStatusDelivered, 5*time.Second)
	require.Equal(t, 2, done.Attempts)
	attempts, err := acme.client.ListTaskAttemptsWithResponse(context.Background(), flaky.ID, nil)
	require.NoError(t, err)
	require.Len(t, attempts.JSON200.Data, 2)
	require.Equal(t, openapi.AttemptOutcomeRetry, attempts.JSON200.Data[0].Outcome)
	require.Equal(t, 503, *attempts.JSON200.Data[0].StatusCode)
	require.Equal(t, openapi.AttemptOutcomeSuccess, attempts.JSON200.Data[1].Outcome)

	dead := acme.waitStatus(t, gone.ID, openapi.TaskStatusDead, 5*time.Second)
	require.Equal(t, 1, dead.Attempts, "a 400 is final: no retry")
	require.Equal(t, 400, *dead.LastStatusCode)
}

// TestSplitRoles: a task stored by an API-only node is fired by a
// dispatcher-only node, which learns of it through Postgres NOTIFY.
func TestSplitRoles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dispatcherOnly := e.startNode(func(c *app.Config) { c.DisableAPI = true })
	apiOnly := e.startNode(func(c *app.Config) { c.DisableDispatcher = true })
	acme := e.createTenant(apiOnly, "acme")
	recv := newReceiver(t)

	// Far enough out for the dispatcher's loader to have already read past
	// it: only the announcement can bring it into the wheel in time.
	task := acme.schedule(t, openapi.TaskRequest{URL: recv.URL + "/split", Delay: ptr("500ms")})
	ds := recv.waitFor(t, 10*time.Second, "the task", func(ds []delivery) bool { return len(ds) == 1 })
	require.Equal(t, task.ID.String(), ds[0].webhookID())
	lateness := ds[0].arrived.Sub(task.RunAt)
	require.GreaterOrEqual(t, lateness, time.Duration(0))

	resp, _ := rawRequest(t, http.MethodGet, dispatcherOnly.base+"/v1/tasks", acme.apiKey, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a dispatcher-only node serves no API")
	resp, _ = rawRequest(t, http.MethodGet, dispatcherOnly.base+"/readyz", "", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestRestartFiresPendingOnce stops a node with tasks pending, some falling
// due while it is down, and starts another on the same database: every task
// arrives exactly once.
func TestRestartFiresPendingOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.startNode()
	acme := e.createTenant(first, "acme")
	recv := newReceiver(t)

	const count = 200
	// Due from 200 ms to 4 s: some fire before the stop, some while no node
	// runs, some after the restart. Created in one batch call, so that a
	// loaded machine cannot take so long creating them that every one is
	// due before the stop.
	start := time.Now()
	batch := openapi.BatchRequest{Tasks: make([]openapi.BatchTaskRequest, count)}
	for i := range batch.Tasks {
		at := start.Add(200*time.Millisecond + time.Duration(i)*19*time.Millisecond)
		batch.Tasks[i] = openapi.BatchTaskRequest{URL: recv.URL + "/restart", RunAt: &at}
	}
	resp, err := acme.client.CreateTasksBatchWithResponse(context.Background(), batch)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	ids := map[string]bool{}
	for i, res := range resp.JSON200.Data {
		require.NotNil(t, res.Task, "item %d: %+v", i, res.Error)
		ids[res.Task.ID.String()] = true
	}
	recv.waitFor(t, 10*time.Second, "some deliveries before the stop", func(ds []delivery) bool { return len(ds) >= 10 })
	first.stop(t)
	before := len(recv.snapshot())
	require.Less(t, before, count, "the first node must not have sent everything")

	second := e.startNode()
	acme.client = clientFor(t, second.base, acme.apiKey)
	recv.waitFor(t, 20*time.Second, "every task", func(ds []delivery) bool { return len(distinctIDs(ds)) == count })
	waitAllDelivered(t, acme, count)
	ds := recv.snapshot()
	require.Len(t, ds, count, "nothing may arrive twice")
	for id, c := range distinctIDs(ds) {
		require.True(t, ids[id])
		require.Equal(t, 1, c)
	}
}
