package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdminPlans: the operator makes plans, puts tenants on them, and the
// tenants' effective limits are their own over the plan's over the node's
// defaults; a plan in use cannot be deleted.
func TestAdminPlans(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	put := func(name, body string) response {
		return h.do(http.MethodPut, "/v1/admin/plans/"+name, adminToken, strings.NewReader(body), nil)
	}

	resp := put("free", `{"api_rate": 10, "max_schedules": 0, "tasks_per_day": 5, "deliveries_per_day": 9}`)
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	keys := rawKeys(t, resp.Body)
	require.JSONEq(t, `"free"`, string(keys["name"]))
	require.JSONEq(t, `{"api_rate": 10, "max_schedules": 0, "tasks_per_day": 5, "deliveries_per_day": 9}`, string(keys["limits"]))
	resp = put("free", `{"api_rate": 10, "tasks_per_day": 5, "deliveries_per_day": 9}`)
	require.Equal(t, http.StatusOK, resp.Status, "a second put replaces: %s", resp.Body)
	require.JSONEq(t, `{"api_rate": 10, "tasks_per_day": 5, "deliveries_per_day": 9}`, string(rawKeys(t, resp.Body)["limits"]))
	require.Equal(t, http.StatusCreated, put("pro", `{}`).Status)

	resp = h.do(http.MethodGet, "/v1/admin/plans", adminToken, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var list struct {
		Data []struct {
			Name string `json:"name"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &list))
	require.Len(t, list.Data, 2)
	require.Equal(t, "free", list.Data[0].Name)
	require.Equal(t, "pro", list.Data[1].Name)
	resp = h.do(http.MethodGet, "/v1/admin/plans/free", adminToken, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{"api_rate": 10, "tasks_per_day": 5, "deliveries_per_day": 9}`, string(rawKeys(t, resp.Body)["limits"]))
	requireProblem(t, h.do(http.MethodGet, "/v1/admin/plans/nope", adminToken, nil, nil), http.StatusNotFound)
	requireProblem(t, h.do(http.MethodGet, "/v1/admin/plans", "", nil, nil), http.StatusUnauthorized)

	// A tenant created on the plan; its own limits override the plan's.
	resp = h.do(http.MethodPost, "/v1/admin/tenants", adminToken, strings.NewReader(`{"name": "acme", "plan": "free"}`), nil)
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	require.JSONEq(t, `"free"`, string(rawKeys(t, resp.Body)["plan"]))
	id := strings.Trim(string(rawKeys(t, resp.Body)["id"]), `"`)
	key := strings.Trim(string(rawKeys(t, resp.Body)["api_key"]), `"`)
	path := "/v1/admin/tenants/" + id
	resp = h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"limits": {"tasks_per_day": 7, "deliveries_per_day": 0}}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	keys = rawKeys(t, resp.Body)
	require.JSONEq(t, `"free"`, string(keys["plan"]))
	require.JSONEq(t, `{"tasks_per_day": 7, "deliveries_per_day": 0}`, string(keys["limits"]))
	require.JSONEq(t, `{"api_rate": 10, "tasks_per_day": 7}`, string(keys["effective_limits"]),
		"own over the plan's; 0 lifts the plan's deliveries_per_day")

	// The tenant sees its plan and limits; a plan's change shows on the next read.
	require.Equal(t, http.StatusOK, put("free", `{"api_rate": 20, "max_pending_tasks": 3}`).Status)
	resp = h.do(http.MethodGet, "/v1/limits", key, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	keys = rawKeys(t, resp.Body)
	require.JSONEq(t, `"free"`, string(keys["plan"]))
	require.JSONEq(t, `{"api_rate": 20, "max_pending_tasks": 3, "tasks_per_day": 7}`, string(keys["limits"]))

	// A plan in use is not deleted; unknown plans are refused by field.
	p := requireProblem(t, h.do(http.MethodDelete, "/v1/admin/plans/free", adminToken, nil, nil), http.StatusConflict)
	require.Equal(t, problemTypePrefix+"plan-in-use", p.Type)
	requireFieldProblem(t, h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"plan": "gold"}`), nil), "plan")
	requireFieldProblem(t, h.do(http.MethodPost, "/v1/admin/tenants", adminToken, strings.NewReader(`{"name": "x", "plan": "gold"}`), nil), "plan")
	requireFieldProblem(t, h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"plan": 3}`), nil), "plan")

	resp = h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"plan": "pro"}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{"tasks_per_day": 7}`, string(rawKeys(t, resp.Body)["effective_limits"]))
	resp = h.do(http.MethodDelete, "/v1/admin/plans/free", adminToken, nil, nil)
	require.Equal(t, http.StatusNoContent, resp.Status, string(resp.Body))
	requireProblem(t, h.do(http.MethodDelete, "/v1/admin/plans/free", adminToken, nil, nil), http.StatusNotFound)

	resp = h.do(http.MethodPatch, path, adminToken, strings.NewReader(`{"plan": null}`), nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `null`, string(rawKeys(t, resp.Body)["plan"]))
	resp = h.do(http.MethodGet, "/v1/admin/audit?limit=100", adminToken, nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	for _, action := range []string{"plan.put", "plan.deleted", "tenant.plan_changed"} {
		require.Contains(t, string(resp.Body), `"`+action+`"`)
	}
}

func TestPutPlanValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	put := func(name, body string) response {
		return h.do(http.MethodPut, "/v1/admin/plans/"+name, adminToken, strings.NewReader(body), nil)
	}
	for body, field := range map[string]string{
		`{"tasks_per_day": -1}`:              "tasks_per_day",
		`{"deliveries_per_day": 2000000000}`: "deliveries_per_day",
		`{"api_rate": "fast"}`:               "api_rate",
		`{"max_timeout": "1ms"}`:             "max_timeout",
		`{"targets": {"a b": {}}}`:           "targets.a b",
		`{"tasks_per_dya": 5}`:               "tasks_per_dya",
	} {
		requireFieldProblem(t, put("free", body), field)
	}
	requireFieldProblem(t, put("Free", `{}`), "name")
	requireFieldProblem(t, put(strings.Repeat("a", 64), `{}`), "name")
	requireProblem(t, put("free", `{"api_rate": 1`), http.StatusBadRequest)
	requireProblem(t, put("free", `[]`), http.StatusBadRequest)
	requireProblem(t, put("free", `{}`+strings.Repeat(" ", 0)+`{}`), http.StatusBadRequest)
	requireProblem(t, h.do(http.MethodGet, "/v1/admin/plans/free", adminToken, nil, nil), http.StatusNotFound)
}
