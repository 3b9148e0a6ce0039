package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
)

// batchBody is a POST /v1/tasks/batch body holding the given items, each a
// JSON text, as sent.
func batchBody(items ...string) string {
	return `{"tasks": [` + strings.Join(items, ",") + `]}`
}

// postBatch sends body to POST /v1/tasks/batch as tenant.
func (h *harness) postBatch(tn tenant, body string) response {
	h.t.Helper()
	return h.do(http.MethodPost, "/v1/tasks/batch", tn.APIKey, strings.NewReader(body), nil)
}

// batch posts items and requires a 200 with one result per item.
func (h *harness) batch(tn tenant, items ...string) []openapi.BatchResult {
	h.t.Helper()
	resp := h.postBatch(tn, batchBody(items...))
	require.Equal(h.t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	require.True(h.t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"), resp.Header.Get("Content-Type"))
	var out openapi.BatchResponse
	require.NoError(h.t, json.Unmarshal(resp.Body, &out))
	require.Len(h.t, out.Data, len(items))
	return out.Data
}

// requireItemCreated checks that a result holds a newly created task.
func requireItemCreated(t *testing.T, res openapi.BatchResult) openapi.Task {
	t.Helper()
	require.Nil(t, res.Error, "item error: %+v", res.Error)
	require.NotNil(t, res.Task)
	require.Nil(t, res.Replayed, "a created task is not a replay")
	require.Equal(t, openapi.TaskStatus("scheduled"), res.Task.Status)
	return *res.Task
}

// requireItemProblem checks that item i's result is a problem with this
// status and, for a validation problem, exactly the field given.
func requireItemProblem(t *testing.T, res openapi.BatchResult, i, status int, field string) openapi.Problem {
	t.Helper()
	require.Nil(t, res.Task, "item %d: want an error, got a task", i)
	require.NotNil(t, res.Error, "item %d", i)
	p := *res.Error
	require.Equal(t, status, p.Status, "item %d: %+v", i, p)
	require.True(t, strings.HasPrefix(p.Type, problemTypePrefix), "type %q", p.Type)
	require.NotEmpty(t, p.Title)
	require.NotEmpty(t, p.Detail)
	require.Equal(t, ptr(fmt.Sprintf("/v1/tasks/batch#/tasks/%d", i)), p.Instance, "the instance points at the item")
	if field != "" {
		require.Equal(t, problemTypePrefix+"validation", p.Type)
		require.Len(t, p.Errors, 1, "item %d: %+v", i, p.Errors)
		require.Equal(t, field, p.Errors[0].Field)
		require.NotEmpty(t, p.Errors[0].Message)
	}
	return p
}

func TestCreateTasksBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	ctx := context.Background()
	now := h.Clock.Now()

	results := h.batch(tn,
		`{"url": "https://example.com/a", "body": "{\"order\": 1}", "headers": {"content-type": "application/json"}}`,
		`{"url": "ftp://example.com/b"}`,
		`{"url": "https://example.com/c", "delay": "1h", "method": "PUT", "timeout": "10s", "retry": {"max_attempts": 3}}`,
		`{"url": "https://example.com/d", "run_at": "`+now.Add(20*time.Second).Format(time.RFC3339)+`", "idempotency_key": "d-1"}`,
		`{"url": "https://example.com/e", "delay": "soon"}`,
	)

	a := requireItemCreated(t, results[0])
	require.Equal(t, "https://example.com/a", a.URL)
	require.Equal(t, openapi.HTTPMethod("POST"), a.Method)
	require.Equal(t, map[string]string{"Content-Type": "application/json"}, a.Headers)
	require.Empty(t, a.Body, "a batch's answer carries no bodies: the caller has them")
	require.Equal(t, `{"order": 1}`, h.getTask(tn, a.ID).Body)
	require.True(t, a.RunAt.Equal(now), "neither run_at nor delay means now")
	require.Equal(t, uuid.Version(7), a.ID.Version())
	require.Nil(t, a.IdempotencyKey)

	requireItemProblem(t, results[1], 1, http.StatusUnprocessableEntity, "url")

	c := requireItemCreated(t, results[2])
	require.True(t, c.RunAt.Equal(now.Add(time.Hour)))
	require.Equal(t, openapi.HTTPMethod("PUT"), c.Method)
	requireDuration(t, 10*time.Second, c.Timeout)
	require.Equal(t, 3, c.MaxAttempts)
	requireDuration(t, time.Second, *c.Retry.MinBackoff) // defaults fill the rest of the policy

	d := requireItemCreated(t, results[3])
	require.True(t, d.RunAt.Equal(now.Add(20*time.Second)))
	require.Equal(t, ptr("d-1"), d.IdempotencyKey)

	p := requireItemProblem(t, results[4], 4, http.StatusUnprocessableEntity, "delay")
	require.Contains(t, p.Detail, "delay")

	// Every created task is stored as answered, and only those.
	for _, task := range []openapi.Task{a, c, d} {
		got, err := tn.Client.GetTaskWithResponse(ctx, task.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, got.StatusCode())
		require.Equal(t, task.URL, got.JSON200.URL)
		require.True(t, got.JSON200.RunAt.Equal(task.RunAt))
		require.True(t, got.JSON200.CreatedAt.Equal(task.CreatedAt))
	}
	list, err := tn.Client.ListTasksWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{d.ID, c.ID, a.ID}, taskIDs(list.JSON200.Data),
		"ids follow the request order, so the newest-first list is its reverse")

	// The local dispatcher hears of the tasks due soon, at their time.
	require.Equal(t, []scheduledCall{{a.ID, a.RunAt}}, h.Sched.scheduledFor(a.ID))
	require.Empty(t, h.Sched.scheduledFor(c.ID), "a task due in an hour is left to the loader")
	require.Equal(t, []scheduledCall{{d.ID, d.RunAt}}, h.Sched.scheduledFor(d.ID))
}

func TestCreateTasksBatchItemValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	now := h.Clock.Now()

	// Each bad item sits between two good ones, which it must not affect;
	// the field named is the one a single POST /v1/tasks names.
	cases := []struct {
		name   string
		item   string
		status int
		field  string
	}{
		{"missing url", `{"method": "POST"}`, 422, "url"},
		{"private url is fine with the guard off", `{"url": "http://10.0.0.1/x"}`, 0, ""},
		{"method FOO", `{"url": "https://example.com/x", "method": "FOO"}`, 422, "method"},
		{"header Host", `{"url": "https://example.com/x", "headers": {"Host": "evil.example"}}`, 422, "headers.Host"},
		{"run_at and delay", `{"url": "https://example.com/x", "run_at": "` + now.Add(time.Hour).Format(time.RFC3339) + `", "delay": "1m"}`, 422, "run_at"},
		{"run_at beyond the horizon", `{"url": "https://example.com/x", "run_at": "` + now.Add(366*24*time.Hour).Format(time.RFC3339) + `"}`, 422, "run_at"},
		{"negative delay", `{"url": "https://example.com/x", "delay": "-1s"}`, 422, "delay"},
		{"timeout 2h", `{"url": "https://example.com/x", "timeout": "2h"}`, 422, "timeout"},
		{"max_attempts 0", `{"url": "https://example.com/x", "retry": {"max_attempts": 0}}`, 422, "retry.max_attempts"},
		{"max_attempts a string", `{"url": "https://example.com/x", "retry": {"max_attempts": "3"}}`, 422, "retry.max_attempts"},
		{"unknown field", `{"url": "https://example.com/x", "runAt": "2030-01-01T00:00:00Z"}`, 422, "runAt"},
		{"unknown field inside retry", `{"url": "https://example.com/x", "retry": {"max_attemps": 3}}`, 422, "retry.max_attemps"},
		{"url as a number", `{"url": 42}`, 422, "url"},
		{"body not a string", `{"url": "https://example.com/x", "body": {"a": 1}}`, 422, "body"},
		{"empty idempotency_key", `{"url": "https://example.com/x", "idempotency_key": ""}`, 422, "idempotency_key"},
		{"idempotency_key of 256 characters", `{"url": "https://example.com/x", "idempotency_key": "` + strings.Repeat("k", 256) + `"}`, 422, "idempotency_key"},
		{"idempotency_key of 255 characters", `{"url": "https://example.com/x", "idempotency_key": "` + strings.Repeat("é", 255) + `"}`, 0, ""},
		{"idempotency_key a number", `{"url": "https://example.com/x", "idempotency_key": 7}`, 422, "idempotency_key"},
		{"item a string", `"https://example.com/x"`, 400, ""},
		{"item an array", `[{"url": "https://example.com/x"}]`, 400, ""},
		{"item null", `null`, 422, "url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			results := h.batch(tn, `{"url": "https://example.com/before"}`, tc.item, `{"url": "https://example.com/after"}`)
			requireItemCreated(t, results[0])
			requireItemCreated(t, results[2])
			if tc.status == 0 {
				requireItemCreated(t, results[1])
				return
			}
			p := requireItemProblem(t, results[1], 1, tc.status, tc.field)
			if tc.status == http.StatusBadRequest {
				require.Equal(t, problemTypePrefix+"malformed-json", p.Type)
			}
		})
	}

	t.Run("the URL guard applies to items", func(t *testing.T) {
		t.Parallel()
		guarded := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
		gt := guarded.createTenant("guarded")
		results := guarded.batch(gt, `{"url": "http://127.0.0.1/x"}`, `{"url": "https://example.com/x"}`)
		requireItemProblem(t, results[0], 0, http.StatusUnprocessableEntity, "url")
		requireItemCreated(t, results[1])
	})
}

func TestCreateTasksBatchRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	item := `{"url": "https://example.com/x"}`

	cases := []struct {
		name   string
		body   string
		status int
		field  string
	}{
		{"malformed JSON", `{"tasks": [` + item, 400, ""},
		{"not JSON", `tasks=1`, 400, ""},
		{"empty body", ``, 400, ""},
		{"two JSON values", batchBody(item) + batchBody(item), 400, ""},
		{"an array", `[` + item + `]`, 400, ""},
		{"no tasks", `{}`, 422, "tasks"},
		{"tasks null", `{"tasks": null}`, 422, "tasks"},
		{"tasks empty", `{"tasks": []}`, 422, "tasks"},
		{"tasks an object", `{"tasks": ` + item + `}`, 422, "tasks"},
		{"1,001 tasks", batchBody(strings.Split(strings.Repeat(item+"\n", 1001), "\n")[:1001]...), 422, "tasks"},
		{"unknown member", `{"tasks": [` + item + `], "atomic": true}`, 422, "atomic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := h.postBatch(tn, tc.body)
			if tc.field != "" {
				requireFieldProblem(t, resp, tc.field)
				return
			}
			requireProblem(t, resp, tc.status)
		})
	}

	t.Run("nothing is stored from a refused batch", func(t *testing.T) {
		t.Parallel()
		other := h.createTenant("refused")
		resp := h.postBatch(other, batchBody(strings.Split(strings.Repeat(item+"\n", 1001), "\n")[:1001]...))
		requireFieldProblem(t, resp, "tasks")
		list := h.do(http.MethodGet, "/v1/tasks", other.APIKey, nil, nil)
		require.JSONEq(t, `{"data": []}`, string(list.Body))
	})

	t.Run("a tenant key is required", func(t *testing.T) {
		t.Parallel()
		resp := h.do(http.MethodPost, "/v1/tasks/batch", "", strings.NewReader(batchBody(item)), nil)
		requireProblem(t, resp, http.StatusUnauthorized)
	})

	t.Run("1,000 tasks", func(t *testing.T) {
		t.Parallel()
		full := h.createTenant("full")
		items := make([]string, 1000)
		for i := range items {
			items[i] = fmt.Sprintf(`{"url": "https://example.com/%d", "delay": "1h", "idempotency_key": "k-%d"}`, i, i)
		}
		results := h.batch(full, items...)
		seen := map[uuid.UUID]bool{}
		for i, res := range results {
			task := requireItemCreated(t, res)
			require.Equal(t, fmt.Sprintf("https://example.com/%d", i), task.URL, "results follow the request order")
			require.False(t, seen[task.ID])
			seen[task.ID] = true
		}
		// The same batch again is a replay of every item.
		again := h.batch(full, items...)
		for i, res := range again {
			require.Nil(t, res.Error)
			require.Equal(t, results[i].Task.ID, res.Task.ID)
			require.Equal(t, ptr(true), res.Replayed)
		}
	})
}

func TestCreateTasksBatchIdempotency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	other := h.createTenant("other")

	single := h.postTask(acme, `{"url": "https://example.com/hook", "body": "x"}`, "order-1")
	require.Equal(t, http.StatusCreated, single.Status, "body: %s", single.Body)
	var earlier openapi.Task
	require.NoError(t, json.Unmarshal(single.Body, &earlier))

	results := h.batch(acme,
		// 0: the single call again, as an item: its replay.
		`{"body": "x", "url": "https://example.com/hook", "idempotency_key": "order-1"}`,
		// 1: the single call's key with another request.
		`{"url": "https://example.com/hook", "body": "y", "idempotency_key": "order-1"}`,
		// 2: a new key.
		`{"url": "https://example.com/n", "idempotency_key": "order-2"}`,
		// 3: item 2 again, spelled differently: a replay of it.
		`{"idempotency_key": "order-2",  "url": "https://example.com/n"}`,
		// 4: item 2's key with another request.
		`{"url": "https://example.com/m", "idempotency_key": "order-2"}`,
		// 5: an invalid item does not take its key...
		`{"url": "nope", "idempotency_key": "order-3"}`,
		// 6: ...so a later valid item with it is created.
		`{"url": "https://example.com/o", "idempotency_key": "order-3"}`,
	)
	require.Equal(t, earlier.ID, results[0].Task.ID)
	require.Equal(t, ptr(true), results[0].Replayed)
	p := requireItemProblem(t, results[1], 1, http.StatusUnprocessableEntity, "")
	require.Equal(t, problemTypePrefix+"idempotency-key-reused", p.Type)
	created := requireItemCreated(t, results[2])
	require.Equal(t, ptr("order-2"), created.IdempotencyKey)
	require.Equal(t, created.ID, results[3].Task.ID)
	require.Equal(t, ptr(true), results[3].Replayed)
	p = requireItemProblem(t, results[4], 4, http.StatusUnprocessableEntity, "")
	require.Equal(t, problemTypePrefix+"idempotency-key-reused", p.Type)
	requireItemProblem(t, results[5], 5, http.StatusUnprocessableEntity, "url")
	requireItemCreated(t, results[6])

	// A single call repeating a batch item is its replay too.
	replay := h.postTask(acme, `{"url": "https://example.com/n"}`, "order-2")
	require.Equal(t, http.StatusOK, replay.Status, "body: %s", replay.Body)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Contains(t, string(replay.Body), created.ID.String())

	// Keys are per tenant.
	fresh := h.batch(other, `{"url": "https://example.com/hook", "body": "x", "idempotency_key": "order-1"}`)
	require.NotEqual(t, earlier.ID, requireItemCreated(t, fresh[0]).ID)

	// A replay is announced to no one: only created tasks are scheduled.
	require.Len(t, h.Sched.scheduledFor(earlier.ID), 1, "once, by the single call")
	require.Len(t, h.Sched.scheduledFor(created.ID), 1)
}

func TestCreateTasksBatchBodyLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) {
		c.Limits.MaxBody = 1024
		// The subtests run side by side: room for all of them at once
		// (TestCreateTasksBatchBytesInFlight tests the bound).
		c.Limits.BatchBytesInFlight = 1 << 30
	})
	tn := h.createTenant("acme")
	item := func(body string) string {
		b, err := json.Marshal(map[string]string{"url": "https://example.com/x", "body": body})
		require.NoError(t, err)
		return string(b)
	}

	t.Run("a batch far larger than a single call's limit", func(t *testing.T) {
		t.Parallel()
		// 1,000 bodies of 1 KiB: over 1 MiB, where a single call stops at 4 KiB + 64 KiB.
		items := make([]string, 1000)
		for i := range items {
			items[i] = item(strings.Repeat("a", 1024))
		}
		for _, res := range h.batch(tn, items...) {
			requireItemCreated(t, res)
		}
	})
	t.Run("each item's body is bounded as a single call's", func(t *testing.T) {
		t.Parallel()
		results := h.batch(tn, item(strings.Repeat("a", 1024)), item(strings.Repeat("a", 1025)))
		requireItemCreated(t, results[0])
		requireItemProblem(t, results[1], 1, http.StatusUnprocessableEntity, "body")
	})

	// 33 items of 1 MiB: over the batch limit of 32 MiB.
	big := make([]string, 33)
	for i := range big {
		big[i] = item(strings.Repeat("a", 1<<20))
	}
	huge := batchBody(big...)
	t.Run("a batch over 32 MiB", func(t *testing.T) {
		t.Parallel()
		p := requireProblem(t, h.postBatch(tn, huge), http.StatusRequestEntityTooLarge)
		require.Equal(t, problemTypePrefix+"too-large", p.Type)
	})
	t.Run("a batch over 32 MiB, chunked", func(t *testing.T) {
		t.Parallel()
		// Hiding the length makes the client send it chunked: the limit
		// must hold while the body is read, not only on Content-Length.
		resp := h.do(http.MethodPost, "/v1/tasks/batch", tn.APIKey, io.MultiReader(bytes.NewReader([]byte(huge))), nil)
		p := requireProblem(t, resp, http.StatusRequestEntityTooLarge)
		require.Equal(t, problemTypePrefix+"too-large", p.Type)
	})
	t.Run("other routes keep their limit", func(t *testing.T) {
		t.Parallel()
		resp := h.postTask(tn, item(strings.Repeat("a", 100<<10)), "")
		requireProblem(t, resp, http.StatusRequestEntityTooLarge)
	})
}

// TestCreateTasksBatchQuota: over the pending-task quota, the valid items
// that do not fit fail with a 429 problem each; the others are stored.
func TestCreateTasksBatchQuota(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	h.patchLimits(acme, `{"limits":{"max_pending_tasks":3}}`)
	h.createTask(acme, `{"url":"https://example.com/first","delay":"1h"}`)

	results := h.batch(acme,
		`{"url":"https://example.com/a","delay":"1h"}`,
		`{"url":"ftp://invalid"}`,
		`{"url":"https://example.com/b","delay":"1h"}`,
		`{"url":"https://example.com/c","delay":"1h"}`,
	)
	require.Len(t, results, 4)
	requireItemCreated(t, results[0])
	requireItemProblem(t, results[1], 1, http.StatusUnprocessableEntity, "url")
	requireItemCreated(t, results[2])
	require.Nil(t, results[3].Task)
	require.NotNil(t, results[3].Error)
	require.Equal(t, http.StatusTooManyRequests, results[3].Error.Status)
	require.Contains(t, results[3].Error.Type, "quota-exceeded")
}

// TestCreateTasksBatchBytesInFlight: the batch calls a node reads at once
// hold at most BatchBytesInFlight of request bodies, a tenant at most half
// of it; a call beyond gets 429 with Retry-After, and goes through once the
// others are done.
func TestCreateTasksBatchBytesInFlight(t *testing.T) {
	t.Parallel()
	const budget = 1 << 20
	h := newHarness(t, func(c *api.Config) { c.Limits.BatchBytesInFlight = budget })
	acme, other := h.createTenant("acme"), h.createTenant("other")

	// A batch of exactly size bytes, one task, padded with spaces.
	sized := func(size int) string {
		b := batchBody(`{"url": "https://example.com/x"}`)
		return b[:len(b)-1] + strings.Repeat(" ", size-len(b)) + "}"
	}
	post := func(tn tenant, size int) response {
		return h.postBatch(tn, sized(size))
	}

	// acme's first call, 600 KiB, arrives slowly and holds its share. Until
	// it has taken it, acme's probes below may hold a moment's share of their
	// own, and a slow call arriving then is rightly refused: it starts again.
	slow := sized(600 << 10)
	var (
		pw       *io.PipeWriter
		answered chan *http.Response
		refused  response
	)
	startSlow := func() {
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		req, err := http.NewRequest(http.MethodPost, h.URL+"/v1/tasks/batch", pr)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+acme.APIKey)
		req.ContentLength = int64(len(slow))
		answered = make(chan *http.Response, 1)
		go func(answered chan<- *http.Response) {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				close(answered)
				return
			}
			answered <- resp
		}(answered)
		_, err = io.WriteString(pw, slow[:1024])
		require.NoError(t, err)
	}
	startSlow()

	// Once it holds its share, acme's next call is over its half...
	deadline := time.Now().Add(10 * time.Second)
	for refused = post(acme, 1024); refused.Status != http.StatusTooManyRequests; refused = post(acme, 1024) {
		require.Equal(t, http.StatusOK, refused.Status, "body: %s", refused.Body)
		select {
		case resp, ok := <-answered:
			require.True(t, ok, "the slow batch's request failed")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the slow batch was answered before its body was sent: %s", body)
			pw.Close()
			startSlow()
		default:
		}
		require.True(t, time.Now().Before(deadline), "the slow batch never held its share")
	}
	p := requireProblem(t, refused, http.StatusTooManyRequests)
	require.Equal(t, problemTypePrefix+"batches-busy", p.Type)
	require.Equal(t, "1", refused.Header.Get("Retry-After"))

	// ...another tenant fits beside it, but not beyond the node's budget.
	require.Equal(t, http.StatusOK, post(other, 300<<10).Status)
	requireProblem(t, post(other, 500<<10), http.StatusTooManyRequests)

	_, err := io.WriteString(pw, slow[1024:])
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	resp, ok := <-answered
	require.True(t, ok, "the slow batch failed")
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// Its share is back.
	require.Equal(t, http.StatusOK, post(acme, 1024).Status)
	require.Equal(t, http.StatusOK, post(other, 500<<10).Status)
}
