package api_test

import (
	"encoding/json"
	"fmt"
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

// putTopicRaw sends body to PUT /v1/topics/{name} as tenant.
func (h *harness) putTopicRaw(tn tenant, name, body string) response {
	h.t.Helper()
	return h.do(http.MethodPut, "/v1/topics/"+name, tn.APIKey, strings.NewReader(body), nil)
}

// putTopic puts a topic and requires a 200 or 201, returning it.
func (h *harness) putTopic(tn tenant, name, body string) openapi.Topic {
	h.t.Helper()
	resp := h.putTopicRaw(tn, name, body)
	require.Contains(h.t, []int{http.StatusOK, http.StatusCreated}, resp.Status, "put topic: %s", resp.Body)
	var topic openapi.Topic
	require.NoError(h.t, json.Unmarshal(resp.Body, &topic))
	return topic
}

// publish posts a task with a topic and requires a 201, returning the
// publish.
func (h *harness) publish(tn tenant, body, idempotencyKey string) openapi.Publish {
	h.t.Helper()
	resp := h.postTask(tn, body, idempotencyKey)
	require.Equal(h.t, http.StatusCreated, resp.Status, "publish: %s", resp.Body)
	var pub openapi.Publish
	require.NoError(h.t, json.Unmarshal(resp.Body, &pub))
	require.Equal(h.t, "/v1/publishes/"+pub.ID.String(), resp.Header.Get("Location"))
	return pub
}

// endpointsBody is a topic body of n endpoints, https://e<i>.example/hook.
func endpointsBody(n int) string {
	eps := make([]string, n)
	for i := range eps {
		eps[i] = fmt.Sprintf(`{"url": "https://e%d.example/hook"}`, i)
	}
	return `{"endpoints": [` + strings.Join(eps, ",") + `]}`
}

func TestTopicsCRUD(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")

	resp := h.putTopicRaw(acme, "orders", `{"description": "order events", "endpoints": [
		{"url": "https://billing.example/hooks", "name": "billing"}, {"url": "https://shipping.example/hooks"}]}`)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.Equal(t, "/v1/topics/orders", resp.Header.Get("Location"))
	var created openapi.Topic
	require.NoError(t, json.Unmarshal(resp.Body, &created))
	require.Equal(t, "orders", created.Name)
	require.Equal(t, "order events", created.Description)
	require.Equal(t, []openapi.TopicEndpoint{{URL: "https://billing.example/hooks", Name: "billing"},
		{URL: "https://shipping.example/hooks"}}, created.Endpoints)
	var raw struct{ Endpoints []map[string]any }
	require.NoError(t, json.Unmarshal(resp.Body, &raw))
	require.NotContains(t, raw.Endpoints[1], "name", "an endpoint without a name has none in the answer")

	// The same PUT again replaces it whole: 200.
	resp = h.putTopicRaw(acme, "orders", `{"endpoints": [{"url": "https://audit.example/hooks"}]}`)
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	var replaced openapi.Topic
	require.NoError(t, json.Unmarshal(resp.Body, &replaced))
	require.Empty(t, replaced.Description)
	require.Equal(t, []openapi.TopicEndpoint{{URL: "https://audit.example/hooks"}}, replaced.Endpoints)
	require.True(t, replaced.CreatedAt.Equal(created.CreatedAt))

	got, err := acme.Client.GetTopicWithResponse(t.Context(), "orders")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode(), "body: %s", got.Body)
	require.Equal(t, replaced.Endpoints, got.JSON200.Endpoints)
	requireProblem(t, h.do(http.MethodGet, "/v1/topics/Orders", acme.APIKey, nil, nil), http.StatusNotFound)

	// A topic may be left without endpoints.
	empty := h.putTopic(acme, "empty", `{"endpoints": []}`)
	require.Equal(t, []openapi.TopicEndpoint{}, empty.Endpoints)

	// Lists go in byte order, a page at a time.
	for _, name := range []string{"a", "B", "a.b", "Z"} {
		h.putTopic(acme, name, `{"endpoints": []}`)
	}
	var names []string
	params := &openapi.ListTopicsParams{Limit: ptr(2)}
	for {
		page, err := acme.Client.ListTopicsWithResponse(t.Context(), params)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, page.StatusCode(), "body: %s", page.Body)
		for _, tp := range page.JSON200.Data {
			names = append(names, tp.Name)
		}
		if page.JSON200.NextCursor == nil {
			break
		}
		params.Cursor = page.JSON200.NextCursor
	}
	require.Equal(t, []string{"B", "Z", "a", "a.b", "empty", "orders"}, names)
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/topics?cursor=bm90IGEgbmFtZQ", acme.APIKey, nil, nil), "cursor")
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/topics?limit=501", acme.APIKey, nil, nil), "limit")

	deleted := h.do(http.MethodDelete, "/v1/topics/orders", acme.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, deleted.Status, "body: %s", deleted.Body)
	var gone openapi.Topic
	require.NoError(t, json.Unmarshal(deleted.Body, &gone))
	require.Equal(t, replaced.Endpoints, gone.Endpoints)
	requireProblem(t, h.do(http.MethodGet, "/v1/topics/orders", acme.APIKey, nil, nil), http.StatusNotFound)
	requireProblem(t, h.do(http.MethodDelete, "/v1/topics/orders", acme.APIKey, nil, nil), http.StatusNotFound)
}

func TestPutTopicValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
	acme := h.createTenant("acme")

	cases := []struct {
		name, topic, body, field string
	}{
		{"name starting with a dot", ".orders", `{"endpoints": []}`, "name"},
		{"name with a space", "or%20ders", `{"endpoints": []}`, "name"},
		{"name with a slash", "a%2Fb", `{"endpoints": []}`, "name"},
		{"name too long", strings.Repeat("a", 101), `{"endpoints": []}`, "name"},
		{"no endpoints", "orders", `{"description": "x"}`, "endpoints"},
		{"endpoints null", "orders", `{"endpoints": null}`, "endpoints"},
		{"too many endpoints", "orders", endpointsBody(101), "endpoints"},
		{"endpoint without a url", "orders", `{"endpoints": [{"name": "billing"}]}`, "endpoints[0].url"},
		{"endpoint url not http", "orders", `{"endpoints": [{"url": "ftp://example.com/x"}]}`, "endpoints[0].url"},
		{"endpoint url with credentials", "orders", `{"endpoints": [{"url": "https://u:p@example.com/x"}]}`, "endpoints[0].url"},
		{"endpoint url on loopback", "orders", `{"endpoints": [{"url": "https://example.com/"}, {"url": "http://127.0.0.1:8080/x"}]}`, "endpoints[1].url"},
		{"endpoint url private", "orders", `{"endpoints": [{"url": "http://10.1.2.3/x"}]}`, "endpoints[0].url"},
		{"endpoint url twice", "orders", `{"endpoints": [{"url": "https://a.example/"}, {"url": "https://a.example/"}]}`, "endpoints[1].url"},
		{"endpoint name twice", "orders", `{"endpoints": [{"url": "https://a.example/", "name": "x"}, {"url": "https://b.example/", "name": "x"}]}`, "endpoints[1].name"},
		{"endpoint name invalid", "orders", `{"endpoints": [{"url": "https://a.example/", "name": "-x"}]}`, "endpoints[0].name"},
		{"endpoint name empty", "orders", `{"endpoints": [{"url": "https://a.example/", "name": ""}]}`, "endpoints[0].name"},
		{"endpoint field unknown", "orders", `{"endpoints": [{"url": "https://a.example/", "headers": {}}]}`, "endpoints[0].headers"},
		{"endpoint url of the wrong type", "orders", `{"endpoints": [{"url": 42}]}`, "endpoints[0].url"},
		{"endpoint not an object", "orders", `{"endpoints": ["https://a.example/"]}`, "endpoints[0]"},
		{"description too long", "orders", `{"description": "` + strings.Repeat("é", 501) + `", "endpoints": []}`, "description"},
		{"unknown field", "orders", `{"endpoints": [], "urls": []}`, "urls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireFieldProblem(t, h.putTopicRaw(acme, tc.topic, tc.body), tc.field)
		})
	}
	t.Cleanup(func() {
		require.JSONEq(t, `{"data": []}`, h.get("/v1/topics", acme.APIKey), "a refused topic was stored")
	})

	// The bounds themselves are accepted.
	h.putTopic(acme, strings.Repeat("a", 100), endpointsBody(100))
	h.putTopic(acme, "A-1_b.c", `{"description": "`+strings.Repeat("é", 500)+`", "endpoints": []}`)
	h.exec(`DELETE FROM topics`)
}

func TestTopicQuota(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	// 1,000 topics, written straight to the table: the PUTs would only
	// take longer.
	h.exec(`INSERT INTO topics (tenant_id, name) SELECT $1, 't' || g FROM generate_series(1, 1000) AS g`, acme.ID)

	resp := h.putTopicRaw(acme, "one-more", `{"endpoints": []}`)
	p := requireProblem(t, resp, http.StatusTooManyRequests)
	require.Equal(t, problemTypePrefix+"topic-quota-exceeded", p.Type)
	require.Contains(t, p.Detail, "at most 1000 topics")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	requireProblem(t, h.do(http.MethodGet, "/v1/topics/one-more", acme.APIKey, nil, nil), http.StatusNotFound)

	// Replacing one it has adds none.
	h.putTopic(acme, "t7", `{"endpoints": [{"url": "https://a.example/"}]}`)
	require.Equal(t, http.StatusOK, h.do(http.MethodDelete, "/v1/topics/t7", acme.APIKey, nil, nil).Status)
	resp = h.putTopicRaw(acme, "one-more", `{"endpoints": []}`)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.Contains(t, string(h.do(http.MethodGet, "/metrics", "", nil, nil).Body), `hookwheel_api_limit_refusals_total{limit="topics"} 1`)
}

func TestPublish(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	h.putTopic(acme, "orders", `{"endpoints": [{"url": "https://billing.example/hooks", "name": "billing"},
		{"url": "https://shipping.example/hooks"}, {"url": "https://audit.example/hooks", "name": "audit"}]}`)

	const body = `{"topic": "orders", "method": "PUT", "headers": {"Content-Type": "application/json"}, "body": "{\"order\": 42}",
		"delay": "10s", "timeout": "5s", "retry": {"max_attempts": 3, "min_backoff": "2s"}, "labels": {"team": "payments"},
		"ordering_key": "order-42", "callback": "https://example.com/done", "failure_callback": "https://example.com/failed"}`
	pub := h.publish(acme, body, "order-42")
	require.Equal(t, "orders", pub.Topic)
	require.Equal(t, ptr("order-42"), pub.IdempotencyKey)
	require.Equal(t, 3, pub.TaskCount)
	require.Equal(t, openapi.PublishStatusCounts{Scheduled: 3}, pub.StatusCounts)
	require.Len(t, pub.Tasks, 3)
	wantRunAt := h.Clock.Now().Add(10 * time.Second)
	for i, want := range []struct{ url, name string }{
		{"https://billing.example/hooks", "billing"}, {"https://shipping.example/hooks", ""}, {"https://audit.example/hooks", "audit"},
	} {
		task := pub.Tasks[i]
		require.Equal(t, want.url, task.URL, "endpoint order")
		if want.name == "" {
			require.Nil(t, task.EndpointName)
		} else {
			require.Equal(t, &want.name, task.EndpointName)
		}
		require.Equal(t, ptr("orders"), task.Topic)
		require.Equal(t, &pub.ID, task.PublishID)
		require.Nil(t, task.IdempotencyKey, "the publish holds the key")
		// Every field of the request applies to each task.
		require.Equal(t, openapi.HTTPMethod("PUT"), task.Method)
		require.Equal(t, map[string]string{"Content-Type": "application/json"}, task.Headers)
		require.Empty(t, task.Body, "a publish's tasks come without their bodies")
		require.Equal(t, `{"order": 42}`, h.getTask(acme, task.ID).Body)
		require.True(t, task.RunAt.Equal(wantRunAt), "run_at %s", task.RunAt)
		require.Equal(t, "5s", task.Timeout)
		require.Equal(t, 3, task.MaxAttempts)
		require.Equal(t, openapi.Labels{"team": "payments"}, task.Labels)
		require.Equal(t, ptr("order-42"), task.OrderingKey)
		require.Equal(t, ptr("https://example.com/done"), task.Callback)
		require.Equal(t, ptr("https://example.com/failed"), task.FailureCallback)
		// Due within the look-ahead: told to the local dispatcher.
		require.Len(t, h.Sched.scheduledFor(task.ID), 1)
	}

	// The publish reads back, and its tasks list, by its id.
	got, err := acme.Client.GetPublishWithResponse(t.Context(), pub.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode(), "body: %s", got.Body)
	require.Equal(t, pub.ID, got.JSON200.ID)
	require.Equal(t, taskIDs(pub.Tasks), taskIDs(got.JSON200.Tasks))
	require.Equal(t, pub.StatusCounts, got.JSON200.StatusCounts)
	require.Equal(t, 3, got.JSON200.TaskCount)
	h.exec(`UPDATE tasks SET status = 'dead', next_attempt_at = NULL WHERE id = $1`, pub.Tasks[1].ID)
	h.exec(`UPDATE tasks SET status = 'delivered', next_attempt_at = NULL WHERE id = $1`, pub.Tasks[2].ID)
	got, err = acme.Client.GetPublishWithResponse(t.Context(), pub.ID)
	require.NoError(t, err)
	require.Equal(t, openapi.PublishStatusCounts{Scheduled: 1, Dead: 1, Delivered: 1}, got.JSON200.StatusCounts)
	list, err := acme.Client.ListTasksWithResponse(t.Context(), &openapi.ListTasksParams{PublishID: &pub.ID})
	require.NoError(t, err)
	require.ElementsMatch(t, taskIDs(pub.Tasks), taskIDs(list.JSON200.Data))
	list, err = acme.Client.ListTasksWithResponse(t.Context(), &openapi.ListTasksParams{PublishID: &pub.ID, Status: ptr(openapi.TaskStatusDead)})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{pub.Tasks[1].ID}, taskIDs(list.JSON200.Data), "the publish's dead letters")
	list, err = acme.Client.ListTasksWithResponse(t.Context(), &openapi.ListTasksParams{Topic: ptr("orders")})
	require.NoError(t, err)
	require.Len(t, list.JSON200.Data, 3)
	requireFieldProblem(t, h.do(http.MethodGet, "/v1/tasks?topic=not%20a%20name", acme.APIKey, nil, nil), "topic")
	requireProblem(t, h.do(http.MethodGet, "/v1/publishes/"+uuid.Must(uuid.NewV7()).String(), acme.APIKey, nil, nil), http.StatusNotFound)

	// The same key and body again: the same publish, as it is now, and
	// nothing stored.
	resp := h.postTask(acme, body, "order-42")
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	var again openapi.Publish
	require.NoError(t, json.Unmarshal(resp.Body, &again))
	require.Equal(t, *got.JSON200, again)
	// The key is the publish's: a different publish with it is refused...
	p := requireProblem(t, h.postTask(acme, strings.Replace(body, `"delay": "10s"`, `"delay": "20s"`, 1), "order-42"),
		http.StatusUnprocessableEntity)
	require.Equal(t, problemTypePrefix+"idempotency-key-reused", p.Type)
	// ...and a single task's own keys are apart.
	task := h.postTask(acme, `{"url": "https://example.com/single"}`, "order-42")
	require.Equal(t, http.StatusCreated, task.Status, "body: %s", task.Body)
	list, err = acme.Client.ListTasksWithResponse(t.Context(), &openapi.ListTasksParams{PublishID: &pub.ID})
	require.NoError(t, err)
	require.Len(t, list.JSON200.Data, 3, "nothing more published")

	// Deleting the topic leaves the publish and its tasks as they are;
	// publishing to it is then refused.
	require.Equal(t, http.StatusOK, h.do(http.MethodDelete, "/v1/topics/orders", acme.APIKey, nil, nil).Status)
	got, err = acme.Client.GetPublishWithResponse(t.Context(), pub.ID)
	require.NoError(t, err)
	require.Len(t, got.JSON200.Tasks, 3)
	requireFieldProblem(t, h.postTask(acme, `{"topic": "orders"}`, ""), "topic")
}

func TestPublishValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	h.putTopic(acme, "orders", endpointsBody(2))
	h.putTopic(acme, "empty", `{"endpoints": []}`)

	cases := []struct{ name, body, field string }{
		{"url and topic", `{"url": "https://example.com/x", "topic": "orders"}`, "url"},
		{"neither url nor topic", `{"body": "x"}`, "url"},
		{"topic name invalid", `{"topic": "no such/topic"}`, "topic"},
		{"topic empty string", `{"topic": ""}`, "topic"},
		{"topic of the wrong type", `{"topic": 42}`, "topic"},
		{"unknown topic", `{"topic": "invoices"}`, "topic"},
		{"topic without endpoints", `{"topic": "empty"}`, "topic"},
		{"topic named in another case", `{"topic": "Orders"}`, "topic"},
		{"a task field still checked", `{"topic": "orders", "delay": "soon"}`, "delay"},
		{"a callback still checked", `{"topic": "orders", "callback": "ftp://example.com/done"}`, "callback"},
		{"a failure callback still checked", `{"topic": "orders", "failure_callback": "https://user:secret@example.com/failed"}`, "failure_callback"},
		{"an ordering key still checked", `{"topic": "orders", "ordering_key": "` + strings.Repeat("k", 256) + `"}`, "ordering_key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireFieldProblem(t, h.postTask(acme, tc.body, ""), tc.field)
			requireItemProblem(t, h.batch(acme, tc.body)[0], 0, http.StatusUnprocessableEntity, tc.field)
		})
	}
	t.Cleanup(func() {
		require.JSONEq(t, `{"data": []}`, h.get("/v1/tasks", acme.APIKey), "a refused publish stored tasks")
	})
}

// TestPublishFanoutBounds: a publish stores its body once per endpoint, at
// most 32 MiB in all.
func TestPublishFanoutBounds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	h.putTopic(acme, "wide", endpointsBody(33))
	h.putTopic(acme, "narrow", endpointsBody(32))
	megabyte := strings.Repeat("x", 1<<20)

	resp := h.postTask(acme, `{"topic": "wide", "body": "`+megabyte+`"}`, "")
	p := requireProblem(t, resp, http.StatusUnprocessableEntity)
	require.Equal(t, problemTypePrefix+"fan-out-too-large", p.Type)
	require.Len(t, p.Errors, 1)
	require.Equal(t, "body", p.Errors[0].Field)
	require.Contains(t, p.Errors[0].Message, "33 × 1048576 bytes")
	require.JSONEq(t, `{"data": []}`, h.get("/v1/tasks", acme.APIKey))

	pub := h.publish(acme, `{"topic": "narrow", "body": "`+megabyte+`"}`, "")
	require.Len(t, pub.Tasks, 32, "32 MiB is within the bound")
}

// TestPublishQuota: every task of a publish counts against
// max_pending_tasks, and a publish fits whole or not at all.
func TestPublishQuota(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	h.patchLimits(acme, `{"limits":{"max_pending_tasks":4}}`)
	h.putTopic(acme, "orders", endpointsBody(3))

	h.publish(acme, `{"topic": "orders", "delay": "1h"}`, "first")
	resp := h.postTask(acme, `{"topic": "orders", "delay": "1h"}`, "second")
	p := requireProblem(t, resp, http.StatusTooManyRequests)
	require.Equal(t, problemTypePrefix+"quota-exceeded", p.Type)
	require.Contains(t, p.Detail, "this request would add 3")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	// A repeat of the publish that was stored still gets it back.
	resp = h.postTask(acme, `{"topic": "orders", "delay": "1h"}`, "first")
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	// One single task still fits.
	h.createTask(acme, `{"url": "https://example.com/x", "delay": "1h"}`)
	list, err := acme.Client.ListTasksWithResponse(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, list.JSON200.Data, 4)

	// In a batch, a publish counts one per endpoint and fits whole or
	// fails, and so do the items after it.
	h.patchLimits(acme, `{"limits":{"max_pending_tasks":9}}`)
	results := h.batch(acme,
		`{"url": "https://example.com/a", "delay": "1h"}`,
		`{"topic": "orders", "delay": "1h"}`,
		`{"topic": "orders", "delay": "1h"}`,
		`{"url": "https://example.com/b", "delay": "1h"}`)
	requireItemCreated(t, results[0])
	require.NotNil(t, results[1].Publish, "item 1: %+v", results[1].Error)
	require.Len(t, results[1].Publish.Tasks, 3)
	for i := 2; i < 4; i++ {
		p := requireItemProblem(t, results[i], i, http.StatusTooManyRequests, "")
		require.Equal(t, problemTypePrefix+"quota-exceeded", p.Type)
	}
}

func TestPublishBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	h.putTopic(acme, "orders", endpointsBody(2))
	h.putTopic(acme, "invoices", endpointsBody(1))

	results := h.batch(acme,
		`{"url": "https://example.com/single", "idempotency_key": "k0"}`,
		`{"topic": "orders", "body": "a", "idempotency_key": "k1"}`,
		`{"topic": "invoices", "delay": "1h"}`,
		`{"topic": "orders", "body": "a", "idempotency_key": "k1"}`,
		`{"topic": "orders", "body": "b", "idempotency_key": "k1"}`,
		`{"topic": "nope"}`,
		`{"topic": "orders", "idempotency_key": "k0"}`)
	requireItemCreated(t, results[0])
	pub := results[1].Publish
	require.NotNil(t, pub, "item 1: %+v", results[1].Error)
	require.Nil(t, results[1].Replayed)
	require.Len(t, pub.Tasks, 2)
	require.Equal(t, ptr("k1"), pub.IdempotencyKey)
	require.NotNil(t, results[2].Publish)
	require.Len(t, results[2].Publish.Tasks, 1)
	// The same key in the same batch: a replay of the earlier item, or a
	// reused key.
	require.NotNil(t, results[3].Publish)
	require.Equal(t, pub.ID, results[3].Publish.ID)
	require.Equal(t, ptr(true), results[3].Replayed)
	p := requireItemProblem(t, results[4], 4, http.StatusUnprocessableEntity, "")
	require.Equal(t, problemTypePrefix+"idempotency-key-reused", p.Type)
	requireItemProblem(t, results[5], 5, http.StatusUnprocessableEntity, "topic")
	// Publishes' keys are apart from tasks'.
	require.NotNil(t, results[6].Publish, "item 6: %+v", results[6].Error)

	// The whole batch again: every item a replay, nothing stored.
	before := h.get("/v1/tasks", acme.APIKey)
	again := h.batch(acme,
		`{"topic": "orders", "body": "a", "idempotency_key": "k1"}`,
		`{"topic": "orders", "idempotency_key": "k0"}`)
	require.Equal(t, pub.ID, again[0].Publish.ID)
	require.Equal(t, ptr(true), again[0].Replayed)
	require.Equal(t, results[6].Publish.ID, again[1].Publish.ID)
	require.Equal(t, before, h.get("/v1/tasks", acme.APIKey))

	// Each task due soon is told to the local dispatcher.
	for _, task := range pub.Tasks {
		require.Len(t, h.Sched.scheduledFor(task.ID), 1)
	}
	require.Empty(t, h.Sched.scheduledFor(results[2].Publish.Tasks[0].ID), "due in an hour: the loader's")
}

// TestPublishBatchFanoutBounds: a batch's publishes together make at most
// 10,000 tasks; one past it fails and later ones are still considered.
func TestPublishBatchFanoutBounds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	h.putTopic(acme, "wide", endpointsBody(100))
	h.putTopic(acme, "half", endpointsBody(50))

	// 99 × 100 + 50 tasks, then 100 more would pass 10,000; 50 do not.
	items := make([]string, 0, 102)
	for range 99 {
		items = append(items, `{"topic": "wide", "delay": "1h"}`)
	}
	items = append(items, `{"topic": "half", "delay": "1h"}`, `{"topic": "wide", "delay": "1h"}`, `{"topic": "half", "delay": "1h"}`)
	results := h.batch(acme, items...)
	for i := range 100 {
		require.NotNil(t, results[i].Publish, "item %d: %+v", i, results[i].Error)
	}
	p := requireItemProblem(t, results[100], 100, http.StatusUnprocessableEntity, "")
	require.Equal(t, problemTypePrefix+"fan-out-too-large", p.Type)
	require.Equal(t, "topic", p.Errors[0].Field)
	require.NotNil(t, results[101].Publish, "a later, smaller publish still fits: %+v", results[101].Error)
	view, err := acme.Client.GetLimitsWithResponse(t.Context())
	require.NoError(t, err)
	require.Equal(t, 10_000, view.JSON200.PendingTasks)
}

// TestBulkCallsByPublish: the bulk cancel and the bulk replay take a
// publish, or a topic, as a condition: the tasks of one publish are
// withdrawn, or its dead letters replayed, and no other task.
func TestBulkCallsByPublish(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	h.putTopic(acme, "orders", endpointsBody(3))
	h.putTopic(acme, "invoices", endpointsBody(2))
	first := h.publish(acme, `{"topic": "orders", "delay": "1h"}`, "")
	second := h.publish(acme, `{"topic": "orders", "delay": "1h"}`, "")
	invoice := h.publish(acme, `{"topic": "invoices", "delay": "1h"}`, "")
	single := h.createTask(acme, `{"url": "https://example.com/single", "delay": "1h"}`)

	post := func(path, body string) string {
		t.Helper()
		resp := h.do(http.MethodPost, path, acme.APIKey, strings.NewReader(body), nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s %s: %s", path, body, resp.Body)
		return string(resp.Body)
	}
	require.JSONEq(t, `{"canceled": 3}`, post("/v1/tasks/cancel", `{"publish_id": "`+first.ID.String()+`"}`))
	for _, task := range first.Tasks {
		require.Equal(t, "canceled", h.taskStatus(acme, task.ID))
	}
	require.Equal(t, "scheduled", h.taskStatus(acme, second.Tasks[0].ID), "another publish of the same topic is left alone")
	require.Equal(t, "scheduled", h.taskStatus(acme, single.ID))

	// Every task of the topic's publishes left dead, and the invoice too:
	// the replay by publish takes the one publish's.
	for _, task := range append(append([]openapi.Task{}, second.Tasks...), invoice.Tasks...) {
		finishForReplay(h, task.ID, "dead", 1, 500, ptr("receiver answered 500"))
	}
	require.JSONEq(t, `{"matched": 3, "replayed": 0}`, post("/v1/tasks/replay", `{"publish_id": "`+second.ID.String()+`", "dry_run": true}`))
	require.JSONEq(t, `{"matched": 2, "replayed": 0}`, post("/v1/tasks/replay", `{"topic": "invoices", "dry_run": true}`))
	require.JSONEq(t, `{"matched": 3, "replayed": 3}`, post("/v1/tasks/replay", `{"publish_id": "`+second.ID.String()+`"}`))
	for _, task := range second.Tasks {
		require.Equal(t, "scheduled", h.taskStatus(acme, task.ID))
	}
	require.Equal(t, "dead", h.taskStatus(acme, invoice.Tasks[0].ID))
	require.JSONEq(t, `{"canceled": 3}`, post("/v1/tasks/cancel", `{"topic": "orders", "status": "scheduled"}`))

	for _, tc := range []struct{ path, body, field string }{
		{"/v1/tasks/cancel", `{"publish_id": "nope"}`, "publish_id"},
		{"/v1/tasks/cancel", `{"topic": "no such topic"}`, "topic"},
		{"/v1/tasks/replay", `{"publish_id": "nope"}`, "publish_id"},
		{"/v1/tasks/replay", `{"topic": ""}`, "topic"},
	} {
		requireFieldProblem(t, h.do(http.MethodPost, tc.path, acme.APIKey, strings.NewReader(tc.body), nil), tc.field)
	}
}
