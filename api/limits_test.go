package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/internal/model"
	"github.com/hookwheel/hookwheel/store"
	"github.com/hookwheel/hookwheel/tenants"
)

// patchLimits sets a tenant's limits through the admin API and returns the
// tenant's "limits" as the response shows them.
func (h *harness) patchLimits(tn tenant, body string) string {
	h.t.Helper()
	resp := h.do(http.MethodPatch, "/v1/admin/tenants/"+tn.ID.String(), adminToken, strings.NewReader(body), nil)
	require.Equal(h.t, http.StatusOK, resp.Status, "patch %s: %s", body, resp.Body)
	return string(rawKeys(h.t, resp.Body)["limits"])
}

// TestTenantLimitsAdmin: the operator sets limits as a whole object, sees
// them with the tenant, and the tenant sees them at GET /v1/limits with its
// pending tasks.
func TestTenantLimitsAdmin(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	path := "/v1/admin/tenants/" + acme.ID.String()

	resp := h.do(http.MethodGet, path, adminToken, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{}`, string(rawKeys(t, resp.Body)["limits"]), "no limits of its own")
	require.JSONEq(t, `{}`, string(rawKeys(t, resp.Body)["effective_limits"]), "a node without defaults limits nothing")

	full := `{"api_rate":0.5,"api_burst":3,"max_pending_tasks":100,"max_schedules":7,"dispatch_rate":20,"dispatch_concurrency":4,
		"targets":{"API.Partner.com":{"dispatch_rate":2},"slow.example":{"dispatch_concurrency":1},"fast.example":{"dispatch_rate":0}}}`
	want := `{"api_rate":0.5,"api_burst":3,"max_pending_tasks":100,"max_schedules":7,"dispatch_rate":20,"dispatch_concurrency":4,
		"targets":{"api.partner.com":{"dispatch_rate":2},"slow.example":{"dispatch_concurrency":1},"fast.example":{"dispatch_rate":0}}}`
	require.JSONEq(t, want, h.patchLimits(acme, `{"limits":`+full+`}`), "hosts are lowercased; a 0 override is kept")

	resp = h.do(http.MethodGet, path, adminToken, nil, nil)
	require.JSONEq(t, want, string(rawKeys(t, resp.Body)["limits"]))
	require.JSONEq(t, `{"max_attempts":10,"min_backoff":"1s","max_backoff":"1h"}`, string(rawKeys(t, resp.Body)["retry"]))

	// Changing the retry defaults alone keeps the limits.
	resp = h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"retry":{"max_attempts":3}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, want, string(rawKeys(t, resp.Body)["limits"]))

	// The tenant sees its limits and its pending tasks.
	h.createTask(acme, `{"url":"https://example.com/a","delay":"1h"}`)
	h.createTask(acme, `{"url":"https://example.com/b","delay":"1h"}`)
	view, err := acme.Client.GetLimitsWithResponse(t.Context())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, view.StatusCode(), string(view.Body))
	require.Equal(t, 2, view.JSON200.PendingTasks)
	require.JSONEq(t, want, string(rawKeys(t, view.Body)["limits"]))

	// A tenant's max_timeout bounds its tasks' timeouts, and cuts the default.
	require.JSONEq(t, `{"max_timeout":"10s"}`, h.patchLimits(acme, `{"limits":{"max_timeout":"10s"}}`))
	requireFieldProblem(t, h.postTask(acme, `{"url":"https://example.com/c","timeout":"11s"}`, ""), "timeout")
	require.Equal(t, "10s", h.createTask(acme, `{"url":"https://example.com/c","timeout":"10s"}`).Timeout)
	require.Equal(t, "10s", h.createTask(acme, `{"url":"https://example.com/c"}`).Timeout, "the 30s default is cut to it")
	require.Equal(t, "30s", h.createTask(h.createTenant("third"), `{"url":"https://example.com/c"}`).Timeout)

	// Replaced as a whole; a 0 is the tenant's own "unlimited", and shown.
	require.JSONEq(t, `{"max_pending_tasks":5,"dispatch_rate":0}`, h.patchLimits(acme, `{"limits":{"max_pending_tasks":5,"dispatch_rate":0}}`))
	// {} and null leave every limit to the node's defaults (none here).
	require.JSONEq(t, `{}`, h.patchLimits(acme, `{"limits":{}}`))
	h.patchLimits(acme, `{"limits":{"max_pending_tasks":5}}`)
	require.JSONEq(t, `{}`, h.patchLimits(acme, `{"limits":null}`))

	// Another tenant is untouched, and sees only its own.
	other := h.createTenant("other")
	resp = h.do(http.MethodGet, "/v1/limits", other.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{"plan":null,"limits":{},"pending_tasks":0}`, string(resp.Body))

	requireProblem(t, h.do(http.MethodGet, "/v1/limits", "", nil, nil), http.StatusUnauthorized)
	requireProblem(t, h.do(http.MethodPatch, "/v1/admin/tenants/"+uuid.NewString(), adminToken,
		strings.NewReader(`{"limits":{"api_rate":1}}`), nil), http.StatusNotFound)
}

// TestTenantLimitsDefaults: a tenant that sets no limit has the node's
// defaults, field by field under its own; an explicit 0 lifts one; the
// defaults are applied when the tenant is read, so changing them changes
// every tenant without an override.
func TestTenantLimitsDefaults(t *testing.T) {
	t.Parallel()
	defaults := model.Limits{APIRate: 1000, APIBurst: 2000, MaxPendingTasks: 2, MaxSchedules: 1, MaxTimeout: 20 * time.Second,
		DispatchRate: 10, DispatchConcurrency: 4}
	h := newHarnessDefaults(t, defaults)
	acme := h.createTenant("acme")
	path := "/v1/admin/tenants/" + acme.ID.String()
	effective := `{"api_rate":1000,"api_burst":2000,"max_pending_tasks":2,"max_schedules":1,"max_timeout":"20s",
		"dispatch_rate":10,"dispatch_concurrency":4}`

	resp := h.do(http.MethodGet, path, adminToken, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{}`, string(rawKeys(t, resp.Body)["limits"]), "no limits of its own")
	require.JSONEq(t, effective, string(rawKeys(t, resp.Body)["effective_limits"]), "the node's defaults")
	view := h.do(http.MethodGet, "/v1/limits", acme.APIKey, nil, nil)
	require.JSONEq(t, `{"plan":null,"limits":`+effective+`,"pending_tasks":0}`, string(view.Body))

	// The defaults are enforced on a tenant that never had limits.
	h.createTask(acme, `{"url":"https://example.com/a","delay":"1h"}`)
	h.createTask(acme, `{"url":"https://example.com/b","delay":"1h"}`)
	p := requireProblem(t, h.postTask(acme, `{"url":"https://example.com/c","delay":"1h"}`, ""), http.StatusTooManyRequests)
	require.Contains(t, p.Type, "quota-exceeded")
	requireFieldProblem(t, h.postTask(acme, `{"url":"https://example.com/c","timeout":"21s"}`, ""), "timeout")
	require.Equal(t, "20s", h.createTenantTaskTimeout(h.createTenant("timeouts")), "the default timeout is cut to the default max_timeout")

	// An override replaces its field alone; 0 lifts the limit for this tenant.
	resp = h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"limits":{"max_pending_tasks":0,"max_schedules":5}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{"max_pending_tasks":0,"max_schedules":5}`, string(rawKeys(t, resp.Body)["limits"]))
	require.JSONEq(t, `{"api_rate":1000,"api_burst":2000,"max_schedules":5,"max_timeout":"20s","dispatch_rate":10,"dispatch_concurrency":4}`,
		string(rawKeys(t, resp.Body)["effective_limits"]))
	h.createTask(acme, `{"url":"https://example.com/c","delay":"1h"}`)

	// Read time, not creation time: other defaults reach the tenant's
	// unset fields at once, never its own.
	other := tenants.New(tenants.Config{Store: h.DB, DefaultLimits: model.Limits{MaxPendingTasks: 50, MaxSchedules: 9, DispatchRate: 3}})
	got, err := other.Get(t.Context(), acme.ID)
	require.NoError(t, err)
	require.Equal(t, model.Limits{MaxSchedules: 5, DispatchRate: 3}, got.Limits)

	// {} gives every limit back to the defaults.
	resp = h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"limits":{}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, effective, string(rawKeys(t, resp.Body)["effective_limits"]))
	requireProblem(t, h.postTask(acme, `{"url":"https://example.com/d","delay":"1h"}`, ""), http.StatusTooManyRequests)
}

// createTenantTaskTimeout creates a task without a timeout for tn and
// returns the timeout it got.
func (h *harness) createTenantTaskTimeout(tn tenant) string {
	h.t.Helper()
	return h.createTask(tn, `{"url":"https://example.com/t"}`).Timeout
}

func TestTenantLimitsValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	path := "/v1/admin/tenants/" + acme.ID.String()
	h.patchLimits(acme, `{"limits":{"api_rate":7}}`)

	tests := []struct {
		limits string
		field  string
	}{
		{`{"api_rate":-1}`, "limits.api_rate"},
		{`{"api_rate":1e9}`, "limits.api_rate"},
		{`{"api_rate":"fast"}`, "limits.api_rate"},
		{`{"api_rate":0,"api_burst":5}`, "limits.api_burst"},
		{`{"api_rate":1,"api_burst":-1}`, "limits.api_burst"},
		{`{"api_rate":1,"api_burst":1.5}`, "limits.api_burst"},
		{`{"max_pending_tasks":-3}`, "limits.max_pending_tasks"},
		{`{"max_schedules":-1}`, "limits.max_schedules"},
		{`{"max_timeout":"500ms"}`, "limits.max_timeout"},
		{`{"max_timeout":"6m"}`, "limits.max_timeout"},
		{`{"max_timeout":"soon"}`, "limits.max_timeout"},
		{`{"max_timeout":30}`, "limits.max_timeout"},
		{`{"max_schedules":2000000}`, "limits.max_schedules"},
		{`{"dispatch_rate":-0.5}`, "limits.dispatch_rate"},
		{`{"dispatch_concurrency":1000000}`, "limits.dispatch_concurrency"},
		{`{"dispatch_rat":1}`, "limits.dispatch_rat"},
		{`{"targets":{"api.partner.com:443":{"dispatch_rate":1}}}`, "limits.targets.api.partner.com:443"},
		{`{"targets":{"https://api.partner.com":{"dispatch_rate":1}}}`, "limits.targets.https://api.partner.com"},
		{`{"targets":{"*.partner.com":{"dispatch_rate":1}}}`, "limits.targets.*.partner.com"},
		{`{"targets":{"":{"dispatch_rate":1}}}`, "limits.targets."},
		{`{"targets":{"a.example":{"dispatch_rate":-1}}}`, "limits.targets.a.example.dispatch_rate"},
		{`{"targets":{"a.example":{"dispatch_concurrency":"x"}}}`, "limits.targets.a.example.dispatch_concurrency"},
		{`{"targets":{"a.example":{"api_rate":1}}}`, "limits.targets.a.example.api_rate"},
		{`{"targets":{"a.example":5}}`, "limits.targets.a.example"},
		{`{"targets":{"A.example":{},"a.example":{}}}`, "limits.targets.a.example"},
	}
	for _, tt := range tests {
		t.Run(tt.limits, func(t *testing.T) {
			t.Parallel()
			resp := h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"limits":`+tt.limits+`}`), nil)
			requireFieldProblem(t, resp, tt.field)
		})
	}
	t.Cleanup(func() {
		// Nothing invalid was stored.
		resp := h.do(http.MethodGet, path, adminToken, nil, nil)
		require.JSONEq(t, `{"api_rate":7}`, string(rawKeys(t, resp.Body)["limits"]))
	})
}

// TestAPIRateLimit: a tenant over its API rate gets 429 with Retry-After;
// every response of a limited tenant says where it stands; other tenants and
// unlimited ones are not touched.
func TestAPIRateLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	other := h.createTenant("other")
	// One call per 10 s, bursts of 3: the test's own pace cannot matter.
	h.patchLimits(acme, `{"limits":{"api_rate":0.1,"api_burst":3}}`)

	calls := []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/v1/limits", http.StatusOK},
		{http.MethodGet, "/v1/tasks/" + uuid.NewString(), http.StatusNotFound},
		{http.MethodPost, "/v1/tasks", http.StatusUnprocessableEntity},
	}
	for i, call := range calls {
		var body *strings.Reader
		if call.method == http.MethodPost {
			body = strings.NewReader(`{"url":"not a url"}`)
		}
		var resp response
		if body != nil {
			resp = h.do(call.method, call.path, acme.APIKey, body, nil)
		} else {
			resp = h.do(call.method, call.path, acme.APIKey, nil, nil)
		}
		require.Equal(t, call.status, resp.Status, "%s %s: %s", call.method, call.path, resp.Body)
		require.Equal(t, "3", resp.Header.Get("RateLimit-Limit"), "call %d", i)
		require.Equal(t, strconv.Itoa(2-i), resp.Header.Get("RateLimit-Remaining"), "call %d", i)
		reset, err := strconv.Atoi(resp.Header.Get("RateLimit-Reset"))
		require.NoError(t, err)
		require.InDelta(t, 10*(i+1), reset, 1, "call %d: seconds until the burst is whole again", i)
		require.Empty(t, resp.Header.Get("Retry-After"))
	}

	for _, path := range []string{"/v1/limits", "/v1/tasks"} {
		resp := h.do(http.MethodGet, path, acme.APIKey, nil, nil)
		p := requireProblem(t, resp, http.StatusTooManyRequests)
		require.Equal(t, problemTypePrefix+"rate-limited", p.Type)
		require.Equal(t, "10", resp.Header.Get("Retry-After"))
		require.Equal(t, "3", resp.Header.Get("RateLimit-Limit"))
		require.Equal(t, "0", resp.Header.Get("RateLimit-Remaining"))
		require.Equal(t, "30", resp.Header.Get("RateLimit-Reset"))
	}

	// Another tenant, without an API rate, is neither limited nor told of one.
	for range 5 {
		resp := h.do(http.MethodGet, "/v1/limits", other.APIKey, nil, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		require.Empty(t, resp.Header.Get("RateLimit-Limit"))
	}
	// Neither are calls without a tenant.
	resp := h.do(http.MethodGet, "/v1/limits", "", nil, nil)
	requireProblem(t, resp, http.StatusUnauthorized)
	require.Empty(t, resp.Header.Get("RateLimit-Limit"))
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/healthz", "", nil, nil).Status)

	// Lifting the limit applies at the next call.
	h.patchLimits(acme, `{"limits":{}}`)
	resp = h.do(http.MethodGet, "/v1/limits", acme.APIKey, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Empty(t, resp.Header.Get("RateLimit-Limit"))

	metrics := string(h.do(http.MethodGet, "/metrics", "", nil, nil).Body)
	require.Contains(t, metrics, `hookwheel_api_limit_refusals_total{limit="rate"} 2`)
	require.Contains(t, metrics, `hookwheel_http_request_duration_seconds_count{code="429",method="GET",route="/v1/limits"} 1`)
}

// TestAPIRateLimitFailsOpen: without Redis, calls go through unchecked and
// are counted; a limiter outage is not an API outage.
func TestAPIRateLimitFailsOpen(t *testing.T) {
	t.Parallel()
	unreachable, err := store.OpenRedis(store.RedisConfig{URL: "redis://" + closedAddr(t) + "/0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = unreachable.Close() })
	h := newHarness(t, withRedis(unreachable))
	acme := h.createTenant("acme")
	h.patchLimits(acme, `{"limits":{"api_rate":0.1,"api_burst":1}}`)

	for range 3 {
		resp := h.do(http.MethodGet, "/v1/limits", acme.APIKey, nil, nil)
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		require.Empty(t, resp.Header.Get("RateLimit-Limit"), "no decision, no headers")
	}
	metrics := string(h.do(http.MethodGet, "/metrics", "", nil, nil).Body)
	require.Contains(t, metrics, "hookwheel_api_rate_limit_unchecked_total 3")
}

// TestPendingTaskQuota: creating a task over the tenant's max_pending_tasks
// gets 429 with Retry-After; finished or canceled tasks free the quota; a
// repeat of a created task's Idempotency-Key still gets its task back.
func TestPendingTaskQuota(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	other := h.createTenant("other")
	h.patchLimits(acme, `{"limits":{"max_pending_tasks":2}}`)
	const body = `{"url":"https://example.com/hook","delay":"1h"}`

	resp := h.postTask(acme, body, "first")
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	var first struct{ ID uuid.UUID }
	require.NoError(t, json.Unmarshal(resp.Body, &first))
	h.createTask(acme, body)

	resp = h.postTask(acme, body, "")
	p := requireProblem(t, resp, http.StatusTooManyRequests)
	require.Equal(t, problemTypePrefix+"quota-exceeded", p.Type)
	require.Contains(t, p.Detail, "at most 2 pending tasks")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	requireProblem(t, h.postTask(acme, body, "new-key"), http.StatusTooManyRequests)

	// Bad input is still a 422, not a 429.
	requireFieldProblem(t, h.postTask(acme, `{"url":"nope"}`, ""), "url")

	// A repeat of a request that created its task creates nothing: it passes.
	resp = h.postTask(acme, body, "first")
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))

	// The quota is the tenant's own.
	h.createTask(other, body)
	h.createTask(other, body)
	h.createTask(other, body)

	// Finished tasks do not count; dispatching ones do.
	h.exec(`UPDATE tasks SET status = 'dispatching' WHERE id = $1`, first.ID)
	requireProblem(t, h.postTask(acme, body, ""), http.StatusTooManyRequests)
	h.exec(`UPDATE tasks SET status = 'delivered', next_attempt_at = NULL WHERE id = $1`, first.ID)
	h.createTask(acme, body)
	requireProblem(t, h.postTask(acme, body, ""), http.StatusTooManyRequests)

	view, err := acme.Client.GetLimitsWithResponse(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, view.JSON200.PendingTasks)

	// Raising the quota applies at the next call.
	h.patchLimits(acme, `{"limits":{"max_pending_tasks":3}}`)
	h.createTask(acme, body)

	metrics := string(h.do(http.MethodGet, "/metrics", "", nil, nil).Body)
	require.Contains(t, metrics, `hookwheel_api_limit_refusals_total{limit="pending_tasks"} 4`)
}
