package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTenantRetention: an operator sets how long a tenant's finished tasks
// are kept; null goes back to the node default, which the tenant shows as
// null; other settings leave it alone.
func TestTenantRetention(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.createTenant("acme")
	path := "/v1/admin/tenants/" + acme.ID.String()
	patch := func(body string) response {
		return h.do(http.MethodPatch, path, adminToken, strings.NewReader(body), nil)
	}
	retentionOf := func(resp response) string {
		t.Helper()
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		return string(rawKeys(t, resp.Body)["retention"])
	}

	require.Equal(t, "null", retentionOf(h.do(http.MethodGet, path, adminToken, nil, nil)), "the node default")
	require.Equal(t, `"720h"`, retentionOf(patch(`{"retention": "720h"}`)))
	require.Equal(t, `"720h"`, retentionOf(h.do(http.MethodGet, path, adminToken, nil, nil)))
	require.Equal(t, `"720h"`, retentionOf(patch(`{"limits": {"max_pending_tasks": 5}}`)), "kept by other changes")
	require.Equal(t, `"1s"`, retentionOf(patch(`{"retention": "1s"}`)), "the shortest allowed")
	require.Equal(t, `"1h30m"`, retentionOf(patch(`{"retention": "90m"}`)))
	require.Equal(t, "null", retentionOf(patch(`{"retention": null}`)))

	for _, body := range []string{
		`{"retention": "999ms"}`,
		`{"retention": "0s"}`,
		`{"retention": "-24h"}`,
		`{"retention": "7d"}`,
		`{"retention": 3600}`,
		`{"retention": ""}`,
	} {
		requireFieldProblem(t, patch(body), "retention")
	}
	require.Equal(t, "null", retentionOf(h.do(http.MethodGet, path, adminToken, nil, nil)), "a refused change changes nothing")
}
