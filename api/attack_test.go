package api_test

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/openapi"
	"github.com/hookwheel/hookwheel/tenants"
)

// specOperation is one operation of the OpenAPI document.
type specOperation struct {
	ID, Method, Path string
	// Security is the scheme the operation requires: "apiKey",
	// "adminToken", or "" for none.
	Security string
	// Scope is a tenant operation's x-hookwheel-scope.
	Scope   string
	HasBody bool
}

// specOperations lists the document's operations, by operation id.
func specOperations(t *testing.T) []specOperation {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	require.NoError(t, err)
	var ops []specOperation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			o := specOperation{ID: op.OperationID, Method: method, Path: path, HasBody: op.RequestBody != nil}
			reqs := doc.Security
			if op.Security != nil {
				reqs = *op.Security
			}
			for _, req := range reqs {
				for name := range req {
					o.Security = name
				}
			}
			o.Scope, _ = op.Extensions["x-hookwheel-scope"].(string)
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b specOperation) int { return strings.Compare(a.ID, b.ID) })
	return ops
}

// operationsSecuredBy returns the operations that require scheme; there must
// be some, or the attacks on them would prove nothing.
func operationsSecuredBy(t *testing.T, scheme string) []specOperation {
	t.Helper()
	var out []specOperation
	for _, op := range specOperations(t) {
		if op.Security == scheme {
			out = append(out, op)
		}
	}
	require.NotEmpty(t, out, "no operation requires %s", scheme)
	return out
}

// fillPath puts values in a path's parameters.
func fillPath(t *testing.T, path string, values map[string]string) string {
	t.Helper()
	for name, v := range values {
		path = strings.ReplaceAll(path, "{"+name+"}", v)
	}
	require.NotContains(t, path, "{", "the test gives no value for a parameter of %s", path)
	return path
}

// unknownKeyID is a well-formed key id that names no key.
const unknownKeyID = "aaaaaaaaaaaaa"

// nowhere fills any path with ids (and names) that name nothing.
func nowhere() map[string]string {
	return map[string]string{"id": uuid.Must(uuid.NewV7()).String(), "key_id": unknownKeyID, "name": "no-such-topic",
		"key": "no-such-flow-key"}
}

// call sends an operation's request, with body when the operation takes one.
func (h *harness) call(op specOperation, path, token, body string, headers map[string]string) response {
	h.t.Helper()
	if !op.HasBody {
		return h.do(op.Method, path, token, nil, headers)
	}
	return h.do(op.Method, path, token, strings.NewReader(body), headers)
}

// get requires a 200 for a GET as token and returns the body.
func (h *harness) get(path, token string) string {
	h.t.Helper()
	resp := h.do(http.MethodGet, path, token, nil, nil)
	require.Equal(h.t, http.StatusOK, resp.Status, "GET %s: %s", path, resp.Body)
	return string(resp.Body)
}

// snapshot is what tn sees of its own data through every list the API
// has, and through extra paths: equal snapshots mean nothing changed.
func (h *harness) snapshot(tn tenant, extra ...string) map[string]string {
	h.t.Helper()
	out := map[string]string{}
	for _, path := range append([]string{"/v1/tasks", "/v1/schedules", "/v1/topics", "/v1/keys", "/v1/signing-secrets", "/v1/audit", "/v1/limits"}, extra...) {
		out[path] = h.get(path, tn.APIKey)
	}
	return out
}

// createKey creates a key for tn with POST /v1/keys.
func (h *harness) createKey(tn tenant, body string) openapi.APIKeyCreated {
	h.t.Helper()
	resp := h.do(http.MethodPost, "/v1/keys", tn.APIKey, strings.NewReader(body), nil)
	require.Equal(h.t, http.StatusCreated, resp.Status, "create key: %s", resp.Body)
	var key openapi.APIKeyCreated
	require.NoError(h.t, json.Unmarshal(resp.Body, &key))
	return key
}

// TestAttackOtherTenantsIDs: tenant B calls every tenant endpoint that takes
// an id with tenant A's ids. Each answers 404, word for word the answer for
// an id that names nothing, and A's data is as it was. Lists, filters, bulk
// cancels and idempotency keys do not cross tenants either.
func TestAttackOtherTenantsIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a, b := h.createTenant("a"), h.createTenant("b")

	// One of A's resources of each kind an id names, in a state each
	// operation would change.
	task := h.createTask(a, `{"url": "https://example.com/a", "delay": "1h"}`)
	dead := h.createTask(a, `{"url": "https://example.com/a-dead", "delay": "1h"}`)
	finishForReplay(h, dead.ID, "dead", 3, 500, ptr("receiver answered 500"))
	active := h.createSchedule(a, scheduleBody(t, nil))
	paused := h.createSchedule(a, scheduleBody(t, map[string]any{"paused": true}))
	h.exec(`UPDATE tasks SET schedule_id = $1 WHERE id = $2`, active.ID, task.ID)
	key := h.createKey(a, `{"name": "a's second key"}`)
	idempotent := h.postTask(a, `{"url": "https://example.com/a-idem", "delay": "1h"}`, "order-1")
	require.Equal(t, http.StatusCreated, idempotent.Status, "body: %s", idempotent.Body)
	var aIdempotent openapi.Task
	require.NoError(t, json.Unmarshal(idempotent.Body, &aIdempotent))
	topic := h.putTopic(a, "orders", `{"endpoints": [{"url": "https://example.com/a-topic"}]}`)
	publish := h.publish(a, `{"topic": "orders", "delay": "1h"}`, "")
	flow := h.putFlowLimit(a, "customer-1", `{"rate": 10, "parallelism": 2}`)
	portalLink, _ := h.createPortalLink(a, `{"label": "customer:1"}`)

	// An edit and replay of A's dead task would send it where B likes.
	const stealingEdit = `{"url": "https://thief.example/", "headers": {"X-Stolen": "1"}, "body": "b's"}`
	ids := map[string]struct {
		params map[string]string
		body   string
	}{
		"getTask":           {params: map[string]string{"id": task.ID.String()}},
		"rescheduleTask":    {params: map[string]string{"id": task.ID.String()}, body: `{"delay": "2h"}`},
		"cancelTask":        {params: map[string]string{"id": task.ID.String()}},
		"listTaskAttempts":  {params: map[string]string{"id": dead.ID.String()}},
		"replayTask":        {params: map[string]string{"id": dead.ID.String()}, body: stealingEdit},
		"getSchedule":       {params: map[string]string{"id": active.ID.String()}},
		"deleteSchedule":    {params: map[string]string{"id": active.ID.String()}},
		"pauseSchedule":     {params: map[string]string{"id": active.ID.String()}},
		"resumeSchedule":    {params: map[string]string{"id": paused.ID.String()}},
		"nextScheduleTimes": {params: map[string]string{"id": active.ID.String()}},
		"updateSchedule":    {params: map[string]string{"id": active.ID.String()}, body: `{"url": "https://thief.example/"}`},
		"revokeKey":         {params: map[string]string{"key_id": key.ID}},
		"getTopic":          {params: map[string]string{"name": topic.Name}},
		"deleteTopic":       {params: map[string]string{"name": topic.Name}},
		"getPublish":        {params: map[string]string{"id": publish.ID.String()}},
		"getFlowLimit":      {params: map[string]string{"key": flow.Key}},
		"deleteFlowLimit":   {params: map[string]string{"key": flow.Key}},
		"revokePortalLink":  {params: map[string]string{"id": portalLink.ID.String()}},
	}
	aPaths := []string{"/v1/tasks/" + task.ID.String(), "/v1/tasks/" + dead.ID.String(), "/v1/tasks/" + dead.ID.String() + "/attempts",
		"/v1/schedules/" + active.ID.String(), "/v1/schedules/" + paused.ID.String(), "/v1/topics/orders",
		"/v1/publishes/" + publish.ID.String(), "/v1/tasks?publish_id=" + publish.ID.String(), "/v1/flow-keys/customer-1",
		"/v1/flow-keys", "/v1/portal-links"}
	before := h.snapshot(a, aPaths...)
	announced := len(h.Sched.scheduledFor(dead.ID))

	for _, op := range operationsSecuredBy(t, "apiKey") {
		if !strings.Contains(op.Path, "{") || op.ID == "putTopic" || op.ID == "putFlowLimit" {
			// A topic's name and a flow key are the tenant's own: B
			// putting A's makes B's ("A's topic name" and "A's flow key"
			// below).
			continue
		}
		tc, ok := ids[op.ID]
		require.True(t, ok, "%s %s takes an id: give this test one of tenant A's for it", op.Method, op.Path)
		t.Run(op.ID, func(t *testing.T) {
			resp := h.call(op, fillPath(t, op.Path, tc.params), b.APIKey, tc.body, nil)
			p := requireProblem(t, resp, http.StatusNotFound)
			require.Equal(t, problemTypePrefix+"not-found", p.Type)
			require.NotContains(t, string(resp.Body), a.ID.String())

			// The same answer as for an id that names nothing, but for
			// the id itself.
			fake := nowhere()
			missing := h.call(op, fillPath(t, op.Path, fake), b.APIKey, tc.body, nil)
			require.Equal(t, resp.Status, missing.Status)
			for name, v := range tc.params {
				require.Equal(t,
					strings.ReplaceAll(string(resp.Body), v, "<"+name+">"),
					strings.ReplaceAll(string(missing.Body), fake[name], "<"+name+">"))
			}
		})
	}

	t.Run("lists and bulk cancels by A's schedule", func(t *testing.T) {
		for _, query := range []string{"schedule_id=" + active.ID.String(), "url=https%3A%2F%2Fexample.com%2Fa", "idempotency_key=order-1",
			"publish_id=" + publish.ID.String()} {
			require.JSONEq(t, `{"data": []}`, h.get("/v1/tasks?"+query, b.APIKey), query)
		}
		for _, body := range []string{
			`{"schedule_id": "` + active.ID.String() + `"}`,
			`{"status": "scheduled"}`,
			`{"created_after": "2000-01-01T00:00:00Z"}`,
		} {
			resp := h.do(http.MethodPost, "/v1/tasks/cancel", b.APIKey, strings.NewReader(body), nil)
			require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
			require.JSONEq(t, `{"canceled": 0}`, string(resp.Body), body)
		}
	})

	t.Run("bulk replays of A's dead tasks", func(t *testing.T) {
		for _, body := range []string{
			`{}`,
			`{"dry_run": true}`,
			`{"url": "https://example.com/a-dead"}`,
			`{"schedule_id": "` + active.ID.String() + `"}`,
		} {
			resp := h.do(http.MethodPost, "/v1/tasks/replay", b.APIKey, strings.NewReader(body), nil)
			require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
			require.JSONEq(t, `{"matched": 0, "replayed": 0}`, string(resp.Body), body)
		}
	})

	t.Run("A's idempotency key", func(t *testing.T) {
		// Keys are per tenant: B's request with A's key is B's own task,
		// not a replay of A's.
		resp := h.postTask(b, `{"url": "https://example.com/a-idem", "delay": "1h"}`, "order-1")
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
		var own openapi.Task
		require.NoError(t, json.Unmarshal(resp.Body, &own))
		require.NotEqual(t, aIdempotent.ID, own.ID)

		results := h.batch(b, `{"url": "https://example.com/a-idem", "delay": "1h", "idempotency_key": "order-1"}`)
		require.NotNil(t, results[0].Task, "item: %+v", results[0].Error)
		require.Equal(t, own.ID, results[0].Task.ID, "a replay of B's own task")
	})

	t.Run("A's topic name", func(t *testing.T) {
		// B's topic of the same name is B's; a publish to it reaches B's
		// endpoints only.
		h.putTopic(b, "orders", `{"endpoints": [{"url": "https://example.com/b-topic"}]}`)
		own := h.publish(b, `{"topic": "orders", "delay": "1h"}`, "")
		require.Len(t, own.Tasks, 1)
		require.Equal(t, "https://example.com/b-topic", own.Tasks[0].URL)
	})

	t.Run("A's flow key", func(t *testing.T) {
		// B's limits of the same key are B's: created, not replacing A's.
		resp := h.do(http.MethodPut, "/v1/flow-keys/customer-1", b.APIKey, strings.NewReader(`{"rate": 1}`), nil)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		var list openapi.FlowLimitList
		require.NoError(t, json.Unmarshal([]byte(h.get("/v1/flow-keys", b.APIKey)), &list))
		require.Len(t, list.Data, 1)
		require.Equal(t, 1, list.Data[0].Rate, "B's own limits")
	})

	require.Equal(t, before, h.snapshot(a, aPaths...), "B changed A's data")
	require.Zero(t, h.Sched.canceledCount(task.ID))
	require.Len(t, h.Sched.scheduledFor(dead.ID), announced, "B's replay announced A's task")
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/limits", key.APIKey, nil, nil).Status, "A's key still works")
}

// TestAttackInvalidCredentials: every tenant endpoint refuses, with 401, an
// expired key, a revoked key, a key id given another tenant's secret, and the
// admin token; none of the calls changes anything.
func TestAttackInvalidCredentials(t *testing.T) {
	t.Parallel()
	// Every call fails from one address: room for all of them
	// (TestAuthFailureThrottle tests the throttle).
	h := newHarness(t, func(c *api.Config) { c.AuthFailures.Max = 100_000 })
	a, b := h.createTenant("a"), h.createTenant("b")

	expired := h.createKey(a, `{"name": "expired", "expires_at": "`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	revoked := h.createKey(a, `{"name": "revoked"}`)
	for _, key := range []string{expired.APIKey, revoked.APIKey} {
		require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/limits", key, nil, nil).Status, "the key works before")
	}
	// An hour is too long to wait; the expiry is moved instead.
	h.exec(`UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.ID)
	require.Equal(t, http.StatusOK, h.do(http.MethodDelete, "/v1/keys/"+revoked.ID, a.APIKey, nil, nil).Status)
	aKeyID, ok := tenants.KeyID(a.APIKey)
	require.True(t, ok)
	bSecret := b.APIKey[strings.LastIndex(b.APIKey, "_")+1:]

	credentials := []struct{ name, token string }{
		{"expired key", expired.APIKey},
		{"revoked key", revoked.APIKey},
		{"key id with another tenant's secret", "hw_" + aKeyID + "_" + bSecret},
		{"admin token", adminToken},
	}
	before := h.snapshot(a)
	for _, cred := range credentials {
		t.Run(cred.name, func(t *testing.T) {
			t.Parallel()
			for _, op := range operationsSecuredBy(t, "apiKey") {
				resp := h.call(op, fillPath(t, op.Path, nowhere()), cred.token, `{}`, nil)
				require.Equal(t, http.StatusUnauthorized, resp.Status, "%s: %s", op.ID, resp.Body)
				requireUnauthorized(t, resp)
			}
		})
	}
	t.Cleanup(func() { require.Equal(t, before, h.snapshot(a), "a refused call changed A's data") })
}

// TestAttackAdminEndpoints: no tenant key opens an operator endpoint, not
// even one holding every scope: each answers 401. With the admin API
// disabled, each answers 403 whatever is sent. None of the calls changes
// anything.
func TestAttackAdminEndpoints(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.AuthFailures.Max = 100_000 })
	disabled := newHarness(t, func(c *api.Config) { c.AdminToken = "" })
	tn := h.createTenant("acme")
	key := h.createKey(tn, `{"name": "all scopes", "scopes": ["*"]}`)
	params := map[string]string{"id": tn.ID.String(), "key_id": key.ID, "name": "free"}
	body := `{"name": "mallory"}`

	auditBefore := h.get("/v1/admin/audit", adminToken)
	tenantBefore := h.snapshot(tn)
	for _, op := range operationsSecuredBy(t, "adminToken") {
		t.Run(op.ID, func(t *testing.T) {
			t.Parallel()
			path := fillPath(t, op.Path, params)
			for _, token := range []string{tn.APIKey, key.APIKey} {
				requireUnauthorized(t, h.call(op, path, token, body, nil))
			}
			for _, token := range []string{"", tn.APIKey, adminToken} {
				p := requireProblem(t, disabled.call(op, path, token, body, nil), http.StatusForbidden)
				require.Equal(t, problemTypePrefix+"forbidden", p.Type)
			}
		})
	}
	t.Cleanup(func() {
		require.Equal(t, auditBefore, h.get("/v1/admin/audit", adminToken), "a refused operator call changed something")
		require.Equal(t, tenantBefore, h.snapshot(tn))
	})
}

// TestAttackAdminTokenGuessing: guessing the admin token is throttled like
// guessing keys, by the same count: an address that failed too often is
// refused with 429 even with the right token, other addresses are not, and
// it is let through again once the window is over.
func TestAttackAdminTokenGuessing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) {
		c.AuthFailures = api.AuthFailureLimit{Max: 3, Window: 10 * time.Second}
		// The harness's client connects from loopback, standing for a proxy
		// that names the client.
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	tn := h.createTenant("acme")
	from := func(ip, token string) response {
		return h.do(http.MethodGet, "/v1/admin/breakers", token, nil, map[string]string{"X-Forwarded-For": ip})
	}

	for _, guess := range []string{"admin", "admin-secreT", strings.Repeat("x", 200)} {
		requireUnauthorized(t, from("203.0.113.5", guess))
	}
	resp := from("203.0.113.5", adminToken)
	p := requireProblem(t, resp, http.StatusTooManyRequests)
	require.Equal(t, problemTypePrefix+"too-many-auth-failures", p.Type)
	require.Equal(t, "10", resp.Header.Get("Retry-After"))
	// One count for both kinds of credential.
	tenantCall := h.do(http.MethodGet, "/v1/limits", tn.APIKey, nil, map[string]string{"X-Forwarded-For": "203.0.113.5"})
	requireProblem(t, tenantCall, http.StatusTooManyRequests)
	require.Equal(t, http.StatusOK, from("203.0.113.6", adminToken).Status, "another address is not held back")

	h.Clock.Advance(10 * time.Second)
	require.Equal(t, http.StatusOK, from("203.0.113.5", adminToken).Status, "the window over, it is let through")
}

// TestAttackMissingScope: on every tenant endpoint, a key holding every scope
// but the one the endpoint needs is refused with 403 insufficient-scope before
// anything is done, and a key holding only that scope is let through.
func TestAttackMissingScope(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := h.createTenant("acme")
	scopes := model.Scopes()[1:] // every scope but "*"
	mint := func(scopes []model.Scope) string {
		b, err := json.Marshal(map[string]any{"scopes": scopes})
		require.NoError(t, err)
		resp := h.do(http.MethodPost, "/v1/admin/tenants/"+tn.ID.String()+"/keys", adminToken, strings.NewReader(string(b)), nil)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		var key openapi.APIKeyCreated
		require.NoError(t, json.Unmarshal(resp.Body, &key))
		return key.APIKey
	}
	allBut, only := map[string]string{}, map[string]string{}
	for _, s := range scopes {
		allBut[string(s)] = mint(slices.DeleteFunc(slices.Clone(scopes), func(o model.Scope) bool { return o == s }))
		only[string(s)] = mint([]model.Scope{s})
	}
	// Bodies that would succeed, so that a refusal is the scope's doing.
	bodies := map[string]string{
		"createTask":       `{"url": "https://example.com/x", "delay": "1h"}`,
		"createTasksBatch": `{"tasks": [{"url": "https://example.com/x", "delay": "1h"}]}`,
		"cancelTasks":      `{"status": "scheduled"}`,
		"rescheduleTask":   `{"delay": "2h"}`,
		"createSchedule":   `{"cron": "@hourly", "url": "https://example.com/x"}`,
		// A key hands on only scopes it holds; keys:manage is the one
		// the key letting this call through holds.
		"createKey":        `{"scopes": ["keys:manage"]}`,
		"replayTasks":      `{"dry_run": true}`,
		"putTopic":         `{"endpoints": [{"url": "https://example.com/x"}]}`,
		"putFlowLimit":     `{"rate": 10}`,
		"createPortalLink": `{"label": "customer:1"}`,
		"updateSettings":   `{"operations_url": "https://example.com/ops"}`,
	}
	ops := operationsSecuredBy(t, "apiKey")

	before := h.snapshot(tn)
	for _, op := range ops {
		if op.Scope == "any" {
			continue
		}
		require.Contains(t, allBut, op.Scope, "%s needs an unknown scope", op.ID)
		resp := h.call(op, fillPath(t, op.Path, nowhere()), allBut[op.Scope], bodies[op.ID], nil)
		p := requireProblem(t, resp, http.StatusForbidden)
		require.Equal(t, problemTypePrefix+"insufficient-scope", p.Type, op.ID)
		require.Contains(t, p.Detail, op.Scope)
	}
	require.Equal(t, before, h.snapshot(tn), "a call refused for its scope changed something")

	for _, op := range ops {
		needs := []string{op.Scope}
		if op.Scope == "any" {
			needs = nil
			for _, s := range scopes {
				needs = append(needs, string(s))
			}
		}
		for _, scope := range needs {
			resp := h.call(op, fillPath(t, op.Path, nowhere()), only[scope], bodies[op.ID], nil)
			require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.Status,
				"%s with a key holding only %s: %s", op.ID, scope, resp.Body)
		}
	}
}
