package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hookwheel/hookwheel/api"
	"github.com/hookwheel/hookwheel/internal/netguard"
	"github.com/hookwheel/hookwheel/openapi"
)

// TestTenantRetryDefaults: a tenant's retry defaults apply to its tasks that
// give no policy, field by field; a task's own fields still win; null
// restores hookwheel's default.
func TestTenantRetryDefaults(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	other := h.createTenant("other")
	path := "/v1/admin/tenants/" + acme.ID.String()

	resp := h.do(http.MethodGet, path, adminToken, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{"max_attempts":10,"min_backoff":"1s","max_backoff":"1h"}`, string(rawKeys(t, resp.Body)["retry"]))

	resp = h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"retry":{"max_attempts":3,"max_backoff":"2m"}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{"max_attempts":3,"min_backoff":"1s","max_backoff":"2m"}`, string(rawKeys(t, resp.Body)["retry"]))

	task := h.createTask(acme, `{"url":"https://example.com/a"}`)
	require.Equal(t, 3, task.MaxAttempts)
	require.Equal(t, "1s", *task.Retry.MinBackoff)
	require.Equal(t, "2m", *task.Retry.MaxBackoff)

	task = h.createTask(acme, `{"url":"https://example.com/a","retry":{"max_attempts":7}}`)
	require.Equal(t, 7, task.MaxAttempts, "the task's own field wins")
	require.Equal(t, "2m", *task.Retry.MaxBackoff, "the tenant's default fills the rest")

	task = h.createTask(other, `{"url":"https://example.com/a"}`)
	require.Equal(t, 10, task.MaxAttempts, "another tenant keeps hookwheel's defaults")

	// A task whose own min_backoff exceeds the tenant's max_backoff is refused by name.
	resp = h.postTask(acme, `{"url":"https://example.com/a","retry":{"min_backoff":"5m"}}`, "")
	requireFieldProblem(t, resp, "retry.max_backoff")

	resp = h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"retry":{"max_backoff":null}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{"max_attempts":3,"min_backoff":"1s","max_backoff":"1h"}`, string(rawKeys(t, resp.Body)["retry"]))
}

func TestUpdateTenantValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	path := "/v1/admin/tenants/" + acme.ID.String()

	tests := []struct {
		body  string
		field string
	}{
		{`{"retry":{"max_attempts":0}}`, "retry.max_attempts"},
		{`{"retry":{"max_attempts":"three"}}`, "retry.max_attempts"},
		{`{"retry":{"min_backoff":"1ms"}}`, "retry.min_backoff"},
		{`{"retry":{"min_backoff":"soon"}}`, "retry.min_backoff"},
		{`{"retry":{"max_backoff":"500ms"}}`, "retry.max_backoff"},
		{`{"retry":{"max_backoff":"200h"}}`, "retry.max_backoff"},
		{`{"retry":{"max_backof":"1h"}}`, "retry.max_backof"},
	}
	for _, tt := range tests {
		resp := h.do(http.MethodPatch, path, adminToken, strings.NewReader(tt.body), nil)
		requireFieldProblem(t, resp, tt.field)
	}
	requireProblem(t, h.do(http.MethodPatch, "/v1/admin/tenants/"+uuid.NewString(), adminToken, strings.NewReader(`{}`), nil), http.StatusNotFound)
	requireProblem(t, h.do(http.MethodGet, "/v1/admin/tenants/"+uuid.NewString(), adminToken, nil, nil), http.StatusNotFound)
	requireProblem(t, h.do(http.MethodGet, path, acme.APIKey, nil, nil), http.StatusUnauthorized)
	requireProblem(t, h.do(http.MethodGet, "/v1/admin/tenants/nope", adminToken, nil, nil), http.StatusBadRequest)
}

func TestListBreakersWithoutDispatcher(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, err := h.client(adminToken).ListBreakersWithResponse(t.Context())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), string(resp.Body))
	require.Equal(t, []openapi.Breaker{}, resp.JSON200.Data)
	requireProblem(t, h.do(http.MethodGet, "/v1/admin/breakers", "", nil, nil), http.StatusUnauthorized)
}

// TestTenantTargetGrants: the operator grants private ranges to one tenant;
// that tenant's tasks may target them, no other tenant's may; null
// withdraws them. Malformed grants are refused by field.
func TestTenantTargetGrants(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *api.Config) { c.Guard = netguard.New(netguard.Config{}) })
	acme, other := h.createTenant("acme"), h.createTenant("other")
	path := "/v1/admin/tenants/" + acme.ID.String()
	patch := func(body string) response {
		return h.do(http.MethodPatch, path, adminToken, strings.NewReader(body), nil)
	}
	internal := `{"url": "http://10.20.3.4:8080/hook"}`
	requireFieldProblem(t, h.postTask(acme, internal, ""), "url")

	resp := patch(`{"target_allow_cidrs": ["10.20.0.0/16", "fd00::1/8"]}`)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `["10.20.0.0/16", "fd00::/8"]`, string(rawKeys(t, resp.Body)["target_allow_cidrs"]))
	resp = h.do(http.MethodGet, path, adminToken, nil, nil)
	require.JSONEq(t, `["10.20.0.0/16", "fd00::/8"]`, string(rawKeys(t, resp.Body)["target_allow_cidrs"]))

	h.createTask(acme, internal)
	requireFieldProblem(t, h.postTask(acme, `{"url": "http://10.21.0.1/hook"}`, ""), "url")
	requireFieldProblem(t, h.postTask(other, internal, ""), "url")

	// Other settings leave the grants alone; null withdraws them.
	require.Equal(t, http.StatusOK, patch(`{"limits": {"max_pending_tasks": 5}}`).Status)
	h.createTask(acme, internal)
	resp = patch(`{"target_allow_cidrs": null}`)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.NotContains(t, rawKeys(t, resp.Body), "target_allow_cidrs")
	requireFieldProblem(t, h.postTask(acme, internal, ""), "url")

	for body, field := range map[string]string{
		`{"target_allow_cidrs": "10.0.0.0/8"}`:           "target_allow_cidrs",
		`{"target_allow_cidrs": ["10.0.0.0/8", "nope"]}`: "target_allow_cidrs[1]",
		`{"target_allow_cidrs": ["10.0.0.300/8"]}`:       "target_allow_cidrs[0]",
	} {
		requireFieldProblem(t, patch(body), field)
	}
}
